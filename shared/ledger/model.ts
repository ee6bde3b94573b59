import { createHash } from 'node:crypto';
import { canonicalJson } from '../canonical-json.js';

export { canonicalJson };

/**
 * Work items of a run. The id is the content hash of the item's canonical
 * payload, so enqueueing the same work twice is a no-op and a retried
 * submission lands on the same row.
 *
 * Guarantee: every item ends Done exactly once (one recorded result) or
 * Failed with a reason. Non-guarantee: an item may *execute* more than once
 * (a victim and a thief, a crash and a retry); only one result is recorded.
 */

export type ItemState = 'pending' | 'running' | 'done' | 'failed';

export interface WorkItem {
  readonly runId: string;
  readonly id: string;
  readonly payload: unknown;
  readonly state: ItemState;
  /** Running: who holds it. Done: who produced the result. */
  readonly worker: string | null;
  /** Running: the coordinator epoch current when it was claimed or stolen. */
  readonly epoch: number | null;
  readonly claimedAt: number | null;
  /** Running: the worker has begun executing it; a started item is never stolen. */
  readonly started: boolean;
  /** Running: refreshed by the executing worker; the failure scan ages by this, never by claimedAt. */
  readonly heartbeatAt: number | null;
  readonly resultHash: string | null;
  readonly result: unknown;
  readonly error: string | null;
  /**
   * Pending: when a message for it was last sent (or, after a nack that releases
   * the worker's message, known to exist); null = none sent since it became
   * Pending. The coordinator's scan re-sends those, so a crash between storing
   * a change and sending its message never strands an item.
   */
  readonly sentAt: number | null;
  /**
   * Runs that ended without a result through the item's own doing: a backend
   * failure, or a started item whose worker went silent. What we cause — a
   * drain, a re-pend of an unstarted item, a steal — is not counted. At
   * `maxAttempts` the item is poison and ends Failed with the reason.
   */
  readonly attempts: number;
  /** +1 on every transition. */
  readonly version: number;
}

export function contentId(payload: unknown): string {
  return hashText(canonicalJson(payload));
}

/** sha256 of an already canonical JSON text. */
export function hashText(canonical: string): string {
  return createHash('sha256').update(canonical).digest('hex');
}

export function resultHash(result: unknown): string {
  return contentId(result);
}

/**
 * The largest result recorded, as canonical JSON: a DynamoDB item (payload,
 * result and bookkeeping together) must stay under 400 KB. A larger result
 * fails its item with the reason, on every backend alike; store it elsewhere
 * (S3) and return a reference.
 */
export const MAX_RESULT_BYTES = 256 * 1024;

/**
 * How many times an item is tried before it is failed for good (poison): the
 * one figure every part reads — the ledger queue's claim and its dead letters,
 * each coordinator, and the SQS work queue's maxReceiveCount the stack sets.
 * A worker cannot choose its own: one that stopped claiming sooner than the
 * coordinator fails would leave items Pending that nobody takes.
 */
export const MAX_ATTEMPTS = 5;
