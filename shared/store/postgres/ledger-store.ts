import type { LeaseRecord } from '../../lease/record.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { contentId, canonicalJson, type WorkItem } from '../../ledger/model.js';
import type { ItemCasOutcome, LedgerStore, RunRecord } from '../../ledger/store.js';
import type { ItemCas, ItemFields } from '../../ledger/transitions.js';
import { withFence } from './fence.js';
import { PostgresLeaseStore } from './lease-store.js';
import { toInt, toMillis, type Sql } from './sql.js';

const COLUMN: Record<keyof ItemFields, string> = {
  state: 'state',
  worker: 'worker',
  epoch: 'epoch',
  claimedAt: 'claimed_at',
  started: 'started',
  heartbeatAt: 'heartbeat_at',
  resultHash: 'result_hash',
  result: 'result',
  error: 'error',
  attempts: 'attempts',
};
const TIME_FIELDS = new Set<keyof ItemFields>(['claimedAt', 'heartbeatAt']);

function sqlValue(field: keyof ItemFields, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (TIME_FIELDS.has(field)) return new Date(v as number);
  if (field === 'result') return JSON.stringify(v);
  return v;
}

type Row = Record<string, unknown>;
const ms = (v: unknown) => (v === null || v === undefined ? null : toMillis(v));

function itemOf(r: Row): WorkItem {
  return {
    runId: String(r.run_id),
    id: String(r.id),
    payload: r.payload,
    state: r.state as WorkItem['state'],
    worker: (r.worker as string | null) ?? null,
    epoch: r.epoch === null ? null : toInt(r.epoch),
    claimedAt: ms(r.claimed_at),
    started: Boolean(r.started),
    heartbeatAt: ms(r.heartbeat_at),
    resultHash: (r.result_hash as string | null) ?? null,
    result: r.result ?? null,
    error: (r.error as string | null) ?? null,
    attempts: toInt(r.attempts),
    version: toInt(r.version),
  };
}

/** The ledger on PostgreSQL / PGlite: each transition one conditional UPDATE (inside the fence for coordinator writes). */
export class PostgresLedgerStore implements LedgerStore {
  constructor(private readonly sql: Sql) {}

  async createRun(id: string, spec: unknown, now: number): Promise<{ created: boolean }> {
    const { rows } = await this.sql.query('INSERT INTO runs (id, spec, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING id', [id, canonicalJson(spec), new Date(now)]);
    return { created: rows.length === 1 };
  }

  async getRun(id: string): Promise<RunRecord | null> {
    const { rows } = await this.sql.query<Row>('SELECT id, spec, coordinator_epoch, created_at FROM runs WHERE id = $1', [id]);
    const r = rows[0];
    return r ? { id: String(r.id), spec: r.spec, coordinatorEpoch: toInt(r.coordinator_epoch), createdAt: toMillis(r.created_at) } : null;
  }

  async enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }> {
    const ids = payloads.map(contentId);
    let added = 0;
    for (let i = 0; i < payloads.length; i += 1000) {
      const slice = payloads.slice(i, i + 1000);
      const { rows } = await this.sql.query(
        `INSERT INTO work_items (run_id, id, payload, state, created_at, updated_at)
         SELECT $1, id, payload::jsonb, 'pending', $4, $4 FROM unnest($2::text[], $3::text[]) AS t(id, payload)
         ON CONFLICT (run_id, id) DO NOTHING RETURNING id`,
        [runId, ids.slice(i, i + 1000), slice.map(canonicalJson), new Date(now)],
      );
      added += rows.length;
    }
    return { ids, added };
  }

  async get(runId: string, itemId: string): Promise<WorkItem | null> {
    const { rows } = await this.sql.query<Row>('SELECT * FROM work_items WHERE run_id = $1 AND id = $2', [runId, itemId]);
    return rows[0] ? itemOf(rows[0]) : null;
  }

  async cas(change: ItemCas, now: number): Promise<ItemCasOutcome> {
    const params: unknown[] = [change.runId, change.itemId, new Date(now)];
    const p = (v: unknown) => `$${params.push(v)}`;
    const sets = Object.entries(change.set).map(([f, v]) => `${COLUMN[f as keyof ItemFields]} = ${p(sqlValue(f as keyof ItemFields, v))}`);
    if (change.bumpAttempts) sets.push('attempts = attempts + 1');
    const where = Object.entries(change.expect).map(([f, v]) => `${COLUMN[f as keyof ItemFields]} IS NOT DISTINCT FROM ${p(sqlValue(f as keyof ItemFields, v))}`);
    const text = `UPDATE work_items SET ${[...sets, 'version = version + 1', 'updated_at = $3'].join(', ')}
                   WHERE run_id = $1 AND id = $2 AND ${where.join(' AND ')} RETURNING *`;
    const { rows } = change.fence ? await withFence(this.sql, change.fence, (tx) => tx.query<Row>(text, params)) : await this.sql.query<Row>(text, params);
    if (rows[0]) return { ok: true, item: itemOf(rows[0]) };
    return { ok: false, current: await this.get(change.runId, change.itemId) };
  }

  async running(runId: string): Promise<WorkItem[]> {
    const { rows } = await this.sql.query<Row>(`SELECT * FROM work_items WHERE run_id = $1 AND state = 'running' ORDER BY heartbeat_at`, [runId]);
    return rows.map(itemOf);
  }

  async staleRunning(runId: string, before: number, limit: number): Promise<WorkItem[]> {
    const { rows } = await this.sql.query<Row>(
      `SELECT * FROM work_items WHERE run_id = $1 AND state = 'running' AND heartbeat_at < $2 ORDER BY heartbeat_at LIMIT $3`,
      [runId, new Date(before), limit],
    );
    return rows.map(itemOf);
  }

  async pending(runId: string, limit: number, after?: string): Promise<WorkItem[]> {
    const { rows } = await this.sql.query<Row>(
      `SELECT * FROM work_items WHERE run_id = $1 AND state = 'pending' AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $2`,
      [runId, limit, after ?? null],
    );
    return rows.map(itemOf);
  }

  async counts(runId: string): Promise<Record<WorkItem['state'], number>> {
    const { rows } = await this.sql.query<{ state: WorkItem['state']; n: unknown }>('SELECT state, count(*) AS n FROM work_items WHERE run_id = $1 GROUP BY state', [runId]);
    const out = { pending: 0, running: 0, done: 0, failed: 0 };
    for (const r of rows) out[r.state] = toInt(r.n);
    return out;
  }
}

/**
 * The coordinator lease of one run, with the run's epoch stamped in the same
 * transaction as every lease win, so the lease epoch and the ledger's epoch
 * never diverge.
 */
export class PostgresRunLeaseStore implements LeaseStore {
  private readonly leases: PostgresLeaseStore;

  constructor(
    private readonly sql: Sql,
    private readonly runId: string,
  ) {
    this.leases = new PostgresLeaseStore(sql);
  }

  read(name: string): Promise<LeaseRecord | null> {
    return this.leases.read(name);
  }

  compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
    return this.sql.transaction(async (tx) => {
      const out = await new PostgresLeaseStore(tx).compareAndSwap(expected, next);
      if (out.ok && next.holder !== null) {
        await tx.query('UPDATE runs SET coordinator_epoch = $2 WHERE id = $1 AND coordinator_epoch < $2', [this.runId, next.epoch]);
      }
      return out;
    });
  }
}

