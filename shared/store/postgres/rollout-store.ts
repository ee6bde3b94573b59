import type { LeaseToken } from '../../lease/record.js';
import type { RolloutEvent, RolloutEventDetail, RolloutEventType } from '../../rollout/events.js';
import { ROLLOUT_SOURCE } from '../../rollout/events.js';
import type { AlarmState, Rollout, RolloutState, RolloutView, StageMetrics, StagePhase, StageStatus } from '../../rollout/model.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import { RolloutConflictError, UnknownRolloutError, type RolloutStore, type SignalOutcome } from '../../rollout/store.js';
import { freshStages, type StageSet, type TransitionPlan } from '../../rollout/transitions.js';
import { withFence } from './fence.js';
import { toInt, toMillis, type Sql } from './sql.js';

const ms = (v: unknown): number | null => (v === null || v === undefined ? null : toMillis(v));
const date = (v: number | null): Date | null => (v === null ? null : new Date(v));

/** One statement, so one snapshot: the rollout with its current attempt's stages and metrics. */
const VIEW_SQL = `
  SELECT r.*,
    (SELECT coalesce(json_agg(s ORDER BY s.stage_index), '[]') FROM rollout_stages s
      WHERE s.rollout_id = r.id AND s.attempt = r.attempt) AS stages,
    (SELECT coalesce(json_agg(m), '[]') FROM stage_metrics m
      WHERE m.rollout_id = r.id AND m.attempt = r.attempt) AS metrics
  FROM rollouts r`;

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
  stages: Record<string, unknown>[] | string;
  metrics: Record<string, unknown>[] | string;
}

