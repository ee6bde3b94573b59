import { TransactionCanceledException, TransactionConflictException } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, type DynamoDBDocumentClient, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreContendedError } from '../../errors.js';
import { countThrottle, isThrottled } from './throttles.js';

/**
 * Writes DynamoDB refused without judging them, sent again.
 *
 * A cancelled TransactWriteItems carries one reason per item.
 * `ConditionalCheckFailed` is a verdict on the state. `TransactionConflict`
 * is not: another transaction (or a write) was on one of the items at that
 * moment — and every fenced write condition-checks its lease item, so
 * concurrent ones run into each other all the time. Throttling reasons are of
 * the same kind. A PutItem, UpdateItem or DeleteItem on an item of an ongoing
 * transaction fails with TransactionConflictException, also unjudged.
 *
 * Guarantees
 * - Writes of one client on one lease item (fenced transactions, lease
 *   compare-and-swaps) go one at a time, in order (`inTurn`): DynamoDB runs
 *   one transaction on an item at a time and cancels the others, so a
 *   process's own writes would otherwise cancel each other all the time,
 *   paying for every cancelled attempt, and starve its own lease renewal.
 * - A refusal applied nothing, so sending the write again is never a second
 *   application: it is retried after a full-jitter exponential backoff, at
 *   most CONFLICT_RETRY.maxAttempts attempts in all. What is left to retry
 *   are conflicts with other processes (another node, other Lambda sandboxes).
 * - A failed condition is never retried here: it reaches the caller as the
 *   cancellation (or ConditionalCheckFailedException) DynamoDB sent.
 * - Conflicts and retries are counted in `conflictStats` (process-wide).
 *
 * Non-guarantees
 * - A conflict that outlasts every attempt is thrown as WriteContendedError:
 *   nothing was written, the state is unknown to us, try again later. It is
 *   never reported as a failed condition.
 */

export const CONFLICT_RETRY = {
  maxAttempts: 10,
  /** The first backoff is up to this long; each later one doubles it… */
  baseDelayMs: 10,
  /** …up to this (so every attempt together waits at most about 2 s). */
  maxDelayMs: 400,
} as const;

/** Cancellation reasons that say "not now", not "no". */
const UNJUDGED = new Set(['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded']);

/** Process-wide counters (the promotion bench and the Lambda metrics read them). */
export const conflictStats = {
  /** Writes refused for a conflict (each attempt counts). */
  conflicts: 0,
  /** Attempts sent again after an unjudged refusal. */
  retries: 0,
  /** Writes given up after maxAttempts (thrown as WriteContendedError). */
  exhausted: 0,
};

/** The counters' growth from now on: call the result at the end of an invocation. */
export function conflictsSince(): () => { conflicts: number; retries: number; exhausted: number } {
  const before = { ...conflictStats };
  return () => ({
    conflicts: conflictStats.conflicts - before.conflicts,
    retries: conflictStats.retries - before.retries,
    exhausted: conflictStats.exhausted - before.exhausted,
  });
}

/** The counters as Lambda metrics (name, value), nonzero ones only. */
export function conflictMetrics(delta: ReturnType<ReturnType<typeof conflictsSince>>): [name: string, value: number][] {
  const named: [string, number][] = [
    ['TransactionConflicts', delta.conflicts],
    ['TransactionRetries', delta.retries],
    ['TransactionRetriesExhausted', delta.exhausted],
  ];
  return named.filter(([, v]) => v > 0);
}

export class WriteContendedError extends StoreContendedError {
  override readonly name = 'WriteContendedError';
  constructor(attempts: number, options: { cause: unknown }) {
    super(`DynamoDB refused the write ${attempts} times for conflicts with concurrent writes on its items; nothing was written, try again`, options);
  }
}

const turns = new WeakMap<object, Map<string, Promise<void>>>();

/**
 * Runs `write` once the client's earlier writes on `item` have finished
 * (first come, first served). `item` names one DynamoDB item, e.g. the table
 * and lease name. One queue per client: a process normally has one client.
 */
export async function inTurn<T>(client: object, item: string, write: () => Promise<T>): Promise<T> {
  let queue = turns.get(client);
  if (!queue) turns.set(client, (queue = new Map<string, Promise<void>>()));
  const previous = queue.get(item);
  let done!: () => void;
  const mine = new Promise<void>((resolve) => (done = resolve));
  queue.set(item, mine);
  try {
    await previous;
    return await write();
  } finally {
    done();
    if (queue.get(item) === mine) queue.delete(item);
  }
}

/** A refusal that applied nothing and judged nothing: worth sending again. */
export function isUnjudged(err: unknown): boolean {
  if (err instanceof TransactionConflictException) return true;
  if (!(err instanceof TransactionCanceledException)) return false;
  const codes = (err.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
  return codes.some((c) => UNJUDGED.has(c)) && codes.every((c) => c === 'None' || UNJUDGED.has(c));
}

function isConflict(err: unknown): boolean {
  return (
    err instanceof TransactionConflictException ||
    (err instanceof TransactionCanceledException && (err.CancellationReasons ?? []).some((r) => r.Code === 'TransactionConflict'))
  );
}

/** `write(attempt)` until it is not refused unjudged, within the bounds of CONFLICT_RETRY. */
export async function retryingConflicts<T>(write: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write(attempt);
    } catch (err) {
      if (!isUnjudged(err)) throw err;
      if (isConflict(err)) conflictStats.conflicts++;
      else if (isThrottled(err)) countThrottle('transaction');
      if (attempt + 1 >= CONFLICT_RETRY.maxAttempts) {
        conflictStats.exhausted++;
        throw new WriteContendedError(attempt + 1, { cause: err });
      }
      conflictStats.retries++;
      // Full jitter: writers that collided once spread out instead of colliding again in step.
      await sleep(Math.random() * Math.min(CONFLICT_RETRY.maxDelayMs, CONFLICT_RETRY.baseDelayMs * 2 ** attempt));
    }
  }
}

/**
 * TransactWriteItems, sent again while DynamoDB cancels it unjudged.
 *
 * Each attempt carries its own ClientRequestToken. Within one attempt the
 * SDK's own retries (a lost reply, a 5xx) reuse it, so a retry after an unseen
 * commit is answered as that commit instead of applied twice. A cancelled
 * attempt, though, is known to have applied nothing: a new token cannot
 * duplicate it, while DynamoDB does not promise that reusing the token of a
 * completed (cancelled) request within its 10 minutes is evaluated afresh
 * rather than answered with that cancellation again.
 */
export function transactWrite(
  doc: DynamoDBDocumentClient,
  input: Omit<TransactWriteCommandInput, 'ClientRequestToken'>,
  firstToken: string = randomUUID(),
): Promise<void> {
  return retryingConflicts(async (attempt) => {
    await doc.send(new TransactWriteCommand({ ...input, ClientRequestToken: attempt === 0 ? firstToken : randomUUID() }));
  });
}
