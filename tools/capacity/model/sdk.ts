/** The AWS SDK clients the simulated processes send through: the SDK's standard retry mode and a client's retry quota. */

/**
 * The AWS SDK v3's standard retry mode as this project's lockfile resolves it
 * (@smithy/core util-retry, `Retry.v2026`; DynamoDBClient's defaults): 4
 * attempts, a throttling error waits U(0, min(20 s, 1 s × 2^retry)), each
 * retry takes 5 tokens of a 500-token quota per client, a success gives back
 * 1 (or the retry's 5). Read from node_modules on 2026-11-24.
 */
export const SDK_RETRY = { maxAttempts: 4, throttlingBaseMs: 1_000, capMs: 20_000, quota: 500, retryCost: 5, successRefund: 1 } as const;

/** A client (one per worker, or one shared): its retry quota is its own. */
export interface Client {
  /** Tokens left in the SDK's retry quota. */
  quota: number;
}
