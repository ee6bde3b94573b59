import { ProvisionedThroughputExceededException, RequestLimitExceeded, ThrottlingException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreContendedError } from '../../errors.js';

/**
 * Throttling, as back-pressure a user can see.
 *
 * DynamoDB refuses a request when a partition key (or an index key it would
 * write) is past its share of the partition's units: `ThrottlingException`
 * on an on-demand table, `ProvisionedThroughputExceededException` on a
 * provisioned one, a `ThrottlingError` reason in a cancelled transaction.
 * Nothing was applied, so the request may be sent again. The SDK retries a
 * few times and then gives up (its retry budget is shared by the client);
 * `retryingThrottles` goes on with a jittered backoff of its own, so a hot
 * key slows the writers down instead of failing them, and every refusal is
 * counted by key family (`throttleStats`) for the run's record and the
 * stack's metric. A write still refused after THROTTLE_RETRY is a
 * StoreThrottledError: a 503 with Retry-After from the API, a failed step a
 * worker retries after its own backoff.
 */

export const THROTTLE_RETRY = {
  maxAttempts: 8,
  /** The first backoff is up to this long; each later one doubles it… */
  baseDelayMs: 50,
  /** …up to this: DynamoDB meters by the second, so waiting longer than a couple of seconds helps no more. */
  maxDelayMs: 2_000,
} as const;

export class StoreThrottledError extends StoreContendedError {
  override readonly name = 'StoreThrottledError';
  constructor(
    readonly family: string,
    attempts: number,
    options: { cause: unknown },
  ) {
    super(`DynamoDB throttled ${family} ${attempts} times (a hot key: more writes than its partition takes); nothing was written, try again later`, options);
  }
}

const THROTTLE_REASONS = new Set(['ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded']);

export function isThrottled(err: unknown): boolean {
  if (err instanceof ThrottlingException || err instanceof ProvisionedThroughputExceededException || err instanceof RequestLimitExceeded) return true;
  const name = (err as { name?: string }).name;
  if (name === 'ThrottlingException' || name === 'ProvisionedThroughputExceededException') return true;
  return err instanceof TransactionCanceledException && (err.CancellationReasons ?? []).some((r) => THROTTLE_REASONS.has(r.Code ?? ''));
}

/** Whether DynamoDB named an index as what was over its capacity (a write that would have written a hot index key). */
function onIndex(err: unknown): boolean {
  const e = err as { message?: string; ThrottlingReasons?: { reason?: string }[]; throttlingReasons?: { reason?: string }[] };
  const reasons = [...(e.ThrottlingReasons ?? []), ...(e.throttlingReasons ?? [])].map((r) => r.reason ?? '');
  return reasons.some((r) => r.startsWith('Index')) || /secondary ind/i.test(e.message ?? '');
}

/** A key with its ids taken out: `RUN#nightly#7` → `RUN#*#*`, `PENDING#nightly#7` → `PENDING#*#*`. */
export function keyFamily(key: string): string {
  const [head, ...rest] = key.split('#');
  return [head, ...rest.map(() => '*')].join('#');
}

/** Refusals counted by key family since the process started (what the run's record and the metric report). */
export const throttleStats = { throttled: 0, exhausted: 0, byFamily: new Map<string, number>() };

export function countThrottle(family: string): void {
  throttleStats.throttled++;
  throttleStats.byFamily.set(family, (throttleStats.byFamily.get(family) ?? 0) + 1);
}

/** The counts' growth from now on. */
export function throttlesSince(): () => { throttled: number; byFamily: Map<string, number> } {
  const start = { throttled: throttleStats.throttled, byFamily: new Map(throttleStats.byFamily) };
  return () => ({
    throttled: throttleStats.throttled - start.throttled,
    byFamily: new Map([...throttleStats.byFamily].map(([f, n]) => [f, n - (start.byFamily.get(f) ?? 0)] as [string, number]).filter(([, n]) => n > 0)),
  });
}

/**
 * `request()` until DynamoDB stops refusing it for throttling, at most
 * THROTTLE_RETRY.maxAttempts times with full-jitter backoff; each refusal
 * counted under the family of `key` (its index's when DynamoDB named one)
 * and reported to `onThrottle`.
 */
export async function retryingThrottles<T>(key: string, request: () => Promise<T>, onThrottle?: (family: string) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await request();
    } catch (err) {
      if (!isThrottled(err)) throw err;
      const family = onIndex(err) ? `gsi1 (${keyFamily(key)} writes)` : keyFamily(key);
      countThrottle(family);
      onThrottle?.(family);
      if (attempt + 1 >= THROTTLE_RETRY.maxAttempts) {
        throttleStats.exhausted++;
        throw new StoreThrottledError(family, attempt + 1, { cause: err });
      }
      await sleep(Math.random() * Math.min(THROTTLE_RETRY.maxDelayMs, THROTTLE_RETRY.baseDelayMs * 2 ** attempt));
    }
  }
}
