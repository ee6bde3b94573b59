import type { LeaseRecord } from './record.js';

export type CasOutcome = { readonly ok: true; readonly record: LeaseRecord } | { readonly ok: false; readonly current: LeaseRecord | null };

/**
 * The lease half of the store port. Every backend implements the same two
 * operations; the transitions and the elector are written once on top.
 */
export interface LeaseStore {
  /** Strongly consistent read of the row (null: no row yet). */
  read(name: string): Promise<LeaseRecord | null>;
  /**
   * Write `next` only if the row is still exactly `expected` (compared by
   * version; `null` means the row must not exist). On a lost condition the
   * outcome carries the current row. Throws only on transport or server
   * errors, after which the write may or may not have been applied.
   */
  compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome>;
}
