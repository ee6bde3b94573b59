import { canonicalJson, hashText, type WorkItem } from '../../ledger/model.js';
import { cursorObject, cursorText, cursorTime, decodeCursor, encodeCursor } from '../../cursor.js';
import {
  assertOneChangePerItem,
  type ItemCasOutcome,
  type ItemPage,
  type ItemPageQuery,
  type LedgerStore,
  type RunCancel,
  type RunRecord,
} from '../../ledger/store.js';
import type { ItemCas } from '../../ledger/transitions.js';
import { assertStillHeld, fenceClauses } from './fence.js';
import { LEDGER_STATEMENTS, type LedgerStatement } from './ledger-statements.js';
import { toInt, toMillis, type Sql } from './sql.js';

const ANALYZE_AFTER = 1_000;
const ENQUEUE_BATCH = 5_000;

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
    sentAt: ms(r.sent_at),
    attempts: toInt(r.attempts),
    version: toInt(r.version),
  };
}

/** The run list's cursor: the last run's created_at and id (the page's order). */
const RUNS_CURSOR = cursorObject({ at: cursorTime(), id: cursorText(512) });
/** A run's items page's cursor: the last item's id (the page's order). */
const ITEMS_CURSOR = cursorObject({ id: cursorText(512) });
const RUN_COLUMNS = 'id, spec, coordinator_epoch, created_at, cancelled_at, cancelled_by, cancel_reason';

function runOf(r: Row): RunRecord {
  const cancelled =
    r.cancelled_at === null || r.cancelled_at === undefined
      ? null
      : { at: toMillis(r.cancelled_at), by: String(r.cancelled_by), reason: (r.cancel_reason as string | null) ?? null };
  return { id: String(r.id), spec: r.spec, coordinatorEpoch: toInt(r.coordinator_epoch), createdAt: toMillis(r.created_at), cancelled };
}

/** The ledger on PostgreSQL / PGlite: each transition its own conditional UPDATE (ledger-statements.ts; coordinator writes carry the fence in the same statement). */
export class PostgresLedgerStore implements LedgerStore {
  constructor(private readonly sql: Sql) {}

  async createRun(id: string, spec: unknown, now: number): Promise<{ created: boolean }> {
    const { rows } = await this.sql.query('INSERT INTO runs (id, spec, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING id', [
      id,
      canonicalJson(spec),
      new Date(now),
    ]);
    return { created: rows.length === 1 };
  }