function json<T>(v: T[] | string): T[] {
  return typeof v === 'string' ? (JSON.parse(v) as T[]) : v;
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

function stageOf(s: Record<string, unknown>): StageStatus {
  return {
    index: toInt(s.stage_index),
    name: String(s.name),
    phase: s.phase as StagePhase,
    activatedAt: ms(s.activated_at),
    promotedAt: ms(s.promoted_at),
    promotedEpoch: s.promoted_epoch === null ? null : toInt(s.promoted_epoch),
    promotedBy: (s.promoted_by as string | null) ?? null,
    rolledBackAt: ms(s.rolled_back_at),
    reason: (s.reason as string | null) ?? null,
  };
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

const STAGE_COLUMNS: Record<keyof StageSet, string> = {
  phase: 'phase',
  activatedAt: 'activated_at',
  promotedAt: 'promoted_at',
  promotedEpoch: 'promoted_epoch',
  promotedBy: 'promoted_by',
  rolledBackAt: 'rolled_back_at',
  reason: 'reason',
};

/** Raised inside the transaction to roll it back when the evaluated state has moved on. */
class Stale extends Error {}

export class PostgresRolloutStore implements RolloutStore {
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
    const { rows } = await this.sql.query<RolloutRow>(`${VIEW_SQL} WHERE r.id = $1`, [id]);
    const views = await this.views(rows);
    return views[0] ?? null;
  }

  async loadRunning(): Promise<RolloutView[]> {
    const { rows } = await this.sql.query<RolloutRow>(`${VIEW_SQL} WHERE r.state = 'running' ORDER BY r.id`);
    return this.views(rows);
  }

  private async views(rows: RolloutRow[]): Promise<RolloutView[]> {
    const names = [...new Set(rows.flatMap((r) => r.spec.stages.flatMap((s) => s.gates.alarms)))];
    const alarms: Record<string, AlarmState> = {};
    if (names.length) {
      const res = await this.sql.query<{ name: string; state: AlarmState }>('SELECT name, state FROM alarm_states WHERE name = ANY($1::text[])', [names]);
      for (const a of res.rows) alarms[a.name] = a.state;
    }
    return rows.map((r) => {
      const metrics = new Map<number, StageMetrics>();
      for (const m of json(r.metrics)) {
        metrics.set(toInt(m.stage_index), {
          requests: toInt(m.requests),
          errors: toInt(m.errors),
          p99LatencyMs: m.p99_latency_ms === null ? null : Number(m.p99_latency_ms),
          observedAt: toMillis(m.observed_at),
        });
      }
      const own = new Set(r.spec.stages.flatMap((s) => s.gates.alarms));
      return {
        rollout: rolloutOf(r),
        stages: json(r.stages).map(stageOf),
        metrics,
        alarms: Object.fromEntries(Object.entries(alarms).filter(([n]) => own.has(n))),
      };
    });
  }

  async recordMetrics(rolloutId: string, attempt: number, stage: number, m: StageMetrics): Promise<SignalOutcome> {
    const { rows } = await this.sql.query(
      `INSERT INTO stage_metrics (rollout_id, attempt, stage_index, requests, errors, p99_latency_ms, observed_at)
       SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM rollouts WHERE id = $1)
       ON CONFLICT (rollout_id, attempt, stage_index) DO UPDATE
         SET requests = excluded.requests, errors = excluded.errors, p99_latency_ms = excluded.p99_latency_ms, observed_at = excluded.observed_at
         WHERE stage_metrics.observed_at < excluded.observed_at
       RETURNING 1`,
      [rolloutId, attempt, stage, m.requests, m.errors, m.p99LatencyMs, new Date(m.observedAt)],
    );
    if (rows.length) return 'stored';
    const exists = await this.sql.query('SELECT 1 FROM rollouts WHERE id = $1', [rolloutId]);
    if (!exists.rows.length) throw new UnknownRolloutError(rolloutId);
    return 'stale';
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

  async apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean> {
    try {
      await withFence(this.sql, token, async (tx) => {
        const n = plan.next;
        // The rollout row exactly as evaluated. Its row lock also orders every transition of this rollout.
        const updated = await tx.query(
          `UPDATE rollouts SET state = $2, attempt = $3, version = $4, updated_at = $5, last_progress_at = $6,
                  deadline_exceeded_at = $7, state_by = $8, state_reason = $9
            WHERE id = $1 AND version = $10 AND state = $11 AND attempt = $12
            RETURNING id`,
          [plan.rolloutId, n.state, n.attempt, n.version, new Date(n.updatedAt), new Date(n.lastProgressAt), date(n.deadlineExceededAt), n.stateBy, n.stateReason,
            plan.expect.version, plan.expect.state, plan.expect.attempt],
        );
        if (updated.rows.length === 0) throw new Stale();
        for (const change of plan.stageChanges) {
          const entries = Object.entries(change.set) as [keyof StageSet, unknown][];
          const sets = entries.map(([k], i) => `${STAGE_COLUMNS[k]} = $${i + 5}`).join(', ');
          const values = entries.map(([k, v]) => (k.endsWith('At') ? date(v as number | null) : v));
          const res = await tx.query(
            `UPDATE rollout_stages SET ${sets} WHERE rollout_id = $1 AND attempt = $2 AND stage_index = $3 AND phase = $4 RETURNING 1`,
            [plan.rolloutId, plan.expect.attempt, change.index, change.expect, ...values],
          );
          if (res.rows.length === 0) throw new Stale();
        }
        if (plan.newStages.length) await this.insertStages(tx, plan.rolloutId, n.attempt, plan.newStages);
        for (const e of plan.events) {
          await tx.query(
            'INSERT INTO rollout_events (id, rollout_id, detail_type, time, detail) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING',
            [e.id, plan.rolloutId, e.detailType, new Date(e.time), JSON.stringify(e.detail)],
          );
        }
      });
      return true;
    } catch (err) {
      if (err instanceof Stale) return false;
      throw err;
    }
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
      await this.sql.query('UPDATE rollout_events SET published_at = now() WHERE id = ANY($1::text[]) AND published_at IS NULL', [events.map((e) => e.id)]);
    }
  }

  async events(rolloutId: string): Promise<RolloutEvent[]> {
    const { rows } = await this.sql.query<{ id: string; detail_type: string; time: unknown; detail: unknown }>(
      'SELECT id, detail_type, time, detail FROM rollout_events WHERE rollout_id = $1 ORDER BY seq',
      [rolloutId],
    );
    return rows.map(eventOf);
  }
}
