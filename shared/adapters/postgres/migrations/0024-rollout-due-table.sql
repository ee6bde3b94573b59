-- rollout_due: when each rollout is next due and when it ended, in a narrow table of its own, so neither a mark nor an end rewrites the rollout row or its indexes
-- 22 and 23 kept these on the rollouts row: every reading then rewrote that wide row and every one of its indexes
-- (an indexed column changed, so no HOT update), doubling a reading's cost. Here a reading writes one small row.
-- due_at: epoch ms, 0 for at once, 999999999999999 (NEVER_DUE) while not running. ended_at: epoch ms of the
-- transition that ended it (retention), null otherwise. The rollout row gains no indexed column, so a transition
-- within running stays a HOT update of it (an indexed ended_at there doubled a reading's cost again).

DROP TRIGGER rollouts_due_on_change ON rollouts;
DROP FUNCTION rollout_due_on_change();
DROP TRIGGER stage_metrics_due ON stage_metrics;
DROP FUNCTION rollout_due_on_metrics();
DROP TRIGGER alarm_states_due ON alarm_states;
DROP FUNCTION rollout_due_on_alarm();
DROP INDEX rollouts_due;
DROP INDEX rollouts_ended;

CREATE TABLE rollout_due (
  rollout_id text PRIMARY KEY REFERENCES rollouts (id),
  due_at     bigint NOT NULL,
  due_mark   bigint NOT NULL DEFAULT 0,
  ended_at   bigint
);
INSERT INTO rollout_due (rollout_id, due_at, due_mark, ended_at)
  SELECT id, CASE WHEN state = 'running' THEN 0 ELSE 999999999999999 END, due_mark,
         CASE WHEN state IN ('completed', 'rolled_back', 'aborted') THEN round(date_part('epoch', updated_at) * 1000)::bigint END
    FROM rollouts;
CREATE INDEX rollout_due_at ON rollout_due (due_at);
CREATE INDEX rollout_due_ended ON rollout_due (ended_at) WHERE ended_at IS NOT NULL;
ALTER TABLE rollouts DROP COLUMN due_at, DROP COLUMN due_mark;

--! include functions/rollout_due_created.sql
--! include functions/rollout_due_on_change.sql
--! include functions/rollout_due_on_metrics.sql
--! include functions/rollout_due_on_alarm.sql
