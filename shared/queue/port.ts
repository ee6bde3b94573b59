/**
 * The work-queue port: SQS in AWS; on one machine and in cluster mode the
 * ledger itself. A message names one item of one run; the ledger, not the
 * queue, is the truth about the item (a message may be delivered twice).
 */
export interface QueueMessage {
  readonly runId: string;
  readonly itemId: string;
  /** Opaque handle for delete / extend / release. */
  readonly receipt: string;
  /** How many times this message has been received (1 on first delivery). */
  readonly receiveCount: number;
  /** Already claimed for the receiving worker (the ledger-backed queue claims as it delivers). */
  readonly claimed?: boolean;
  /** Claimed and started in the same step (asked for with `receive(…, { start: true })`); carries the payload. */
  readonly started?: boolean;
  readonly payload?: unknown;
}

export interface ReceiveOptions {
  /**
   * The worker will execute everything it receives at once: a queue served by
   * the ledger may claim and start in one step (saving a round trip per batch).
   * Other queues ignore it.
   */
  readonly start?: boolean;
}

export interface WorkQueue {
  /**
   * The queue delivers the ledger's Pending rows themselves (the ledger-backed
   * queue): a Pending item always has its "message", sending only wakes
   * workers, and nothing needs recording or re-sending.
   */
  readonly deliversFromLedger?: boolean;
  send(runId: string, itemIds: readonly string[]): Promise<void>;
  /** Long-poll for up to `max` messages, waiting at most `waitSeconds`. */
  receive(max: number, waitSeconds: number, signal?: AbortSignal, options?: ReceiveOptions): Promise<QueueMessage[]>;
  /** Done with it (acked, or it no longer concerns us). */
  delete(message: QueueMessage): Promise<void>;
  deleteMany(messages: readonly QueueMessage[]): Promise<void>;
  /** Still working on it: keep it invisible for another `seconds`. */
  extend(message: QueueMessage, seconds: number): Promise<void>;
  /** Give it back now (nack, drain). */
  release(message: QueueMessage): Promise<void>;
}
