-- rollout_actuations: what was applied to each target of a rollout, and when

CREATE TABLE rollout_actuations (
  rollout_id text NOT NULL REFERENCES rollouts (id),
  target     text NOT NULL,
  record     jsonb NOT NULL,
  settled    boolean NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (rollout_id, target)
);
-- What a tick reconciles beyond the running rollouts: a few rows, whatever the history holds.
CREATE INDEX rollout_actuations_unsettled ON rollout_actuations (updated_at) WHERE NOT settled;
