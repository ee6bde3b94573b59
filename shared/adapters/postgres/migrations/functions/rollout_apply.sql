-- rollout_apply: one fenced transition in one round trip, with the same checks as a
-- client-side transaction: the lease row FOR SHARE (holder and epoch),
-- the rollout row as evaluated (version, state, attempt), each stage's
-- phase; all or nothing. A stage mismatch raises RB001 to undo the rest.
-- It reads the plan's JSON by field name: test/unit/transition-plan.test.ts takes every path it
-- reads from this text and checks that transitionPlanSchema requires it.

CREATE OR REPLACE FUNCTION rollout_apply(p_lease text, p_holder text, p_epoch bigint, p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
  l record;
  n jsonb := p->'next';
  x jsonb := p->'expect';
  changes jsonb := p->'stageChanges';
  events jsonb := p->'events';
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
         updated_at = to_timestamp((n->>'updatedAt')::float8 / 1000), last_progress_at = to_timestamp((n->>'lastProgressAt')::float8 / 1000),
         deadline_exceeded_at = to_timestamp((n->>'deadlineExceededAt')::float8 / 1000), state_by = n->>'stateBy', state_reason = n->>'stateReason'
   WHERE id = p->>'rolloutId' AND version = (x->>'version')::bigint AND state = x->>'state' AND attempt = (x->>'attempt')::int;
  IF NOT FOUND THEN
    RETURN '{"status": "stale"}';
  END IF;

  FOR i IN 0 .. jsonb_array_length(changes) - 1 LOOP
    c := changes->i;
    s := c->'set';
    UPDATE rollout_stages SET
           phase          = CASE WHEN s ? 'phase' THEN s->>'phase' ELSE phase END,
           activated_at   = CASE WHEN s ? 'activatedAt' THEN to_timestamp((s->>'activatedAt')::float8 / 1000) ELSE activated_at END,
           promoted_at    = CASE WHEN s ? 'promotedAt' THEN to_timestamp((s->>'promotedAt')::float8 / 1000) ELSE promoted_at END,
           promoted_epoch = CASE WHEN s ? 'promotedEpoch' THEN (s->>'promotedEpoch')::bigint ELSE promoted_epoch END,
           promoted_by    = CASE WHEN s ? 'promotedBy' THEN s->>'promotedBy' ELSE promoted_by END,
           rolled_back_at = CASE WHEN s ? 'rolledBackAt' THEN to_timestamp((s->>'rolledBackAt')::float8 / 1000) ELSE rolled_back_at END,
           reason         = CASE WHEN s ? 'reason' THEN s->>'reason' ELSE reason END
     WHERE rollout_id = p->>'rolloutId' AND attempt = (x->>'attempt')::int
       AND stage_index = (c->>'index')::int AND phase = c->>'expect';
    IF NOT FOUND THEN
      RAISE EXCEPTION 'stage % is not %', c->>'index', c->>'expect' USING ERRCODE = 'RB001';
    END IF;
  END LOOP;

  IF jsonb_array_length(p->'newStages') > 0 THEN
    INSERT INTO rollout_stages (rollout_id, attempt, stage_index, name, phase)
    SELECT p->>'rolloutId', (n->>'attempt')::int, (v->>'index')::int, v->>'name', 'pending'
      FROM jsonb_array_elements(p->'newStages') AS v;
  END IF;

  FOR i IN 0 .. jsonb_array_length(events) - 1 LOOP
    ev := events->i;
    INSERT INTO rollout_events (id, rollout_id, detail_type, time, detail)
    VALUES (ev->>'id', p->>'rolloutId', ev->>'detailType', to_timestamp((ev->>'time')::float8 / 1000), ev->'detail')
    ON CONFLICT (id) DO NOTHING;
  END LOOP;
  RETURN '{"status": "ok"}';
END
$f$;
