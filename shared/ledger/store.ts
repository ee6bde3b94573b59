import type { ItemState, WorkItem } from './model.js';
import { StoreContendedError } from '../errors.js';
import type { StealHints } from './steal-hint.js';
import type { ItemCas } from './transitions.js';

export type ItemCasOutcome = { readonly ok: true; readonly item: WorkItem } | { readonly ok: false; readonly current: WorkItem | null };

export interface RunRecord {
  readonly id: string;
  readonly spec: unknown;
  /** The coordinator epoch, stamped in the same atomic write as each lease win. */
  readonly coordinatorEpoch: number;
  readonly createdAt: number;
  /** How many shards its items are spread over, where the store shards runs (DynamoDB); null where it does not, or for a run of the first layout. */
  readonly shards?: number | null;
  /** Where the store throttles (DynamoDB): the last time a request of this run was refused, on which key family, and how many so far. */
  readonly throttled?: { readonly at: number; readonly family: string; readonly requests: number };
  /** Cancelled (POST /runs/{id}/cancel): its Pending items are failed by its coordinator; null while it is not. */
  readonly cancelled?: RunCancel | null;
}

/** Who cancelled a run, when and why: recorded once, never undone. */
export interface RunCancel {
  readonly at: number;
  readonly by: string;
  readonly reason: string | null;
}

/** How a run is laid out, fixed when it is created. */
export interface RunOptions {
  /** Shards of its items (a store that does not shard ignores it): see shared/ledger/capacity.ts for how many. */
  readonly shards?: number;
}

/**
 * A Running item as an index lists it: who holds it and since when. Whether
 * it started is there only when the store had it at no cost (`started`
 * absent: read the item).
 */
export type RunningEntry = Pick<WorkItem, 'runId' | 'id' | 'worker' | 'claimedAt'> & { readonly started?: boolean };

/** A Pending item as an index lists it: enough to page on, fail it, or send its message and record that (`version`). */
export type PendingEntry = Pick<WorkItem, 'runId' | 'id' | 'state' | 'version' | 'sentAt'> &
  /** Where the store lists them with the entry (PostgreSQL); absent where a reader must read the item for them (DynamoDB's index). */
  Partial<Pick<WorkItem, 'attempts' | 'error'>>;

