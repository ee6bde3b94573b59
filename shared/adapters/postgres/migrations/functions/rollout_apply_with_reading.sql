-- rollout_apply_with_reading: a metrics reading and the decision made on it, one write. The reading
-- is stored whoever leads, as a signal always is. The plan (through rollout_apply, its checks and all)
-- applies only when what the decision read is still what the caller held (p_held): the rollout's
-- version and attempt, which stand for the row and its stages; the active stage's (p_held.stage, null
-- when none is) metrics' observed_at; the states of the alarms its gates name and its provider gates'
-- tallies (origin, readings), null for one not stored. Each of those only moves forward, so equal means
-- unchanged. Otherwise 'changed', with the view it found (p_with_spec: with the spec), for the caller
-- to decide again on. Migration 14's six-argument function stays for nodes of an older version.

CREATE OR REPLACE FUNCTION rollout_apply_with_reading(p_lease text, p_holder text, p_epoch bigint, p_reading jsonb, p_held jsonb, p jsonb, p_with_spec boolean)
  RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
  rid text := p->>'rolloutId';
  r record;
  att integer;
  stg integer := (p_reading->>'stage')::int;
  sig integer := (p_held->>'stage')::int;
  same boolean;
  stored boolean;
  res jsonb;
BEGIN
  SELECT r0.version, r0.attempt, jsonb_array_length(r0.spec->'stages') AS n,
         (SELECT round(date_part('epoch', m.observed_at) * 1000) FROM stage_metrics m
           WHERE m.rollout_id = rid AND m.attempt = r0.attempt AND m.stage_index = sig) AS seen
    INTO r FROM rollouts r0 WHERE r0.id = rid;
  IF NOT FOUND OR stg < 0 OR stg >= r.n THEN
    RETURN '{"status": "unknown"}';
  END IF;
  att := coalesce((p_reading->>'attempt')::int, r.attempt);
  same := r.version = (p_held->>'version')::bigint AND r.attempt = (p_held->>'attempt')::int
    AND r.seen IS NOT DISTINCT FROM (p_held->>'observedAt')::float8;
  IF same AND p_held->'alarms' <> '{}' THEN
    same := (SELECT jsonb_object_agg(k.name, a.state) FROM jsonb_object_keys(p_held->'alarms') AS k(name)
               LEFT JOIN alarm_states a ON a.name = k.name) = p_held->'alarms';
  END IF;
  IF same AND p_held->'tallies' <> '{}' THEN
    same := (SELECT jsonb_object_agg(k.gate, CASE WHEN t.gate IS NOT NULL THEN jsonb_build_array(round(date_part('epoch', t.origin) * 1000), t.readings) END)
               FROM jsonb_object_keys(p_held->'tallies') AS k(gate)
               LEFT JOIN gate_tallies t ON t.rollout_id = rid AND t.attempt = r.attempt AND t.stage_index = sig AND t.gate = k.gate) = p_held->'tallies';
  END IF;

  INSERT INTO stage_metrics (rollout_id, attempt, stage_index, requests, errors, p99_latency_ms, observed_at)
  VALUES (rid, att, stg, (p_reading->>'requests')::bigint, (p_reading->>'errors')::bigint, (p_reading->>'p99LatencyMs')::double precision,
          to_timestamp((p_reading->>'observedAt')::float8 / 1000))
  ON CONFLICT (rollout_id, attempt, stage_index) DO UPDATE
    SET requests = excluded.requests, errors = excluded.errors, p99_latency_ms = excluded.p99_latency_ms, observed_at = excluded.observed_at
    WHERE stage_metrics.observed_at < excluded.observed_at;
  stored := FOUND;
  IF stored AND same THEN
    res := rollout_apply(p_lease, p_holder, p_epoch, p);
    IF res->>'status' <> 'stale' THEN
      RETURN res || jsonb_build_object('stored', true, 'attempt', att);
    END IF;
  END IF;
  -- Read after the insert, by a statement of its own: the view includes this reading if it was stored.
  RETURN jsonb_build_object('status', coalesce(res->>'status', 'changed'), 'stored', stored, 'attempt', att, 'view',
    (SELECT to_jsonb(v) - CASE WHEN p_with_spec THEN '' ELSE 'spec' END FROM rollout_views v WHERE v.id = rid));
END
$f$;
