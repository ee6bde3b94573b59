-- rollout_due_on_change: a transition (a new version or state) marks the rollout due at once while it runs,
-- never due once it ended (and when it ended, for retention); due_mark is bumped so a reschedule decided on
-- an older reading is refused (rollout_reschedule in rollout-store.ts).

CREATE OR REPLACE FUNCTION rollout_due_on_change() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE rollout_due SET due_at = CASE WHEN NEW.state = 'running' THEN 0 ELSE 999999999999999 END, due_mark = due_mark + 1,
         ended_at = CASE WHEN NEW.state IN ('completed', 'rolled_back', 'aborted') THEN round(date_part('epoch', NEW.updated_at) * 1000)::bigint END
   WHERE rollout_id = NEW.id;
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER rollouts_due_on_change AFTER UPDATE ON rollouts FOR EACH ROW
  WHEN (OLD.version IS DISTINCT FROM NEW.version OR OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION rollout_due_on_change();
