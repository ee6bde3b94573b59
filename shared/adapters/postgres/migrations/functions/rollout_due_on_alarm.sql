-- rollout_due_on_alarm: an alarm's change marks due at once every running rollout that watches it.

CREATE OR REPLACE FUNCTION rollout_due_on_alarm() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE rollout_due d SET due_at = 0, due_mark = d.due_mark + 1 FROM rollouts r
   WHERE r.id = d.rollout_id AND r.state = 'running' AND r.alarm_names @> ARRAY[NEW.name];
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER alarm_states_due AFTER INSERT OR UPDATE ON alarm_states FOR EACH ROW EXECUTE FUNCTION rollout_due_on_alarm();
