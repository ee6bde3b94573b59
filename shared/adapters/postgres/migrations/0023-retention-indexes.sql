-- retention: rollouts that ended found by when, and the alarms any rollout (running or not) watches

CREATE INDEX rollouts_ended ON rollouts (updated_at) WHERE state IN ('completed', 'rolled_back', 'aborted');
CREATE INDEX rollouts_alarm_names ON rollouts USING gin (alarm_names);
