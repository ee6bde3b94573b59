-- rollouts: the alarm names a spec watches, kept beside it
-- A view read them out of the spec's JSON on every read (half its cost for
-- a rollout with no alarms). Generated from the spec, so every writer of a
-- rollout, of this version or an older one, keeps them right.
-- alarmNamesOf in shared/rollout/model.ts is the same rule.

CREATE FUNCTION rollout_alarm_names(spec jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $f$
  SELECT coalesce(array_agg(DISTINCT n ORDER BY n), '{}') FROM (
    SELECT jsonb_array_elements_text(g->'gates'->'alarms') FROM jsonb_array_elements(spec->'stages') g
    UNION ALL
    SELECT jsonb_array_elements_text(p->'alarms')
      FROM jsonb_array_elements(spec->'stages') g, jsonb_array_elements(coalesce(g->'gates'->'providers', '[]')) p
     WHERE p->>'type' = 'cloudwatchAlarm') AS x(n)
$f$;
ALTER TABLE rollouts ADD COLUMN alarm_names text[] GENERATED ALWAYS AS (rollout_alarm_names(spec)) STORED;
