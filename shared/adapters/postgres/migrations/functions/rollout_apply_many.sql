-- rollout_apply_many: several transitions in one round trip, each made by rollout_apply exactly as alone (its
-- fence, the rollout row as evaluated, each stage's phase; all or nothing for that plan): what a tick that moves
-- many rollouts at once sends. A plan whose stage moved (RB001) is undone alone and answers stale, the others stand;
-- once one answers fenced, every later one does too (the lease does not come back within a transaction).
-- Answers one status per plan, in order, as rollout_apply answers it.

CREATE OR REPLACE FUNCTION rollout_apply_many(p_lease text, p_holder text, p_epoch bigint, p_plans jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
  answers jsonb := '[]';
  r jsonb;
BEGIN
  FOR i IN 0 .. jsonb_array_length(p_plans) - 1 LOOP
    IF r IS NULL OR r->>'status' <> 'fenced' THEN
      BEGIN
        r := rollout_apply(p_lease, p_holder, p_epoch, p_plans->i);
      EXCEPTION WHEN SQLSTATE 'RB001' THEN
        r := '{"status": "stale"}';
      END;
    END IF;
    answers := answers || jsonb_build_array(r);
  END LOOP;
  RETURN answers;
END
$f$;
