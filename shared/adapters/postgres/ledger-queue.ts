import { randomBytes } from 'node:crypto';
import { systemClock, type Clock } from '../../clock.js';
import { toInt, type Sql } from './sql.js';
import type { QueueMessage, ReceiveOptions, WorkQueue } from '../../queue/port.js';
import { MAX_ATTEMPTS } from '../../ledger/model.js';
import { CLAIM_NEXT } from './ledger-statements.js';
import type { WakeSource } from './wake.js';

/**
 * The work queue served by the ledger itself (PostgreSQL / PGlite): one
 * machine and cluster mode need no SQS. A Pending row *is* the message, so
 * the queue rule ("a Pending item always has a message") holds by
 * construction. `receive` is the `claim` statement (ledger-statements.ts:
 * Pending → Running(worker), heartbeat now, stamped with the run's epoch) for
 * the next Pending items, `FOR UPDATE SKIP LOCKED` so concurrent workers never
 * wait on each other's rows; when nothing is Pending it sleeps until a
 * wake-up (LISTEN/NOTIFY or in-process), not in a polling loop.
 *
 * Poison items: an item given back `maxReceiveCount` times is no longer
 * delivered; `LedgerDeadLetters` hands it to the coordinator's
 * `failDeadLetters`, as the SQS DLQ does.
 */
export interface LedgerQueueOptions {
  /** MAX_ATTEMPTS unless a test asks for fewer; what LedgerDeadLetters is given must be the same. */
  maxReceiveCount?: number;
  clock?: Clock;
}

/** On the ledger a row is the message: deleting or extending one has nothing to do (the ledger state and heartbeat say it all). */
abstract class LedgerRows {
  delete(): Promise<void> {
    return Promise.resolve();
  }

  deleteMany(): Promise<void> {
    return Promise.resolve();
  }

  extend(): Promise<void> {
    return Promise.resolve();
  }
}

export class LedgerWorkQueue extends LedgerRows implements WorkQueue {
  readonly deliversFromLedger = true;
  private readonly maxReceiveCount: number;
  private readonly clock: Clock;
  /** Where this worker's next claim starts in the Pending index (a random point at first). */
  private cursor = randomBytes(32).toString('hex');

  constructor(
    private readonly sql: Sql,
    private readonly wake: WakeSource,
    private readonly runId: string,
    /** Who claims what `receive` delivers; a queue without one (the coordinator's) only sends. */
    private readonly workerId: string | null,
    private readonly options: LedgerQueueOptions = {},
  ) {
    super();
    this.maxReceiveCount = options.maxReceiveCount ?? MAX_ATTEMPTS;
    this.clock = options.clock ?? systemClock;
  }

  /** The same queue, receiving for one worker. */
  forWorker(workerId: string): LedgerWorkQueue {
    return new LedgerWorkQueue(this.sql, this.wake, this.runId, workerId, this.options);
  }

  /** The items are already Pending in the ledger: only wake whoever waits. */
  async send(runId: string): Promise<void> {
    await this.wake.notify(runId);
  }

  async receive(max: number, waitSeconds: number, signal?: AbortSignal, options: ReceiveOptions = {}): Promise<QueueMessage[]> {
    const until = performance.now() + Math.max(0, waitSeconds) * 1000;
    for (;;) {
      const armed = this.wake.arm(this.runId);
      const got = await this.claimBatch(max, options.start === true);
      const left = until - performance.now();
      if (got.length || left <= 0 || signal?.aborted) {
        armed.cancel();
        return got;
      }
      await armed.wait(left, signal);
    }
  }

  /**
   * `claim` for a batch; with `start`, `claim` then `start` in the same
   * statement (the items are executed at once). Each worker walks the
   * Pending index from its own cursor: item ids are content hashes, so
   * uniformly spread, and workers starting at random points claim from
   * different parts of the key space instead of all fighting over (and
   * skipping past) the same first rows. At the end it wraps around.
   */
  private async claimBatch(max: number, start: boolean): Promise<QueueMessage[]> {
    if (this.workerId === null) throw new Error('this ledger queue has no worker id: use forWorker(id) to receive');
    const want = Math.max(1, max);
    const got = await this.claimAfter(this.cursor, want, start);
    if (got.length < want && this.cursor !== '') got.push(...(await this.claimAfter('', want - got.length, start)));
    this.cursor = got.at(-1)?.itemId ?? '';
    return got;
  }

  private async claimAfter(after: string, max: number, start: boolean): Promise<QueueMessage[]> {
    const now = new Date(this.clock.now());
    const { rows } = await this.sql.query<{ id: string; attempts: unknown; payload: unknown }>(
      `${CLAIM_NEXT}\n  RETURNING w.id, w.attempts${start ? ', w.payload' : ''}`,
      [this.runId, now, this.workerId, now, now, start, max, this.maxReceiveCount, after],
    );
    rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return rows.map((r) => ({
      runId: this.runId,
      itemId: r.id,
      receipt: r.id,
      receiveCount: toInt(r.attempts) + 1,
      claimed: true,
      ...(start ? { started: true, payload: r.payload } : {}),
    }));
  }

  /** Nacked back to Pending in the ledger already: wake a waiting worker. */
  async release(): Promise<void> {
    await this.wake.notify(this.runId);
  }
}

/**
 * The ledger-backed queue as a writer of items sees it (the API creating a
 * run): the rows it wrote are the messages, so sending only wakes the
 * workers, after the writer's commit when it runs in a transaction (a
 * wake-up sent before would find nothing to claim). It receives nothing.
 */
export class LedgerSender extends LedgerRows implements WorkQueue {
  readonly deliversFromLedger = true;

  constructor(
    private readonly wake: Pick<WakeSource, 'notify'>,
    private readonly afterCommit?: (fn: () => Promise<void>) => void,
  ) {
    super();
  }

  async send(runId: string): Promise<void> {
    if (this.afterCommit) this.afterCommit(() => this.wake.notify(runId));
    else await this.wake.notify(runId);
  }

  receive(): Promise<QueueMessage[]> {
    return Promise.resolve([]);
  }

  release(): Promise<void> {
    return Promise.resolve();
  }
}

/** Pending items given back `maxReceiveCount` times or more: the dead letters of the ledger-backed queue. */
export class LedgerDeadLetters extends LedgerRows implements WorkQueue {
  constructor(
    private readonly sql: Sql,
    private readonly runId: string,
    private readonly maxReceiveCount = MAX_ATTEMPTS,
  ) {
    super();
  }

  async receive(max: number): Promise<QueueMessage[]> {
    const { rows } = await this.sql.query<{ id: string; attempts: unknown }>(
      `SELECT id, attempts FROM work_items WHERE run_id = $1 AND state = 'pending' AND attempts >= $2 ORDER BY id LIMIT $3`,
      [this.runId, this.maxReceiveCount, Math.max(1, max)],
    );
    return rows.map((r) => ({ runId: this.runId, itemId: r.id, receipt: r.id, receiveCount: toInt(r.attempts) }));
  }

  send(): Promise<void> {
    return Promise.reject(new Error('the ledger dead letters are read-only: items get there by being given back maxReceiveCount times'));
  }

  release(): Promise<void> {
    return Promise.resolve();
  }
}
