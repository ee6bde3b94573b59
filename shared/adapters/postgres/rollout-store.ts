import { actuationRecordOf, type ActuationRecord } from '../../rollout/actuation-record.js';
import type { LeaseToken } from '../../lease/record.js';
import { assertStillHeld, fenceClauses } from './fence.js';
import { ROLLOUT_SOURCE, type RolloutEvent, type RolloutEventDetail, type RolloutEventType } from '../../rollout/events.js';
import {
  talliesByStage,
  type AlarmState,
  type Rollout,
  type RolloutState,
  type RolloutView,
  type StageMetrics,
  type StagePhase,
  type StageStatus,
} from '../../rollout/model.js';
import type { GateReading, GateTally, ReadingSeries, ReadingToStore } from '../../rollout/gates.js';
import type { CohortReportsQuery } from '../../rollout/store.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import {
  NEVER_DUE,
  RolloutConflictError,
  UnknownRolloutError,
  type CountedReading,
  type DueView,
  type GateReadingsQuery,
  type HeldReading,
  type MetricsTarget,
  type ReadingApplied,
  type RolloutListQuery,
  type RolloutPage,
  type RolloutStore,
  type SignalOutcome,
} from '../../rollout/store.js';
import { cursorObject, cursorText, cursorTime, decodeCursor, encodeCursor } from '../../cursor.js';
import { freshStages, type TransitionPlan } from '../../rollout/transitions.js';
import { FencedError } from '../../lease/fencing.js';
import { toInt, toMillis, type Sql } from './sql.js';
import { signalsRead } from '../../rollout/evaluate.js';
import { BoundedMap } from '../../bounded-map.js';
import { Batcher } from '../../concurrency.js';
import { own } from '../../own.js';
import { unknownVersion, type Cohort, type CohortReport, type CohortReportInput } from '../../rollout/cohort-signals.js';
import { InvalidEventError } from '../../rollout/inbound.js';

const ms = (v: unknown): number | null => (v === null || v === undefined ? null : toMillis(v));

/**
 * What a decision reads of a rollout: the `rollout_views` view of migration
 * 15, one statement, so one snapshot. Stages and metrics come as arrays of
 * values in a fixed order (stageOf, metricsOf), timestamps as epoch milliseconds.
 */
const viewSql = (spec: string) => `
  SELECT id, state, attempt, version, created_at, updated_at, last_progress_at, deadline_exceeded_at, state_by, state_reason,
         ${spec} AS spec, stages, metrics, alarms, gates
    FROM rollout_views`;
const VIEW_SQL = viewSql('spec');

/**
 * Readings counted into their tallies in one statement, by the rule of
 * \`tallyWith\` (shared/rollout/gates.ts): same period, add; a newer period,
 * start again; an older one, leave the tally alone. A pass extends the pass
 * streak only when it is the newest; any other reading ends it, late or not. Ties on \`at\` go to the
 * newer write, as there. The history row is kept either way.
 */
const RECORD_READINGS_SQL = `
  WITH input AS (
    SELECT x->>'rolloutId' AS rollout_id, rollout_ts(x->'origin') AS origin, x->'reading' AS r, x->'series' AS series
      FROM jsonb_array_elements($1::jsonb) AS x),
  history AS (
    INSERT INTO gate_readings (rollout_id, attempt, stage_index, gate, at, type, outcome, value, query, answer, reason, source, series)
    SELECT rollout_id, (r->>'attempt')::int, (r->>'stage')::int, r->>'gate', rollout_ts(r->'at'), r->>'type', r->>'outcome',
           (r->>'value')::double precision, r->>'query', r->>'answer', r->>'reason', r->>'source', series
      FROM input
    ON CONFLICT DO NOTHING)
  INSERT INTO gate_tallies AS t (rollout_id, attempt, stage_index, gate, origin, readings, failures, inconclusive, pass_streak, last, last_failure, last_inconclusive)
  SELECT rollout_id, (r->>'attempt')::int, (r->>'stage')::int, r->>'gate', origin, 1,
         (r->>'outcome' = 'fail')::int, (r->>'outcome' = 'inconclusive')::int, (r->>'outcome' = 'pass')::int, r,
         CASE WHEN r->>'outcome' = 'fail' THEN r END, CASE WHEN r->>'outcome' = 'inconclusive' THEN r END
    FROM input
  ON CONFLICT (rollout_id, attempt, stage_index, gate) DO UPDATE SET
    readings     = CASE WHEN t.origin = excluded.origin THEN t.readings + 1 ELSE 1 END,
    failures     = CASE WHEN t.origin = excluded.origin THEN t.failures ELSE 0 END + excluded.failures,
    inconclusive = CASE WHEN t.origin = excluded.origin THEN t.inconclusive ELSE 0 END + excluded.inconclusive,
    pass_streak = CASE
      WHEN excluded.pass_streak = 0 THEN 0
      WHEN t.origin = excluded.origin AND (t.last->>'at')::bigint > (excluded.last->>'at')::bigint THEN t.pass_streak
      WHEN t.origin = excluded.origin THEN t.pass_streak + 1
      ELSE 1 END,
    last = CASE WHEN t.origin = excluded.origin AND (t.last->>'at')::bigint > (excluded.last->>'at')::bigint THEN t.last ELSE excluded.last END,
    last_failure = CASE
      WHEN t.origin <> excluded.origin THEN excluded.last_failure
      WHEN excluded.last_failure IS NULL THEN t.last_failure
      WHEN t.last_failure IS NOT NULL AND (t.last_failure->>'at')::bigint > (excluded.last_failure->>'at')::bigint THEN t.last_failure
      ELSE excluded.last_failure END,
    last_inconclusive = CASE
      WHEN t.origin <> excluded.origin THEN excluded.last_inconclusive
      WHEN excluded.last_inconclusive IS NULL THEN t.last_inconclusive
      WHEN t.last_inconclusive IS NOT NULL AND (t.last_inconclusive->>'at')::bigint > (excluded.last_inconclusive->>'at')::bigint THEN t.last_inconclusive
      ELSE excluded.last_inconclusive END,
    origin = excluded.origin
  WHERE t.origin <= excluded.origin
  RETURNING t.*`;

