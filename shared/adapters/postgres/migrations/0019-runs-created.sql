-- runs_created: runs listed newest first, a page at a time

CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
