import { backlogs } from '../../../shared/ledger/coordinator.js';
import { EpochGuard } from '../../../shared/ledger/epoch-guard.js';
import type { LeaseToken } from '../../../shared/lease/record.js';
import type { WorkItem } from '../../../shared/ledger/model.js';
import { coordinatorLease } from '../../../shared/ledger/store.js';
import { ack, claim, fail, heartbeat, nack, repend, start, steal, type ItemChange } from '../../../shared/ledger/transitions.js';
import type { Invariant, Model, Step } from '../explorer.js';
import { applyItemCas, emptyLeaseGhost, fenceAdmits, checksAtIssue, noLease, recordFencedWrite, type HeldToken, type ItemRow, type Variant } from '../store.js';
import {
  contenderSteps,
  describeRow,
  freshContender,
  leaseInvariants,
  type Budget,
  type Contender,
  type HasLease,
  type LeaseTiming,
  type LeaseWorld,
} from './lease.js';

/**
 * The ledger model: coordinators contending for a run's lease, workers
 * claiming, starting, running and recording items, steals and failure scans.
 *
 * Modeled, with the project's own transitions (claim, start, heartbeat, ack,
 * nack, repend, steal, fail) applied by the store model's item CAS (the
 * conditions of each transition's statement, ledger-statements.ts) and the fence:
 * - a worker, as in worker.ts: when idle it pulls (claims up to two Pending
 *   items in one batch, as if their messages arrived), reconciles (adopts
 *   Running(itself) items it does not hold, nacks the ones it started in a
 *   previous life) or asks a coordinator for work and waits for the notice,
 *   which its EpochGuard (the project's class) accepts or refuses. With work
 *   it starts one item (a chunk of one) and runs it in the same step (the
 *   backend succeeds, or fails within the budget), then records the outcome
 *   (ack or nack). Its heartbeat covers everything it holds and drops a
 *   waiting item that was taken from it.
 * - a coordinator, as in coordinator.ts: the lease campaign of the lease
 *   model (lean: it keeps its token, not the row; the run's epoch is stamped
 *   with each win, as PostgresRunLeaseStore does); stealFor (the project's
 *   `backlogs` picks the victim, ceil(n/2) items, one fenced steal CAS each,
 *   then the notice to the thief); the failure scan, re-pending or failing
 *   (poison at two attempts) a Running item it read, pinned to the version
 *   read, one batch in flight at a time.
 * - faults: a reply lost after the write committed, on a claim, a start, a
 *   record or a steal's notice (the caller acts as the code does on an
 *   error); a crash or a stop (resign) of any process (a coordinator's write
 *   on the wire still arrives, a steal stops after the CAS in flight and no
 *   notice is sent); lease expiry by a tick of the shared clock.
 *
 * Which Running item is stale is the adversary's choice: safety may not rest
 * on the failure timeout, and the CAS's version pin is what keeps a live
 * worker's item. Item timestamps (claimedAt, heartbeatAt) are one constant:
 * no condition reads them. A heartbeat is a step only when it tells the
 * worker something or lands before a re-pend pinned to the version it
 * changes; otherwise it only bumps a version nobody holds.
 *
 * Not modeled: the queue (a message exists for every Pending item and may be
 * delivered any number of times — pull may claim any Pending item; sending,
 * markSent and the re-send scan are liveness), drains (a nack that does not
 * count), chunks of more than one item, result size rejection, dead letters,
 * lost replies of heartbeats, reconciles and lease writes (they leave the
 * caller as it was, which another interleaving already covers).
 */

const RUN = 'run';
const STAMP = 1_000;
const MAX_ATTEMPTS = 2;
const RECEIVE_BATCH = 2;

export interface LedgerScope {
  readonly coordinators: number;
  readonly workers: number;
  readonly items: number;
  readonly budget: LedgerBudget;
  readonly maxDepth: number;
}

export interface LedgerBudget extends Budget {
  /** Backend failures (nacks that count). */
  readonly failures: number;
}