interface RolloutRow {
  id: string;
  spec: RolloutSpec;
  state: RolloutState;
  attempt: unknown;
  version: unknown;
  created_at: unknown;
  updated_at: unknown;
  last_progress_at: unknown;
  deadline_exceeded_at: unknown;
  state_by: string | null;
  state_reason: string | null;
  stages: StageTuple[] | string;
  metrics: MetricsTuple[] | string;
  alarms: Record<string, AlarmState> | string;
  gates: Record<string, unknown>[] | string;
}

/** VIEW_SQL's stage: index, name, phase, activated, promoted, promoted epoch, promoted by, rolled back, reason. */
type StageTuple = [number, string, StagePhase, number | null, number | null, number | string | null, string | null, number | null, string | null];
/** VIEW_SQL's metrics: stage index, requests, errors, p99 latency, observed. */
type MetricsTuple = [number, number | string, number | string, number | null, number];

function json<T>(v: T | string): T {
  return typeof v === 'string' ? (JSON.parse(v) as T) : v;
}

function rolloutOf(r: RolloutRow): Rollout {
  return {
    id: r.id,
    spec: r.spec,
    state: r.state,
    attempt: toInt(r.attempt),
    version: toInt(r.version),
    createdAt: toMillis(r.created_at),
    updatedAt: toMillis(r.updated_at),
    lastProgressAt: toMillis(r.last_progress_at),
    deadlineExceededAt: ms(r.deadline_exceeded_at),
    stateBy: r.state_by,
    stateReason: r.state_reason,
  };
}

function stageOf([index, name, phase, activatedAt, promotedAt, promotedEpoch, promotedBy, rolledBackAt, reason]: StageTuple): StageStatus {
  return {
    index,
    name,
    phase,
    activatedAt,
    promotedAt,
    promotedEpoch: promotedEpoch === null ? null : toInt(promotedEpoch),
    promotedBy,
    rolledBackAt,
    reason,
  };
}

const readingOf = (v: unknown): GateReading | null => (v === null || v === undefined ? null : ((typeof v === 'string' ? JSON.parse(v) : v) as GateReading));

function tallyOf(g: Record<string, unknown>): GateTally {
  return {
    gate: String(g.gate),
    stage: toInt(g.stage_index),
    origin: toMillis(g.origin),
    readings: toInt(g.readings),
    failures: toInt(g.failures),
    inconclusive: toInt(g.inconclusive),
    passStreak: toInt(g.pass_streak),
    last: readingOf(g.last)!,
    lastFailure: readingOf(g.last_failure),
    lastInconclusive: readingOf(g.last_inconclusive),
  };
}

function metricsOf(rows: readonly MetricsTuple[]): Map<number, StageMetrics> {
  const metrics = new Map<number, StageMetrics>();
  for (const [stage, requests, errors, p99LatencyMs, observedAt] of rows) {
    metrics.set(stage, { requests: toInt(requests), errors: toInt(errors), p99LatencyMs, observedAt });
  }
  return metrics;
}

function eventOf(e: { id: string; detail_type: string; time: unknown; detail: unknown }): RolloutEvent {
  return {
    id: e.id,
    source: ROLLOUT_SOURCE,
    detailType: e.detail_type as RolloutEventType,
    time: toMillis(e.time),
    detail: (typeof e.detail === 'string' ? JSON.parse(e.detail) : e.detail) as RolloutEventDetail,
  };
}

/** What rollout_apply_with_reading answers. */
type ApplyWithReading =
  | { status: 'ok'; stored: true; attempt: number }
  | { status: 'changed' | 'stale'; stored: boolean; attempt: number; view: RolloutRow }
  | { status: 'fenced'; holder?: string | null; epoch?: number | string | null }
  | { status: 'unknown' };

