-- rollout_due_created: a new rollout gets its rollout_due row, due at once while running, never otherwise.

CREATE OR REPLACE FUNCTION rollout_due_created() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO rollout_due (rollout_id, due_at) VALUES (NEW.id, CASE WHEN NEW.state = 'running' THEN 0 ELSE 999999999999999 END);
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER rollouts_due_created AFTER INSERT ON rollouts FOR EACH ROW EXECUTE FUNCTION rollout_due_created();
