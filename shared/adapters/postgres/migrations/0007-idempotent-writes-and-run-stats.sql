-- node api: idempotent writes and run statistics

-- A write sent with an Idempotency-Key is applied in the same transaction that records its
-- response here, so a retry (a proxy failing over after the node died) replays, never re-applies.
CREATE TABLE api_requests (
  key         text PRIMARY KEY,
  fingerprint text NOT NULL,
  status      integer NOT NULL,
  response    jsonb NOT NULL,
  node_id     text NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX api_requests_created ON api_requests (created_at);
-- Observability only (the status page): no protocol decision reads these.
CREATE TABLE run_stats (
  run_id text PRIMARY KEY,
  steals bigint NOT NULL DEFAULT 0
);