interface WorkerLocal {
  /** Held, not started, in order: the next chunk is the first. */
  readonly backlog: readonly string[];
  /** Run, not yet recorded. */
  readonly outcome: { readonly item: string; readonly ok: boolean } | null;
  /** EpochGuard's highest epoch seen (-1: none). */
  readonly highest: number;
  /** Asked a coordinator for work; the answer has not come back. */
  readonly waiting: boolean;
}

type CoordinatorWrite =
  | {
      readonly kind: 'steal';
      readonly from: string;
      readonly token: HeldToken;
      readonly thief: string;
      readonly todo: readonly ItemChange[];
      readonly taken: readonly string[];
      /** Its coordinator crashed: what is on the wire still lands, nothing follows it. */
      readonly orphan: boolean;
      /** The thief still awaits the answer (a crash on either side ends the request). */
      readonly listening: boolean;
      readonly admitted: boolean | null;
    }
  | { readonly kind: 'scan'; readonly from: string; readonly token: HeldToken; readonly change: ItemChange; readonly admitted: boolean | null };

/** What the invariants need of each item's history (the chaos checker reads it from itemTransitions). */
interface ItemGhost {
  readonly results: number;
  readonly foreignDone: string | null;
  readonly stolenStarted: string | null;
  /** Pending because a steal put it there, and nobody has taken it since. */
  readonly stealWindow: boolean;
}

export interface LedgerState extends HasLease {
  readonly now: number;
  /** runs.coordinator_epoch. */
  readonly runEpoch: number;
  readonly items: readonly ItemRow[];
  readonly ghost: readonly ItemGhost[];
  readonly coordinators: readonly Contender[];
  readonly workers: readonly WorkerLocal[];
  readonly net: readonly CoordinatorWrite[];
  readonly budget: LedgerBudget;
}

const itemId = (i: number) => `i${i}`;
const indexOf = (id: string) => Number(id.slice(1));
const workerId = (i: number) => `w${i}`;
const coordId = (i: number) => `c${i}`;

export const LEDGER_TIMING: LeaseTiming = { name: coordinatorLease(RUN), tickMs: 1_000, ttlMs: 1_000, skewMs: 0 };

const freshItem: ItemRow = {
  state: 'pending',
  worker: null,
  epoch: null,
  claimedAt: null,
  started: false,
  heartbeatAt: null,
  resultHash: null,
  result: null,
  error: null,
  sentAt: STAMP,
  attempts: 0,
  version: 0,
};
const freshGhost: ItemGhost = { results: 0, foreignDone: null, stolenStarted: null, stealWindow: false };
const freshWorker: WorkerLocal = { backlog: [], outcome: null, highest: -1, waiting: false };

function describeItem(id: string, it: ItemRow): string {
  const who = it.worker ? `(${it.worker}${it.state === 'running' && it.started ? ', started' : ''})` : '';
  return `${id} ${it.state}${who}`;
}

/**
 * One committed item change: the row and the ghost. `steal` marks the
 * changes a steal makes, so the ghost knows a Pending window it opens.
 */
function commit(s: LedgerState, change: ItemChange, opts: { steal?: boolean } = {}): { s: LedgerState; ok: boolean } {
  const i = indexOf(change.itemId);
  const prior = s.items[i]!;
  const after = applyItemCas(prior, change);
  if (after === null) return { s, ok: false };
  let g = s.ghost[i]!;
  if (after.state === 'done') {
    const by = after.worker;
    const held = prior.state === 'running' && prior.worker === by;
    g = {
      ...g,
      results: g.results + 1,
      foreignDone: g.foreignDone ?? (held ? null : `${change.itemId} recorded Done by ${by} while ${describeItem(change.itemId, prior)}`),
    };
  }
  if (opts.steal && prior.started) g = { ...g, stolenStarted: g.stolenStarted ?? `${change.itemId} stolen from ${prior.worker} after it started it` };
  g = { ...g, stealWindow: after.state === 'pending' && (opts.steal === true || (g.stealWindow && prior.state === 'pending')) };
  return { s: { ...s, items: s.items.map((x, j) => (j === i ? after : x)), ghost: s.ghost.map((x, j) => (j === i ? g : x)) }, ok: true };
}