  async getRun(id: string): Promise<RunRecord | null> {
    const { rows } = await this.sql.query<Row>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = $1`, [id]);
    return rows[0] ? runOf(rows[0]) : null;
  }

  async cancelRun(
    id: string,
    cancel: { readonly by: string; readonly reason: string | null },
    now: number,
  ): Promise<{ cancelled: RunCancel; first: boolean } | null> {
    const { rows } = await this.sql.query<Row>(
      `UPDATE runs SET cancelled_at = $2, cancelled_by = $3, cancel_reason = $4 WHERE id = $1 AND cancelled_at IS NULL RETURNING ${RUN_COLUMNS}`,
      [id, new Date(now), cancel.by, cancel.reason],
    );
    if (rows[0]) return { cancelled: runOf(rows[0]).cancelled!, first: true };
    const run = await this.getRun(id);
    return run?.cancelled ? { cancelled: run.cancelled, first: false } : null;
  }

  async listRuns(o: { readonly cursor?: string; readonly limit: number }): Promise<{ runs: RunRecord[]; next: string | null }> {
    const after = o.cursor === undefined ? null : decodeCursor(o.cursor, RUNS_CURSOR);
    const { rows } = await this.sql.query<Row>(
      `SELECT ${RUN_COLUMNS} FROM runs
        WHERE ($1::bigint IS NULL OR (created_at, id) < (to_timestamp($1::bigint / 1000.0), $2::text))
        ORDER BY created_at DESC, id DESC LIMIT $3`,
      [after?.at ?? null, after?.id ?? null, o.limit + 1],
    );
    const runs = rows.slice(0, o.limit).map(runOf);
    const last = runs.at(-1);
    return { runs, next: rows.length > o.limit && last ? encodeCursor({ at: last.createdAt, id: last.id }) : null };
  }

  async enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }> {
    const texts = payloads.map(canonicalJson);
    const ids = texts.map(hashText);
    let added = 0;
    for (let i = 0; i < payloads.length; i += ENQUEUE_BATCH) {
      const { rows } = await this.sql.query<{ n: unknown }>(
        `WITH added AS (
           INSERT INTO work_items (run_id, id, payload, state, created_at, updated_at)
           SELECT $1, id, payload::jsonb, 'pending', $4, $4 FROM unnest($2::text[], $3::text[]) AS t(id, payload)
           ON CONFLICT (run_id, id) DO NOTHING RETURNING 1)
         SELECT count(*) AS n FROM added`,
        [runId, ids.slice(i, i + ENQUEUE_BATCH), texts.slice(i, i + ENQUEUE_BATCH), new Date(now)],
      );
      added += toInt(rows[0]?.n ?? 0);
    }
    // New work re-opens a run found finished: its retention starts again when it next finishes.
    if (added > 0) await this.sql.query('UPDATE runs SET closed_at = NULL WHERE id = $1 AND closed_at IS NOT NULL', [runId]);
    // A bulk load (more than autovacuum's 10 % threshold): refresh the planner's statistics now,
    // not at the next autovacuum. With a fresh table's default estimates the batched updates
    // join the whole run instead of looking each row up by key (hundreds of ms per batch, not ~1 ms).
    if (added >= ANALYZE_AFTER) {
      const { rows } = await this.sql.query<{ n: unknown }>(`SELECT reltuples::bigint AS n FROM pg_class WHERE oid = 'work_items'::regclass`);
      const known = Math.max(0, toInt(rows[0]?.n ?? 0));
      if (added > known * 0.1) await this.sql.query('ANALYZE work_items (run_id, id, state)'); // the planner's keys; not the payloads
    }
    return { ids, added };
  }

  async get(runId: string, itemId: string): Promise<WorkItem | null> {
    const { rows } = await this.sql.query<Row>('SELECT * FROM work_items WHERE run_id = $1 AND id = $2', [runId, itemId]);
    return rows[0] ? itemOf(rows[0]) : null;
  }

  async cas(change: ItemCas, now: number): Promise<ItemCasOutcome> {
    return (await this.casMany([change], now))[0]!;
  }

  /** Changes of one transition (of one run, under one fence) go in one statement; rows that did not match are read back in one query. */
  async casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]> {
    const out = new Array<ItemCasOutcome>(changes.length);
    for (const { idx, first, rows } of await this.write(changes, now, 'w.*')) {
      const won = new Map(rows.map((r) => [String(r.id), itemOf(r)]));
      const lost = idx.filter((i) => !won.has(changes[i]!.itemId)).map((i) => changes[i]!.itemId);
      const current = new Map<string, WorkItem>();
      if (lost.length) {
        const read = await this.sql.query<Row>('SELECT * FROM work_items WHERE run_id = $1 AND id = ANY($2::text[])', [first.runId, lost]);
        for (const r of read.rows) current.set(String(r.id), itemOf(r));
      }
      for (const i of idx) {
        const id = changes[i]!.itemId;
        const item = won.get(id);
        out[i] = item ? { ok: true, item } : { ok: false, current: current.get(id) ?? null };
      }
    }
    return out;
  }

  /** The same statements, returning only the ids that changed: no rows to send back, parse or re-read. */
  async applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]> {
    const out = new Array<boolean>(changes.length).fill(false);
    for (const { idx, rows } of await this.write(changes, now, 'w.id')) {
      const won = new Set(rows.map((r) => String(r.id)));
      for (const i of idx) out[i] = won.has(changes[i]!.itemId);
    }
    return out;
  }

  /** Each batch through its transition's statement (ledger-statements.ts). */
  private async write(changes: readonly ItemCas[], now: number, returning: 'w.*' | 'w.id'): Promise<{ idx: number[]; first: ItemCas; rows: Row[] }[]> {
    assertOneChangePerItem(changes);
    const statementOf = (c: ItemCas) => LEDGER_STATEMENTS[c.transition] as LedgerStatement<ItemCas>;
    const batches = new Map<string, number[]>();
    changes.forEach((c, i) => {
      const key = [c.runId, c.transition, c.fence ? `${c.fence.name}|${c.fence.holder}|${c.fence.epoch}` : '', statementOf(c).batchKey?.(c) ?? ''].join(
        '\u0000',
      );
      const batch = batches.get(key);
      if (batch) batch.push(i);
      else batches.set(key, [i]);
    });
    const results: { idx: number[]; first: ItemCas; rows: Row[] }[] = [];
    for (const idx of batches.values()) {
      const first = changes[idx[0]!]!;
      const statement = statementOf(first);
      const params: unknown[] = [first.runId, new Date(now), ...statement.params(idx.map((i) => changes[i]!))];
      let text: string;
      if (typeof statement.text === 'string') {
        if (first.fence) throw new Error(`${first.transition} is not a fenced transition: its change must carry no fence`);
        text = statement.text;
      } else {
        if (!first.fence) throw new Error(`${first.transition} is a coordinator transition: its change must carry the coordinator's fence`);
        text = statement.text(fenceClauses(first.fence, params));
      }
      const { rows } = await this.sql.query<Row>(`${text}\n  RETURNING ${returning}`, params);
      // Nothing changed: fenced (FencedError), or every row had moved on (reported per item).
      if (!rows.length && first.fence) await assertStillHeld(this.sql, first.fence);
      results.push({ idx, first, rows });
    }
    return results;
  }

  async running(runId: string): Promise<WorkItem[]> {
    const { rows } = await this.sql.query<Row>(`SELECT * FROM work_items WHERE run_id = $1 AND state = 'running' ORDER BY heartbeat_at`, [runId]);
    return rows.map(itemOf);
  }

  async pending(runId: string, limit: number, after?: WorkItem): Promise<WorkItem[]> {
    const { rows } = await this.sql.query<Row>(
      `SELECT * FROM work_items WHERE run_id = $1 AND state = 'pending' AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $2`,
      [runId, limit, after?.id ?? null],
    );
    return rows.map(itemOf);
  }

  async unsent(runId: string, sentBefore: number, limit: number): Promise<WorkItem[]> {
    const { rows } = await this.sql.query<Row>(
      `SELECT * FROM work_items WHERE run_id = $1 AND state = 'pending' AND (sent_at IS NULL OR sent_at < $2)
        ORDER BY sent_at NULLS FIRST LIMIT $3`,
      [runId, new Date(sentBefore), limit],
    );
    return rows.map(itemOf);
  }

  async markUnsent(runId: string, limit: number): Promise<number> {
    const { rows } = await this.sql.query<{ n: unknown }>(
      `WITH sent AS (SELECT id FROM work_items WHERE run_id = $1 AND state = 'pending' AND sent_at IS NOT NULL LIMIT $2),
       marked AS (UPDATE work_items w SET sent_at = NULL FROM sent WHERE w.run_id = $1 AND w.id = sent.id AND w.state = 'pending' RETURNING 1)
       SELECT count(*) AS n FROM marked`,
      [runId, limit],
    );
    return toInt(rows[0]?.n ?? 0);
  }

  async markSent(runId: string, items: readonly Pick<WorkItem, 'id' | 'version'>[], now: number): Promise<void> {
    if (!items.length) return;
    await this.sql.query(
      `UPDATE work_items w SET sent_at = $2 FROM unnest($3::text[], $4::bigint[]) AS v(id, version)
        WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id AND w.state = 'pending' AND w.version = v.version`,
      [runId, new Date(now), items.map((i) => i.id), items.map((i) => i.version)],
    );
  }

  /**
   * Runs first found finished are stamped `closed_at` (the start of their
   * retention: at most one pass late); those stamped before `before` lose
   * their Done and Failed items, `limit` a call, and once none is left the
   * run goes with its statistics and its gone workers. A run an enqueue
   * re-opened meanwhile has `closed_at` cleared, and its Pending items keep
   * the run (the last delete finds items and removes nothing).
   */
  async pruneRuns(before: number, limit: number, now: number): Promise<{ runs: number; items: number }> {
    // A stamp that raced an enqueue (its snapshot missed the new items) is taken back while the run is open.
    await this.sql.query(
      `UPDATE runs r SET closed_at = NULL
        WHERE r.closed_at IS NOT NULL
          AND (EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id AND w.state = 'pending')
            OR EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id AND w.state = 'running'))`,
    );
    await this.sql.query(
      `UPDATE runs r SET closed_at = $1
        WHERE r.closed_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id AND w.state = 'pending')
          AND NOT EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id AND w.state = 'running')`,
      [new Date(now)],
    );
    const { rows: deleted } = await this.sql.query<{ n: unknown }>(
      `WITH doomed AS (
         SELECT w.run_id, w.id FROM runs r JOIN work_items w ON w.run_id = r.id
          WHERE r.closed_at < $1 AND w.state IN ('done', 'failed')
            AND NOT EXISTS (SELECT 1 FROM work_items o WHERE o.run_id = r.id AND o.state = 'pending')
            AND NOT EXISTS (SELECT 1 FROM work_items o WHERE o.run_id = r.id AND o.state = 'running')
          LIMIT $2),
       gone AS (DELETE FROM work_items w USING doomed d WHERE w.run_id = d.run_id AND w.id = d.id RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      [new Date(before), limit],
    );
    const items = toInt(deleted[0]?.n ?? 0);
    const { rows: runs } = await this.sql.query<{ id: string }>(
      `SELECT id FROM runs r WHERE r.closed_at < $1 AND NOT EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id) LIMIT 100`,
      [new Date(before)],
    );
    let gone = 0;
    for (const { id } of runs) {
      await this.sql.query(`DELETE FROM run_stats WHERE run_id = $1`, [id]);
      await this.sql.query(`DELETE FROM workers WHERE run_id = $1 AND state = 'gone'`, [id]);
      // Still closed and empty as it is deleted: an enqueue that came in since keeps it.
      const { rows } = await this.sql.query(
        `DELETE FROM runs r WHERE r.id = $1 AND r.closed_at < $2 AND NOT EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id) RETURNING 1`,
        [id, new Date(before)],
      );
      gone += rows.length;
    }
    return { runs: gone, items };
  }

  async openRuns(): Promise<string[]> {
    // One probe of each partial index per run.
    const { rows } = await this.sql.query<{ id: string }>(
      `SELECT r.id FROM runs r
        WHERE EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id AND w.state = 'pending')
           OR EXISTS (SELECT 1 FROM work_items w WHERE w.run_id = r.id AND w.state = 'running')
        ORDER BY r.id`,
    );
    return rows.map((r) => r.id);
  }

  /** By id, after the cursor's id: the primary key (run_id, id) orders and bounds every page. */
  async items(runId: string, o: ItemPageQuery): Promise<ItemPage> {
    const after = o.cursor === undefined ? null : decodeCursor(o.cursor, ITEMS_CURSOR).id;
    const { rows } = await this.sql.query<Row>(
      `SELECT * FROM work_items WHERE run_id = $1 AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $4`,
      [runId, o.state ?? null, after, o.limit + 1],
    );
    const items = rows.slice(0, o.limit).map(itemOf);
    return { items, next: rows.length > o.limit ? encodeCursor({ id: items.at(-1)!.id }) : null };
  }

  async isDone(runId: string): Promise<boolean> {
    // Two probes of the partial indexes, whatever the run's size.
    const { rows } = await this.sql.query<{ open: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM work_items WHERE run_id = $1 AND state = 'pending')
           OR EXISTS (SELECT 1 FROM work_items WHERE run_id = $1 AND state = 'running') AS open`,
      [runId],
      'ledger_is_done',
    );
    return !rows[0]?.open;
  }

  async counts(runId: string): Promise<Record<WorkItem['state'], number>> {
    const { rows } = await this.sql.query<{ state: WorkItem['state']; n: unknown }>(
      'SELECT state, count(*) AS n FROM work_items WHERE run_id = $1 GROUP BY state',
      [runId],
    );
    const out = { pending: 0, running: 0, done: 0, failed: 0 };
    for (const r of rows) out[r.state] = toInt(r.n);
    return out;
  }
}
