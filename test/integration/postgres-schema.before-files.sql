-- A database made by the migrations as they stood before they were files (the array in
-- shared/adapters/postgres/schema.ts at commit 5766061), dumped by pg_dump --inserts with its
-- schema_migrations rows. test/integration/postgres-schema.test.ts restores it and migrates it.

--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: rollout_alarm_names(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_alarm_names(spec jsonb) RETURNS text[]
    LANGUAGE sql IMMUTABLE
    AS $$
        SELECT coalesce(array_agg(DISTINCT n ORDER BY n), '{}') FROM (
          SELECT jsonb_array_elements_text(g->'gates'->'alarms') FROM jsonb_array_elements(spec->'stages') g
          UNION ALL
          SELECT jsonb_array_elements_text(p->'alarms')
            FROM jsonb_array_elements(spec->'stages') g, jsonb_array_elements(coalesce(g->'gates'->'providers', '[]')) p
           WHERE p->>'type' = 'cloudwatchAlarm') AS x(n)
      $$;

--
-- Name: rollout_apply(text, text, bigint, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_apply(p_lease text, p_holder text, p_epoch bigint, p jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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
      $$;

--
-- Name: rollout_apply_with_reading(text, text, bigint, jsonb, jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_apply_with_reading(p_lease text, p_holder text, p_epoch bigint, p_reading jsonb, p_held jsonb, p jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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
      $$;

--
-- Name: rollout_apply_with_reading(text, text, bigint, jsonb, jsonb, jsonb, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_apply_with_reading(p_lease text, p_holder text, p_epoch bigint, p_reading jsonb, p_held jsonb, p jsonb, p_with_spec boolean) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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
      $$;

--
-- Name: rollout_due_created(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_due_created() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
      BEGIN
        INSERT INTO rollout_due (rollout_id, due_at) VALUES (NEW.id, CASE WHEN NEW.state = 'running' THEN 0 ELSE 999999999999999 END);
        RETURN NULL;
      END $$;

--
-- Name: rollout_due_on_alarm(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_due_on_alarm() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
      BEGIN
        UPDATE rollout_due d SET due_at = 0, due_mark = d.due_mark + 1 FROM rollouts r
         WHERE r.id = d.rollout_id AND r.state = 'running' AND r.alarm_names @> ARRAY[NEW.name];
        RETURN NULL;
      END $$;

--
-- Name: rollout_due_on_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_due_on_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
      BEGIN
        UPDATE rollout_due SET due_at = CASE WHEN NEW.state = 'running' THEN 0 ELSE 999999999999999 END, due_mark = due_mark + 1,
               ended_at = CASE WHEN NEW.state IN ('completed', 'rolled_back', 'aborted') THEN round(date_part('epoch', NEW.updated_at) * 1000)::bigint END
         WHERE rollout_id = NEW.id;
        RETURN NULL;
      END $$;

--
-- Name: rollout_due_on_metrics(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_due_on_metrics() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
      BEGIN
        UPDATE rollout_due SET due_at = 0, due_mark = due_mark + 1 WHERE rollout_id = NEW.rollout_id AND due_at < 999999999999999;
        RETURN NULL;
      END $$;

--
-- Name: rollout_ts(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.rollout_ts(v jsonb) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE WHEN v IS NULL OR v = 'null'::jsonb THEN NULL ELSE to_timestamp((v #>> '{}')::double precision / 1000) END $$;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: alarm_states; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alarm_states (
    name text NOT NULL,
    state text NOT NULL,
    changed_at timestamp with time zone NOT NULL,
    CONSTRAINT alarm_states_state_check CHECK ((state = ANY (ARRAY['OK'::text, 'ALARM'::text, 'INSUFFICIENT_DATA'::text])))
);

--
-- Name: api_requests; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_requests (
    key text NOT NULL,
    fingerprint text NOT NULL,
    status integer NOT NULL,
    response jsonb NOT NULL,
    node_id text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

--
-- Name: cluster_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cluster_events (
    id integer NOT NULL,
    node_id character varying(255) NOT NULL,
    event_type character varying(100) NOT NULL,
    event_data jsonb,
    "timestamp" timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: cluster_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.cluster_events_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: cluster_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.cluster_events_id_seq OWNED BY public.cluster_events.id;

--
-- Name: cluster_nodes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cluster_nodes (
    node_id character varying(255) NOT NULL,
    hostname character varying(255) NOT NULL,
    port integer NOT NULL,
    api_url character varying(512) NOT NULL,
    state character varying(50) NOT NULL,
    term integer DEFAULT 0 NOT NULL,
    last_heartbeat timestamp with time zone DEFAULT now() NOT NULL,
    is_healthy boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT cluster_nodes_state_check CHECK (((state)::text = ANY ((ARRAY['follower'::character varying, 'candidate'::character varying, 'leader'::character varying, 'stopped'::character varying])::text[])))
);

--
-- Name: gate_readings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.gate_readings (
    rollout_id text NOT NULL,
    attempt integer NOT NULL,
    stage_index integer NOT NULL,
    gate text NOT NULL,
    at timestamp with time zone NOT NULL,
    type text NOT NULL,
    outcome text NOT NULL,
    value double precision,
    query text NOT NULL,
    answer text NOT NULL,
    reason text,
    source text NOT NULL,
    CONSTRAINT gate_readings_outcome_check CHECK ((outcome = ANY (ARRAY['pass'::text, 'fail'::text, 'inconclusive'::text]))),
    CONSTRAINT gate_readings_source_check CHECK ((source = ANY (ARRAY['poll'::text, 'event'::text])))
);

--
-- Name: gate_tallies; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.gate_tallies (
    rollout_id text NOT NULL,
    attempt integer NOT NULL,
    stage_index integer NOT NULL,
    gate text NOT NULL,
    origin timestamp with time zone NOT NULL,
    readings integer NOT NULL,
    failures integer NOT NULL,
    inconclusive integer NOT NULL,
    last jsonb NOT NULL,
    last_failure jsonb,
    last_inconclusive jsonb
);

--
-- Name: leases; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.leases (
    name text NOT NULL,
    holder text,
    epoch bigint NOT NULL,
    version bigint NOT NULL,
    acquired_at timestamp with time zone NOT NULL,
    renewed_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    hostname text,
    api_url text,
    CONSTRAINT leases_epoch_check CHECK ((epoch >= 0)),
    CONSTRAINT leases_version_check CHECK ((version >= 0))
);

--
-- Name: TABLE leases; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.leases IS 'Lease rows are never deleted: deleting one resets its epoch and breaks fencing.';

--
-- Name: rollout_actuations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rollout_actuations (
    rollout_id text NOT NULL,
    target text NOT NULL,
    record jsonb NOT NULL,
    settled boolean NOT NULL,
    updated_at bigint NOT NULL
);

--
-- Name: rollout_due; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rollout_due (
    rollout_id text NOT NULL,
    due_at bigint NOT NULL,
    due_mark bigint DEFAULT 0 NOT NULL,
    ended_at bigint
);

--
-- Name: rollout_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rollout_events (
    seq bigint NOT NULL,
    id text NOT NULL,
    rollout_id text NOT NULL,
    detail_type text NOT NULL,
    "time" timestamp with time zone NOT NULL,
    detail jsonb NOT NULL,
    published_at timestamp with time zone
);

--
-- Name: rollout_events_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.rollout_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: rollout_events_seq_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.rollout_events_seq_seq OWNED BY public.rollout_events.seq;

--
-- Name: rollout_stages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rollout_stages (
    rollout_id text NOT NULL,
    attempt integer NOT NULL,
    stage_index integer NOT NULL,
    name text NOT NULL,
    phase text NOT NULL,
    activated_at timestamp with time zone,
    promoted_at timestamp with time zone,
    promoted_epoch bigint,
    promoted_by text,
    rolled_back_at timestamp with time zone,
    reason text,
    CONSTRAINT rollout_stages_phase_check CHECK ((phase = ANY (ARRAY['pending'::text, 'active'::text, 'promoted'::text, 'rolled_back'::text])))
);

--
-- Name: rollouts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.rollouts (
    id text NOT NULL,
    spec jsonb NOT NULL,
    state text NOT NULL,
    attempt integer NOT NULL,
    version bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    last_progress_at timestamp with time zone NOT NULL,
    deadline_exceeded_at timestamp with time zone,
    state_by text,
    state_reason text,
    alarm_names text[] GENERATED ALWAYS AS (public.rollout_alarm_names(spec)) STORED,
    CONSTRAINT rollouts_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT rollouts_state_check CHECK ((state = ANY (ARRAY['running'::text, 'paused'::text, 'completed'::text, 'rolled_back'::text, 'aborted'::text])))
);

--
-- Name: stage_metrics; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.stage_metrics (
    rollout_id text NOT NULL,
    attempt integer NOT NULL,
    stage_index integer NOT NULL,
    requests bigint NOT NULL,
    errors bigint NOT NULL,
    p99_latency_ms double precision,
    observed_at timestamp with time zone NOT NULL
);

--
-- Name: rollout_views; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.rollout_views AS
 SELECT r.id,
    r.state,
    r.attempt,
    r.version,
    round((date_part('epoch'::text, r.created_at) * (1000)::double precision)) AS created_at,
    round((date_part('epoch'::text, r.updated_at) * (1000)::double precision)) AS updated_at,
    round((date_part('epoch'::text, r.last_progress_at) * (1000)::double precision)) AS last_progress_at,
    round((date_part('epoch'::text, r.deadline_exceeded_at) * (1000)::double precision)) AS deadline_exceeded_at,
    r.state_by,
    r.state_reason,
    r.spec,
    ( SELECT COALESCE(json_agg(json_build_array(s.stage_index, s.name, s.phase, round((date_part('epoch'::text, s.activated_at) * (1000)::double precision)), round((date_part('epoch'::text, s.promoted_at) * (1000)::double precision)), s.promoted_epoch, s.promoted_by, round((date_part('epoch'::text, s.rolled_back_at) * (1000)::double precision)), s.reason) ORDER BY s.stage_index), '[]'::json) AS "coalesce"
           FROM public.rollout_stages s
          WHERE ((s.rollout_id = r.id) AND (s.attempt = r.attempt))) AS stages,
    ( SELECT COALESCE(json_agg(json_build_array(m.stage_index, m.requests, m.errors, m.p99_latency_ms, round((date_part('epoch'::text, m.observed_at) * (1000)::double precision)))), '[]'::json) AS "coalesce"
           FROM public.stage_metrics m
          WHERE ((m.rollout_id = r.id) AND (m.attempt = r.attempt))) AS metrics,
    ( SELECT COALESCE(json_object_agg(a.name, a.state), '{}'::json) AS "coalesce"
           FROM public.alarm_states a
          WHERE (a.name = ANY (r.alarm_names))) AS alarms,
    ( SELECT COALESCE(json_agg(t.*), '[]'::json) AS "coalesce"
           FROM public.gate_tallies t
          WHERE ((t.rollout_id = r.id) AND (t.attempt = r.attempt))) AS gates
   FROM public.rollouts r;

--
-- Name: run_stats; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_stats (
    run_id text NOT NULL,
    steals bigint DEFAULT 0 NOT NULL
);

--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    id text NOT NULL,
    spec jsonb NOT NULL,
    coordinator_epoch bigint DEFAULT '-1'::integer NOT NULL,
    created_at timestamp with time zone NOT NULL,
    cancelled_at timestamp with time zone,
    cancelled_by text,
    cancel_reason text,
    closed_at timestamp with time zone
);

--
-- Name: schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_migrations (
    id integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: signal_signatures; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.signal_signatures (
    signature text NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: work_items; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.work_items (
    run_id text NOT NULL,
    id text NOT NULL,
    payload jsonb NOT NULL,
    state text NOT NULL,
    worker text,
    epoch bigint,
    claimed_at timestamp with time zone,
    started boolean DEFAULT false NOT NULL,
    heartbeat_at timestamp with time zone,
    result_hash text,
    result jsonb,
    error text,
    attempts integer DEFAULT 0 NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    sent_at timestamp with time zone,
    CONSTRAINT work_items_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'done'::text, 'failed'::text])))
);

--
-- Name: workers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workers (
    instance_id text NOT NULL,
    worker_id text NOT NULL,
    provider text NOT NULL,
    run_id text NOT NULL,
    state text NOT NULL,
    registered_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL,
    drain jsonb,
    gone_at timestamp with time zone,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workers_provider_check CHECK ((provider = ANY (ARRAY['aws'::text, 'gcp'::text, 'local'::text]))),
    CONSTRAINT workers_state_check CHECK ((state = ANY (ARRAY['active'::text, 'draining'::text, 'gone'::text])))
);

--
-- Name: cluster_events id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cluster_events ALTER COLUMN id SET DEFAULT nextval('public.cluster_events_id_seq'::regclass);

--
-- Name: rollout_events seq; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_events ALTER COLUMN seq SET DEFAULT nextval('public.rollout_events_seq_seq'::regclass);

--
-- Data for Name: alarm_states; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: api_requests; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: cluster_events; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: cluster_nodes; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: gate_readings; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: gate_tallies; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: leases; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: rollout_actuations; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: rollout_due; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: rollout_events; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: rollout_stages; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: rollouts; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: run_stats; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.schema_migrations VALUES (1, 'leases', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (2, 'rollouts', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (3, 'rollout_apply', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (4, 'ledger', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (5, 'worker registry', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (6, 'cluster membership', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (7, 'node api: idempotent writes and run statistics', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (8, 'ledger: when each pending item was last sent to the queue', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (9, 'worker registry: one record per worker per run; heartbeats judged on the store clock', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (10, 'rollout_apply: the same transition for less server time', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (11, 'provider gates: readings and their tallies', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (12, 'rollouts: the alarm names a spec watches, kept beside it', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (13, 'gate readings: found by age, so the tick can prune the history', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (14, 'rollout_apply_with_reading: a metrics reading and the decision it makes, one write', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (15, 'rollout_views: what the evaluator reads, defined once; a reading and its decision return the view they found changed', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (16, 'signal signatures seen within their window: a replayed signed signal is refused on every node', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (17, 'rollout_actuations: what was applied to each target of a rollout, and when', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (18, 'rollouts_created: rollouts listed newest first, a page at a time', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (19, 'runs_created: runs listed newest first, a page at a time', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (20, 'runs_cancelled: who cancelled a run, when and why', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (21, 'rollouts_watching: an alarm change finds the running rollouts that watch it, not every running one', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (22, 'rollouts due: a tick reads the running rollouts whose time has come or that a signal or a transition marked, not every running one', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (23, 'retention: rollouts that ended found by when, and the alarms any rollout (running or not) watches', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (24, 'rollout_due: when each rollout is next due and when it ended, in a narrow table of its own, so neither a mark nor an end rewrites the rollout row or its indexes', '2026-12-06 15:32:45.654104+00');
INSERT INTO public.schema_migrations VALUES (25, 'retention of runs: when a run was first found finished, cleared by an enqueue', '2026-12-06 15:32:45.654104+00');

--
-- Data for Name: signal_signatures; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: stage_metrics; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: work_items; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Data for Name: workers; Type: TABLE DATA; Schema: public; Owner: -
--

--
-- Name: cluster_events_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.cluster_events_id_seq', 1, false);

--
-- Name: rollout_events_seq_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.rollout_events_seq_seq', 1, false);

--
-- Name: alarm_states alarm_states_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alarm_states
    ADD CONSTRAINT alarm_states_pkey PRIMARY KEY (name);

--
-- Name: api_requests api_requests_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_requests
    ADD CONSTRAINT api_requests_pkey PRIMARY KEY (key);

--
-- Name: cluster_events cluster_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cluster_events
    ADD CONSTRAINT cluster_events_pkey PRIMARY KEY (id);

--
-- Name: cluster_nodes cluster_nodes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cluster_nodes
    ADD CONSTRAINT cluster_nodes_pkey PRIMARY KEY (node_id);

--
-- Name: gate_readings gate_readings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gate_readings
    ADD CONSTRAINT gate_readings_pkey PRIMARY KEY (rollout_id, attempt, stage_index, gate, at);

--
-- Name: gate_tallies gate_tallies_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gate_tallies
    ADD CONSTRAINT gate_tallies_pkey PRIMARY KEY (rollout_id, attempt, stage_index, gate);

--
-- Name: leases leases_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.leases
    ADD CONSTRAINT leases_pkey PRIMARY KEY (name);

--
-- Name: rollout_actuations rollout_actuations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_actuations
    ADD CONSTRAINT rollout_actuations_pkey PRIMARY KEY (rollout_id, target);

--
-- Name: rollout_due rollout_due_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_due
    ADD CONSTRAINT rollout_due_pkey PRIMARY KEY (rollout_id);

--
-- Name: rollout_events rollout_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_events
    ADD CONSTRAINT rollout_events_pkey PRIMARY KEY (id);

--
-- Name: rollout_stages rollout_stages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_stages
    ADD CONSTRAINT rollout_stages_pkey PRIMARY KEY (rollout_id, attempt, stage_index);

--
-- Name: rollouts rollouts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollouts
    ADD CONSTRAINT rollouts_pkey PRIMARY KEY (id);

--
-- Name: run_stats run_stats_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_stats
    ADD CONSTRAINT run_stats_pkey PRIMARY KEY (run_id);

--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (id);

--
-- Name: signal_signatures signal_signatures_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.signal_signatures
    ADD CONSTRAINT signal_signatures_pkey PRIMARY KEY (signature);

--
-- Name: stage_metrics stage_metrics_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stage_metrics
    ADD CONSTRAINT stage_metrics_pkey PRIMARY KEY (rollout_id, attempt, stage_index);

--
-- Name: work_items work_items_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_items
    ADD CONSTRAINT work_items_pkey PRIMARY KEY (run_id, id);

--
-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (instance_id, run_id, worker_id);

--
-- Name: api_requests_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_requests_created ON public.api_requests USING btree (created_at);

--
-- Name: gate_readings_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX gate_readings_at ON public.gate_readings USING btree (at);

--
-- Name: rollout_actuations_unsettled; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollout_actuations_unsettled ON public.rollout_actuations USING btree (updated_at) WHERE (NOT settled);

--
-- Name: rollout_due_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollout_due_at ON public.rollout_due USING btree (due_at);

--
-- Name: rollout_due_ended; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollout_due_ended ON public.rollout_due USING btree (ended_at) WHERE (ended_at IS NOT NULL);

--
-- Name: rollout_events_by_rollout; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollout_events_by_rollout ON public.rollout_events USING btree (rollout_id, seq);

--
-- Name: rollout_events_unpublished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollout_events_unpublished ON public.rollout_events USING btree (seq) WHERE (published_at IS NULL);

--
-- Name: rollouts_alarm_names; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollouts_alarm_names ON public.rollouts USING gin (alarm_names);

--
-- Name: rollouts_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollouts_created ON public.rollouts USING btree (created_at DESC, id DESC);

--
-- Name: rollouts_running; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollouts_running ON public.rollouts USING btree (id) WHERE (state = 'running'::text);

--
-- Name: rollouts_watching; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX rollouts_watching ON public.rollouts USING gin (alarm_names) WHERE (state = 'running'::text);

--
-- Name: runs_closed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_closed ON public.runs USING btree (closed_at) WHERE (closed_at IS NOT NULL);

--
-- Name: runs_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_created ON public.runs USING btree (created_at DESC, id DESC);

--
-- Name: signal_signatures_seen; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX signal_signatures_seen ON public.signal_signatures USING btree (seen_at);

--
-- Name: work_items_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_items_pending ON public.work_items USING btree (run_id, id) WHERE (state = 'pending'::text);

--
-- Name: work_items_running; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_items_running ON public.work_items USING btree (run_id, heartbeat_at) WHERE (state = 'running'::text);

--
-- Name: work_items_unsent; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX work_items_unsent ON public.work_items USING btree (run_id, sent_at NULLS FIRST) WHERE (state = 'pending'::text);

--
-- Name: alarm_states alarm_states_due; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER alarm_states_due AFTER INSERT OR UPDATE ON public.alarm_states FOR EACH ROW EXECUTE FUNCTION public.rollout_due_on_alarm();

--
-- Name: rollouts rollouts_due_created; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER rollouts_due_created AFTER INSERT ON public.rollouts FOR EACH ROW EXECUTE FUNCTION public.rollout_due_created();

--
-- Name: rollouts rollouts_due_on_change; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER rollouts_due_on_change AFTER UPDATE ON public.rollouts FOR EACH ROW WHEN (((old.version IS DISTINCT FROM new.version) OR (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION public.rollout_due_on_change();

--
-- Name: stage_metrics stage_metrics_due; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER stage_metrics_due AFTER INSERT OR UPDATE ON public.stage_metrics FOR EACH ROW EXECUTE FUNCTION public.rollout_due_on_metrics();

--
-- Name: gate_readings gate_readings_rollout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gate_readings
    ADD CONSTRAINT gate_readings_rollout_id_fkey FOREIGN KEY (rollout_id) REFERENCES public.rollouts(id);

--
-- Name: gate_tallies gate_tallies_rollout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.gate_tallies
    ADD CONSTRAINT gate_tallies_rollout_id_fkey FOREIGN KEY (rollout_id) REFERENCES public.rollouts(id);

--
-- Name: rollout_actuations rollout_actuations_rollout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_actuations
    ADD CONSTRAINT rollout_actuations_rollout_id_fkey FOREIGN KEY (rollout_id) REFERENCES public.rollouts(id);

--
-- Name: rollout_due rollout_due_rollout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_due
    ADD CONSTRAINT rollout_due_rollout_id_fkey FOREIGN KEY (rollout_id) REFERENCES public.rollouts(id);

--
-- Name: rollout_stages rollout_stages_rollout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.rollout_stages
    ADD CONSTRAINT rollout_stages_rollout_id_fkey FOREIGN KEY (rollout_id) REFERENCES public.rollouts(id);

--
-- Name: stage_metrics stage_metrics_rollout_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stage_metrics
    ADD CONSTRAINT stage_metrics_rollout_id_fkey FOREIGN KEY (rollout_id) REFERENCES public.rollouts(id);

--
-- Name: work_items work_items_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.work_items
    ADD CONSTRAINT work_items_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

--
-- PostgreSQL database dump complete
--