/** The running items as `ledger.running(runId)` returns them. */
function running(s: LedgerState): WorkItem[] {
  return s.items.flatMap((it, i) => (it.state === 'running' ? [{ ...it, runId: RUN, id: itemId(i), payload: { n: i } }] : []));
}

/** What a write carries: the token without the ghost's grant. */
function fenceOf(t: HeldToken): LeaseToken {
  return { name: t.name, holder: t.holder, epoch: t.epoch };
}

function setAt<T>(xs: readonly T[], i: number, x: T): T[] {
  return xs.map((y, j) => (j === i ? x : y));
}

function held(w: WorkerLocal): string[] {
  return [...w.backlog, ...(w.outcome ? [w.outcome.item] : [])];
}

function subsets<T>(xs: readonly T[], max: number): T[][] {
  const out: T[][] = [];
  for (let mask = 1; mask < 1 << xs.length; mask++) {
    const pick = xs.filter((_, i) => mask & (1 << i));
    if (pick.length <= max) out.push(pick);
  }
  return out;
}

export function ledgerModel(scope: LedgerScope, variant: Variant = 'correct', timing: LeaseTiming = LEDGER_TIMING): Model<LedgerState> {
  const initial: LedgerState = {
    now: 0,
    lease: noLease,
    leaseGhost: emptyLeaseGhost,
    runEpoch: -1,
    items: Array.from({ length: scope.items }, () => freshItem),
    ghost: Array.from({ length: scope.items }, () => freshGhost),
    coordinators: Array.from({ length: scope.coordinators }, () => freshContender),
    workers: Array.from({ length: scope.workers }, () => freshWorker),
    net: [],
    budget: scope.budget,
  };
  const spend = (s: LedgerState, what: keyof LedgerBudget): LedgerState => ({ ...s, budget: { ...s.budget, [what]: s.budget[what] - 1 } });

  // Variants that change what a process asks for (the product's transitions stay as they are).
  const ackFor = (id: string, w: string): ItemChange => {
    const change = ack(RUN, id, w, { item: id, by: w });
    if (variant === 'ack-any-worker') return { ...change, expect: { state: 'running' } };
    if (variant === 'ack-by-worker-only') return { ...change, expect: { worker: w } };
    return change;
  };
  const stealChanges = (held: HeldToken, item: WorkItem, victim: string, thief: string): ItemChange[] => {
    const token = fenceOf(held);
    if (variant === 'steal-two-step') {
      // A two-step steal (try_repending then try_claim): two fenced CASes with Pending in between.
      return [repend(token, RUN, item, `stolen for ${thief}`), { ...claim(RUN, item.id, thief, token.epoch, STAMP), fence: token }];
    }
    const change = steal(token, RUN, item.id, victim, thief, STAMP);
    return [variant === 'steal-started' ? { ...change, expect: { state: 'running', worker: victim } } : change];
  };
  const stealable = (items: readonly WorkItem[]): Map<string, WorkItem[]> => {
    if (variant !== 'steal-started') return backlogs(items);
    const out = new Map<string, WorkItem[]>();
    for (const it of items) if (it.worker !== null) out.set(it.worker, [...(out.get(it.worker) ?? []), it]);
    return out;
  };

  const workerSteps = (s: LedgerState, wi: number): Step<LedgerState>[] => {
    const out: Step<LedgerState>[] = [];
    const me = workerId(wi);
    const w = s.workers[wi]!;
    const setW = (st: LedgerState, x: WorkerLocal): LedgerState => ({ ...st, workers: setAt(st.workers, wi, x) });
    const lossy = s.budget.lost > 0;

    if (w.outcome !== null) {
      const { item, ok } = w.outcome;
      const change = ok ? ackFor(item, me) : nack(RUN, item, me, 'backend failed', { counts: true });
      const r = commit(s, change);
      const what = `${me} records ${ok ? 'the result of' : 'a failure of'} ${item}: ${r.ok ? 'ok' : 'refused'} (${describeItem(item, r.s.items[indexOf(item)]!)})`;
      out.push({ label: what, next: setW(r.s, { ...w, outcome: null }) });
      if (lossy) out.push({ label: `${what}, reply lost (kept, recorded again later)`, next: spend(setW(r.s, w), 'lost') });
    } else if (w.backlog.length) {
      const [item, ...rest] = w.backlog as [string, ...string[]];
      const r = commit(s, start(RUN, item, me, STAMP));
      const what = `${me} starts ${item}: ${r.ok ? 'ok, runs it' : `refused (${describeItem(item, s.items[indexOf(item)]!)})`}`;
      out.push({ label: r.ok ? `${what}: result` : what, next: setW(r.s, { ...w, backlog: rest, outcome: r.ok ? { item, ok: true } : null }) });
      if (r.ok && s.budget.failures > 0)
        out.push({ label: `${what}: the backend fails`, next: spend(setW(r.s, { ...w, backlog: rest, outcome: { item, ok: false } }), 'failures') });
      // runChunk throws before its try: the chunk is out of the backlog, started or not.
      if (lossy && r.ok) out.push({ label: `${what}, reply lost (the item is dropped)`, next: spend(setW(r.s, { ...w, backlog: rest }), 'lost') });
    } else if (!w.waiting) {
      const pending = s.items.flatMap((it, i) => (it.state === 'pending' ? [itemId(i)] : []));
      for (const pick of subsets(pending, RECEIVE_BATCH)) {
        let st = s;
        for (const id of pick) st = commit(st, claim(RUN, id, me, Math.max(s.runEpoch, 0), STAMP)).s;
        const what = `${me} claims ${pick.join(', ')}`;
        out.push({ label: what, next: setW(st, { ...w, backlog: [...w.backlog, ...pick] }) });
        if (lossy) out.push({ label: `${what}, reply lost`, next: spend(st, 'lost') });
      }
      // reconcile: Running(me) items it does not hold (idle: it holds nothing).
      const mine = running(s).filter((it) => it.worker === me);
      if (mine.length) {
        let st = s;
        for (const it of mine.filter((x) => x.started)) st = commit(st, nack(RUN, it.id, me, 'worker restarted while running it', { counts: true })).s;
        const adopt = mine.filter((x) => !x.started).map((x) => x.id);
        const what = `${me} reconciles: ${mine.map((x) => (x.started ? `nacks ${x.id}` : `adopts ${x.id}`)).join(', ')}`;
        out.push({ label: what, next: setW(st, { ...w, backlog: adopt }) });
      }
      // Ask each coordinator that believes it leads (it answers with its own token).
      s.coordinators.forEach((c, ci) => {
        if (c.token === null) return;
        const byWorker = stealable(running(s));

        // Nothing to steal: an empty notice, which changes nothing that matters here.
        if ((byWorker.get(me)?.length ?? 0) > 0 || ![...byWorker.keys()].some((v) => v !== me)) return;
        let victim = '';
        let most = 0;
        for (const [v, items] of byWorker) if (v !== me && items.length > most) [victim, most] = [v, items.length];
        const candidates = [...byWorker.get(victim)!].sort((a, b) => (b.claimedAt ?? 0) - (a.claimedAt ?? 0)).slice(0, Math.ceil(most / 2));
        const todo = candidates.flatMap((it) => stealChanges(c.token!, it, victim, me));
        const admitted = checksAtIssue(variant) ? fenceAdmits(s.lease, c.token, variant) : null;
        const msg: CoordinatorWrite = {
          kind: 'steal',
          from: coordId(ci),
          token: c.token,
          thief: me,
          todo,
          taken: [],
          orphan: false,
          listening: true,
          admitted,
        };
        out.push({
          label: `${me} asks ${coordId(ci)} for work: ${coordId(ci)} steals ${candidates.map((x) => x.id).join(', ')} from ${victim} under epoch ${c.token.epoch}`,
          next: setW({ ...s, net: [...s.net, msg] }, { ...w, waiting: true }),
        });
      });
    }

    // The heartbeat timer runs whatever the loop is doing. Only a beat that tells the worker
    // something, or lands before a re-pend pinned to the version it changes, is a step.
    // A refused beat drops a waiting item; one already run keeps its outcome (its record is refused).
    const mineNow = held(w);
    if (mineNow.length) {
      const taken = w.backlog.filter((id) => {
        const it = s.items[indexOf(id)]!;
        return !(it.state === 'running' && it.worker === me);
      });
      const pinned = s.net.some((m) => m.kind === 'scan' && mineNow.includes(m.change.itemId));
      if (taken.length || pinned) {
        let st = s;
        for (const id of mineNow) st = commit(st, heartbeat(RUN, id, me, STAMP)).s;
        const what = `${me} heartbeats ${mineNow.join(', ')}${taken.length ? `: refused for ${taken.join(', ')}` : ''}`;
        out.push({ label: what, next: setW(st, { ...w, backlog: w.backlog.filter((id) => !taken.includes(id)) }) });
      }
    }
    if (s.budget.crashes > 0 && (held(w).length || w.waiting || w.highest >= 0)) {
      const net = s.net.map((m) => (m.kind === 'steal' && m.thief === me && m.listening ? { ...m, listening: false } : m));
      out.push({ label: `${me} crashes (forgets what it holds)`, next: spend(setW({ ...s, net }, freshWorker), 'crashes') });
    }
    return out;
  };

  const coordinatorSteps = (s: LedgerState, ci: number): Step<LedgerState>[] => {
    const out: Step<LedgerState>[] = [];
    const me = coordId(ci);
    const c = s.coordinators[ci]!;
    // Lost lease replies are the lease model's subject; here they would only delay a coordinator.
    const world: LeaseWorld = { now: s.now, lease: s.lease, ghost: s.leaseGhost, mayLoseReply: false, mayStop: s.budget.crashes > 0 };
    for (const step of contenderSteps(world, c, me, timing, variant, false)) {
      // PostgresRunLeaseStore: every lease win stamps the run's epoch in the same transaction.
      const won = step.lease !== s.lease && step.lease.row?.holder ? step.lease.row.epoch : -1;
      const next: LedgerState = {
        ...s,
        lease: step.lease,
        leaseGhost: step.ghost,
        runEpoch: Math.max(s.runEpoch, won),
        coordinators: setAt(s.coordinators, ci, step.contender),
      };
      out.push({ label: step.label, next: step.stopped ? spend(next, 'crashes') : next });
    }
    if (c.token !== null) {
      const held = c.token;
      const token = fenceOf(held);
      // The failure scan: the adversary says which Running item went silent.
      for (const it of running(s)) {
        const change =
          it.started && it.attempts + 1 >= MAX_ATTEMPTS
            ? fail(token, RUN, it.id, { state: 'running', worker: it.worker, version: it.version }, 'poison', { counts: true })
            : repend(token, RUN, it, 'silent');
        // The scan awaits its batch: one in flight per coordinator.
        if (s.net.some((m) => m.kind === 'scan' && m.from === me)) break;
        const admitted = checksAtIssue(variant) ? fenceAdmits(s.lease, token, variant) : null;
        out.push({
          label: `${me} judges ${describeItem(it.id, it)} stale: sends ${change.transition} (version ${it.version}, epoch ${token.epoch})`,
          next: { ...s, net: [...s.net, { kind: 'scan', from: me, token: held, change, admitted }] },
        });
      }
    }
    if (s.budget.crashes > 0 && c.token !== null) {
      const mine = (m: CoordinatorWrite) => m.kind === 'steal' && m.from === me && !m.orphan;
      const net = s.net.map((m) => (m.kind === 'steal' && mine(m) ? { ...m, todo: m.todo.slice(0, 1), orphan: true, listening: false } : m));
      const cut = new Set(s.net.flatMap((m) => (m.kind === 'steal' && mine(m) && m.listening ? [m.thief] : [])));
      const workers = s.workers.map((w, i) => (cut.has(workerId(i)) ? { ...w, waiting: false } : w));
      out.push({
        label: `${me} crashes (a steal in progress stops after the CAS on the wire)`,
        next: spend({ ...s, coordinators: setAt(s.coordinators, ci, freshContender), net, workers }, 'crashes'),
      });
    }
    return out;
  };

  const netSteps = (s: LedgerState, k: number): Step<LedgerState>[] => {
    const out: Step<LedgerState>[] = [];
    const m = s.net[k]!;
    const rest = s.net.filter((_, j) => j !== k);
    const change = m.kind === 'steal' ? m.todo[0]! : m.change;
    const admitted = m.admitted ?? fenceAdmits(s.lease, change.fence!, variant);
    const head = `${m.from}'s ${change.transition} of ${change.itemId} under epoch ${m.token.epoch} arrives`;
    const thiefIndex = m.kind === 'steal' ? Number(m.thief.slice(1)) : -1;
    const release = (st: LedgerState): LedgerState =>
      m.kind === 'steal' && m.listening ? { ...st, workers: setAt(st.workers, thiefIndex, { ...st.workers[thiefIndex]!, waiting: false }) } : st;
    if (!admitted) {
      out.push({ label: `${head}: fenced (lease ${describeRow(s.lease.row)})`, next: release({ ...s, net: rest }) });
      return out;
    }
    const c = commit(s, change, { steal: m.kind === 'steal' });
    const r = c.ok ? { ...c, s: { ...c.s, leaseGhost: recordFencedWrite(s.leaseGhost, s.lease, m.token) } } : c;
    const result = `${r.ok ? 'ok' : 'refused'} (${describeItem(change.itemId, r.s.items[indexOf(change.itemId)]!)})`;
    if (m.kind === 'scan') {
      out.push({ label: `${head}: ${result}`, next: { ...r.s, net: rest } });
      return out;
    }
    // Two-step variant: the second change is only sent after the first succeeded.
    const todo = r.ok ? m.todo.slice(1) : m.todo.slice(1).filter((x) => x.itemId !== change.itemId);
    const taken = r.ok && change.transition !== 'repend' ? [...m.taken, change.itemId] : m.taken;
    if (todo.length && !m.orphan) {
      out.push({ label: `${head}: ${result}`, next: { ...r.s, net: [...rest, { ...m, todo, taken }] } });
      return out;
    }
    if (m.orphan || todo.length || !m.listening) {
      out.push({ label: `${head}: ${result} (${m.orphan ? 'its coordinator is gone' : 'the thief is gone'}: no notice)`, next: { ...r.s, net: rest } });
      return out;
    }
    // The last CAS: the notice goes back to the thief, whose EpochGuard judges it.
    const w = r.s.workers[thiefIndex]!;
    const guard = new EpochGuard();
    if (w.highest >= 0) guard.accept(w.highest);
    const accepted = guard.accept(m.token.epoch);
    const adopt = accepted ? taken.filter((id) => !held(w).includes(id)) : [];
    const thief: WorkerLocal = { ...w, waiting: false, highest: guard.current, backlog: [...w.backlog, ...adopt] };
    const notice = accepted
      ? `notice to ${m.thief}: ${taken.length ? taken.join(', ') : 'nothing'}`
      : `notice refused by ${m.thief}'s EpochGuard (epoch ${m.token.epoch} < ${w.highest})`;
    out.push({ label: `${head}: ${result}; ${notice}`, next: { ...r.s, net: rest, workers: setAt(r.s.workers, thiefIndex, thief) } });
    if (s.budget.lost > 0) out.push({ label: `${head}: ${result}; the notice to ${m.thief} is lost`, next: spend(release({ ...r.s, net: rest }), 'lost') });
    return out;
  };

  const steps = (s: LedgerState): Step<LedgerState>[] => {
    const out: Step<LedgerState>[] = [];
    s.workers.forEach((_, i) => out.push(...workerSteps(s, i)));
    s.coordinators.forEach((_, i) => out.push(...coordinatorSteps(s, i)));
    s.net.forEach((_, k) => out.push(...netSteps(s, k)));
    if (s.budget.ticks > 0) out.push({ label: `time passes: ${s.now + timing.tickMs} ms`, next: spend({ ...s, now: s.now + timing.tickMs }, 'ticks') });
    return out;
  };

  return { name: 'ledger', initial, steps, invariants: [...leaseInvariants, ...ledgerInvariants], project };
}

