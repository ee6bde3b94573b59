import { systemClock, type Clock } from '../../clock.js';
import { silentLogger, type Logger } from '../../log.js';
import type { QueueMessage, WorkQueue } from '../../queue/port.js';
import { MAX_ATTEMPTS, type WorkItem } from '../model.js';
import type { WorkerOptions, WorkerStats } from './options.js';

/** An item this worker claimed, with the message that brought it (none when stolen or adopted). */
export interface Held {
  readonly itemId: string;
  readonly message: QueueMessage | null;
  /** Started already (by the queue as it claimed, or before a store error interrupted its chunk): run it, no start CAS. */
  readonly started?: { readonly payload: unknown };
}

/**
 * Tried MAX_ATTEMPTS times by the ledger's count. On SQS a receive count is a
 * message's, and an item can have had several messages (a re-pend sends a new
 * one while the old copy is still in flight): such an item is not run again
 * and no message goes out for it; the coordinator's scan fails it, as it does
 * an item whose dead letter it reads. The ledger queue claims none (its claim
 * reads attempts).
 */
export const spent = (queue: Pick<WorkQueue, 'deliversFromLedger'>, item: Pick<WorkItem, 'attempts'>): boolean =>
  !queue.deliversFromLedger && item.attempts >= MAX_ATTEMPTS;

/** What became of an executed item, until the ledger has it. */
export type Outcome =
  { readonly h: Held; readonly kind: 'result'; readonly result: unknown } | { readonly h: Held; readonly kind: 'failure'; readonly reason: string };

/** The chunk being executed: a drain aborts its current item and waits for what it gave back. */
export interface RunningChunk {
  readonly abort: (reason: Error) => void;
  readonly done: Promise<string[]>;
  itemId: string | null;
}

/**
 * Everything the worker holds, stage by stage — claimed and waiting (the
 * backlog), started and running (executing), executed but not yet recorded
 * (outcomes) — shared by the parts that move items along: claims fill the
 * backlog, chunks run it, flushes record it, heartbeats write all of it.
 */
export class Holdings {
  /** Claimed and not yet started, in order. */
  readonly backlog: Held[] = [];
  /** Started items of the chunk being run that have no outcome yet. */
  readonly executing = new Map<string, Held>();
  /** Executed items whose outcome is not in the ledger yet (recorded in batches; kept across a store error). */
  readonly outcomes: Outcome[] = [];
  /** Items found lost by a heartbeat while executing: skipped, or aborted if running now. */
  readonly lostIds = new Set<string>();
  current: RunningChunk | null = null;

  /** Ids of the items claimed and not yet started, in order. */
  waiting(): string[] {
    return this.backlog.map((h) => h.itemId);
  }
}

/** What every part of a worker reads: its options with their defaults, its clocks, its counters and its holdings. */
export class WorkerContext {
  readonly clock: Clock;
  readonly monotonic: Clock;
  readonly logger: Logger;
  readonly heartbeatMs: number;
  readonly visibilitySeconds: number;
  readonly stats: WorkerStats = { done: 0, lost: 0, stolen: 0, failedAttempts: 0, rejected: 0, staleNotices: 0, errors: 0, stealErrors: 0, throttledRounds: 0 };
  readonly held = new Holdings();
  /** Draining: no more pulls or runs; what is held is given back. */
  stopping = false;

  constructor(readonly o: WorkerOptions) {
    if (!o.workerId.trim()) throw new Error('invalid worker config: workerId: must not be empty');
    this.clock = o.clock ?? systemClock;
    this.monotonic = o.monotonic ?? { now: () => performance.now() };
    this.logger = o.logger ?? silentLogger;
    this.heartbeatMs = o.heartbeatMs ?? 5_000;
    this.visibilitySeconds = o.visibilitySeconds ?? 30;
  }

  get id(): string {
    return this.o.workerId;
  }
}

export async function deleteAll(queue: WorkQueue, messages: readonly QueueMessage[]): Promise<void> {
  if (messages.length) await queue.deleteMany(messages);
}
