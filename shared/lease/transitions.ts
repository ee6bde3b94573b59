import type { HolderMeta, LeaseRecord } from './record.js';

/**
 * The four lease transitions, pure. Each returns the row to compare-and-swap
 * in; the store applies it only if the row is still exactly the prior one.
 *
 *   absent ──acquire──▶ held(e=0) ──renew──▶ held(e) ──resign──▶ released(e)
 *                          │                    │                    │
 *                          └──── expired ───────┴─────steal──────────┘──▶ held(e+1)
 */

export function acquire(name: string, holder: string, now: number, ttlMs: number, meta: HolderMeta = {}): LeaseRecord {
  return {
    name,
    holder,
    epoch: 0,
    version: 0,
    acquiredAt: now,
    renewedAt: now,
    expiresAt: now + ttlMs,
    hostname: meta.hostname ?? null,
    apiUrl: meta.apiUrl ?? null,
  };
}

/** Take an expired or released row: the epoch advances, which fences the previous holder. */
export function steal(prior: LeaseRecord, holder: string, now: number, ttlMs: number, meta: HolderMeta = {}): LeaseRecord {
  return {
    ...prior,
    holder,
    epoch: prior.epoch + 1,
    version: prior.version + 1,
    acquiredAt: now,
    renewedAt: now,
    expiresAt: now + ttlMs,
    hostname: meta.hostname ?? null,
    apiUrl: meta.apiUrl ?? null,
  };
}

/** The holder moves its own row forward; the epoch stays. */
export function renew(prior: LeaseRecord, now: number, ttlMs: number): LeaseRecord {
  return { ...prior, version: prior.version + 1, renewedAt: now, expiresAt: now + ttlMs };
}

/** Release without deleting: holder cleared, expiry in the past, epoch kept. */
export function release(prior: LeaseRecord, now: number): LeaseRecord {
  return { ...prior, holder: null, version: prior.version + 1, renewedAt: now, expiresAt: Math.min(prior.expiresAt, now - 1) };
}

/**
 * Whether a contender may steal. A held row counts as expired only once the
 * contender's clock passes expiry plus the skew margin; the holder itself stops
 * acting at expiry minus the margin, so with clocks within the margin the two
 * never overlap. (Safety does not rest on this: fencing does.)
 */
export function stealable(row: LeaseRecord, now: number, clockSkewMs: number): boolean {
  return row.holder === null || now >= row.expiresAt + clockSkewMs;
}

/** Whether `holder` may act on this row by its own clock. */
export function validFor(row: LeaseRecord | null, holder: string, now: number, clockSkewMs: number): boolean {
  return row !== null && row.holder === holder && now < row.expiresAt - clockSkewMs;
}
