-- retention of runs: when a run was first found finished, cleared by an enqueue
-- Stamped by the pruner (pruneRuns), not by the writes that finish items: an item's ack stays one row's update.

ALTER TABLE runs ADD COLUMN closed_at timestamptz;
CREATE INDEX runs_closed ON runs (closed_at) WHERE closed_at IS NOT NULL;