/**
 * What rollout_apply_with_reading compares with the store: the view's version
 * and attempt, and each signal the decision read (signalsRead) as the view
 * held it, null where it held none, in the form the function builds.
 */
function heldInputs(v: RolloutView) {
  const read = signalsRead(v);
  const tally = (gate: string) => {
    const t = read && v.gates.get(read.stage)?.get(gate);
    return t ? [t.origin, t.readings] : null;
  };
  return {
    version: v.rollout.version,
    attempt: v.rollout.attempt,
    stage: read?.stage ?? null,
    observedAt: (read && v.metrics.get(read.stage)?.observedAt) ?? null,
    alarms: Object.fromEntries((read?.alarms ?? []).map((a) => [a, own(v.alarms, a) ?? null])),
    tallies: Object.fromEntries((read?.gates ?? []).map((g) => [g, tally(g)])),
  };
}

/** A rollout list's cursor: the last row's created_at and id, what the page's order is keyed by. */
const LIST_CURSOR = cursorObject({ at: cursorTime(), id: cursorText(512) });

/** What rollout_apply answers for one plan. */
type ApplyAnswer = { status: 'ok' | 'stale' | 'fenced'; holder?: string | null; epoch?: number | string | null };

/**
 * Plans one rollout_apply_many carries at most. Each is a subtransaction (a transaction that writes
 * in more than 64 overflows every backend's cache of them); and a tick's lanes (16 at most) fill two
 * statements of 8, one for each of two server processes, while one statement would leave a core idle.
 */
const PLANS_PER_STATEMENT = 8;

/**
 * rollout_apply statements of this store on the wire at once: the rest wait, and go together. As many
 * as a tick has lanes at most, so that one slow statement (a lock wait, a slow link) holds back no other
 * plan: the plans of one turn go together, and none waits for a statement already under way.
 */
const APPLIES_IN_FLIGHT = 16;

/** SQLSTATE raised by rollout_apply when a stage is no longer in the evaluated phase. */
const STAGE_MOVED = 'RB001';

/** Specs the record path keeps so a reading does not fetch the same spec again: enough for every running rollout of a busy instance. */
const SPEC_CACHE_SIZE = 10_000;

export class PostgresRolloutStore implements RolloutStore {
  /** A rollout's spec never changes once created (no statement updates it, rollouts are never deleted), so a copy stays true. */
  private readonly specs = new BoundedMap<string, RolloutSpec>(SPEC_CACHE_SIZE);

  constructor(private readonly sql: Sql) {}

