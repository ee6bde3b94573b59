-- rollouts

CREATE TABLE rollouts (
  id                   text PRIMARY KEY,
  spec                 jsonb NOT NULL,
  state                text NOT NULL CHECK (state IN ('running', 'paused', 'completed', 'rolled_back', 'aborted')),
  attempt              integer NOT NULL CHECK (attempt >= 1),
  version              bigint NOT NULL,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  last_progress_at     timestamptz NOT NULL,
  deadline_exceeded_at timestamptz,
  state_by             text,
  state_reason         text
);
CREATE INDEX rollouts_running ON rollouts (id) WHERE state = 'running';
CREATE TABLE rollout_stages (
  rollout_id     text NOT NULL REFERENCES rollouts (id),
  attempt        integer NOT NULL,
  stage_index    integer NOT NULL,
  name           text NOT NULL,
  phase          text NOT NULL CHECK (phase IN ('pending', 'active', 'promoted', 'rolled_back')),
  activated_at   timestamptz,
  promoted_at    timestamptz,
  promoted_epoch bigint,
  promoted_by    text,
  rolled_back_at timestamptz,
  reason         text,
  PRIMARY KEY (rollout_id, attempt, stage_index)
);
CREATE TABLE stage_metrics (
  rollout_id     text NOT NULL REFERENCES rollouts (id),
  attempt        integer NOT NULL,
  stage_index    integer NOT NULL,
  requests       bigint NOT NULL,
  errors         bigint NOT NULL,
  p99_latency_ms double precision,
  observed_at    timestamptz NOT NULL,
  PRIMARY KEY (rollout_id, attempt, stage_index)
);
CREATE TABLE alarm_states (
  name       text PRIMARY KEY,
  state      text NOT NULL CHECK (state IN ('OK', 'ALARM', 'INSUFFICIENT_DATA')),
  changed_at timestamptz NOT NULL
);
CREATE TABLE rollout_events (
  seq          bigserial,
  id           text PRIMARY KEY,
  rollout_id   text NOT NULL,
  detail_type  text NOT NULL,
  time         timestamptz NOT NULL,
  detail       jsonb NOT NULL,
  published_at timestamptz
);
CREATE INDEX rollout_events_unpublished ON rollout_events (seq) WHERE published_at IS NULL;
CREATE INDEX rollout_events_by_rollout ON rollout_events (rollout_id, seq);
