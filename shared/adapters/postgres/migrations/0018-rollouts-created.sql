-- rollouts_created: rollouts listed newest first, a page at a time

CREATE INDEX rollouts_created ON rollouts (created_at DESC, id DESC);
