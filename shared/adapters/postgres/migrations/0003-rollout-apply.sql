-- rollout_apply
-- One fenced transition in one round trip, with the same checks as a
-- client-side transaction: the lease row FOR SHARE (holder and epoch),
-- the rollout row as evaluated (version, state, attempt), each stage's
-- phase; all or nothing. A stage mismatch raises RB001 to undo the rest.
-- Migration 10 replaced it (functions/rollout_apply.sql is the current text).

CREATE FUNCTION rollout_ts(v jsonb) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS
  $f$ SELECT CASE WHEN v IS NULL OR v = 'null'::jsonb THEN NULL ELSE to_timestamp((v #>> '{}')::double precision / 1000) END $f$;

CREATE FUNCTION rollout_apply(p_lease text, p_holder text, p_epoch bigint, p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
  l record;
  n jsonb := p->'next';
  x jsonb := p->'expect';
  c jsonb;
  s jsonb;
  ev jsonb;
BEGIN
  SELECT holder, epoch INTO l FROM leases WHERE name = p_lease FOR SHARE;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'fenced', 'holder', NULL, 'epoch', NULL);
  END IF;
  IF l.holder IS DISTINCT FROM p_holder OR l.epoch <> p_epoch THEN
    RETURN jsonb_build_object('status', 'fenced', 'holder', l.holder, 'epoch', l.epoch);
  END IF;

  UPDATE rollouts SET state = n->>'state', attempt = (n->>'attempt')::int, version = (n->>'version')::bigint,
         updated_at = rollout_ts(n->'updatedAt'), last_progress_at = rollout_ts(n->'lastProgressAt'),
         deadline_exceeded_at = rollout_ts(n->'deadlineExceededAt'), state_by = n->>'stateBy', state_reason = n->>'stateReason'
   WHERE id = p->>'rolloutId' AND version = (x->>'version')::bigint AND state = x->>'state' AND attempt = (x->>'attempt')::int;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'stale');
  END IF;

  FOR c IN SELECT value FROM jsonb_array_elements(p->'stageChanges') LOOP
    s := c->'set';
    UPDATE rollout_stages SET
           phase          = CASE WHEN s ? 'phase' THEN s->>'phase' ELSE phase END,
           activated_at   = CASE WHEN s ? 'activatedAt' THEN rollout_ts(s->'activatedAt') ELSE activated_at END,
           promoted_at    = CASE WHEN s ? 'promotedAt' THEN rollout_ts(s->'promotedAt') ELSE promoted_at END,
           promoted_epoch = CASE WHEN s ? 'promotedEpoch' THEN (s->>'promotedEpoch')::bigint ELSE promoted_epoch END,
           promoted_by    = CASE WHEN s ? 'promotedBy' THEN s->>'promotedBy' ELSE promoted_by END,
           rolled_back_at = CASE WHEN s ? 'rolledBackAt' THEN rollout_ts(s->'rolledBackAt') ELSE rolled_back_at END,
           reason         = CASE WHEN s ? 'reason' THEN s->>'reason' ELSE reason END
     WHERE rollout_id = p->>'rolloutId' AND attempt = (x->>'attempt')::int
       AND stage_index = (c->>'index')::int AND phase = c->>'expect';
    IF NOT FOUND THEN
      RAISE EXCEPTION 'stage % is not %', c->>'index', c->>'expect' USING ERRCODE = 'RB001';
    END IF;
  END LOOP;

  INSERT INTO rollout_stages (rollout_id, attempt, stage_index, name, phase)
  SELECT p->>'rolloutId', (n->>'attempt')::int, (v->>'index')::int, v->>'name', 'pending'
    FROM jsonb_array_elements(p->'newStages') AS v;

  FOR ev IN SELECT value FROM jsonb_array_elements(p->'events') LOOP
    INSERT INTO rollout_events (id, rollout_id, detail_type, time, detail)
    VALUES (ev->>'id', p->>'rolloutId', ev->>'detailType', rollout_ts(ev->'time'), ev->'detail')
    ON CONFLICT (id) DO NOTHING;
  END LOOP;
  RETURN jsonb_build_object('status', 'ok');
END
$f$;
