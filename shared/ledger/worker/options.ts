import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import type { WorkQueue } from '../../queue/port.js';
import type { ExecutionBackend } from '../backends.js';
import type { StealNotice } from '../coordinator.js';
import type { LedgerStore, RunRecord } from '../store.js';
import type { RunningReader } from '../running.js';

export interface CoordinatorClient {
  /** An idle worker asks for work; the answer carries the coordinator epoch for the EpochGuard. */
  requestWork(workerId: string): Promise<StealNotice>;
}

/**
 * What a worker asks of the ledger: a store (LedgerStore has it all), or a
 * node's API for a worker without one (client/node-work.ts).
 */
export type WorkerLedger = Pick<LedgerStore, 'isDone' | 'casMany' | 'applyMany' | 'markSent'> &
  RunningReader & {
    /** The run, as far as a worker reads it: its coordinator epoch (null: no such run). */
    getRun(id: string): Promise<Pick<RunRecord, 'id' | 'coordinatorEpoch'> | null>;
  };

export interface WorkerOptions {
  runId: string;
  workerId: string;
  ledger: WorkerLedger;
  queue: WorkQueue;
  backend: ExecutionBackend;
  coordinator?: CoordinatorClient;
  /** Stamps what the worker writes (claimedAt, heartbeatAt). */
  clock?: Clock;
  /** What heartbeat rounds measure intervals on: a monotonic clock (performance.now) unless given. */
  monotonic?: Clock;
  logger?: Logger;
  /**
   * The longest a held item goes without a ledger write (a claim, a start or a
   * heartbeat): the coordinator's failure timeout must be longer. Messages
   * are extended to `visibilitySeconds` once fewer than two of these remain.
   */
  heartbeatMs?: number;
  visibilitySeconds?: number;
  /** Long-poll wait (SQS: up to 20 s). */
  waitSeconds?: number;
  receiveBatch?: number;
  /**
   * How long a chunk of started items may take. Items are started (made
   * unstealable) a chunk at a time, sized from the measured item duration so a
   * chunk lasts about this long: one item at a time when items are slow (a
   * thief can still take the rest), many per round trip when they are fast.
   */
  chunkBudgetMs?: number;
  maxChunk?: number;
  /**
   * Ask the coordinator for work as soon as the first look finds none. By
   * default a worker's first ask waits stealBackoffMs(1) (10–20 s, jittered)
   * from its start, long-polling meanwhile: a fleet started together would
   * otherwise ask in the same second, each ask a Lambda invocation, cold ones
   * reading the run's lease and racing to rebuild its steal hint. Once it has
   * worked, a worker that runs dry asks at once either way.
   */
  askAtStart?: boolean;
}

export interface WorkerStats {
  done: number;
  /** Items whose claim was lost while held or running (stolen, re-pended): someone else records the result. */
  lost: number;
  stolen: number;
  failedAttempts: number;
  /** Items that ran but whose result could not be recorded (too large, not JSON): Failed with the reason. */
  rejected: number;
  staleNotices: number;
  /** Steps that failed on a store or queue error and were retried after a backoff. */
  errors: number;
  /** Steal requests the coordinator did not answer (refused, unreachable): the worker long-polled instead. */
  stealErrors: number;
  /** Rounds the store throttled (in part or whole): each halves the receive batch and pauses (slowDown). */
  throttledRounds: number;
}
