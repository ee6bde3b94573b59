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
export type LeaseTimings = z.output<typeof leaseTimingsSchema>;

export const holderIdSchema = z.string().trim().min(1, 'must not be empty').max(255);
export const leaseNameSchema = z.string().trim().min(1, 'must not be empty').max(255);
