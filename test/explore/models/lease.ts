import { sameRow, staleReply, type LeaseRecord } from '../../../shared/lease/record.js';
import { acquire, release, renew, steal, stealable } from '../../../shared/lease/transitions.js';
import type { Invariant, Model, Step } from '../explorer.js';
import {
  checksAtIssue,
  emptyLeaseGhost,
  fenceAdmits,
  leaseCas,
  leaseResign,
  noLease,
  recordFencedWrite,
  type HeldToken,
  type LeaseCell,
  type LeaseGhost,
  type Variant,
} from '../store.js';

/**
 * The lease model: contenders campaigning for one lease row and making
 * fenced writes under it.
 *
 * Modeled. Each contender is the elector's campaign as a step machine over
 * the project's transitions (acquire, renew, steal, stealable, release): from
 * the row it last saw it plans acquire (no row), renew (its own row), steal
 * (stealable) or a read, and compare-and-swaps that plan over the row it saw.
 * A reply may be lost after the write committed: the contender then settles
 * by re-reading (casSettled, with the project's sameRow) before anything
 * else. A contender may stop and resign (release, row kept), crash (forget
 * everything; its writes already on the wire still arrive) — both spend the
 * crash budget — and issue fenced writes with the token it holds. A
 * leadership check (`isLeader`, outside the campaign's turn) is read by the
 * store when issued and its reply applied any number of steps later, after
 * the contender's own writes: the elector's `staleReply` (the product's rule)
 * decides whether it may replace the view. Time is
 * discrete ticks of one shared clock; the lease expires by it, and a holder
 * renews at most once per tick (its cadence, and what keeps versions finite).
 *
 * Clocks are adversarial on purpose: a contender acts on the token it last
 * saw whatever the time (a paused process, a clock far off), and a fenced
 * write sent may commit any number of steps later. So the only thing keeping
 * these invariants is the store's conditions, which is the claim.
 *
 * LeaseElector itself is not called: it is an async class with timers, and
 * its `plan` and `observe` are private. The model restates the smallest part
 * of them, the three-way choice above and "the token is mine while the row
 * names me"; every row it writes comes from the project's transitions.
 *
 * Not modeled: the renew interval beyond one per tick, jitter, IsLeader's
 * cache and the step-down timer (liveness only: they decide when a contender acts, and here it may
 * act at any time); DynamoDB TransactionConflict retries (a conflict is no
 * verdict and writes nothing); fenced writes lost before they reach the
 * store (they change nothing).
 */

export interface LeaseTiming {
  readonly name: string;
  readonly tickMs: number;
  readonly ttlMs: number;
  readonly skewMs: number;
}

/** A leadership check's read: served by the store when issued, its reply still on the way. */
export interface PendingCheck {
  readonly row: LeaseRecord | null;
  /** Ghost: the grant of that row. */
  readonly grant: number | null;
  /** A reply to a request issued after this one has been applied since (the elector's ticket order). */
  readonly overtaken: boolean;
}

/** A process's view of the lease: what it last saw, the token it acts with, and a write it does not know the outcome of. */
export interface Contender {
  readonly view: LeaseRecord | null;
  readonly token: HeldToken | null;
  /** A lease write whose reply was lost: settled by re-reading before anything else. */
  readonly unsure: LeaseRecord | null;
  /** A leadership check in flight (the lease model only). */
  readonly check: PendingCheck | null;
  /** Ghost: the highest row version this process has applied (-1: only "no row"; null: nothing yet). */
  readonly seen: number | null;
}

export const freshContender: Contender = { view: null, token: null, unsure: null, check: null, seen: null };

export interface LeaseWorld {
  /** Milliseconds on the shared clock. */
  readonly now: number;
  readonly lease: LeaseCell;
  readonly ghost: LeaseGhost;
  /** Whether the fault budget still allows a lost reply. */
  readonly mayLoseReply: boolean;
  /** Whether the budget still allows a stop (resign), which counts as a crash: the process goes away. */
  readonly mayStop: boolean;
}

export interface ContenderStep {
  readonly label: string;
  readonly contender: Contender;
  readonly lease: LeaseCell;
  readonly ghost: LeaseGhost;
  readonly lostReply: boolean;
  /** A resign: the caller spends one crash from its budget. */
  readonly stopped: boolean;
}

export function describeRow(row: LeaseRecord | null): string {
  if (row === null) return 'no row';
  return row.holder === null ? `released@${row.epoch}` : `${row.holder}@${row.epoch} until ${row.expiresAt}`;
}

