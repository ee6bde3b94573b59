import type { WorkItem } from './model.js';
import type { ItemCas } from './transitions.js';

export type ItemCasOutcome = { readonly ok: true; readonly item: WorkItem } | { readonly ok: false; readonly current: WorkItem | null };

export interface RunRecord {
  readonly id: string;
  readonly spec: unknown;
  /** The coordinator epoch, stamped in the same atomic write as each lease win. */
  readonly coordinatorEpoch: number;
  readonly createdAt: number;
}

/** The ledger half of the store port. */
export interface LedgerStore {
  createRun(id: string, spec: unknown, now: number): Promise<{ created: boolean }>;
  getRun(id: string): Promise<RunRecord | null>;
  /** Idempotent: an item already present (same content, same id) is left as it is. Returns the ids and how many were new. */
  enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }>;
  get(runId: string, itemId: string): Promise<WorkItem | null>;
  /** One compare-and-swap; a fenced one throws FencedError when the coordinator was deposed. */
  cas(change: ItemCas, now: number): Promise<ItemCasOutcome>;
  /** Running items (what the coordinator needs: backlog per worker, stale heartbeats). Cost follows the running set, not the run. */
  /**
   * Many compare-and-swaps at once, each judged on its own (not a transaction):
   * a worker starts, heartbeats and acks a chunk of items in one round trip.
   * Outcomes keep the input order. At most one change per item per call (two
   * would have no defined order): more is refused.
   */
  casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]>;
  /** As casMany, answering only whether each change applied (heartbeats, acks, nacks: no rows sent back). */
  applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]>;
  running(runId: string): Promise<WorkItem[]>;
  /** Running items whose heartbeat is older than `before`, oldest first (index-backed). */
  staleRunning(runId: string, before: number, limit: number): Promise<WorkItem[]>;
  /** Pending items in item-id order, after `after` (exclusive) when given: a cursor for paging (index-backed). */
  pending(runId: string, limit: number, after?: string): Promise<WorkItem[]>;
  counts(runId: string): Promise<Record<WorkItem['state'], number>>;
  /** Runs with anything Pending or Running: what a scheduled coordinator scan visits. Cost follows the number of runs, not items. */
  openRuns(): Promise<string[]>;
}

/** casMany / applyMany take one change per item: two changes of one item in a batch have no order. */
export function assertOneChangePerItem(changes: readonly ItemCas[]): void {
  const seen = new Set<string>();
  for (const c of changes) {
    const key = `${c.runId}\u0000${c.itemId}`;
    if (seen.has(key)) throw new Error(`batched CAS: more than one change for item ${c.itemId} of run ${c.runId} in one call`);
    seen.add(key);
  }
}

export function coordinatorLease(runId: string): string {
  return `coordinator:${runId}`;
}

