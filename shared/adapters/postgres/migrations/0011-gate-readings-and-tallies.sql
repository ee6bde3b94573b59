-- provider gates: readings and their tallies

-- Every reading of a provider gate, for the record (what the gate saw): read by people, not by decisions.
CREATE TABLE gate_readings (
  rollout_id  text NOT NULL REFERENCES rollouts (id),
  attempt     integer NOT NULL,
  stage_index integer NOT NULL,
  gate        text NOT NULL,
  at          timestamptz NOT NULL,
  type        text NOT NULL,
  outcome     text NOT NULL CHECK (outcome IN ('pass', 'fail', 'inconclusive')),
  value       double precision,
  query       text NOT NULL,
  answer      text NOT NULL,
  reason      text,
  source      text NOT NULL CHECK (source IN ('poll', 'event')),
  PRIMARY KEY (rollout_id, attempt, stage_index, gate, at)
);
-- One row per gate of a stage: its counts in the current period (origin = the rollout's
-- last_progress_at when read) and the readings a decision names. This, not the history, is what
-- the evaluator reads, so a view costs the same however long a stage bakes.
CREATE TABLE gate_tallies (
  rollout_id        text NOT NULL REFERENCES rollouts (id),
  attempt           integer NOT NULL,
  stage_index       integer NOT NULL,
  gate              text NOT NULL,
  origin            timestamptz NOT NULL,
  readings          integer NOT NULL,
  failures          integer NOT NULL,
  inconclusive      integer NOT NULL,
  last              jsonb NOT NULL,
  last_failure      jsonb,
  last_inconclusive jsonb,
  PRIMARY KEY (rollout_id, attempt, stage_index, gate)
);
