-- worker registry: one record per worker per run; heartbeats judged on the store clock

-- The same worker id in two runs is two workers: draining or deregistering one must not touch the other.
UPDATE workers SET run_id = '' WHERE run_id IS NULL;
ALTER TABLE workers ALTER COLUMN run_id SET NOT NULL;
ALTER TABLE workers DROP CONSTRAINT workers_pkey;
ALTER TABLE workers ADD PRIMARY KEY (instance_id, run_id, worker_id);
-- When the store last heard from the worker, by the store's clock (heartbeat_at is the worker's).
ALTER TABLE workers ADD COLUMN seen_at timestamptz NOT NULL DEFAULT now();
