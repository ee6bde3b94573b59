import type { Sql } from './sql.js';

/**
 * Schema migrations, applied in order, each once. Timestamps are timestamptz
 * (readable in psql) written from the lease holder's clock; `version` is what
 * compare-and-swap compares.
 */
export const migrations: readonly { id: number; name: string; sql: string }[] = [
  {
    id: 1,
    name: 'leases',
    sql: `
      CREATE TABLE leases (
        name        text PRIMARY KEY,
        holder      text,
        epoch       bigint NOT NULL CHECK (epoch >= 0),
        version     bigint NOT NULL CHECK (version >= 0),
        acquired_at timestamptz NOT NULL,
        renewed_at  timestamptz NOT NULL,
        expires_at  timestamptz NOT NULL,
        hostname    text,
        api_url     text
      );
      COMMENT ON TABLE leases IS 'Lease rows are never deleted: deleting one resets its epoch and breaks fencing.';
    `,
  },
  {
    id: 2,
    name: 'rollouts',
    sql: `
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
    `,
  },
  {
    id: 3,
    name: 'rollout_apply',
    // One fenced transition in one round trip, with the same checks as a
    // client-side transaction: the lease row FOR SHARE (holder and epoch),
    // the rollout row as evaluated (version, state, attempt), each stage's
    // phase; all or nothing. A stage mismatch raises RB001 to undo the rest.
    // It reads the plan's JSON by field name: test/unit/transition-plan.test.ts takes every path it
    // reads from this text and checks that transitionPlanSchema requires it.
    sql: `
      CREATE FUNCTION rollout_ts(v jsonb) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS
        $f$ SELECT CASE WHEN v IS NULL OR v = 'null'::jsonb THEN NULL ELSE to_timestamp((v #>> '{}')::double precision / 1000) END $f$;

      CREATE FUNCTION rollout_apply(p_lease text, p_holder text, p_epoch bigint, p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
      DECLARE
        l record;
        n jsonb := p->'next';
        x jsonb := p->'expect';
        c jsonb;
        s jsonb;
        ev jsonb;
      BEGIN
        SELECT holder, epoch INTO l FROM leases WHERE name = p_lease FOR SHARE;
        IF NOT FOUND THEN
          RETURN jsonb_build_object('status', 'fenced', 'holder', NULL, 'epoch', NULL);
        END IF;
        IF l.holder IS DISTINCT FROM p_holder OR l.epoch <> p_epoch THEN
          RETURN jsonb_build_object('status', 'fenced', 'holder', l.holder, 'epoch', l.epoch);
        END IF;

        UPDATE rollouts SET state = n->>'state', attempt = (n->>'attempt')::int, version = (n->>'version')::bigint,
               updated_at = rollout_ts(n->'updatedAt'), last_progress_at = rollout_ts(n->'lastProgressAt'),
               deadline_exceeded_at = rollout_ts(n->'deadlineExceededAt'), state_by = n->>'stateBy', state_reason = n->>'stateReason'
         WHERE id = p->>'rolloutId' AND version = (x->>'version')::bigint AND state = x->>'state' AND attempt = (x->>'attempt')::int;
        IF NOT FOUND THEN
          RETURN jsonb_build_object('status', 'stale');
        END IF;

        FOR c IN SELECT value FROM jsonb_array_elements(p->'stageChanges') LOOP
          s := c->'set';
          UPDATE rollout_stages SET
                 phase          = CASE WHEN s ? 'phase' THEN s->>'phase' ELSE phase END,
                 activated_at   = CASE WHEN s ? 'activatedAt' THEN rollout_ts(s->'activatedAt') ELSE activated_at END,
                 promoted_at    = CASE WHEN s ? 'promotedAt' THEN rollout_ts(s->'promotedAt') ELSE promoted_at END,
                 promoted_epoch = CASE WHEN s ? 'promotedEpoch' THEN (s->>'promotedEpoch')::bigint ELSE promoted_epoch END,
                 promoted_by    = CASE WHEN s ? 'promotedBy' THEN s->>'promotedBy' ELSE promoted_by END,
                 rolled_back_at = CASE WHEN s ? 'rolledBackAt' THEN rollout_ts(s->'rolledBackAt') ELSE rolled_back_at END,
                 reason         = CASE WHEN s ? 'reason' THEN s->>'reason' ELSE reason END
           WHERE rollout_id = p->>'rolloutId' AND attempt = (x->>'attempt')::int
             AND stage_index = (c->>'index')::int AND phase = c->>'expect';
          IF NOT FOUND THEN
            RAISE EXCEPTION 'stage % is not %', c->>'index', c->>'expect' USING ERRCODE = 'RB001';
          END IF;
        END LOOP;

        INSERT INTO rollout_stages (rollout_id, attempt, stage_index, name, phase)
        SELECT p->>'rolloutId', (n->>'attempt')::int, (v->>'index')::int, v->>'name', 'pending'
          FROM jsonb_array_elements(p->'newStages') AS v;

        FOR ev IN SELECT value FROM jsonb_array_elements(p->'events') LOOP
          INSERT INTO rollout_events (id, rollout_id, detail_type, time, detail)
          VALUES (ev->>'id', p->>'rolloutId', ev->>'detailType', rollout_ts(ev->'time'), ev->'detail')
          ON CONFLICT (id) DO NOTHING;
        END LOOP;
        RETURN jsonb_build_object('status', 'ok');
      END
      $f$;
    `,
  },
  {
    id: 4,
    name: 'ledger',
    sql: `
      CREATE TABLE runs (
        id                text PRIMARY KEY,
        spec              jsonb NOT NULL,
        coordinator_epoch bigint NOT NULL DEFAULT -1,
        created_at        timestamptz NOT NULL
      );
      CREATE TABLE work_items (
        run_id       text NOT NULL REFERENCES runs (id),
        id           text NOT NULL,
        payload      jsonb NOT NULL,
        state        text NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
        worker       text,
        epoch        bigint,
        claimed_at   timestamptz,
        started      boolean NOT NULL DEFAULT false,
        heartbeat_at timestamptz,
        result_hash  text,
        result       jsonb,
        error        text,
        attempts     integer NOT NULL DEFAULT 0,
        version      bigint NOT NULL DEFAULT 0,
        created_at   timestamptz NOT NULL,
        updated_at   timestamptz NOT NULL,
        PRIMARY KEY (run_id, id)
      );
      -- The coordinator's queries touch only these partial indexes: their cost follows the running
      -- (or pending) set, not the size of the run.
      CREATE INDEX work_items_running ON work_items (run_id, heartbeat_at) WHERE state = 'running';
      CREATE INDEX work_items_pending ON work_items (run_id, id) WHERE state = 'pending';
    `,
  },
  {
    id: 5,
    name: 'worker registry',
    sql: `
      -- Keyed by instance first: a preemption notice names an instance.
      CREATE TABLE workers (
        instance_id   text NOT NULL,
        worker_id     text NOT NULL,
        provider      text NOT NULL CHECK (provider IN ('aws', 'gcp', 'local')),
        run_id        text,
        state         text NOT NULL CHECK (state IN ('active', 'draining', 'gone')),
        registered_at timestamptz NOT NULL,
        heartbeat_at  timestamptz NOT NULL,
        drain         jsonb,
        gone_at       timestamptz,
        PRIMARY KEY (instance_id, worker_id)
      );
    `,
  },
  {
    id: 6,
    name: 'cluster membership',
    // Cluster membership, as Orchestry's distributed controller keeps it. Leadership is the lease row (leases), so its leader_lease table is not created.
    sql: `
      CREATE TABLE cluster_nodes (
        node_id        varchar(255) PRIMARY KEY,
        hostname       varchar(255) NOT NULL,
        port           integer NOT NULL,
        api_url        varchar(512) NOT NULL,
        state          varchar(50) NOT NULL CHECK (state IN ('follower', 'candidate', 'leader', 'stopped')),
        term           integer NOT NULL DEFAULT 0,
        last_heartbeat timestamptz NOT NULL DEFAULT now(),
        is_healthy     boolean NOT NULL DEFAULT true,
        created_at     timestamptz NOT NULL DEFAULT now(),
        updated_at     timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE cluster_events (
        id         serial PRIMARY KEY,
        node_id    varchar(255) NOT NULL,
        event_type varchar(100) NOT NULL,
        event_data jsonb,
        timestamp  timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    id: 7,
    name: 'node api: idempotent writes and run statistics',
    sql: `
      -- A write sent with an Idempotency-Key is applied in the same transaction that records its
      -- response here, so a retry (a proxy failing over after the node died) replays, never re-applies.
      CREATE TABLE api_requests (
        key         text PRIMARY KEY,
        fingerprint text NOT NULL,
        status      integer NOT NULL,
        response    jsonb NOT NULL,
        node_id     text NOT NULL,
        created_at  timestamptz NOT NULL
      );
      CREATE INDEX api_requests_created ON api_requests (created_at);
      -- Observability only (the status page): no protocol decision reads these.
      CREATE TABLE run_stats (
        run_id text PRIMARY KEY,
        steals bigint NOT NULL DEFAULT 0
      );
    `,
  },
  {
    id: 8,
    name: 'ledger: when each pending item was last sent to the queue',
    sql: `
      -- Storing a change and sending its message are two steps: a Pending item whose message was
      -- never recorded as sent (NULL) is re-sent by the coordinator's scan. Items pending before this
      -- migration count as unsent and are sent once more (a duplicate message is harmless).
      ALTER TABLE work_items ADD COLUMN sent_at timestamptz;
      CREATE INDEX work_items_unsent ON work_items (run_id, sent_at NULLS FIRST) WHERE state = 'pending';
    `,
  },
  {
    id: 9,
    name: 'worker registry: one record per worker per run; heartbeats judged on the store clock',
    sql: `
      -- The same worker id in two runs is two workers: draining or deregistering one must not touch the other.
      UPDATE workers SET run_id = '' WHERE run_id IS NULL;
      ALTER TABLE workers ALTER COLUMN run_id SET NOT NULL;
      ALTER TABLE workers DROP CONSTRAINT workers_pkey;
      ALTER TABLE workers ADD PRIMARY KEY (instance_id, run_id, worker_id);
      -- When the store last heard from the worker, by the store's clock (heartbeat_at is the worker's).
      ALTER TABLE workers ADD COLUMN seen_at timestamptz NOT NULL DEFAULT now();
    `,
  },
  {
    id: 10,
    name: 'rollout_apply: the same transition for less server time',
    // Migration 3's function, statement for statement, made cheaper where it
    // measured: arrays are walked by index (no query to list their elements),
    // no statement runs for an empty list, and timestamps are read with ->>
    // (rollout_ts compared and re-extracted each value). Same checks, same order, all or nothing.
    // test/unit/transition-plan.test.ts reads the JSON paths from the newest definition: this one.
    sql: `
      CREATE OR REPLACE FUNCTION rollout_apply(p_lease text, p_holder text, p_epoch bigint, p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $f$
      DECLARE
        l record;
        n jsonb := p->'next';
        x jsonb := p->'expect';
        changes jsonb := p->'stageChanges';
        events jsonb := p->'events';
        c jsonb;
        s jsonb;
        ev jsonb;
      BEGIN
        SELECT holder, epoch INTO l FROM leases WHERE name = p_lease FOR SHARE;
        IF NOT FOUND THEN
          RETURN jsonb_build_object('status', 'fenced', 'holder', NULL, 'epoch', NULL);
        END IF;
        IF l.holder IS DISTINCT FROM p_holder OR l.epoch <> p_epoch THEN
          RETURN jsonb_build_object('status', 'fenced', 'holder', l.holder, 'epoch', l.epoch);
        END IF;

        UPDATE rollouts SET state = n->>'state', attempt = (n->>'attempt')::int, version = (n->>'version')::bigint,
               updated_at = to_timestamp((n->>'updatedAt')::float8 / 1000), last_progress_at = to_timestamp((n->>'lastProgressAt')::float8 / 1000),
               deadline_exceeded_at = to_timestamp((n->>'deadlineExceededAt')::float8 / 1000), state_by = n->>'stateBy', state_reason = n->>'stateReason'
         WHERE id = p->>'rolloutId' AND version = (x->>'version')::bigint AND state = x->>'state' AND attempt = (x->>'attempt')::int;
        IF NOT FOUND THEN
          RETURN '{"status": "stale"}';
        END IF;

        FOR i IN 0 .. jsonb_array_length(changes) - 1 LOOP
          c := changes->i;
          s := c->'set';
          UPDATE rollout_stages SET
                 phase          = CASE WHEN s ? 'phase' THEN s->>'phase' ELSE phase END,
                 activated_at   = CASE WHEN s ? 'activatedAt' THEN to_timestamp((s->>'activatedAt')::float8 / 1000) ELSE activated_at END,
                 promoted_at    = CASE WHEN s ? 'promotedAt' THEN to_timestamp((s->>'promotedAt')::float8 / 1000) ELSE promoted_at END,
                 promoted_epoch = CASE WHEN s ? 'promotedEpoch' THEN (s->>'promotedEpoch')::bigint ELSE promoted_epoch END,
                 promoted_by    = CASE WHEN s ? 'promotedBy' THEN s->>'promotedBy' ELSE promoted_by END,
                 rolled_back_at = CASE WHEN s ? 'rolledBackAt' THEN to_timestamp((s->>'rolledBackAt')::float8 / 1000) ELSE rolled_back_at END,
                 reason         = CASE WHEN s ? 'reason' THEN s->>'reason' ELSE reason END
           WHERE rollout_id = p->>'rolloutId' AND attempt = (x->>'attempt')::int
             AND stage_index = (c->>'index')::int AND phase = c->>'expect';
          IF NOT FOUND THEN
            RAISE EXCEPTION 'stage % is not %', c->>'index', c->>'expect' USING ERRCODE = 'RB001';
          END IF;
        END LOOP;

        IF jsonb_array_length(p->'newStages') > 0 THEN
          INSERT INTO rollout_stages (rollout_id, attempt, stage_index, name, phase)
          SELECT p->>'rolloutId', (n->>'attempt')::int, (v->>'index')::int, v->>'name', 'pending'
            FROM jsonb_array_elements(p->'newStages') AS v;
        END IF;

        FOR i IN 0 .. jsonb_array_length(events) - 1 LOOP
          ev := events->i;
          INSERT INTO rollout_events (id, rollout_id, detail_type, time, detail)
          VALUES (ev->>'id', p->>'rolloutId', ev->>'detailType', to_timestamp((ev->>'time')::float8 / 1000), ev->'detail')
          ON CONFLICT (id) DO NOTHING;
        END LOOP;
        RETURN '{"status": "ok"}';
      END
      $f$;
    `,
  },
  {
    id: 11,
    name: 'provider gates: readings and their tallies',
    sql: `
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
    `,
  },
  {
    id: 12,
    name: 'rollouts: the alarm names a spec watches, kept beside it',
    // A view read them out of the spec's JSON on every read (half its cost for
    // a rollout with no alarms). Generated from the spec, so every writer of a
    // rollout, of this version or an older one, keeps them right.
    // alarmNamesOf in shared/rollout/model.ts is the same rule.
    sql: `
      CREATE FUNCTION rollout_alarm_names(spec jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $f$
        SELECT coalesce(array_agg(DISTINCT n ORDER BY n), '{}') FROM (
          SELECT jsonb_array_elements_text(g->'gates'->'alarms') FROM jsonb_array_elements(spec->'stages') g
          UNION ALL
          SELECT jsonb_array_elements_text(p->'alarms')
            FROM jsonb_array_elements(spec->'stages') g, jsonb_array_elements(coalesce(g->'gates'->'providers', '[]')) p
           WHERE p->>'type' = 'cloudwatchAlarm') AS x(n)
      $f$;
      ALTER TABLE rollouts ADD COLUMN alarm_names text[] GENERATED ALWAYS AS (rollout_alarm_names(spec)) STORED;
    `,
  },
  {
    id: 13,
    name: 'gate readings: found by age, so the tick can prune the history',
    sql: `
      -- A gate read every 30 s on 1,000 rollouts writes ~2.9 million readings a day; after
      -- READING_RETENTION_DAYS they go, oldest first, a bounded batch per tick.
      CREATE INDEX gate_readings_at ON gate_readings (at);
    `,
  },
  {
    id: 14,
    name: 'rollout_apply_with_reading: a metrics reading and the decision it makes, one write',
    // The leader evaluates a view it already holds plus the new reading, and
    // sends both here. The reading is stored whoever leads, as a signal
    // always is. The plan applies only when the evaluator's inputs are still
    // what the caller held before this reading: the rollout's version (which
    // every change to it or its stages bumps), and per row of its current
    // attempt the metrics' observed_at, the watched alarms' states and the
    // gate tallies' (origin, readings). Each of those only moves forward, so
    // equal means unchanged. Otherwise 'changed': the caller decides again on
    // a fresh view. The plan goes through rollout_apply, its checks and all.
    sql: `
      CREATE FUNCTION rollout_apply_with_reading(p_lease text, p_holder text, p_epoch bigint, p_reading jsonb, p_held jsonb, p jsonb)
        RETURNS jsonb LANGUAGE plpgsql AS $f$
      DECLARE
        rid text := p->>'rolloutId';
        r record;
        att integer;
        stg integer := (p_reading->>'stage')::int;
        same boolean;
      BEGIN
        SELECT version, attempt, alarm_names, jsonb_array_length(spec->'stages') AS n INTO r FROM rollouts WHERE id = rid;
        IF NOT FOUND OR stg < 0 OR stg >= r.n THEN
          RETURN '{"status": "unknown"}';
        END IF;
        att := coalesce((p_reading->>'attempt')::int, r.attempt);
        same := r.version = (p_held->>'version')::bigint AND r.attempt = (p_held->>'attempt')::int
          AND (SELECT coalesce(jsonb_object_agg(m.stage_index::text, round(date_part('epoch', m.observed_at) * 1000)), '{}')
                 FROM stage_metrics m WHERE m.rollout_id = rid AND m.attempt = r.attempt) = p_held->'metrics'
          AND (SELECT coalesce(jsonb_object_agg(a.name, a.state), '{}') FROM alarm_states a WHERE a.name = ANY (r.alarm_names)) = p_held->'alarms'
          AND (SELECT coalesce(jsonb_object_agg(t.stage_index || '/' || t.gate, jsonb_build_array(round(date_part('epoch', t.origin) * 1000), t.readings)), '{}')
                 FROM gate_tallies t WHERE t.rollout_id = rid AND t.attempt = r.attempt) = p_held->'tallies';

        INSERT INTO stage_metrics (rollout_id, attempt, stage_index, requests, errors, p99_latency_ms, observed_at)
        VALUES (rid, att, stg, (p_reading->>'requests')::bigint, (p_reading->>'errors')::bigint, (p_reading->>'p99LatencyMs')::double precision,
                to_timestamp((p_reading->>'observedAt')::float8 / 1000))
        ON CONFLICT (rollout_id, attempt, stage_index) DO UPDATE
          SET requests = excluded.requests, errors = excluded.errors, p99_latency_ms = excluded.p99_latency_ms, observed_at = excluded.observed_at
          WHERE stage_metrics.observed_at < excluded.observed_at;
        IF NOT FOUND THEN
          RETURN jsonb_build_object('status', 'changed', 'stored', false, 'attempt', att);
        END IF;
        IF NOT same THEN
          RETURN jsonb_build_object('status', 'changed', 'stored', true, 'attempt', att);
        END IF;
        RETURN rollout_apply(p_lease, p_holder, p_epoch, p) || jsonb_build_object('stored', true, 'attempt', att);
      END
      $f$;
    `,
  },
  {
    id: 15,
    name: 'rollout_views: what the evaluator reads, defined once; a reading and its decision return the view they found changed',
    // The view a decision is made on, as one SQL view (inlined by the planner,
    // so a spec nobody selects is never read): the rollout with its current
    // attempt's stages, metrics and provider gate tallies, and the state of
    // every alarm its stages name; timestamps as epoch milliseconds.
    //
    // rollout_apply_with_reading, seven arguments: migration 14's function,
    // called as a plain statement. It builds the view it found changed
    // itself (p_with_spec: with the spec), where migration 14's caller read
    // it in a subquery the server set up on every call. It compares only
    // what the decision read (signalsRead in shared/rollout/evaluate.ts), as
    // held: the rollout's version and attempt, which stand for the row and
    // its stages; the active stage (p_held.stage, null when none is) metrics'
    // observed_at; the states of the alarms its gates name and its provider
    // gates' tallies (origin, readings), null for one not stored. Each of
    // those only moves forward, so equal means unchanged. Migration 14's
    // six-argument function stays for nodes of the previous version.
    sql: `
      CREATE VIEW rollout_views AS
        SELECT r.id, r.state, r.attempt, r.version,
               round(date_part('epoch', r.created_at) * 1000) AS created_at, round(date_part('epoch', r.updated_at) * 1000) AS updated_at,
               round(date_part('epoch', r.last_progress_at) * 1000) AS last_progress_at,
               round(date_part('epoch', r.deadline_exceeded_at) * 1000) AS deadline_exceeded_at, r.state_by, r.state_reason, r.spec,
          (SELECT coalesce(json_agg(json_build_array(s.stage_index, s.name, s.phase, round(date_part('epoch', s.activated_at) * 1000),
                                                     round(date_part('epoch', s.promoted_at) * 1000), s.promoted_epoch, s.promoted_by,
                                                     round(date_part('epoch', s.rolled_back_at) * 1000), s.reason) ORDER BY s.stage_index), '[]')
             FROM rollout_stages s WHERE s.rollout_id = r.id AND s.attempt = r.attempt) AS stages,
          (SELECT coalesce(json_agg(json_build_array(m.stage_index, m.requests, m.errors, m.p99_latency_ms, round(date_part('epoch', m.observed_at) * 1000))), '[]')
             FROM stage_metrics m WHERE m.rollout_id = r.id AND m.attempt = r.attempt) AS metrics,
          (SELECT coalesce(json_object_agg(a.name, a.state), '{}') FROM alarm_states a WHERE a.name = ANY (r.alarm_names)) AS alarms,
          (SELECT coalesce(json_agg(t), '[]') FROM gate_tallies t WHERE t.rollout_id = r.id AND t.attempt = r.attempt) AS gates
        FROM rollouts r;

      CREATE FUNCTION rollout_apply_with_reading(p_lease text, p_holder text, p_epoch bigint, p_reading jsonb, p_held jsonb, p jsonb, p_with_spec boolean)
        RETURNS jsonb LANGUAGE plpgsql AS $f$
      DECLARE
        rid text := p->>'rolloutId';
        r record;
        att integer;
        stg integer := (p_reading->>'stage')::int;
        sig integer := (p_held->>'stage')::int;
        same boolean;
        stored boolean;
        res jsonb;
      BEGIN
        SELECT r0.version, r0.attempt, jsonb_array_length(r0.spec->'stages') AS n,
               (SELECT round(date_part('epoch', m.observed_at) * 1000) FROM stage_metrics m
                 WHERE m.rollout_id = rid AND m.attempt = r0.attempt AND m.stage_index = sig) AS seen
          INTO r FROM rollouts r0 WHERE r0.id = rid;
        IF NOT FOUND OR stg < 0 OR stg >= r.n THEN
          RETURN '{"status": "unknown"}';
        END IF;
        att := coalesce((p_reading->>'attempt')::int, r.attempt);
        same := r.version = (p_held->>'version')::bigint AND r.attempt = (p_held->>'attempt')::int
          AND r.seen IS NOT DISTINCT FROM (p_held->>'observedAt')::float8;
        IF same AND p_held->'alarms' <> '{}' THEN
          same := (SELECT jsonb_object_agg(k.name, a.state) FROM jsonb_object_keys(p_held->'alarms') AS k(name)
                     LEFT JOIN alarm_states a ON a.name = k.name) = p_held->'alarms';
        END IF;
        IF same AND p_held->'tallies' <> '{}' THEN
          same := (SELECT jsonb_object_agg(k.gate, CASE WHEN t.gate IS NOT NULL THEN jsonb_build_array(round(date_part('epoch', t.origin) * 1000), t.readings) END)
                     FROM jsonb_object_keys(p_held->'tallies') AS k(gate)
                     LEFT JOIN gate_tallies t ON t.rollout_id = rid AND t.attempt = r.attempt AND t.stage_index = sig AND t.gate = k.gate) = p_held->'tallies';
        END IF;

        INSERT INTO stage_metrics (rollout_id, attempt, stage_index, requests, errors, p99_latency_ms, observed_at)
        VALUES (rid, att, stg, (p_reading->>'requests')::bigint, (p_reading->>'errors')::bigint, (p_reading->>'p99LatencyMs')::double precision,
                to_timestamp((p_reading->>'observedAt')::float8 / 1000))
        ON CONFLICT (rollout_id, attempt, stage_index) DO UPDATE
          SET requests = excluded.requests, errors = excluded.errors, p99_latency_ms = excluded.p99_latency_ms, observed_at = excluded.observed_at
          WHERE stage_metrics.observed_at < excluded.observed_at;
        stored := FOUND;
        IF stored AND same THEN
          res := rollout_apply(p_lease, p_holder, p_epoch, p);
          IF res->>'status' <> 'stale' THEN
            RETURN res || jsonb_build_object('stored', true, 'attempt', att);
          END IF;
        END IF;
        -- Read after the insert, by a statement of its own: the view includes this reading if it was stored.
        RETURN jsonb_build_object('status', coalesce(res->>'status', 'changed'), 'stored', stored, 'attempt', att, 'view',
          (SELECT to_jsonb(v) - CASE WHEN p_with_spec THEN '' ELSE 'spec' END FROM rollout_views v WHERE v.id = rid));
      END
      $f$;
    `,
  },
  {
    id: 16,
    name: 'signal signatures seen within their window: a replayed signed signal is refused on every node',
    sql: `
      CREATE TABLE signal_signatures (
        signature text PRIMARY KEY,
        seen_at   timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX signal_signatures_seen ON signal_signatures (seen_at);
    `,
  },
  {
    id: 17,
    name: 'rollout_actuations: what was applied to each target of a rollout, and when',
    sql: `
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
    `,
  },
  {
    id: 18,
    name: 'rollouts_created: rollouts listed newest first, a page at a time',
    sql: `CREATE INDEX rollouts_created ON rollouts (created_at DESC, id DESC);`,
  },
  {
    id: 19,
    name: 'runs_created: runs listed newest first, a page at a time',
    sql: `CREATE INDEX runs_created ON runs (created_at DESC, id DESC);`,
  },
  {
    id: 20,
    name: 'runs_cancelled: who cancelled a run, when and why',
    sql: `ALTER TABLE runs ADD COLUMN cancelled_at timestamptz, ADD COLUMN cancelled_by text, ADD COLUMN cancel_reason text;`,
  },
  {
    id: 21,
    name: 'rollouts_watching: an alarm change finds the running rollouts that watch it, not every running one',
    sql: `CREATE INDEX rollouts_watching ON rollouts USING gin (alarm_names) WHERE state = 'running';`,
  },
  {
    id: 22,
    name: 'rollouts due: a tick reads the running rollouts whose time has come or that a signal or a transition marked, not every running one',
    // due_at: epoch ms (0: due at once), compared with the promoter's clock. due_mark: bumped by every mark, so a
    // reschedule decided on an older reading is refused (rollout_reschedule in rollout-store.ts). Existing rows start due.
    // The triggers mark in the writing statement itself: no path that stores a signal or a transition can forget to.
    sql: `
      ALTER TABLE rollouts ADD COLUMN due_at bigint NOT NULL DEFAULT 0, ADD COLUMN due_mark bigint NOT NULL DEFAULT 0;
      CREATE INDEX rollouts_due ON rollouts (due_at) WHERE state = 'running';

      CREATE FUNCTION rollout_due_on_change() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        NEW.due_at := 0;
        NEW.due_mark := OLD.due_mark + 1;
        RETURN NEW;
      END $f$;
      CREATE TRIGGER rollouts_due_on_change BEFORE UPDATE ON rollouts FOR EACH ROW
        WHEN (OLD.version IS DISTINCT FROM NEW.version OR OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION rollout_due_on_change();

      CREATE FUNCTION rollout_due_on_metrics() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        UPDATE rollouts SET due_at = 0, due_mark = due_mark + 1 WHERE id = NEW.rollout_id AND state = 'running';
        RETURN NULL;
      END $f$;
      CREATE TRIGGER stage_metrics_due AFTER INSERT OR UPDATE ON stage_metrics FOR EACH ROW EXECUTE FUNCTION rollout_due_on_metrics();

      CREATE FUNCTION rollout_due_on_alarm() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        UPDATE rollouts SET due_at = 0, due_mark = due_mark + 1 WHERE state = 'running' AND alarm_names @> ARRAY[NEW.name];
        RETURN NULL;
      END $f$;
      CREATE TRIGGER alarm_states_due AFTER INSERT OR UPDATE ON alarm_states FOR EACH ROW EXECUTE FUNCTION rollout_due_on_alarm();
    `,
  },
  {
    id: 23,
    name: 'retention: rollouts that ended found by when, and the alarms any rollout (running or not) watches',
    sql: `
      CREATE INDEX rollouts_ended ON rollouts (updated_at) WHERE state IN ('completed', 'rolled_back', 'aborted');
      CREATE INDEX rollouts_alarm_names ON rollouts USING gin (alarm_names);
    `,
  },
  {
    id: 24,
    name: 'rollout_due: when each rollout is next due and when it ended, in a narrow table of its own, so neither a mark nor an end rewrites the rollout row or its indexes',
    // 22 and 23 kept these on the rollouts row: every reading then rewrote that wide row and every one of its indexes
    // (an indexed column changed, so no HOT update), doubling a reading's cost. Here a reading writes one small row.
    // due_at: epoch ms, 0 for at once, 999999999999999 (NEVER_DUE) while not running. ended_at: epoch ms of the
    // transition that ended it (retention), null otherwise. The rollout row gains no indexed column, so a transition
    // within running stays a HOT update of it (an indexed ended_at there doubled a reading's cost again).
    sql: `
      DROP TRIGGER rollouts_due_on_change ON rollouts;
      DROP FUNCTION rollout_due_on_change();
      DROP TRIGGER stage_metrics_due ON stage_metrics;
      DROP FUNCTION rollout_due_on_metrics();
      DROP TRIGGER alarm_states_due ON alarm_states;
      DROP FUNCTION rollout_due_on_alarm();
      DROP INDEX rollouts_due;
      DROP INDEX rollouts_ended;

      CREATE TABLE rollout_due (
        rollout_id text PRIMARY KEY REFERENCES rollouts (id),
        due_at     bigint NOT NULL,
        due_mark   bigint NOT NULL DEFAULT 0,
        ended_at   bigint
      );
      INSERT INTO rollout_due (rollout_id, due_at, due_mark, ended_at)
        SELECT id, CASE WHEN state = 'running' THEN 0 ELSE 999999999999999 END, due_mark,
               CASE WHEN state IN ('completed', 'rolled_back', 'aborted') THEN round(date_part('epoch', updated_at) * 1000)::bigint END
          FROM rollouts;
      CREATE INDEX rollout_due_at ON rollout_due (due_at);
      CREATE INDEX rollout_due_ended ON rollout_due (ended_at) WHERE ended_at IS NOT NULL;
      ALTER TABLE rollouts DROP COLUMN due_at, DROP COLUMN due_mark;

      CREATE FUNCTION rollout_due_created() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        INSERT INTO rollout_due (rollout_id, due_at) VALUES (NEW.id, CASE WHEN NEW.state = 'running' THEN 0 ELSE 999999999999999 END);
        RETURN NULL;
      END $f$;
      CREATE TRIGGER rollouts_due_created AFTER INSERT ON rollouts FOR EACH ROW EXECUTE FUNCTION rollout_due_created();

      CREATE FUNCTION rollout_due_on_change() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        UPDATE rollout_due SET due_at = CASE WHEN NEW.state = 'running' THEN 0 ELSE 999999999999999 END, due_mark = due_mark + 1,
               ended_at = CASE WHEN NEW.state IN ('completed', 'rolled_back', 'aborted') THEN round(date_part('epoch', NEW.updated_at) * 1000)::bigint END
         WHERE rollout_id = NEW.id;
        RETURN NULL;
      END $f$;
      CREATE TRIGGER rollouts_due_on_change AFTER UPDATE ON rollouts FOR EACH ROW
        WHEN (OLD.version IS DISTINCT FROM NEW.version OR OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION rollout_due_on_change();

      CREATE FUNCTION rollout_due_on_metrics() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        UPDATE rollout_due SET due_at = 0, due_mark = due_mark + 1 WHERE rollout_id = NEW.rollout_id AND due_at < 999999999999999;
        RETURN NULL;
      END $f$;
      CREATE TRIGGER stage_metrics_due AFTER INSERT OR UPDATE ON stage_metrics FOR EACH ROW EXECUTE FUNCTION rollout_due_on_metrics();

      CREATE FUNCTION rollout_due_on_alarm() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        UPDATE rollout_due d SET due_at = 0, due_mark = d.due_mark + 1 FROM rollouts r
         WHERE r.id = d.rollout_id AND r.state = 'running' AND r.alarm_names @> ARRAY[NEW.name];
        RETURN NULL;
      END $f$;
      CREATE TRIGGER alarm_states_due AFTER INSERT OR UPDATE ON alarm_states FOR EACH ROW EXECUTE FUNCTION rollout_due_on_alarm();
    `,
  },
  {
    id: 25,
    name: 'retention of runs: when a run was first found finished, cleared by an enqueue',
    // Stamped by the pruner (pruneRuns), not by the writes that finish items: an item's ack stays one row's update.
    sql: `
      ALTER TABLE runs ADD COLUMN closed_at timestamptz;
      CREATE INDEX runs_closed ON runs (closed_at) WHERE closed_at IS NOT NULL;
    `,
  },
];

// Any fixed key: serialises concurrent migrators on a server (a no-op on PGlite, which has one session).
const MIGRATION_LOCK = 7_413_026_401;

export async function migrate(sql: Sql): Promise<void> {
  // A current schema is the common case (every Lambda invocation on Aurora opens the database): one small read,
  // no transaction and no lock. Anything else, a missing table included, takes the locked path below.
  const latest = Math.max(...migrations.map((m) => m.id));
  const current = await sql.query<{ id: unknown }>('SELECT max(id) AS id FROM schema_migrations').then(
    (r) => Number(r.rows[0]?.id ?? 0),
    () => 0,
  );
  if (current >= latest) return;
  await sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await tx.query<{ id: number }>('SELECT id FROM schema_migrations');
    const applied = new Set(rows.map((r) => Number(r.id)));
    for (const m of migrations) {
      if (applied.has(m.id)) continue;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    }
  });
}
