/**
 * A lease row. The row is never deleted: releasing it clears the holder and
 * keeps the epoch, so the next acquisition is epoch + 1 and an old holder's
 * fenced write can never match again.
 */
export interface LeaseRecord {
  readonly name: string;
  /** null once released. */
  readonly holder: string | null;
  /** Monotonic per leadership: +1 on every change of holder, never reset. */
  readonly epoch: number;
  /** +1 on every write. Equal versions mean the exact same row, which is what a CAS compares. */
  readonly version: number;
  /** Milliseconds since the Unix epoch, on the writer's clock. */
  readonly acquiredAt: number;
  readonly renewedAt: number;
  readonly expiresAt: number;
  readonly hostname: string | null;
  readonly apiUrl: string | null;
}

/** What every write made under a lease carries, and what the store checks it against. */
export interface LeaseToken {
  readonly name: string;
  readonly holder: string;
  readonly epoch: number;
}

export interface HolderMeta {
  readonly hostname?: string | null;
  readonly apiUrl?: string | null;
}

export function tokenOf(record: LeaseRecord): LeaseToken {
  if (record.holder === null) throw new Error(`lease ${record.name} is released and has no token`);
  return { name: record.name, holder: record.holder, epoch: record.epoch };
}

/** Same row: what a lost reply is resolved against. */
export function sameRow(a: LeaseRecord | null, b: LeaseRecord | null): boolean {
  if (a === null || b === null) return a === b;
  return a.name === b.name && a.version === b.version && a.holder === b.holder && a.epoch === b.epoch;
}

/**
 * Whether a reply showing `row` must not replace `held`, the row already
 * applied from an earlier-answered request. Replies can arrive out of order
 * (a leadership check reads outside the campaign's turn), so:
 *
 *   request A issued ─┐         ┌─ A's reply: no row (served before B wrote)
 *   request B (our acquire) ──▶ committed, applied
 *                     └─────────┘  applying A now would undo B
 *
 * - a row with a lower version than `held`: an earlier state of the row
 *   (every write is a CAS that adds one to the version);
 * - no row, when we hold one, from a request issued before the one `held`
 *   came from (`issuedBefore`): rows are never deleted, so absence only
 *   predates what we saw. (From a request issued later it is news: the row
 *   was deleted by hand.)
 * Equal versions are the same row; a higher version is newer, whatever the
 * order the requests were issued in.
 */
export function staleReply(held: LeaseRecord | null, row: LeaseRecord | null, issuedBefore: boolean): boolean {
  if (held === null) return false;
  if (row === null) return issuedBefore;
  return row.name === held.name && row.version < held.version;
}
