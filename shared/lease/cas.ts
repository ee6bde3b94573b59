import { sameRow, type LeaseRecord } from './record.js';
import type { CasOutcome, LeaseStore } from './store.js';

/** The store could not be reached to settle a lease write; its outcome is unknown. */
export class LeaseUnavailableError extends Error {
  override readonly name = 'LeaseUnavailableError';
  constructor(
    readonly leaseName: string,
    options: { cause: unknown },
  ) {
    super(`lease ${leaseName}: store unreachable, outcome unknown`, options);
  }
}

/**
 * compareAndSwap with ambiguous outcomes settled by re-reading the row, never
 * by assuming failure. A timeout or lost reply after the write committed would
 * otherwise leave a holder that does not know it holds the lease (and, worse,
 * one that thinks a steal failed when the epoch did advance).
 *
 * A failed condition whose current row *is* our write (a client-side retry of
 * a request that had already committed) is also a success.
 */
export async function casSettled(store: LeaseStore, expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
  let outcome: CasOutcome;
  try {
    outcome = await store.compareAndSwap(expected, next);
  } catch (writeError) {
    let current: LeaseRecord | null;
    try {
      current = await store.read(next.name);
    } catch {
      throw new LeaseUnavailableError(next.name, { cause: writeError });
    }
    return sameRow(current, next) ? { ok: true, record: next } : { ok: false, current };
  }
  if (!outcome.ok && sameRow(outcome.current, next)) return { ok: true, record: next };
  return outcome;
}
