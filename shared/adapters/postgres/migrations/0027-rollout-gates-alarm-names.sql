-- rollouts: the alarm names a spec watches include its rollout-wide gates' (rolloutGates)
-- alarmNamesOf in shared/rollout/model.ts is the same rule. No rollout stored before has rolloutGates,
-- so every stored alarm_names is already what the new rule gives.

CREATE OR REPLACE FUNCTION rollout_alarm_names(spec jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $f$
  SELECT coalesce(array_agg(DISTINCT n ORDER BY n), '{}') FROM (
    SELECT jsonb_array_elements_text(g->'gates'->'alarms') FROM jsonb_array_elements(spec->'stages') g
    UNION ALL
    SELECT jsonb_array_elements_text(p->'alarms')
      FROM jsonb_array_elements(spec->'stages') g, jsonb_array_elements(coalesce(g->'gates'->'providers', '[]')) p
     WHERE p->>'type' = 'cloudwatchAlarm'
    UNION ALL
    SELECT jsonb_array_elements_text(p->'alarms')
      FROM jsonb_array_elements(coalesce(spec->'rolloutGates'->'providers', '[]')) p
     WHERE p->>'type' = 'cloudwatchAlarm') AS x(n)
$f$;
