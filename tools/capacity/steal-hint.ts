/**
 * The coordinator's steal path as both the plan and the model charge it
 * (shared/ledger/steal-hint.ts, coordinator.ts): the lease TTL, the steal
 * hint's size and what reading, writing and taking from it costs.
 */
/** The coordinator lease's TTL (shared/runtimes/lambda-env.ts ROLLOUT_LEASE_TTL_MS): a warm sandbox renews it only past half of it. */
export const COORDINATOR_LEASE_TTL_MS = 30_000;
/** Items a steal (now: a hint rebuild) reads at most to learn which are started (coordinator.ts STEAL_READ_BUDGET). */
export const STEAL_READ_ITEMS = 1_000;
/**
 * The steal hint item STEAL#<run>/HINT as DynamoDB sizes it: keys, builtAt and
 * the rebuild claim; per victim its worker id and list; per id 64 hex
 * characters and a list element's byte. Empty ≈ 0.1 KB, full (4 × 32 ids) ≈ 8.4 KB.
 */
export const STEAL_HINT_BYTES = { base: 100, perVictim: 40, perId: 65 } as const;
export const stealHintBytes = (idsPerVictim: readonly number[]): number =>
  STEAL_HINT_BYTES.base + idsPerVictim.reduce((s, ids) => s + STEAL_HINT_BYTES.perVictim + ids * STEAL_HINT_BYTES.perId, 0);
/** An eventually consistent GetItem: ½ unit per started 4 KB. */
export const hintReadRru = (bytes: number): number => 0.5 * Math.max(1, Math.ceil(bytes / 4096));
/** A write of the hint item (put, or a conditional update: claim, take, won or lost): a unit per started KB. */
export const hintWriteWcu = (bytes: number): number => Math.max(1, Math.ceil(bytes / 1024));

/**
 * A herd of `thieves` asks that read the same hint listing `ids` (ids per
 * entry, busiest first) take as coordinator.ts stealFor does: each tries the
 * busiest entry first and, lost, the next, so in round r one wins the
 * busiest entry left and the rest lose it. A take, won or lost, costs the
 * hint's size as it lands (`rest`: other entries still in it): the winner's
 * with its entry still in, the losers' after it went. A fractional herd's
 * last thief counts for its fraction.
 */
export function busiestFirstTakes(
  thieves: number,
  ids: readonly number[],
  rest: readonly number[] = [],
): { attempts: number; wcu: number; won: number; rounds: number } {
  const order = [...ids].sort((a, b) => b - a);
  let attempts = 0;
  let wcu = 0;
  let won = 0;
  let r = 0;
  for (let left = thieves; left > 0 && r < order.length; left--, r++) {
    const winner = Math.min(1, left);
    const losers = Math.max(0, left - 1);
    attempts += left;
    won += winner;
    wcu += winner * hintWriteWcu(stealHintBytes([...order.slice(r), ...rest])) + losers * hintWriteWcu(stealHintBytes([...order.slice(r + 1), ...rest]));
  }
  return { attempts, wcu, won, rounds: r };
}
/** Ceilings of the idle fleet: its reads leave most of a RUNNING key to the scan and reconciles; the hint or a fence stays under half a partition. */
export const IDLE_CEILINGS = { runningKeyReadShare: 0.3, emptyFleetRru: 1_000, stealItemWriteShare: 0.5 } as const;
