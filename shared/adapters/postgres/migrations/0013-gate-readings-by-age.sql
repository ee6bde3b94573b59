-- gate readings: found by age, so the tick can prune the history

-- A gate read every 30 s on 1,000 rollouts writes ~2.9 million readings a day; after
-- READING_RETENTION_DAYS they go, oldest first, a bounded batch per tick.
CREATE INDEX gate_readings_at ON gate_readings (at);