  async create(id: string, spec: RolloutSpec, now: number, actor: string): Promise<{ created: boolean }> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query(
        `INSERT INTO rollouts (id, spec, state, attempt, version, created_at, updated_at, last_progress_at, state_by)
         VALUES ($1, $2, 'running', 1, 0, $3, $3, $3, $4) ON CONFLICT (id) DO NOTHING RETURNING id`,
        [id, JSON.stringify(spec), new Date(now), actor],
      );
      if (rows.length === 0) {
        const existing = await tx.query<{ same: boolean }>('SELECT spec = $2::jsonb AS same FROM rollouts WHERE id = $1', [id, JSON.stringify(spec)]);
        if (!existing.rows[0]?.same) throw new RolloutConflictError(id);
        return { created: false };
      }
      await this.insertStages(tx, id, 1, freshStages({ rollout: { spec } as Rollout }));
      return { created: true };
    });
  }

  private async insertStages(tx: Sql, id: string, attempt: number, stages: readonly StageStatus[]): Promise<void> {
    await tx.query(
      `INSERT INTO rollout_stages (rollout_id, attempt, stage_index, name, phase)
       SELECT $1, $2, i, n, 'pending' FROM unnest($3::int[], $4::text[]) AS t(i, n)`,
      [id, attempt, stages.map((s) => s.index), stages.map((s) => s.name)],
    );
  }

  async load(id: string): Promise<RolloutView | null> {
    const { rows } = await this.sql.query<RolloutRow>(`${VIEW_SQL} WHERE id = $1`, [id], 'rollout_load');
    return this.views(rows)[0] ?? null;
  }

  async anyRunning(): Promise<boolean> {
    const { rows } = await this.sql.query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM rollouts WHERE state = 'running') AS any`);
    return Boolean(rows[0]?.any);
  }

  async loadRunning(): Promise<RolloutView[]> {
    const { rows } = await this.sql.query<RolloutRow>(`${VIEW_SQL} WHERE state = 'running' ORDER BY id`, [], 'rollout_load_running');
    return this.views(rows);
  }

  async loadDue(now: number, limit: number): Promise<DueView[]> {
    // One statement: each mark is read in the same snapshot as its view.
    const { rows } = await this.sql.query<RolloutRow & { due_mark: unknown }>(
      `SELECT v.*, d.due_mark FROM rollout_views v JOIN rollout_due d ON d.rollout_id = v.id
        WHERE v.id IN (SELECT x.rollout_id FROM rollout_due x JOIN rollouts r ON r.id = x.rollout_id
                        WHERE x.due_at <= $1 AND r.state = 'running' ORDER BY x.due_at LIMIT $2)
        ORDER BY d.due_at, v.id`,
      [now, limit],
      'rollout_load_due',
    );
    const views = this.views(rows);
    return rows.map((r, i) => ({ view: views[i]!, mark: String(toInt(r.due_mark)) }));
  }

  async reschedule(rolloutId: string, mark: string, at: number): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE rollout_due d SET due_at = $3 FROM rollouts r
        WHERE d.rollout_id = $1 AND d.due_mark = $2 AND r.id = d.rollout_id AND r.state = 'running' RETURNING 1`,
      [rolloutId, mark, Math.min(at, NEVER_DUE)],
      'rollout_reschedule',
    );
    return rows.length > 0;
  }

  async loadWatching(alarm: string): Promise<RolloutView[]> {
    const { rows } = await this.sql.query<RolloutRow>(
      `${VIEW_SQL} WHERE id IN (SELECT id FROM rollouts WHERE state = 'running' AND alarm_names @> ARRAY[$1::text]) ORDER BY id`,
      [alarm],
      'rollout_load_watching',
    );
    return this.views(rows);
  }

  async list(o: RolloutListQuery): Promise<RolloutPage> {
    const after = o.cursor === undefined ? null : decodeCursor(o.cursor, LIST_CURSOR);
    const { rows } = await this.sql.query<RolloutRow>(
      `SELECT * FROM rollouts
        WHERE ($1::text IS NULL OR state = $1)
          AND ($2::bigint IS NULL OR (created_at, id) < (to_timestamp($2::bigint / 1000.0), $3::text))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [o.state ?? null, after?.at ?? null, after?.id ?? null, o.limit + 1],
    );
    const rollouts = rows.slice(0, o.limit).map(rolloutOf);
    const last = rollouts.at(-1);
    return { rollouts, next: rows.length > o.limit && last ? encodeCursor({ at: last.createdAt, id: last.id }) : null };
  }

  private views(rows: RolloutRow[]): RolloutView[] {
    return rows.map((r) => ({
      rollout: rolloutOf(this.remember(r)),
      stages: json(r.stages).map(stageOf),
      metrics: metricsOf(json(r.metrics)),
      alarms: json(r.alarms),
      gates: talliesByStage(json(r.gates).map(tallyOf)),
    }));
  }

  private remember(r: RolloutRow): RolloutRow {
    if (!this.specs.has(r.id)) this.specs.set(r.id, r.spec);
    return r;
  }

  async recordMetrics(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<SignalOutcome> {
    return (await this.record(rolloutId, at, m, false)).outcome;
  }

  async recordMetricsAndLoad(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<{ outcome: SignalOutcome; view: RolloutView }> {
    const { outcome, view, stage, attempt } = await this.record(rolloutId, at, m, true);
    // The statement's own snapshot predates its insert: put the stored metrics into the view here.
    if (outcome === 'stored' && view && attempt === view.rollout.attempt) (view.metrics as Map<number, StageMetrics>).set(stage, m);
    return { outcome, view: view! };
  }

  /**
   * One statement: resolves the stage (index or name: `stageIndexOf`'s rule,
   * in SQL so a reading stays one round trip) and the current attempt,
   * upserts the metrics if newer, and optionally reads the view.
   */
  private async record(rolloutId: string, at: MetricsTarget, m: StageMetrics, withView: boolean) {
    // The spec is fetched only when this store has not seen it (it is most of a view's bytes).
    const known = withView ? this.specs.get(rolloutId) : undefined;
    const { rows } = await this.sql.query<{ found: unknown; stage: number | null; attempt: number | null; stored: unknown; view: RolloutRow | string | null }>(
      `WITH tgt AS (
         SELECT id, coalesce($2::int, attempt) AS attempt, jsonb_array_length(spec->'stages') AS n,
                coalesce($3::int, (SELECT (o - 1)::int FROM jsonb_array_elements(spec->'stages') WITH ORDINALITY AS s(v, o) WHERE v->>'name' = $4)) AS stage
           FROM rollouts WHERE id = $1),
       ins AS (
         INSERT INTO stage_metrics (rollout_id, attempt, stage_index, requests, errors, p99_latency_ms, observed_at)
         SELECT id, attempt, stage, $5, $6, $7, $8 FROM tgt WHERE stage >= 0 AND stage < n
         ON CONFLICT (rollout_id, attempt, stage_index) DO UPDATE
           SET requests = excluded.requests, errors = excluded.errors, p99_latency_ms = excluded.p99_latency_ms, observed_at = excluded.observed_at
           WHERE stage_metrics.observed_at < excluded.observed_at
         RETURNING 1)
       SELECT (SELECT count(*) FROM tgt) AS found,
              (SELECT stage FROM tgt WHERE stage >= 0 AND stage < n) AS stage,
              (SELECT attempt FROM tgt) AS attempt,
              (SELECT count(*) FROM ins) AS stored,
              ${withView ? `(SELECT row_to_json(v) FROM (${viewSql('CASE WHEN $9 THEN spec END')} WHERE id = $1) v)` : 'NULL'} AS view`,
      [
        rolloutId,
        at.attempt ?? null,
        typeof at.stage === 'number' ? at.stage : null,
        typeof at.stage === 'string' ? at.stage : null,
        m.requests,
        m.errors,
        m.p99LatencyMs,
        new Date(m.observedAt),
        ...(withView ? [known === undefined] : []),
      ],
      withView ? 'rollout_record_and_load' : 'rollout_record',
    );
    const r = rows[0]!;
    if (toInt(r.found) === 0) throw new UnknownRolloutError(rolloutId);
    if (r.stage === null) throw new UnknownRolloutError(rolloutId, at.stage);
    const outcome: SignalOutcome = toInt(r.stored) > 0 ? 'stored' : 'stale';
    const viewRow = typeof r.view === 'string' ? (JSON.parse(r.view) as RolloutRow) : r.view;
    if (viewRow && known) viewRow.spec ??= known;
    const [view] = viewRow ? this.views([viewRow]) : [];
    return { outcome, view, stage: r.stage, attempt: toInt(r.attempt) };
  }

  async recordAlarm(name: string, state: AlarmState, changedAt: number): Promise<SignalOutcome> {
    const { rows } = await this.sql.query(
      `INSERT INTO alarm_states (name, state, changed_at) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at
         WHERE alarm_states.changed_at < excluded.changed_at
       RETURNING 1`,
      [name, state, new Date(changedAt)],
    );
    return rows.length ? 'stored' : 'stale';
  }

  async recordCohortReport(rolloutId: string, at: MetricsTarget, r: CohortReportInput): Promise<SignalOutcome> {
    // One statement, as a stage's reading is: the stage, the attempt and the version's cohort resolved on the rollout's row.
    const named = typeof r.cohort === 'string' ? r.cohort : null;
    const version = typeof r.cohort === 'string' ? null : r.cohort.version;
    const { rows } = await this.sql.query<{
      found: unknown;
      stage: number | null;
      cohort: string | null;
      target: RolloutSpec['target'] | string | null;
      stored: unknown;
    }>(
      `WITH tgt AS (
         SELECT id, coalesce($2::int, attempt) AS attempt, jsonb_array_length(spec->'stages') AS n, spec->'target' AS target,
                coalesce($3::int, (SELECT (o - 1)::int FROM jsonb_array_elements(spec->'stages') WITH ORDINALITY AS s(v, o) WHERE v->>'name' = $4)) AS stage,
                coalesce($5::text, CASE WHEN $6::text = spec->'target'->>'version' THEN 'canary'
                                        WHEN $6::text = spec->'target'->>'stableVersion' THEN 'baseline' END) AS cohort
           FROM rollouts WHERE id = $1),
       ins AS (
         INSERT INTO rollout_cohort_reports (rollout_id, attempt, stage_index, observed_at, cohort, reporter, requests, errors, samples)
         SELECT id, attempt, stage, $7, cohort, $8, $9, $10, $11::jsonb FROM tgt WHERE stage >= 0 AND stage < n AND cohort IS NOT NULL
         ON CONFLICT DO NOTHING
         RETURNING 1)
       SELECT (SELECT count(*) FROM tgt) AS found,
              (SELECT stage FROM tgt WHERE stage >= 0 AND stage < n) AS stage,
              (SELECT cohort FROM tgt) AS cohort,
              (SELECT target FROM tgt) AS target,
              (SELECT count(*) FROM ins) AS stored`,
      [
        rolloutId,
        at.attempt ?? null,
        typeof at.stage === 'number' ? at.stage : null,
        typeof at.stage === 'string' ? at.stage : null,
        named,
        version,
        new Date(r.observedAt),
        r.reporter,
        r.requests,
        r.errors,
        r.samples === null ? null : JSON.stringify(r.samples),
      ],
      'rollout_record_cohort',
    );
    const row = rows[0]!;
    if (toInt(row.found) === 0) throw new UnknownRolloutError(rolloutId);
    if (row.stage === null) throw new UnknownRolloutError(rolloutId, at.stage);
    if (row.cohort === null) {
      const target = (typeof row.target === 'string' ? JSON.parse(row.target) : row.target) as RolloutSpec['target'];
      throw new InvalidEventError([unknownVersion({ target }, version ?? '')]);
    }
    return toInt(row.stored) > 0 ? 'stored' : 'stale';
  }

  async cohortReports(rolloutId: string, attempt: number, stage: number, o: CohortReportsQuery): Promise<CohortReport[]> {
    const order = o.order === 'oldest' ? 'ASC' : 'DESC';
    const { rows } = await this.sql.query<Record<string, unknown>>(
      `SELECT cohort, reporter, requests, errors, ${o.samples ? 'samples' : 'NULL AS samples'}, observed_at FROM rollout_cohort_reports
        WHERE rollout_id = $1 AND attempt = $2 AND stage_index = $3 AND observed_at >= $4
        ORDER BY observed_at ${order}, cohort ${order}, reporter ${order} LIMIT $5`,
      [rolloutId, attempt, stage, new Date(o.since), o.limit],
    );
    return rows.map((row) => ({
      cohort: row.cohort as Cohort,
      reporter: String(row.reporter),
      requests: toInt(row.requests),
      errors: toInt(row.errors),
      samples: (typeof row.samples === 'string' ? JSON.parse(row.samples) : row.samples) as number[] | null,
      observedAt: toMillis(row.observed_at),
    }));
  }

  async recordGateReadings(readings: readonly ReadingToStore[]): Promise<CountedReading[]> {
    const out: CountedReading[] = [];
    // One statement may not update a row twice: readings of the same gate go in successive rounds.
    for (const round of uniqueRounds(readings)) {
      const { rows } = await this.sql.query<Record<string, unknown>>(RECORD_READINGS_SQL, [JSON.stringify(round)]);
      out.push(...rows.map((row) => ({ rolloutId: String(row.rollout_id), tally: tallyOf(row) })));
    }
    return out;
  }

  async gateReadings(rolloutId: string, o: GateReadingsQuery = {}): Promise<GateReading[]> {
    // The series leave the table only where asked: they are up to 1,000 points a cohort each.
    const { rows } = await this.sql.query<Record<string, unknown>>(
      `SELECT attempt, stage_index, gate, at, type, outcome, value, query, answer, reason, source,
              CASE WHEN $5::text = 'all' OR ($5::text = 'newest' AND n = 1) THEN series END AS kept
         FROM (SELECT g.*, row_number() OVER (PARTITION BY g.stage_index, g.gate ORDER BY g.at DESC) AS n
                 FROM gate_readings g JOIN rollouts r ON r.id = g.rollout_id
                WHERE g.rollout_id = $1 AND g.attempt = coalesce($2::int, r.attempt) AND ($4::text IS NULL OR g.gate = $4)) x
        WHERE n <= $3 ORDER BY stage_index, gate, at DESC`,
      [rolloutId, o.attempt ?? null, o.perGate ?? 50, o.gate ?? null, o.series ?? null],
    );
    const kept = (g: Record<string, unknown>) => (g.kept === null || g.kept === undefined ? {} : { series: json(g.kept as ReadingSeries) });
    return rows.map((g) => ({
      gate: String(g.gate),
      type: g.type as GateReading['type'],
      attempt: toInt(g.attempt),
      stage: toInt(g.stage_index),
      at: toMillis(g.at),
      outcome: g.outcome as GateReading['outcome'],
      value: g.value === null ? null : Number(g.value),
      query: String(g.query),
      answer: String(g.answer),
      reason: (g.reason as string | null) ?? null,
      source: g.source as GateReading['source'],
      ...kept(g),
    }));
  }

  async pruneGateReadings(before: number, limit: number): Promise<number> {
    const { rows } = await this.sql.query<{ n: unknown }>(
      `WITH old AS (SELECT rollout_id, attempt, stage_index, gate, at FROM gate_readings WHERE at < $1 ORDER BY at LIMIT $2),
       gone AS (DELETE FROM gate_readings g USING old
                 WHERE (g.rollout_id, g.attempt, g.stage_index, g.gate, g.at) = (old.rollout_id, old.attempt, old.stage_index, old.gate, old.at)
                 RETURNING 1),
       old_reports AS (SELECT rollout_id, attempt, stage_index, observed_at, cohort, reporter FROM rollout_cohort_reports
                        WHERE observed_at < $1 ORDER BY observed_at LIMIT $2),
       reports AS (DELETE FROM rollout_cohort_reports c USING old_reports o
                    WHERE (c.rollout_id, c.attempt, c.stage_index, c.observed_at, c.cohort, c.reporter)
                        = (o.rollout_id, o.attempt, o.stage_index, o.observed_at, o.cohort, o.reporter)
                    RETURNING 1)
       SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM reports) AS n`,
      [new Date(before), limit],
      'rollout_prune_readings',
    );
    return toInt(rows[0]?.n ?? 0);
  }

  async pruneEnded(before: number, limit: number): Promise<number> {
    // One statement, so one snapshot: the rows a rollout has are deleted with it or not at all. Locked rows
    // (a retry under way) are skipped, and found again by the next call.
    const { rows } = await this.sql.query<{ n: unknown }>(
      `WITH old AS (
         SELECT r.id, r.alarm_names FROM rollout_due d JOIN rollouts r ON r.id = d.rollout_id
          WHERE d.ended_at < $1::bigint
            AND NOT EXISTS (SELECT 1 FROM rollout_events e WHERE e.rollout_id = r.id AND e.published_at IS NULL)
            AND NOT EXISTS (SELECT 1 FROM rollout_actuations a WHERE a.rollout_id = r.id AND NOT a.settled)
          ORDER BY d.ended_at LIMIT $2 FOR UPDATE OF r SKIP LOCKED),
       due AS (DELETE FROM rollout_due WHERE rollout_id IN (SELECT id FROM old)),
       stages AS (DELETE FROM rollout_stages WHERE rollout_id IN (SELECT id FROM old)),
       metrics AS (DELETE FROM stage_metrics WHERE rollout_id IN (SELECT id FROM old)),
       events AS (DELETE FROM rollout_events WHERE rollout_id IN (SELECT id FROM old)),
       readings AS (DELETE FROM gate_readings WHERE rollout_id IN (SELECT id FROM old)),
       reports AS (DELETE FROM rollout_cohort_reports WHERE rollout_id IN (SELECT id FROM old)),
       tallies AS (DELETE FROM gate_tallies WHERE rollout_id IN (SELECT id FROM old)),
       targets AS (DELETE FROM rollout_actuations WHERE rollout_id IN (SELECT id FROM old)),
       alarms AS (
         DELETE FROM alarm_states a WHERE a.name IN (SELECT unnest(alarm_names) FROM old) AND a.changed_at < to_timestamp($1::bigint / 1000.0)
            AND NOT EXISTS (SELECT 1 FROM rollouts r WHERE r.alarm_names @> ARRAY[a.name] AND r.id NOT IN (SELECT id FROM old))),
       gone AS (DELETE FROM rollouts WHERE id IN (SELECT id FROM old) RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      [before, limit],
      'rollout_prune_ended',
    );
    return toInt(rows[0]?.n ?? 0);
  }

  /**
   * One round trip: the whole fenced, state-conditioned transition runs in `rollout_apply` (migration 10).
   * Group-committed: plans applied while earlier ones are on the wire (a tick's, many at once) go
   * together in one `rollout_apply_many` (migration 28), each still rollout_apply's own write with its
   * own answer; a plan applied alone goes alone, as before.
   */
  async apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean> {
    const r = await this.applies.add({ token, plan });
    if (r.status === 'fenced') {
      throw new FencedError(token, r.epoch === null || r.epoch === undefined ? null : { holder: r.holder ?? null, epoch: toInt(r.epoch) });
    }
    return r.status === 'ok';
  }

  private readonly applies = new Batcher<{ token: LeaseToken; plan: TransitionPlan }, ApplyAnswer>(
    async (items) => {
      // One statement a lease token (a process normally has one at a time).
      const byToken = new Map<string, number[]>();
      items.forEach(({ token }, i) => {
        const key = `${token.name}\u0000${token.holder}\u0000${token.epoch}`;
        const group = byToken.get(key);
        if (group) group.push(i);
        else byToken.set(key, [i]);
      });
      const answers = new Array<ApplyAnswer>(items.length);
      await Promise.all(
        [...byToken.values()].map(async (group) => {
          const token = items[group[0]!]!.token;
          const got = await this.applyPlans(
            token,
            group.map((i) => items[i]!.plan),
          );
          group.forEach((i, j) => (answers[i] = got[j]!));
        }),
      );
      return answers;
    },
    { maxInFlight: APPLIES_IN_FLIGHT, maxBatch: PLANS_PER_STATEMENT, linger: true },
  );

  private async applyPlans(token: LeaseToken, plans: readonly TransitionPlan[]): Promise<ApplyAnswer[]> {
    // rollout_apply never reads the spec, the largest part of the plan: it is not sent.
    const sent = (plan: TransitionPlan) => ({ ...plan, next: { ...plan.next, spec: undefined } });
    if (plans.length === 1) {
      try {
        const { rows } = await this.sql.query<{ r: ApplyAnswer | string }>(
          'SELECT rollout_apply($1, $2, $3, $4::jsonb) AS r',
          [token.name, token.holder, token.epoch, JSON.stringify(sent(plans[0]!))],
          'rollout_apply',
        );
        return [json(rows[0]!.r)];
      } catch (err) {
        if ((err as { code?: string }).code === STAGE_MOVED) return [{ status: 'stale' }];
        throw err;
      }
    }
    const { rows } = await this.sql.query<{ r: ApplyAnswer[] | string }>(
      'SELECT rollout_apply_many($1, $2, $3, $4::jsonb) AS r',
      [token.name, token.holder, token.epoch, JSON.stringify(plans.map(sent))],
      'rollout_apply_many',
    );
    return json(rows[0]!.r);
  }

  /**
   * One round trip: `rollout_apply_with_reading` (migration 14) stores the
   * reading and applies the plan if what `held` was read from is unchanged;
   * if not, the same statement reads the view afresh for the caller to decide again.
   */
  async recordMetricsAndApply(token: LeaseToken, plan: TransitionPlan, reading: HeldReading, held: RolloutView): Promise<ReadingApplied> {
    const known = this.specs.get(plan.rolloutId);
    let rows: { r: ApplyWithReading | string }[];
    try {
      // A plain call: the function reads the view itself, and only when it found the inputs changed.
      ({ rows } = await this.sql.query<{ r: ApplyWithReading | string }>(
        'SELECT rollout_apply_with_reading($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7) AS r',
        [
          token.name,
          token.holder,
          token.epoch,
          JSON.stringify({ stage: reading.stage, attempt: reading.attempt ?? null, ...reading.metrics }),
          JSON.stringify(heldInputs(held)),
          JSON.stringify({ ...plan, next: { ...plan.next, spec: undefined } }),
          known === undefined,
        ],
        'rollout_apply_with_reading',
      ));
    } catch (err) {
      // Nothing was written, the reading included: the caller records it the usual way.
      if ((err as { code?: string }).code === STAGE_MOVED) return { applied: false, outcome: null, view: null };
      throw err;
    }
    const r = json(rows[0]!.r);
    if (r.status === 'unknown') throw new UnknownRolloutError(plan.rolloutId, reading.stage);
    if (r.status === 'fenced')
      throw new FencedError(token, r.epoch === null || r.epoch === undefined ? null : { holder: r.holder ?? null, epoch: toInt(r.epoch) });
    if (r.status === 'ok') return { applied: true };
    // Read after the reading was stored (or found older than the one stored): it is in the view either way.
    const viewRow = r.view;
    if (known) viewRow.spec ??= known;
    return { applied: false, outcome: r.stored ? 'stored' : 'stale', view: this.views([viewRow])[0]! };
  }

  async unpublishedEvents(limit: number): Promise<RolloutEvent[]> {
    const { rows } = await this.sql.query<{ id: string; detail_type: string; time: unknown; detail: unknown }>(
      'SELECT id, detail_type, time, detail FROM rollout_events WHERE published_at IS NULL ORDER BY seq LIMIT $1',
      [limit],
    );
    return rows.map(eventOf);
  }

  async markPublished(events: readonly RolloutEvent[]): Promise<void> {
    if (events.length) {
      // Found by primary key only: with `published_at IS NULL` in the WHERE, the generic plan also
      // scanned the partial index of unpublished events, whose entries for published rows stay until
      // VACUUM (a bitmap scan never marks them dead), so each call cost more the more had been published.
      await this.sql.query(
        'UPDATE rollout_events SET published_at = coalesce(published_at, now()) WHERE id = ANY($1::text[])',
        [events.map((e) => e.id)],
        'rollout_mark_published_by_id',
      );
    }
  }

  async events(rolloutId: string): Promise<RolloutEvent[]> {
    const { rows } = await this.sql.query<{ id: string; detail_type: string; time: unknown; detail: unknown }>(
      'SELECT id, detail_type, time, detail FROM rollout_events WHERE rollout_id = $1 ORDER BY seq',
      [rolloutId],
    );
    return rows.map(eventOf);
  }

  async actuations(rolloutId: string): Promise<ActuationRecord[]> {
    const { rows } = await this.sql.query<{ record: unknown }>('SELECT record FROM rollout_actuations WHERE rollout_id = $1 ORDER BY target', [rolloutId]);
    return rows.map((r) => actuationRecordOf(json(r.record)));
  }

  async recordActuation(token: LeaseToken, record: ActuationRecord): Promise<void> {
    const params: unknown[] = [];
    const fence = fenceClauses(token, params);
    const p = (v: unknown) => `$${params.push(v)}`;
    const { rows } = await this.sql.query(
      `${fence.with}
       INSERT INTO rollout_actuations (rollout_id, target, record, settled, updated_at)
       SELECT ${p(record.rolloutId)}, ${p(record.target)}, ${p(JSON.stringify(record))}::jsonb, ${p(record.settled)}, ${p(record.updatedAt)} WHERE ${fence.holds}
       ON CONFLICT (rollout_id, target) DO UPDATE SET record = excluded.record, settled = excluded.settled, updated_at = excluded.updated_at
       RETURNING 1`,
      params,
    );
    if (rows.length === 0) await assertStillHeld(this.sql, token);
  }

  async unsettledActuations(limit: number): Promise<string[]> {
    const { rows } = await this.sql.query<{ rollout_id: string }>(
      'SELECT rollout_id FROM rollout_actuations WHERE NOT settled GROUP BY rollout_id ORDER BY min(updated_at) LIMIT $1',
      [limit],
    );
    return rows.map((r) => r.rollout_id);
  }
}

/** Readings split so that no two of one round count into the same tally. */
export function uniqueRounds(readings: readonly ReadingToStore[]): ReadingToStore[][] {
  const rounds: { keys: Set<string>; items: ReadingToStore[] }[] = [];
  for (const r of readings) {
    const key = JSON.stringify([r.rolloutId, r.reading.attempt, r.reading.stage, r.reading.gate]);
    let round = rounds.find((x) => !x.keys.has(key));
    if (!round) rounds.push((round = { keys: new Set(), items: [] }));
    round.keys.add(key);
    round.items.push(r);
  }
  return rounds.map((x) => x.items);
}
