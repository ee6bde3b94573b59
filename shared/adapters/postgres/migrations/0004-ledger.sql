-- ledger

CREATE TABLE runs (
  id                text PRIMARY KEY,
  spec              jsonb NOT NULL,
  coordinator_epoch bigint NOT NULL DEFAULT -1,
  created_at        timestamptz NOT NULL
);
CREATE TABLE work_items (
  run_id       text NOT NULL REFERENCES runs (id),
  id           text NOT NULL,
  payload      jsonb NOT NULL,
  state        text NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
  worker       text,
  epoch        bigint,
  claimed_at   timestamptz,
  started      boolean NOT NULL DEFAULT false,
  heartbeat_at timestamptz,
  result_hash  text,
  result       jsonb,
  error        text,
  attempts     integer NOT NULL DEFAULT 0,
  version      bigint NOT NULL DEFAULT 0,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  PRIMARY KEY (run_id, id)
);
-- The coordinator's queries touch only these partial indexes: their cost follows the running
-- (or pending) set, not the size of the run.
CREATE INDEX work_items_running ON work_items (run_id, heartbeat_at) WHERE state = 'running';
CREATE INDEX work_items_pending ON work_items (run_id, id) WHERE state = 'pending';
