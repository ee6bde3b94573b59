import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { WorkItem } from '../../ledger/model.js';
import type { ItemCasOutcome, ItemPage, ItemPageQuery, LedgerStore, PendingEntry, RunCancel, RunningEntry, RunOptions, RunRecord } from '../../ledger/store.js';
import type { ItemCas } from '../../ledger/transitions.js';
import { DEFAULT_RETENTION } from '../../retention.js';
import { LedgerCas } from './ledger-cas.js';
import { LedgerEnqueue } from './ledger-enqueue.js';
import { RunFences } from './ledger-fences.js';
import { LedgerReads } from './ledger-reads.js';
import { LedgerRuns } from './ledger-runs.js';
import { LedgerTable } from './ledger-table.js';
import { DynamoStealHints } from './steal-hints.js';

/**
 * The ledger on DynamoDB:
 *   RUN#<id> / RUN          the run (spec, shards, coordinatorEpoch, enqueues, items); in gsi1
 *                           under RUNS while it may have work: openRuns takes a finished run
 *                           out once, and an enqueue that adds items puts it back
 *   items                   one item each, spread over the run's shards (ledger-keys.ts); while
 *                           running it is in gsi1 under its shard's RUNNING key by id, while
 *                           pending under its PENDING key sorted by when its message was last
 *                           sent (never sent: 0, first), once failed under its FAILED key — so the
 *                           coordinator's queries read only the running (or pending, or unsent)
 *                           set, fanned out over the shards, never the whole run.
 * gsi1 is eventually consistent: a query may miss a change of the last moment; every write
 * it leads to is a compare-and-swap on the item itself, so a stale reading never wins.
 * An index entry carries only what no start or heartbeat changes (table.ts GSI1_PROJECTED):
 * `holders` answers from the entries alone; `running` reads the items the entries name
 * (a table whose gsi1 still projects ALL has them in the entries: nothing more is read).
 *
 * A run records its shard count when it is created and keeps it; a run
 * created before sharding has none and keeps the first layout, so the runs
 * of an existing table finish where they started.
 *
 * The parts, each in its own file, share the table (ledger-table.ts: layouts,
 * throttling, index reads): run records (ledger-runs.ts), enqueue and send
 * bookkeeping (ledger-enqueue.ts), item transitions — claim, settle, steal —
 * (ledger-cas.ts), reads (ledger-reads.ts); the run's coordinator lease is
 * run-lease-store.ts.
 */

export interface DynamoLedgerOptions {
  /** Writes (and fanned-out queries) in flight at once. */
  readonly concurrency?: number;
  /** Shards of a run created without a count of its own. */
  readonly defaultShards?: number;
  /** Days a finished item is kept: the write that ends it sets the table's TTL attribute (default DEFAULT_RETENTION.runDays). */
  readonly retainRunDays?: number;
}

export class DynamoLedgerStore implements LedgerStore {
  readonly stealHints: DynamoStealHints;
  private readonly runs: LedgerRuns;
  private readonly enqueues: LedgerEnqueue;
  private readonly changes: LedgerCas;
  private readonly reads: LedgerReads;

  // The client and table stay on the store, as before its parts were split out: tests read raw items through them.
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    o: DynamoLedgerOptions = {},
  ) {
    const t = new LedgerTable(doc, table, o.concurrency ?? 16);
    this.stealHints = new DynamoStealHints(doc, table);
    this.runs = new LedgerRuns(t, o.defaultShards ?? 1);
    this.enqueues = new LedgerEnqueue(t);
    this.changes = new LedgerCas(t, new RunFences(doc, table), (o.retainRunDays ?? DEFAULT_RETENTION.runDays) * 86_400);
    this.reads = new LedgerReads(t);
  }

  createRun(id: string, spec: unknown, now: number, o: RunOptions = {}): Promise<{ created: boolean }> {
    return this.runs.createRun(id, spec, now, o);
  }

  listRuns(o: { readonly cursor?: string; readonly limit: number }): Promise<{ runs: RunRecord[]; next: string | null }> {
    return this.runs.listRuns(o);
  }

  cancelRun(
    id: string,
    cancel: { readonly by: string; readonly reason: string | null },
    now: number,
  ): Promise<{ cancelled: RunCancel; first: boolean } | null> {
    return this.runs.cancelRun(id, cancel, now);
  }

  getRun(id: string): Promise<RunRecord | null> {
    return this.runs.getRun(id);
  }

  pruneRuns(before: number, limit: number): Promise<{ runs: number; items: number }> {
    return this.runs.pruneRuns(before, limit);
  }

  openRuns(): Promise<string[]> {
    return this.runs.openRuns();
  }

  isDone(runId: string): Promise<boolean> {
    return this.runs.isDone(runId);
  }

  counts(runId: string): Promise<Record<WorkItem['state'], number>> {
    return this.runs.counts(runId);
  }

  enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }> {
    return this.enqueues.enqueue(runId, payloads, now);
  }

  pending(runId: string, limit: number, after?: Pick<PendingEntry, 'id' | 'sentAt'>): Promise<PendingEntry[]> {
    return this.enqueues.pending(runId, limit, after);
  }

  unsent(runId: string, sentBefore: number, limit: number): Promise<PendingEntry[]> {
    return this.enqueues.unsent(runId, sentBefore, limit);
  }

  markUnsent(runId: string, limit: number): Promise<number> {
    return this.enqueues.markUnsent(runId, limit);
  }

  markSent(runId: string, items: readonly Pick<WorkItem, 'id' | 'version'>[], now: number): Promise<void> {
    return this.enqueues.markSent(runId, items, now);
  }

  casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]> {
    return this.changes.casMany(changes, now);
  }

  applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]> {
    return this.changes.applyMany(changes, now);
  }

  get(runId: string, itemId: string): Promise<WorkItem | null> {
    return this.changes.get(runId, itemId);
  }

  cas(change: ItemCas, now: number): Promise<ItemCasOutcome> {
    return this.changes.cas(change, now);
  }

  running(runId: string): Promise<WorkItem[]> {
    return this.reads.running(runId);
  }

  holders(runId: string): Promise<RunningEntry[]> {
    return this.reads.holders(runId);
  }

  getMany(runId: string, ids: readonly string[]): Promise<WorkItem[]> {
    return this.reads.getMany(runId, ids);
  }

  items(runId: string, o: ItemPageQuery): Promise<ItemPage> {
    return this.reads.items(runId, o);
  }
}
