-- A judged reading keeps what it was judged on: both cohorts' series (or counts per step), at most
-- 1,000 points a cohort. The history only: tallies and events never carry it.

ALTER TABLE gate_readings ADD COLUMN series jsonb;