/**
 * What the future depends on. An item's version matters only against the
 * versions pinned by re-pends in flight, so it is ranked among them; the
 * fields no condition reads (error, epoch, result, stamps) are dropped; the
 * lease row's version is read by nobody (coordinators here keep no copy of
 * the row); fenced writes that were fine cannot break anything later.
 */
function project(s: LedgerState): unknown {
  const pins = (id: string) =>
    s.net
      .flatMap((m) => (m.kind === 'scan' ? [m.change] : m.todo))
      .flatMap((c) => (c.itemId === id && c.expect.version !== undefined ? [c.expect.version] : []));
  const ranks = s.items.map((it, i) => [...new Set([it.version, ...pins(itemId(i))])].sort((a, b) => a - b));
  const rank = (id: string, v: number) => ranks[indexOf(id)]!.indexOf(v);
  const change = (c: ItemChange) => (c.expect.version === undefined ? c : { ...c, expect: { ...c.expect, version: rank(c.itemId, c.expect.version) } });
  return {
    ...s,
    runEpoch: null,
    lease: { ...s.lease, row: s.lease.row && { ...s.lease.row, version: 0 } },
    leaseGhost: { ...s.leaseGhost, writes: s.leaseGhost.writes.filter((w) => w.under !== w.atCommit) },
    items: s.items.map((it, i) => ({ state: it.state, worker: it.worker, started: it.started, attempts: it.attempts, version: rank(itemId(i), it.version) })),
    net: s.net.map((m) => (m.kind === 'scan' ? { ...m, change: change(m.change) } : { ...m, todo: m.todo.map(change) })),
  };
}

