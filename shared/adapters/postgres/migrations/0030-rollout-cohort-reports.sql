-- Pushed reports by cohort (shared/rollout/cohort-signals.ts): what the canary or the baseline served
-- in a reporter's interval, for a stage's `signals` gates. One row per (cohort, reporter, observed_at):
-- a report delivered again is stored once, and reports add up; none replaces another.

CREATE TABLE rollout_cohort_reports (
  rollout_id  text NOT NULL REFERENCES rollouts (id),
  attempt     integer NOT NULL,
  stage_index integer NOT NULL,
  observed_at timestamptz NOT NULL,
  cohort      text NOT NULL CHECK (cohort IN ('canary', 'baseline')),
  reporter    text NOT NULL,
  requests    bigint NOT NULL CHECK (requests >= 0),
  errors      bigint NOT NULL CHECK (errors >= 0 AND errors <= requests),
  samples     jsonb,
  PRIMARY KEY (rollout_id, attempt, stage_index, observed_at, cohort, reporter)
);

-- Retention deletes the oldest first, as it does gate readings.
CREATE INDEX rollout_cohort_reports_by_age ON rollout_cohort_reports (observed_at);
