-- worker registry

-- Keyed by instance first: a preemption notice names an instance.
CREATE TABLE workers (
  instance_id   text NOT NULL,
  worker_id     text NOT NULL,
  provider      text NOT NULL CHECK (provider IN ('aws', 'gcp', 'local')),
  run_id        text,
  state         text NOT NULL CHECK (state IN ('active', 'draining', 'gone')),
  registered_at timestamptz NOT NULL,
  heartbeat_at  timestamptz NOT NULL,
  drain         jsonb,
  gone_at       timestamptz,
  PRIMARY KEY (instance_id, worker_id)
);