/**
 * The elector's `observe`: the row seen becomes the view; the token is ours
 * while the row names us. A check in flight is now overtaken: this reply's
 * request was issued after it.
 */
function observe(prior: Contender, row: LeaseRecord | null, grant: number | null, me: string): Contender {
  const version = row === null ? -1 : row.version;
  return {
    view: row,
    token: row !== null && row.holder === me ? { name: row.name, holder: me, epoch: row.epoch, grant } : null,
    unsure: null,
    check: prior.check && { ...prior.check, overtaken: true },
    seen: prior.seen === null ? version : Math.max(prior.seen, version),
  };
}

/** The elector's `plan`: the row to write next, or null to wait and read. */
function plan(row: LeaseRecord | null, me: string, now: number, t: LeaseTiming): { what: string; next: LeaseRecord } | null {
  if (row === null) return { what: 'acquire', next: acquire(t.name, me, now, t.ttlMs) };
  // One renewal per tick: the renew cadence, and what keeps the version (and the state space) finite.
  if (row.holder === me) return row.renewedAt < now ? { what: 'renew', next: renew(row, now, t.ttlMs) } : null;
  if (stealable(row, now, t.skewMs)) return { what: `steal ${describeRow(row)}`, next: steal(row, me, now, t.ttlMs) };
  return null;
}

/**
 * Every step one contender can take from here.
 *
 * `remembers`: the contender plans from the row it last saw (the elector's
 * `observed`), so a stale view makes a CAS over an old version, and a lost
 * reply is settled by a later read. Without it (the ledger and promotion
 * models, whose subject is the fenced writes, not the lease CAS) it plans
 * from the row as it is, keeps only its token, and a lost reply leaves it as
 * it was (the settling read failed too): fewer states, the same tokens.
 */
export function contenderSteps(w: LeaseWorld, c: Contender, me: string, t: LeaseTiming, variant: Variant, remembers = true): ContenderStep[] {
  const out: ContenderStep[] = [];
  const keep = (x: Contender): Contender => (remembers ? x : { ...freshContender, token: x.token });
  const same = (label: string, contender: Contender): ContenderStep => ({
    label,
    contender: keep(contender),
    lease: w.lease,
    ghost: w.ghost,
    lostReply: false,
    stopped: false,
  });
  if (c.unsure !== null) {
    // casSettled: the write may have committed; the row says whether it did.
    const row = w.lease.row;
    const won = sameRow(row, c.unsure);
    out.push(
      same(
        `${me} settles its unanswered lease write by reading: ${won ? 'it committed' : 'it did not'} (${describeRow(row)})`,
        observe(c, row, w.lease.grant, me),
      ),
    );
    return out;
  }
  const seenRow = remembers ? c.view : w.lease.row;
  const p = plan(seenRow, me, w.now, t);
  if (p === null) {
    // A read that shows nothing new changes nothing: not a step.
    const seen = observe(c, w.lease.row, w.lease.grant, me);
    if (!sameRow(c.view, keep(seen).view) || c.token?.epoch !== seen.token?.epoch || c.token?.grant !== seen.token?.grant) {
      out.push(same(`${me} reads the lease: ${describeRow(w.lease.row)}`, seen));
    }
  } else {
    const r = leaseCas(w.lease, w.ghost, seenRow, p.next);
    const result = r.ok ? `ok, ${describeRow(p.next)}` : `lost the race, row is ${describeRow(w.lease.row)}`;
    out.push({
      label: `${me} campaigns: ${p.what} → ${result}`,
      contender: keep(observe(c, r.cell.row, r.cell.grant, me)),
      lease: r.cell,
      ghost: r.ghost,
      lostReply: false,
      stopped: false,
    });
    if (w.mayLoseReply) {
      out.push({
        label: `${me} campaigns: ${p.what} → ${r.ok ? 'committed' : 'refused'}, reply lost`,
        contender: remembers ? { ...c, unsure: p.next } : c,
        lease: r.cell,
        ghost: r.ghost,
        lostReply: true,
        stopped: false,
      });
    }
  }
  const mine = remembers ? c.view : w.lease.row;
  if (w.mayStop && c.token !== null && mine !== null && mine.holder === me) {
    const next = release(mine, w.now);
    const r = leaseResign(w.lease, w.ghost, mine, next, variant);
    const after = r.ok ? describeRow(r.cell.row) : `refused, row is ${describeRow(w.lease.row)}`;
    out.push({
      label: `${me} stops and resigns → ${after}`,
      contender: keep({ ...observe(c, r.cell.row, r.cell.grant, me), token: null }),
      lease: r.cell,
      ghost: r.ghost,
      lostReply: false,
      stopped: true,
    });
  }
  return out;
}