// ── invariants ────────────────────────────────────────────────────────────

export const oneResultPerItem: Invariant<LedgerState> = {
  name: 'one-result-per-item',
  check: (s) => {
    const i = s.ghost.findIndex((g) => g.results > 1);
    return i < 0 ? null : `${itemId(i)} has ${s.ghost[i]!.results} recorded results`;
  },
};

export const doneByHolder: Invariant<LedgerState> = {
  name: 'done-by-holder',
  check: (s) => s.ghost.find((g) => g.foreignDone !== null)?.foreignDone ?? null,
};

export const noItemLost: Invariant<LedgerState> = {
  name: 'no-item-lost',
  check: (s) => {
    const states: readonly string[] = ['pending', 'running', 'done', 'failed'];
    const gone = s.items.findIndex((it) => !states.includes(it.state) || (it.state === 'running' && it.worker === null));
    if (gone >= 0) return `${itemId(gone)} is ${s.items[gone]!.state} with worker ${s.items[gone]!.worker}`;
    const open = s.ghost.findIndex((g) => g.stealWindow);
    return open < 0 ? null : `${itemId(open)} is Pending halfway through a steal: the victim's ack is lost and any worker may take it`;
  },
};

export const stealOnlyUnstarted: Invariant<LedgerState> = {
  name: 'steal-only-unstarted',
  check: (s) => s.ghost.find((g) => g.stolenStarted !== null)?.stolenStarted ?? null,
};

export const ledgerInvariants = [oneResultPerItem, doneByHolder, noItemLost, stealOnlyUnstarted] as const;
