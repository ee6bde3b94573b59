/**
 * An idle worker's ask for work (Coordinator.stealFor, shared/ledger/coordinator.ts)
 * answered from the run's steal hint (shared/ledger/steal-hint.ts): read it,
 * rebuild it when stale (one ask wins the claim), take an entry busiest
 * first, move its items one fenced transaction at a time. The hint as last
 * written is state.ts Hint.
 */
import { MAX_STEAL_BATCH } from '../../../shared/ledger/coordinator.js';
import { STEAL_HINT_REBUILD_MS, STEAL_HINT_VICTIMS, hintFresh } from '../../../shared/ledger/steal-hint.js';
import { STEAL_READ_ITEMS, busiestFirstTakes, hintReadRru, hintWriteWcu, stealHintBytes } from '../steal-hint.js';
import { campaign, coordinatorEnd, coordinatorStart, ensureFences } from './coordinator.js';
import { readItems, readRunning, setOwner, single, stealWrite } from './ledger-store.js';
import { dropMessage } from './queue.js';
import type { Proc } from './requests.js';
import type { Client } from './sdk.js';
import { F_ITEM, type Sandbox, type SimState, type WorkerState } from './state.js';

/** A hint as one ask read it: its entries in the order a thief tries them (most ids first). */
export interface HintRead {
  readonly builtAt: number;
  readonly claimedUntil: number;
  readonly order: readonly { readonly victim: number; readonly ids: readonly number[] }[];
}

/** The order a thief tries a hint's entries in (Coordinator.stealFor): most ids first, ties as listed. */
export function takeOrder<V>(entries: Iterable<readonly [V, readonly number[]]>): { victim: V; ids: readonly number[] }[] {
  return [...entries].map(([victim, ids]) => ({ victim, ids })).sort((a, b) => b.ids.length - a.ids.length);
}

/**
 * One simulated take of an entry of `ids` ids, as its k real thieves make it:
 * the entry stands for up to STEAL_HINT_VICTIMS real ones, which they take
 * busiest first among themselves while it is there (`live`), and each loses
 * in turn once it is gone. `rest`: the hint's other real entries, busiest first.
 */
export function simulatedTake(k: number, ids: number, rest: readonly number[], live: boolean): { attempts: number; wcu: number } {
  const stands = Math.max(1, Math.min(k, STEAL_HINT_VICTIMS));
  if (live)
    return busiestFirstTakes(
      k,
      Array.from({ length: stands }, () => ids),
      rest.slice(0, STEAL_HINT_VICTIMS - stands),
    );
  const attempts = k * stands;
  return { attempts, wcu: attempts * hintWriteWcu(stealHintBytes(rest.slice(0, STEAL_HINT_VICTIMS))) };
}

/** The hint's real entries, ids each, busiest first: at most STEAL_HINT_VICTIMS (a simulated one stands for k); `except` left out. */
export function realEntries(sim: SimState, except = -1): number[] {
  const ids: number[] = [];
  for (const [victim, items] of sim.hint.victims) if (victim !== except) for (let j = 0; j < sim.k; j++) ids.push(items.length);
  return ids.sort((a, b) => b - a).slice(0, STEAL_HINT_VICTIMS);
}

/** The hint as stored. */
export function hintBytes(sim: SimState): number {
  return stealHintBytes(realEntries(sim));
}

/** What a read of the hint returns: its entries busiest first (ties in the order the rebuild listed them, busiest backlog first). */
export function readHint(sim: SimState): HintRead {
  const h = sim.hint;
  return { builtAt: h.builtAt, claimedUntil: h.claimedUntil, order: takeOrder(h.victims) };
}

/**
 * An idle worker's requestWork: the coordinator Lambda reads the run's steal
 * hint; fresh (or stale with a live claim, or its claim lost) it answers
 * from it; stale, it claims the rebuild, and the winner rebuilds it and
 * answers from the new one. Items stolen; -1: the invocation failed.
 */