/**
 * A leadership check: issued (the store reads the row now) while none is in
 * flight, or its reply applied, or dropped by `staleReply`. late-read-applied
 * is the elector before it ordered replies: only the version is compared, so
 * a reply of "no row" is always applied.
 */
export function checkSteps(
  w: LeaseWorld,
  c: Contender,
  me: string,
  variant: Variant,
  mayIssue: boolean,
): { label: string; contender: Contender; issued: boolean }[] {
  if (c.check === null) {
    // A check that reads the row the view already holds can only be dropped or change nothing: not a step.
    if (!mayIssue || (w.lease.row !== null && sameRow(w.lease.row, c.view))) return [];
    return [
      {
        label: `${me} checks its leadership: the store reads ${describeRow(w.lease.row)}, the reply is on its way`,
        contender: { ...c, check: { row: w.lease.row, grant: w.lease.grant, overtaken: false } },
        issued: true,
      },
    ];
  }
  const check = c.check;
  const done = { ...c, check: null };
  const issuedBefore = variant === 'late-read-applied' ? false : check.overtaken;
  if (staleReply(c.view, check.row, issuedBefore)) {
    return [
      {
        label: `${me}'s leadership check answers ${describeRow(check.row)}: older than its view (${describeRow(c.view)}), dropped`,
        contender: done,
        issued: false,
      },
    ];
  }
  return [
    {
      label: `${me}'s leadership check answers ${describeRow(check.row)}: applied`,
      contender: { ...observe(done, check.row, check.grant, me), unsure: c.unsure },
      issued: false,
    },
  ];
}

// ── invariants shared by every model that has a lease ─────────────────────

export interface HasLease {
  readonly lease: LeaseCell;
  readonly leaseGhost: LeaseGhost;
}

export const leaseOneHolderPerEpoch: Invariant<HasLease> = {
  name: 'lease-one-holder-per-epoch',
  check: (s) => {
    const byEpoch = new Map<number, string>();
    for (const [n, g] of s.leaseGhost.grants.entries()) {
      const first = byEpoch.get(g.epoch);
      if (first !== undefined) return `epoch ${g.epoch} granted twice: ${first}, then ${g.holder} (grant ${n})`;
      byEpoch.set(g.epoch, `${g.holder} (grant ${n})`);
    }
    return null;
  },
};

export const leaseEpochMonotonic: Invariant<HasLease> = {
  name: 'lease-epoch-monotonic',
  check: (s) => {
    const row = s.lease.row;
    return row !== null && row.epoch < s.leaseGhost.highest ? `lease ${row.name} is at epoch ${row.epoch} after epoch ${s.leaseGhost.highest}` : null;
  },
};

export const fencedWriteUnderCurrentEpoch: Invariant<HasLease> = {
  name: 'fenced-write-under-current-epoch',
  check: (s) => {
    const bad = s.leaseGhost.writes.find((w) => w.under !== w.atCommit);
    return bad ? `a write made under ${bad.under} was accepted while the lease row was ${bad.atCommit}` : null;
  },
};

export const leaseInvariants = [leaseOneHolderPerEpoch, leaseEpochMonotonic, fencedWriteUnderCurrentEpoch] as const;

/**
 * No process goes back to an older view of the lease than one it applied.
 * Going back is how a holder whose row still names it, live, steps down
 * (reason "expired"): nobody then leads until its next retry, since the
 * others cannot steal a live lease.
 */
export const leaseViewNeverRegresses: Invariant<{ readonly nodes: readonly Contender[] }> = {
  name: 'lease-view-never-regresses',
  check: (s) => {
    for (const [i, c] of s.nodes.entries()) {
      if (c.seen === null) continue;
      const version = c.view === null ? -1 : c.view.version;
      if (version < c.seen) return `${nodeId(i)} went back to ${describeRow(c.view)} after applying version ${c.seen} of the row`;
    }
    return null;
  },
};

// ── the lease model ───────────────────────────────────────────────────────

export interface Budget {
  readonly ticks: number;
  readonly crashes: number;
  readonly lost: number;
}

/** The lease model's: leadership checks issued, too. */
export interface LeaseBudget extends Budget {
  readonly checks: number;
}

