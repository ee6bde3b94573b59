/**
 * Steal hints: what a thief reads instead of the running set.
 *
 * Finding a victim means knowing every worker's unstarted backlog, which on
 * DynamoDB is every RUNNING key's entries plus the candidates' items. An idle
 * fleet asking for work would read that set thousands of times a second, and
 * with every set empty still query every key. So where the store keeps a hint
 * (`LedgerStore.stealHints`), the coordinator reads one small item instead:
 *
 * - The hint lists up to STEAL_HINT_VICTIMS workers with the largest
 *   unstarted backlogs, each with the items a steal from it would take (the
 *   back half of its line, at most MAX_STEAL_BATCH), as of `builtAt`.
 * - It is rebuilt from the running set at most once per STEAL_HINT_FRESH_MS
 *   per run, by the one asker that wins the rebuild claim; the others answer
 *   from the hint they read. So the running set is read at most once every
 *   two seconds whatever the fleet's size, and an empty run costs an ask one
 *   small read.
 * - A thief takes a victim's entry out of the hint in one conditional update
 *   (`take`), so two thieves never race for the same items; what it took is
 *   then moved by the usual fenced CAS from Running(victim, unstarted), which
 *   refuses an item the victim started (or finished) since the hint was built.
 *
 * A hint is advice, never authority: a stale or lost one costs a fruitless
 * ask, never an item. Fruitful steals per run are bounded by the hint's
 * victims per rebuild (a few a second): plenty for long items, where steals
 * matter, and nothing lost for short ones, whose backlogs drain on their own.
 */

/** A hint younger than this is answered from; an older one is rebuilt by one asker. */
export const STEAL_HINT_FRESH_MS = 2_000;
/** Victims a hint lists at most (each entry up to MAX_STEAL_BATCH ids: a hint stays a few KB). */
export const STEAL_HINT_VICTIMS = 4;
/** How long a rebuild claim holds off other rebuilders (the claimant died, or its reads are throttled). */
export const STEAL_HINT_REBUILD_MS = 10_000;

export interface StealHint {
  /** When it was built, on the builder's clock; 0 for none yet. */
  readonly builtAt: number;
  /** Victim → the ids a steal from it takes. Entries taken by thieves are gone. */
  readonly victims: Readonly<Record<string, readonly string[]>>;
  /** A rebuild is under way until then (read back: another asker does not try). */
  readonly claimedUntil?: number;
}

/** Where a store keeps its runs' steal hints (one small record a run). */
export interface StealHints {
  /** The run's hint as last written (an eventually consistent read is enough: it is advice), or null. */
  read(runId: string): Promise<StealHint | null>;
  /**
   * Claim the rebuild of a hint seen built at `seenBuiltAt` (0: none):
   * true for one caller until the claim lapses (STEAL_HINT_REBUILD_MS) or a
   * newer hint is written.
   */
  claimRebuild(runId: string, seenBuiltAt: number, now: number): Promise<boolean>;
  /** Replace the run's hint (and clear the rebuild claim). */
  write(runId: string, hint: StealHint): Promise<void>;
  /** Take `victim`'s entry out of the hint built at `builtAt`: its ids, or null when another thief took it first or the hint was rebuilt. */
  take(runId: string, builtAt: number, victim: string): Promise<readonly string[] | null>;
}

/** Whether a hint built at `builtAt` is answered from at `now`. */
export function hintFresh(builtAt: number, now: number): boolean {
  return builtAt > 0 && now - builtAt < STEAL_HINT_FRESH_MS && now >= builtAt - STEAL_HINT_FRESH_MS;
}
