import { z } from 'zod';

/**
 * Lease timings, validated up front (client-go style). Defaults are the usual
 * controller ones: TTL 30 s, renew every 10 s, retry every 5 s, IsLeader cached 1 s.
 *
 * Invariants: ttl > renewInterval > 1.2 × retryInterval, and the skew margin
 * leaves room to act: clockSkew < ttl − renewInterval (a freshly renewed lease
 * must still be usable when the next renewal is due).
 */
export const leaseTimingsSchema = z
  .object({
    ttlMs: z.number().int().positive().default(30_000),
    renewIntervalMs: z.number().int().positive().default(10_000),
    retryIntervalMs: z.number().int().positive().default(5_000),
    clockSkewMs: z.number().int().nonnegative().default(1_000),
    isLeaderCacheMs: z.number().int().nonnegative().default(1_000),
  })
  .strict()
  .superRefine((t, ctx) => {
    if (t.renewIntervalMs >= t.ttlMs) {
      ctx.addIssue({ code: 'custom', path: ['renewIntervalMs'], message: `must be less than ttlMs (${t.ttlMs}), got ${t.renewIntervalMs}` });
    }
    if (t.renewIntervalMs <= 1.2 * t.retryIntervalMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['retryIntervalMs'],
        message: `renewIntervalMs (${t.renewIntervalMs}) must exceed 1.2 × retryIntervalMs (${t.retryIntervalMs})`,
      });
    }
    if (t.clockSkewMs >= t.ttlMs - t.renewIntervalMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['clockSkewMs'],
        message: `must be less than ttlMs − renewIntervalMs (${t.ttlMs - t.renewIntervalMs}), got ${t.clockSkewMs}`,
      });
    }
  });

export type LeaseTimingsInput = z.input<typeof leaseTimingsSchema>;

/**
 * The timings of every lease a runtime holds (promotion_leader, each run's
 * coordinator lease), from the three it is configured with: the retry is
 * kept under renew / 1.25, as the rule above needs, whatever elector set
 * the configured one; the skew margin is a tenth of the TTL, at most 1 s.
 * The one place a runtime's configuration becomes lease timings.
 */
export function runtimeLeaseTimings(c: {
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly retryIntervalMs: number;
}): Pick<LeaseTimings, 'ttlMs' | 'renewIntervalMs' | 'retryIntervalMs' | 'clockSkewMs'> {
  return {
    ttlMs: c.ttlMs,
    renewIntervalMs: c.renewIntervalMs,
    retryIntervalMs: Math.floor(Math.min(c.retryIntervalMs, c.renewIntervalMs / 1.25)),
    clockSkewMs: Math.floor(Math.min(1_000, c.ttlMs / 10)),
  };
}
export type LeaseTimings = z.output<typeof leaseTimingsSchema>;

export const holderIdSchema = z.string().trim().min(1, 'must not be empty').max(255);
export const leaseNameSchema = z.string().trim().min(1, 'must not be empty').max(255);
