import type { FailedItem, RunFigures, StatusReads } from '../../api/status-reads.js';
import { ROLLOUT_SOURCE, type RolloutEvent, type RolloutEventDetail, type RolloutEventType } from '../../rollout/events.js';
import { toInt, toMillis, type Sql } from './sql.js';

/** The status page's reads on PostgreSQL and PGlite: each list one statement, bounded by the caller's caps, through an index. */
export class PostgresStatusReads implements StatusReads {
  constructor(private readonly sql: Sql) {}

  async rollouts(o: { readonly live: number; readonly finished: number }): Promise<string[]> {
    const { rows } = await this.sql.query<{ id: string }>(
      `(SELECT id, true AS live, updated_at FROM rollouts WHERE state IN ('running', 'paused') ORDER BY updated_at DESC LIMIT $1)
       UNION ALL
       (SELECT id, false AS live, updated_at FROM rollouts WHERE state NOT IN ('running', 'paused') ORDER BY updated_at DESC LIMIT $2)
       ORDER BY live DESC, updated_at DESC`,
      [o.live, o.finished],
    );
    return rows.map((r) => r.id);
  }

  /** In one round trip through the (rollout_id, seq) index. */
  async transitions(rolloutIds: readonly string[], limit: number): Promise<Map<string, RolloutEvent[]>> {
    const out = new Map<string, RolloutEvent[]>();
    if (!rolloutIds.length) return out;
    const { rows } = await this.sql.query<{ rollout_id: string; id: string; detail_type: string; time: unknown; detail: unknown }>(
      `SELECT r.id AS rollout_id, e.id, e.detail_type, e.time, e.detail - 'readings' - 'metrics' - 'labels' AS detail
         FROM unnest($1::text[]) AS r(id)
         CROSS JOIN LATERAL (SELECT id, detail_type, time, detail, seq FROM rollout_events WHERE rollout_id = r.id ORDER BY seq DESC LIMIT $2) e
        ORDER BY r.id, e.seq DESC`,
      [rolloutIds, limit],
    );
    for (const row of rows) {
      const detail = (typeof row.detail === 'string' ? JSON.parse(row.detail) : row.detail) as RolloutEventDetail;
      const list = out.get(row.rollout_id) ?? [];
      list.push({ id: row.id, source: ROLLOUT_SOURCE, detailType: row.detail_type as RolloutEventType, time: toMillis(row.time), detail });
      out.set(row.rollout_id, list);
    }
    return out;
  }

  async runs(limit: number): Promise<RunFigures[]> {
    const { rows } = await this.sql.query<Record<string, unknown>>(
      `SELECT r.id, r.created_at, r.coordinator_epoch, coalesce(s.steals, 0) AS steals,
              (SELECT count(*) FROM workers w WHERE w.run_id = r.id AND w.drain IS NOT NULL) AS drains
         FROM runs r LEFT JOIN run_stats s ON s.run_id = r.id ORDER BY r.created_at DESC LIMIT $1`,
      [limit],
    );
    return rows.map((r) => ({
      id: String(r.id),
      createdAt: toMillis(r.created_at),
      coordinatorEpoch: toInt(r.coordinator_epoch),
      steals: toInt(r.steals),
      drains: toInt(r.drains),
    }));
  }

  /** In one round trip. */
  async failures(runIds: readonly string[], o: { readonly limit: number; readonly reasonChars: number }): Promise<Map<string, FailedItem[]>> {
    const out = new Map<string, FailedItem[]>();
    if (!runIds.length) return out;
    const { rows } = await this.sql.query<{ run_id: string; id: string; error: string | null; attempts: unknown; worker: string | null; updated_at: unknown }>(
      `SELECT r.id AS run_id, i.id, left(i.error, $3) AS error, i.attempts, i.worker, i.updated_at
         FROM unnest($1::text[]) AS r(id)
         CROSS JOIN LATERAL (SELECT id, error, attempts, worker, updated_at FROM work_items WHERE run_id = r.id AND state = 'failed' ORDER BY updated_at DESC, id DESC LIMIT $2) i
        ORDER BY r.id, i.updated_at DESC, i.id DESC`,
      [runIds, o.limit, o.reasonChars],
    );
    for (const row of rows) {
      const list = out.get(row.run_id) ?? [];
      list.push({ id: row.id, error: row.error, attempts: toInt(row.attempts), worker: row.worker, at: toMillis(row.updated_at) });
      out.set(row.run_id, list);
    }
    return out;
  }

  async unaddressable(): Promise<{ kind: 'rollout' | 'run'; id: string }[]> {
    const { rows } = await this.sql.query<{ kind: 'rollout' | 'run'; id: string }>(
      `SELECT 'rollout' AS kind, id FROM rollouts WHERE id IN ('.', '..') UNION ALL SELECT 'run' AS kind, id FROM runs WHERE id IN ('.', '..')`,
    );
    return rows;
  }
}