export function* askForWork(sim: SimState, thief: WorkerState): Proc<number> {
  const inv = coordinatorStart(sim);
  if (inv === null) return -1;
  const client = sim.coordinatorClient;
  const fail = () => {
    coordinatorEnd(sim, inv);
    return -1;
  };
  if (!sim.processBox) yield { op: 'sleep', ms: sim.o.latencyMs.lambda };
  if (!(yield* campaign(sim, inv.box, client))) return fail();
  let read: HintRead | null = null;
  const get = single(sim, sim.kHint, 1, hintReadRru(hintBytes(sim)), 'app', client);
  get.onOk = () => (read = readHint(sim));
  if (!(yield { op: 'all', reqs: [get], limit: 1 })) return fail();
  let hint = (read as HintRead | null) ?? readHint(sim);
  // Stale and nobody rebuilding: claim the rebuild; lost, answer from the hint read, as read.
  if (!hintFresh(hint.builtAt, sim.now) && hint.claimedUntil <= sim.now) {
    // The conditional claim: k asks try it (the herd that read the same stale hint), the first to land wins.
    const h = sim.hint;
    const seen = hint.builtAt;
    let won = false;
    const claim = single(sim, sim.kHint, 0, hintWriteWcu(hintBytes(sim)), 'app', client);
    claim.onOk = () => {
      if (h.builtAt !== seen || h.claimedUntil > sim.now) return;
      h.claimedUntil = sim.now + STEAL_HINT_REBUILD_MS;
      won = true;
    };
    sim.hintClaims += sim.k;
    if (!(yield { op: 'all', reqs: [claim], limit: 1 })) return fail();
    if (won) {
      if (!(yield* rebuildHint(sim, client))) return fail();
      // The rebuilder answers from what it built.
      hint = readHint(sim);
    }
  }
  const taken = yield* takeFromHint(sim, thief, hint, inv.box, client);
  if (taken === null) return fail();
  sim.steals += sim.k;
  sim.itemsStolen += taken.length * sim.k;
  for (const i of taken) sim.heldBy[i] = thief.id; // in the thief's memory now (worker.ts hold)
  thief.backlog.push(...taken);
  coordinatorEnd(sim, inv);
  return taken.length;
}

/**
 * The rebuild, once for the run: the running set's entries, then the items
 * of the workers holding most, one worker at a time, until no worker left
 * holds more than the smallest backlog kept or the read budget is spent;
 * the largest backlogs kept, each with the back half of its line, are put.
 */
export function* rebuildHint(sim: SimState, client: Client): Proc<boolean> {
  if (!(yield* readRunning(sim, client, 16, 1))) return false;
  // Real victims a hint lists, in simulated workers: the fraction drawn (k real ones move together).
  const share = STEAL_HINT_VICTIMS / sim.k;
  const limit = Math.floor(share) + (sim.rand() < share - Math.floor(share) ? 1 : 0);
  const budget = Math.max(1, Math.floor(STEAL_READ_ITEMS / sim.k));
  const unstarted = (v: WorkerState) => v.backlog.filter((i) => sim.owner[i] === v.id && !sim.started[i] && sim.state[i] === 2);
  const kept: { worker: WorkerState; line: number[] }[] = [];
  const floor = () => (kept.length < Math.max(1, limit) ? 0 : kept[kept.length - 1]!.line.length);
  let read = 0;
  for (const v of [...sim.workers].filter((w) => w.owned.size > 0).sort((a, b) => b.owned.size - a.owned.size)) {
    if (v.owned.size <= floor() || read >= budget) break;
    read += v.owned.size;
    if (!(yield { op: 'all', reqs: readItems(sim, [...v.owned], client), limit: 16 })) return false;
    const line = unstarted(v);
    if (line.length <= floor()) continue;
    kept.push({ worker: v, line });
    kept.sort((a, b) => b.line.length - a.line.length);
    kept.splice(Math.max(1, limit));
  }
  // From the back of each line: its worker would reach them last.
  const victims = new Map(
    kept.slice(0, limit).map(({ worker, line }) => [worker.id, line.slice(-Math.min(Math.ceil(line.length / 2), MAX_STEAL_BATCH))] as const),
  );
  const bytes = stealHintBytes(
    [...victims.values()].flatMap((ids) => Array.from({ length: Math.min(sim.k, STEAL_HINT_VICTIMS) }, () => ids.length)).slice(0, STEAL_HINT_VICTIMS),
  );
  // A put that replaces an item is paid at the larger of the two.
  const put = single(sim, sim.kHint, 0, hintWriteWcu(Math.max(bytes, hintBytes(sim))), 'app', client, 1);
  put.onOk = () => {
    sim.hint.builtAt = sim.now;
    sim.hint.claimedUntil = 0;
    sim.hint.victims = victims;
    sim.hintRebuilds++;
  };
  return yield { op: 'all', reqs: [put], limit: 1 };
}

