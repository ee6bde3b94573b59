-- rollout_apply_with_reading: a metrics reading and the decision it makes, one write
-- The leader evaluates a view it already holds plus the new reading, and
-- sends both here. The reading is stored whoever leads, as a signal
-- always is. The plan applies only when the evaluator's inputs are still
-- what the caller held before this reading: the rollout's version (which
-- every change to it or its stages bumps), and per row of its current
-- attempt the metrics' observed_at, the watched alarms' states and the
-- gate tallies' (origin, readings). Each of those only moves forward, so
-- equal means unchanged. Otherwise 'changed': the caller decides again on
-- a fresh view. The plan goes through rollout_apply, its checks and all.

CREATE FUNCTION rollout_apply_with_reading(p_lease text, p_holder text, p_epoch bigint, p_reading jsonb, p_held jsonb, p jsonb)
  RETURNS jsonb LANGUAGE plpgsql AS $f$
DECLARE
  rid text := p->>'rolloutId';
  r record;
  att integer;
  stg integer := (p_reading->>'stage')::int;
  same boolean;
BEGIN
  SELECT version, attempt, alarm_names, jsonb_array_length(spec->'stages') AS n INTO r FROM rollouts WHERE id = rid;
  IF NOT FOUND OR stg < 0 OR stg >= r.n THEN
    RETURN '{"status": "unknown"}';
  END IF;
  att := coalesce((p_reading->>'attempt')::int, r.attempt);
  same := r.version = (p_held->>'version')::bigint AND r.attempt = (p_held->>'attempt')::int
    AND (SELECT coalesce(jsonb_object_agg(m.stage_index::text, round(date_part('epoch', m.observed_at) * 1000)), '{}')
           FROM stage_metrics m WHERE m.rollout_id = rid AND m.attempt = r.attempt) = p_held->'metrics'
    AND (SELECT coalesce(jsonb_object_agg(a.name, a.state), '{}') FROM alarm_states a WHERE a.name = ANY (r.alarm_names)) = p_held->'alarms'
    AND (SELECT coalesce(jsonb_object_agg(t.stage_index || '/' || t.gate, jsonb_build_array(round(date_part('epoch', t.origin) * 1000), t.readings)), '{}')
           FROM gate_tallies t WHERE t.rollout_id = rid AND t.attempt = r.attempt) = p_held->'tallies';

  INSERT INTO stage_metrics (rollout_id, attempt, stage_index, requests, errors, p99_latency_ms, observed_at)
  VALUES (rid, att, stg, (p_reading->>'requests')::bigint, (p_reading->>'errors')::bigint, (p_reading->>'p99LatencyMs')::double precision,
          to_timestamp((p_reading->>'observedAt')::float8 / 1000))
  ON CONFLICT (rollout_id, attempt, stage_index) DO UPDATE
    SET requests = excluded.requests, errors = excluded.errors, p99_latency_ms = excluded.p99_latency_ms, observed_at = excluded.observed_at
    WHERE stage_metrics.observed_at < excluded.observed_at;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('status', 'changed', 'stored', false, 'attempt', att);
  END IF;
  IF NOT same THEN
    RETURN jsonb_build_object('status', 'changed', 'stored', true, 'attempt', att);
  END IF;
  RETURN rollout_apply(p_lease, p_holder, p_epoch, p) || jsonb_build_object('stored', true, 'attempt', att);
END
$f$;