export interface LeaseScope {
  readonly nodes: number;
  readonly budget: LeaseBudget;
  readonly maxDepth: number;
}

interface InFlightWrite {
  readonly from: string;
  readonly token: HeldToken;
  /** fence-check-then-write: the fence's answer when the write was issued. */
  readonly admitted: boolean | null;
}

export interface LeaseState extends HasLease {
  readonly now: number;
  readonly nodes: readonly Contender[];
  /** Fenced writes sent and not yet committed, in a canonical order (a multiset). */
  readonly net: readonly InFlightWrite[];
  readonly budget: LeaseBudget;
}

export const LEASE_TIMING: LeaseTiming = { name: 'promotion_leader', tickMs: 1_000, ttlMs: 1_000, skewMs: 0 };

function nodeId(i: number): string {
  return `n${i}`;
}

function withWrite(net: readonly InFlightWrite[], w: InFlightWrite): InFlightWrite[] {
  const key = (x: InFlightWrite) => JSON.stringify(x);
  return [...net, w].sort((a, b) => (key(a) < key(b) ? -1 : 1));
}

export function leaseModel(scope: LeaseScope, variant: Variant = 'correct', timing: LeaseTiming = LEASE_TIMING): Model<LeaseState> {
  const initial: LeaseState = {
    now: 0,
    lease: noLease,
    leaseGhost: emptyLeaseGhost,
    nodes: Array.from({ length: scope.nodes }, () => freshContender),
    net: [],
    budget: scope.budget,
  };
  const steps = (s: LeaseState): Step<LeaseState>[] => {
    const out: Step<LeaseState>[] = [];
    const world: LeaseWorld = { now: s.now, lease: s.lease, ghost: s.leaseGhost, mayLoseReply: s.budget.lost > 0, mayStop: s.budget.crashes > 0 };
    s.nodes.forEach((c, i) => {
      const me = nodeId(i);
      const setNode = (contender: Contender) => s.nodes.map((x, j) => (j === i ? contender : x));
      for (const step of contenderSteps(world, c, me, timing, variant)) {
        out.push({
          label: step.label,
          next: {
            ...s,
            lease: step.lease,
            leaseGhost: step.ghost,
            nodes: setNode(step.contender),
            budget: { ...s.budget, lost: s.budget.lost - (step.lostReply ? 1 : 0), crashes: s.budget.crashes - (step.stopped ? 1 : 0) },
          },
        });
      }
      for (const step of checkSteps(world, c, me, variant, s.budget.checks > 0)) {
        out.push({
          label: step.label,
          next: { ...s, nodes: setNode(step.contender), budget: { ...s.budget, checks: s.budget.checks - (step.issued ? 1 : 0) } },
        });
      }
      // One fenced write in flight per contender bounds the net without losing an interleaving that matters.
      if (c.token !== null && !s.net.some((w) => w.from === me)) {
        const admitted = checksAtIssue(variant) ? fenceAdmits(s.lease, c.token, variant) : null;
        out.push({
          label: `${me} sends a fenced write under ${me}@${c.token.epoch}`,
          next: { ...s, net: withWrite(s.net, { from: me, token: c.token, admitted }) },
        });
      }
      if (s.budget.crashes > 0 && (c.view !== null || c.token !== null || c.unsure !== null)) {
        out.push({
          label: `${me} crashes (forgets its view and token)`,
          next: { ...s, nodes: setNode(freshContender), budget: { ...s.budget, crashes: s.budget.crashes - 1 } },
        });
      }
    });
    s.net.forEach((w, k) => {
      const admitted = w.admitted ?? fenceAdmits(s.lease, w.token, variant);
      const net = s.net.filter((_, j) => j !== k);
      out.push({
        label: `${w.from}'s fenced write under ${w.token.holder}@${w.token.epoch} arrives: ${admitted ? 'accepted' : 'fenced'} (lease ${describeRow(s.lease.row)})`,
        next: { ...s, net, leaseGhost: admitted ? recordFencedWrite(s.leaseGhost, s.lease, w.token) : s.leaseGhost },
      });
    });
    if (s.budget.ticks > 0) {
      out.push({
        label: `time passes: ${s.now + timing.tickMs} ms`,
        next: { ...s, now: s.now + timing.tickMs, budget: { ...s.budget, ticks: s.budget.ticks - 1 } },
      });
    }
    return out;
  };
  return { name: 'lease', initial, steps, invariants: [...leaseInvariants, leaseViewNeverRegresses] };
}