/** The ledger half of the store port. */
export interface LedgerStore {
  /** Idempotent on id: an existing run is left as it is (its layout included). */
  createRun(id: string, spec: unknown, now: number, options?: RunOptions): Promise<{ created: boolean }>;
  getRun(id: string): Promise<RunRecord | null>;
  /**
   * Marks the run cancelled, once: a later call changes nothing and answers
   * the first cancel (`first: false`). Null: no such run. Monotone (nothing
   * ever clears it), so it needs no fence; failing the Pending items it
   * leaves is the coordinator's, fenced (Coordinator.failCancelled).
   */
  cancelRun(
    id: string,
    cancel: { readonly by: string; readonly reason: string | null },
    now: number,
  ): Promise<{ readonly cancelled: RunCancel; readonly first: boolean } | null>;
  /** Idempotent: an item already present (same content, same id) is left as it is. Returns the ids and how many were new. */
  enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }>;
  get(runId: string, itemId: string): Promise<WorkItem | null>;
  /** One compare-and-swap; a fenced one throws FencedError when the coordinator was deposed. */
  cas(change: ItemCas, now: number): Promise<ItemCasOutcome>;
  /**
   * Many compare-and-swaps at once, each judged on its own (not a transaction):
   * a worker starts, heartbeats and acks a chunk of items in one round trip.
   * Outcomes keep the input order. At most one change per item per call (two
   * would have no defined order): more is refused. Where changes are sent
   * separately (DynamoDB), one that fails while others were applied makes a
   * PartialBatchError carrying those outcomes, so none is forgotten; when
   * all fail, the first error is thrown as it came.
   */
  casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]>;
  /** As casMany, answering only whether each change applied (heartbeats, acks, nacks: no rows sent back). */
  applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]>;
  /** Running items, whole (what the failure scan needs: heartbeats, versions, attempts). Cost follows the running set, not the run. */
  running(runId: string): Promise<WorkItem[]>;
  /**
   * Who holds each Running item, where the store can say so more cheaply
   * than `running` (DynamoDB: from its index alone, without the fields a
   * start or a heartbeat changes). Absent: `running` is as cheap (see
   * running.ts, which picks).
   */
  holders?(runId: string): Promise<RunningEntry[]>;
  /**
   * Where this store keeps its runs' steal hints (steal-hint.ts): a thief then
   * reads one small record, not the running set. Absent: the coordinator reads
   * the running set for each steal (as cheap where it is one indexed query).
   */
  readonly stealHints?: StealHints;
  /** The items named, read consistently; those that do not exist are left out. Absent: one `get` each. */
  getMany?(runId: string, ids: readonly string[]): Promise<WorkItem[]>;
  /** Pending items in the store's own order, after `after` (the last item of the previous page) when given (index-backed). */
  pending(runId: string, limit: number, after?: Pick<PendingEntry, 'id' | 'sentAt'>): Promise<PendingEntry[]>;
  /**
   * Pending items that need a message: none sent since they became Pending
   * (`sentAt` null), or the last one sent before `sentBefore` (a queue drops
   * messages older than its retention). Unsent first (index-backed).
   */
  unsent(runId: string, sentBefore: number, limit: number): Promise<PendingEntry[]>;
  /**
   * Their messages were sent: `sentAt` = now for each item still Pending at
   * the version given (an item claimed meanwhile is left alone). Bookkeeping,
   * not a transition: the version does not change.
   */
  markSent(runId: string, items: readonly Pick<WorkItem, 'id' | 'version'>[], now: number): Promise<void>;
  /**
   * Up to `limit` Pending items with a message on record are marked as having
   * none (`sentAt` null), so the coordinator's next scan sends each a message:
   * a failover's step, once the old region's queue is out of reach. Returns
   * how many; 0 once none is left. Bookkeeping, like markSent.
   */
  markUnsent(runId: string, limit: number): Promise<number>;
  counts(runId: string): Promise<Record<WorkItem['state'], number>>;
  /**
   * Whether nothing of the run is Pending or Running (a run that does not
   * exist included): what an idle worker with exitWhenDone asks. Never a
   * count of the run's items: the run's closed flag, or one probe a key.
   */
  isDone(runId: string): Promise<boolean>;
  /**
   * Runs that finished (nothing Pending or Running) before `before` and got
   * nothing since, deleted with their items and results, a bounded batch a
   * call (`limit` items, at most); a run whose items are not all gone yet is
   * finished off by later calls. An enqueue re-opens a run, and a run that
   * is open again is not touched. What a store leaves to its own expiry
   * (DynamoDB's TTL on each finished item) it does not delete here.
   */
  pruneRuns(before: number, limit: number, now: number): Promise<{ readonly runs: number; readonly items: number }>;
  /** Runs with anything Pending or Running: what a scheduled coordinator scan visits. Cost follows the number of runs, not items. */
  openRuns(): Promise<string[]>;
  /**
   * A page of a run's items (all, or those in `state`), with their results
   * and failure reasons, in a stable order; `next` continues from the last
   * one (an opaque cursor), null once there is nothing more (a store may
   * hand out one last cursor whose page is empty). For people and exports,
   * not the work path: filtering by state reads past the others.
   */
  items(runId: string, o: ItemPageQuery): Promise<ItemPage>;
  /** Runs newest first (by creation), a page at a time; `next` as in items. */
  listRuns(o: { readonly cursor?: string; readonly limit: number }): Promise<{ readonly runs: readonly RunRecord[]; readonly next: string | null }>;
}

export interface ItemPageQuery {
  readonly state?: ItemState;
  /** A `next` from the previous page. */
  readonly cursor?: string;
  readonly limit: number;
}

export interface ItemPage {
  readonly items: readonly WorkItem[];
  readonly next: string | null;
}

/**
 * Part of a batch (casMany, applyMany) failed on an error while the rest was
 * answered: thrown once every change has settled, with each answered
 * change's outcome and `undefined` for each failed one. A store that applies
 * a batch all or nothing (PostgreSQL) never throws it. `refusedOnly`: every
 * failure was a refusal that applied nothing (throttling, contention), so
 * no change's fate is unknown.
 */
export class PartialBatchError<T> extends Error {
  override readonly name = 'PartialBatchError';
  constructor(
    readonly outcomes: readonly (T | undefined)[],
    readonly errors: readonly unknown[],
  ) {
    super(
      `${errors.length} of ${outcomes.length} changes failed (the others were applied or judged): ${errors[0] instanceof Error ? errors[0].message : String(errors[0])}`,
      { cause: errors[0] },
    );
  }

  get refusedOnly(): boolean {
    return this.errors.every(refused);
  }

  map<U>(f: (t: T) => U): PartialBatchError<U> {
    return new PartialBatchError(
      this.outcomes.map((o) => (o === undefined ? undefined : f(o))),
      this.errors,
    );
  }
}

/**
 * A failure that applied nothing: the store refused it (throttling,
 * contention), whole or, for a batch, in every part it did not answer.
 */
export function refused(err: unknown): boolean {
  return err instanceof StoreContendedError || (err instanceof PartialBatchError && err.refusedOnly);
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
