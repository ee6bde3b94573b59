-- signal signatures seen within their window: a replayed signed signal is refused on every node

CREATE TABLE signal_signatures (
  signature text PRIMARY KEY,
  seen_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signal_signatures_seen ON signal_signatures (seen_at);
