-- rollout_due_on_metrics: a stored metrics reading marks its running rollout due at once.

CREATE OR REPLACE FUNCTION rollout_due_on_metrics() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE rollout_due SET due_at = 0, due_mark = due_mark + 1 WHERE rollout_id = NEW.rollout_id AND due_at < 999999999999999;
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER stage_metrics_due AFTER INSERT OR UPDATE ON stage_metrics FOR EACH ROW EXECUTE FUNCTION rollout_due_on_metrics();