/**
 * Answer from the hint as read (Coordinator.stealFor): its entries tried
 * busiest first, each a conditional take paid won or lost; a lost one (taken
 * by another thief, or the hint rebuilt) → the next. The entry won's ids are
 * moved one at a time, each a fenced transaction and a consistent read. A
 * thief the hint lists has a backlog of its own: nothing. Null: the invocation failed.
 */
export function* takeFromHint(sim: SimState, thief: WorkerState, read: HintRead, box: Sandbox, client: Client): Proc<number[] | null> {
  if (read.order.some((e) => e.victim === thief.id)) return [];
  const h = sim.hint;
  let got: number[] | null = null;
  let victimId = -1;
  for (const entry of read.order) {
    const live = h.builtAt === read.builtAt && h.victims.has(entry.victim);
    const cost = simulatedTake(sim.k, entry.ids.length, live ? realEntries(sim, entry.victim) : realEntries(sim), live);
    let ids: number[] | null = null;
    const take = single(sim, sim.kHint, 0, cost.wcu / cost.attempts, 'app', client, cost.attempts);
    take.onOk = () => {
      if (h.builtAt !== read.builtAt || !h.victims.has(entry.victim)) return;
      ids = h.victims.get(entry.victim)!;
      h.victims.delete(entry.victim);
    };
    sim.hintTakes += cost.attempts;
    if (!(yield { op: 'all', reqs: [take], limit: 1 })) return null;
    if (ids === null) continue;
    got = ids;
    victimId = entry.victim;
    break;
  }
  if (got === null) return [];
  sim.fruitfulSteals += sim.k;
  if (!(yield* ensureFences(sim, box, client))) return null;
  const victim = sim.workers[victimId]!;
  const taken: number[] = [];
  for (const i of got as number[]) {
    const moved = yield { op: 'all', reqs: [stealWrite(sim, i, box, client)], limit: 1 };
    if (moved && sim.owner[i] === victim.id && !sim.started[i] && sim.state[i] === 2) {
      setOwner(sim, i, thief.id);
      sim.lastBeat[i] = sim.now;
      sim.wrote[i] = Number.NEGATIVE_INFINITY;
      const at = victim.backlog.indexOf(i);
      if (at >= 0) victim.backlog.splice(at, 1);
      // The victim finds it gone at its next heartbeat and deletes its message; the thief holds it without one.
      if (sim.msgRef[i]) dropMessage(sim, i);
      taken.push(i);
    }
    const read = yield { op: 'all', reqs: [single(sim, F_ITEM * sim.n + sim.slotShard[sim.slotStart[i]!]!, 1, 1, 'app', client)], limit: 1 };
    if (!moved || !read) {
      // What moved is the thief's in the ledger; its reconcile finds it.
      return null;
    }
  }
  return taken;
}
