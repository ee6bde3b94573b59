-- rollouts_watching: an alarm change finds the running rollouts that watch it, not every running one

CREATE INDEX rollouts_watching ON rollouts USING gin (alarm_names) WHERE state = 'running';
