-- rollout_views: what the evaluator reads, defined once; a reading and its decision return the view they found changed
-- The view a decision is made on, as one SQL view (inlined by the planner,
-- so a spec nobody selects is never read): the rollout with its current
-- attempt's stages, metrics and provider gate tallies, and the state of
-- every alarm its stages name; timestamps as epoch milliseconds.
--
-- rollout_apply_with_reading, seven arguments: migration 14's function,
-- called as a plain statement. It builds the view it found changed
-- itself (p_with_spec: with the spec), where migration 14's caller read
-- it in a subquery the server set up on every call. It compares only
-- what the decision read (signalsRead in shared/rollout/evaluate.ts), as
-- held: the rollout's version and attempt, which stand for the row and
-- its stages; the active stage (p_held.stage, null when none is) metrics'
-- observed_at; the states of the alarms its gates name and its provider
-- gates' tallies (origin, readings), null for one not stored. Each of
-- those only moves forward, so equal means unchanged. Migration 14's
-- six-argument function stays for nodes of the previous version.

CREATE VIEW rollout_views AS
  SELECT r.id, r.state, r.attempt, r.version,
         round(date_part('epoch', r.created_at) * 1000) AS created_at, round(date_part('epoch', r.updated_at) * 1000) AS updated_at,
         round(date_part('epoch', r.last_progress_at) * 1000) AS last_progress_at,
         round(date_part('epoch', r.deadline_exceeded_at) * 1000) AS deadline_exceeded_at, r.state_by, r.state_reason, r.spec,
    (SELECT coalesce(json_agg(json_build_array(s.stage_index, s.name, s.phase, round(date_part('epoch', s.activated_at) * 1000),
                                               round(date_part('epoch', s.promoted_at) * 1000), s.promoted_epoch, s.promoted_by,
                                               round(date_part('epoch', s.rolled_back_at) * 1000), s.reason) ORDER BY s.stage_index), '[]')
       FROM rollout_stages s WHERE s.rollout_id = r.id AND s.attempt = r.attempt) AS stages,
    (SELECT coalesce(json_agg(json_build_array(m.stage_index, m.requests, m.errors, m.p99_latency_ms, round(date_part('epoch', m.observed_at) * 1000))), '[]')
       FROM stage_metrics m WHERE m.rollout_id = r.id AND m.attempt = r.attempt) AS metrics,
    (SELECT coalesce(json_object_agg(a.name, a.state), '{}') FROM alarm_states a WHERE a.name = ANY (r.alarm_names)) AS alarms,
    (SELECT coalesce(json_agg(t), '[]') FROM gate_tallies t WHERE t.rollout_id = r.id AND t.attempt = r.attempt) AS gates
  FROM rollouts r;

--! include functions/rollout_apply_with_reading.sql
