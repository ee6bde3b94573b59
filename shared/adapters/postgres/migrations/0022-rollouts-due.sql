-- rollouts due: a tick reads the running rollouts whose time has come or that a signal or a transition marked, not every running one
-- due_at: epoch ms (0: due at once), compared with the promoter's clock. due_mark: bumped by every mark, so a
-- reschedule decided on an older reading is refused (rollout_reschedule in rollout-store.ts). Existing rows start due.
-- The triggers mark in the writing statement itself: no path that stores a signal or a transition can forget to.
-- Migration 24 replaced them (functions/rollout_due_*.sql are the current ones).

ALTER TABLE rollouts ADD COLUMN due_at bigint NOT NULL DEFAULT 0, ADD COLUMN due_mark bigint NOT NULL DEFAULT 0;
CREATE INDEX rollouts_due ON rollouts (due_at) WHERE state = 'running';

CREATE FUNCTION rollout_due_on_change() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  NEW.due_at := 0;
  NEW.due_mark := OLD.due_mark + 1;
  RETURN NEW;
END $f$;
CREATE TRIGGER rollouts_due_on_change BEFORE UPDATE ON rollouts FOR EACH ROW
  WHEN (OLD.version IS DISTINCT FROM NEW.version OR OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION rollout_due_on_change();

CREATE FUNCTION rollout_due_on_metrics() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE rollouts SET due_at = 0, due_mark = due_mark + 1 WHERE id = NEW.rollout_id AND state = 'running';
  RETURN NULL;
END $f$;
CREATE TRIGGER stage_metrics_due AFTER INSERT OR UPDATE ON stage_metrics FOR EACH ROW EXECUTE FUNCTION rollout_due_on_metrics();

CREATE FUNCTION rollout_due_on_alarm() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE rollouts SET due_at = 0, due_mark = due_mark + 1 WHERE state = 'running' AND alarm_names @> ARRAY[NEW.name];
  RETURN NULL;
END $f$;
CREATE TRIGGER alarm_states_due AFTER INSERT OR UPDATE ON alarm_states FOR EACH ROW EXECUTE FUNCTION rollout_due_on_alarm();
