import type { Desired, Observed, Stamp } from '../../../shared/actuation/port.js';
import { decide, desiredOf } from '../../../shared/actuation/reconcile.js';
import type { RolloutView } from '../../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../../shared/rollout/spec.js';
import { freshStages, isTerminal, planTransition, viewAfter, type Transition } from '../../../shared/rollout/transitions.js';
import type { Invariant, Model, Step } from '../explorer.js';
import type { Variant } from '../store.js';

/**
 * The alias model: leaders converging a Lambda alias to a rollout's
 * committed traffic, each deposed one a zombie that goes on where it stalled
 * (anywhere), the next one (epoch + 1) taking the lease over at any point.
 *
 * Modeled, with the project's own code: the committed states are planned by
 * `planTransition`/`viewAfter` (canary 10 % → 50 % → rolled back, or
 * completed by promote-full; a rollback of the canary too), what each asks of the alias by
 * `desiredOf`, and whether to write by `decide`. A leader's convergence is
 * Actuation.convergeTarget's loop against LambdaAliasActuator, in three steps:
 * - read the store and the alias, `decide`; on a write, save the pending
 *   record (fenced: a deposed leader stops here);
 * - UpdateAlias with the alias's content and stamp, conditioned on the
 *   RevisionId read (the alias bumps its revision on every write); refused,
 *   it reads again, up to three times (MOVED_RETRIES), with the same view;
 * - read back, verify, save the converged record (fenced).
 * The leader in office commits the next transition at any time. A leader's
 * convergences run one after another (Actuation.converge chains them per
 * rollout), each on the store as it was when it began.
 *
 * Merged into one step, sound because nothing but our leaders writes the
 * alias: the store read with the alias read (a view older than the store is a
 * previous convergence's), and the fenced pending save with them (before the
 * takeover only the reader writes the alias, so reading later reads the same;
 * after it the save fails whenever it comes). The actuator's GetAlias for the
 * stable version (`versionAt`, only when the alias carries no stamp of ours)
 * is checked at the write: the conditioned write makes it redundant, and
 * without the condition checking it as late as possible admits the fewest
 * writes, so a counterexample found there is one the actuator allows.
 *
 * Not modeled: the stable version (`base`) and the alias's FunctionVersion
 * beyond `final`, other writers of the alias, a retry's next attempt, and a
 * view loaded before its leader's own later commit but converged after it (a
 * BatchPromoter tick's, while a StreamingPromoter commits): that writes an
 * earlier stage back over a converged one, even over a rollback, until the
 * next tick. The
 * actuation record is not passed to `decide`: it matters only once drift was
 * recorded, and our leaders write weights and stamp together, so drift cannot
 * arise; `decide` answering drift or held here is a model error, thrown.
 *
 * `aliasAtRest` (the default scope's start): the alias starts never written,
 * so a deposed leader's first write, decided before the rollout ended, may
 * still be in flight when the new leader converges the end. `decide` writes
 * the end (0, or finalised) to an unstamped alias at rest, which moves the
 * revision and refuses that late write; releasing it instead (an earlier
 * rule) let the write land after a settled rollback, and left a rollout
 * completed before its first write never finalised. The large scope starts
 * from the alias carrying the canary.
 */

const ROLLOUT = 'rollout';
const NOW = 1_000;
/** Actuation.convergeTarget's MOVED_RETRIES: re-reads after a refused conditioned write. */
const MOVED_RETRIES = 3;
/** The first leader's epoch; each takeover adds one. */
const FIRST = 1;

const SPEC = parseRolloutSpec({
  target: { service: 'fn', version: '7' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0 },
    { name: 'half', percent: 50, bakeSeconds: 0 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
  actuators: ['alias'],
});

export type CommitId = 'canary' | 'half' | 'canary-rolled-back' | 'half-rolled-back' | 'completed';

interface Committed {
  readonly view: RolloutView;
  readonly desired: Desired;
  /** The highest share any state committed up to this one asked for (the attempt's path to it is unique). */
  readonly highest: number;
  readonly next: readonly { readonly to: CommitId; readonly what: string }[];
}

/** The committed states, each planned from the one before by the project's transitions. */
const COMMITTED: Readonly<Record<CommitId, Committed>> = (() => {
  const ctx = { now: NOW, token: { name: 'promotion_leader', holder: 'n0', epoch: FIRST }, actor: 'promoter:n0' };
  const after = (v: RolloutView, t: Transition) => viewAfter(v, planTransition(v, t, ctx));
  const rollout = {
    id: ROLLOUT,
    spec: SPEC,
    state: 'running' as const,
    attempt: 1,
    version: 0,
    createdAt: NOW,
    updatedAt: NOW,
    lastProgressAt: NOW,
    deadlineExceededAt: null,
    stateBy: 'ops',
    stateReason: null,
  };
  const start: RolloutView = { rollout, stages: freshStages({ rollout }), metrics: new Map(), alarms: {}, gates: new Map() };
  const canary = after(start, { kind: 'activate', stage: 0 });
  const half = after(canary, { kind: 'promote', stage: 0, then: 'activate_next' });
  const views: Record<CommitId, RolloutView> = {
    canary,
    half,
    'canary-rolled-back': after(canary, { kind: 'rollback', stage: 0, reason: 'breach' }),
    'half-rolled-back': after(half, { kind: 'rollback', stage: 1, reason: 'breach' }),
    completed: after(half, { kind: 'promote_full' }),
  };
  const next: Record<CommitId, Committed['next']> = {
    canary: [
      { to: 'half', what: 'promotes the canary' },
      { to: 'canary-rolled-back', what: 'rolls the canary back' },
    ],
    half: [
      { to: 'half-rolled-back', what: 'rolls back at 50 %' },
      { to: 'completed', what: 'completes (promote-full)' },
    ],
    'canary-rolled-back': [],
    'half-rolled-back': [],
    completed: [],
  };
  const highest: Record<CommitId, number> = { canary: 10, half: 50, 'canary-rolled-back': 10, 'half-rolled-back': 50, completed: 100 };
  const out = {} as Record<CommitId, Committed>;
  for (const id of Object.keys(views) as CommitId[]) out[id] = { view: views[id], desired: desiredOf(views[id]), highest: highest[id], next: next[id] };
  return out;
})();

/** The alias: the new version's share as LambdaAliasActuator reads it, our stamp (its Description), its RevisionId. */
interface AliasCell {
  /** On the new version, 0–100; 0 once finalised (nothing split, the alias on the new version). */
  readonly percent: number;
  readonly final: boolean;
  readonly stamp: Stamp | null;
  readonly revision: number;
}

interface Leader {
  readonly epoch: number;
  /** idle; read: reads the alias again (after a refused write); write: its UpdateAlias is on its way; check: reads back. */
  readonly at: 'idle' | 'read' | 'write' | 'check';
  /** The committed state this convergence works towards (null while idle). */
  readonly view: CommitId | null;
  /** The alias as read, which the write is conditioned on (write, check). */
  readonly observed: AliasCell | null;
  /** Refused conditioned writes in this convergence. */
  readonly moved: number;
  /** A fenced save failed: FencedError ended its convergence, and no write of it gets past the fence again. */
  readonly deposed: boolean;
}

export interface AliasState {
  readonly commit: CommitId;
  /** The promotion lease's epoch: whose fenced writes pass. */
  readonly lease: number;
  readonly alias: AliasCell;
  /** By epoch: leader i holds epoch FIRST + i. */
  readonly leaders: readonly Leader[];
  /** Ghost: the committed state a leader in office last completed a convergence of (its converged record saved under the fence). */
  readonly reconciled: CommitId | null;
}

export interface AliasScope {
  /** Leaders in turn, each taking the lease over from the one before (epochs 1, 2, …). */
  readonly leaders: number;
  readonly maxDepth: number;
  /** Start from an alias never written (see the model's comment) rather than one carrying the canary under epoch 1. */
  readonly aliasAtRest?: boolean;
}

const shareOf = (o: { percent: number; final: boolean }) => (o.final ? 100 : o.percent);
const sameRollout = (s: Stamp | null): s is Stamp => s !== null && s.rolloutId === ROLLOUT;

function describeAlias(a: AliasCell): string {
  const carries = a.final ? 'final' : `${a.percent} %`;
  return `${carries}${a.stamp ? ` under epoch ${a.stamp.epoch}` : ', no stamp'}, rev ${a.revision}`;
}

function describeCommit(id: CommitId): string {
  const d = COMMITTED[id].desired;
  return `${id} (${d.final ? 'final' : `${d.percent} %`})`;
}

/** What UpdateAlias leaves: the split (or none), the alias's version (final or not), the stamp as Description. */
function written(d: Desired, stamp: Stamp, revision: number): AliasCell {
  const split = !d.final && d.percent > 0;
  return { percent: split ? d.percent : 0, final: d.final, stamp, revision };
}

/** convergeTarget's check of the read-back (its `verified`). */
function verified(after: AliasCell, stamp: Stamp, d: Desired): boolean {
  const s = after.stamp;
  const carries = s !== null && s.attempt === d.attempt && s.stage === d.stage && shareOf(s) === shareOf(d) && s.final === d.final;
  return carries && s.rolloutId === stamp.rolloutId && s.epoch === stamp.epoch && shareOf(after) === shareOf(d) && after.final === d.final;
}

const observedOf = (a: AliasCell): Observed => ({ percent: a.percent, final: a.final, stamp: a.stamp, detail: describeAlias(a), revision: String(a.revision) });

const stampOf = (d: Desired, epoch: number): Stamp => ({
  rolloutId: d.rolloutId,
  attempt: d.attempt,
  stage: d.stage,
  epoch,
  percent: d.percent,
  final: d.final,
});

export function aliasModel(scope: AliasScope, variant: Variant = 'correct'): Model<AliasState> {
  const canary = COMMITTED.canary.desired;
  const idle = (epoch: number): Leader => ({ epoch, at: 'idle', view: null, observed: null, moved: 0, deposed: false });
  const initial: AliasState = {
    commit: 'canary',
    lease: FIRST,
    alias: scope.aliasAtRest ? { percent: 0, final: false, stamp: null, revision: 0 } : written(canary, stampOf(canary, FIRST), 1),
    leaders: Array.from({ length: scope.leaders }, (_, i) => idle(FIRST + i)),
    reconciled: scope.aliasAtRest ? null : 'canary',
  };
  const name = (l: Leader) => `n${l.epoch - FIRST}@${l.epoch}`;
  const withLeader = (s: AliasState, i: number, l: Leader): AliasState => ({ ...s, leaders: s.leaders.map((x, j) => (j === i ? l : x)) });
  /** A fenced save: passes only for the leader in office; otherwise FencedError ends the convergence for good. */
  const inOffice = (s: AliasState, l: Leader) => s.lease === l.epoch;

  /** Read the alias, decide on `view`, and on a write save the pending record. */
  const readAndDecide = (s: AliasState, i: number, view: CommitId, moved: number, how: string): Step<AliasState> => {
    const l = s.leaders[i]!;
    const c = COMMITTED[view];
    const verdict = decide(c.desired, observedOf(s.alias), l.epoch, null, { version: c.view.rollout.version, ended: isTerminal(c.view.rollout.state) });
    const head = `${name(l)} ${how} ${describeCommit(view)}, reads the alias (${describeAlias(s.alias)}): ${verdict.kind}`;
    switch (verdict.kind) {
      case 'write':
        if (!inOffice(s, l))
          return { label: `${head}; pending record fenced (lease epoch ${s.lease}): stops`, next: withLeader(s, i, { ...idle(l.epoch), deposed: true }) };
        return { label: `${head}; pending record saved`, next: withLeader(s, i, { ...l, at: 'write', view, observed: s.alias, moved }) };
      case 'superseded':
        return { label: head, next: withLeader(s, i, idle(l.epoch)) };
      case 'converged':
      case 'released':
        return complete(s, i, view, head);
      case 'drift':
      case 'held':
        throw new Error(`alias model: decide answered ${verdict.kind} (${head}); the model passes no record, which is sound only while drift cannot arise`);
    }
  };
  /** The converged record saved: under the fence, a completed convergence of `view`. */
  const complete = (s: AliasState, i: number, view: CommitId, head: string): Step<AliasState> => {
    const l = s.leaders[i]!;
    if (!inOffice(s, l))
      return { label: `${head}; record fenced (lease epoch ${s.lease}): stops`, next: withLeader(s, i, { ...idle(l.epoch), deposed: true }) };
    return { label: `${head}; converged record saved`, next: { ...withLeader(s, i, idle(l.epoch)), reconciled: view } };
  };

  const steps = (s: AliasState): Step<AliasState>[] => {
    const out: Step<AliasState>[] = [];
    s.leaders.forEach((l, i) => {
      if (l.deposed || s.lease < l.epoch) return;
      switch (l.at) {
        case 'idle':
          out.push(readAndDecide(s, i, s.commit, 0, 'converges'));
          return;
        case 'read':
          out.push(readAndDecide(s, i, l.view!, l.moved, 'again for'));
          return;
        case 'write': {
          const c = COMMITTED[l.view!];
          const read = l.observed!;
          const stamp = stampOf(c.desired, l.epoch);
          // versionAt: a GetAlias for the stable version when the reading has no stamp of ours to take it from.
          const baseMoved = !sameRollout(read.stamp) && s.alias.revision !== read.revision;
          const revisionMoved = variant !== 'actuate-without-revision' && s.alias.revision !== read.revision;
          const head = `${name(l)}'s UpdateAlias ${c.desired.final ? 'final' : `${c.desired.percent} %`} under epoch ${l.epoch}${variant === 'actuate-without-revision' ? '' : ` if rev ${read.revision}`}`;
          if (baseMoved || revisionMoved) {
            const why = `${baseMoved ? 'versionAt' : 'PreconditionFailed'}: the alias is at rev ${s.alias.revision}`;
            if (l.moved < MOVED_RETRIES)
              out.push({ label: `${head}: refused (${why}); reads again`, next: withLeader(s, i, { ...l, at: 'read', observed: null, moved: l.moved + 1 }) });
            else out.push(failed(s, i, `${head}: refused (${why}), retries spent`));
            return;
          }
          const alias = written(c.desired, stamp, s.alias.revision + 1);
          out.push({ label: `${head}: written → ${describeAlias(alias)}`, next: { ...withLeader(s, i, { ...l, at: 'check' }), alias } });
          return;
        }
        case 'check': {
          const c = COMMITTED[l.view!];
          const head = `${name(l)} reads back ${describeAlias(s.alias)}`;
          if (verified(s.alias, stampOf(c.desired, l.epoch), c.desired)) out.push(complete(s, i, l.view!, `${head}: verified`));
          else out.push(failed(s, i, `${head}: not what it wrote`));
          return;
        }
      }
    });
    // The leader in office commits the next transition (a fenced rollout_apply).
    const office = s.leaders.find((l) => l.epoch === s.lease)!;
    for (const n of COMMITTED[s.commit].next) out.push({ label: `${name(office)} ${n.what}: commits ${describeCommit(n.to)}`, next: { ...s, commit: n.to } });
    if (s.lease < FIRST + s.leaders.length - 1) {
      const to = s.leaders[s.lease - FIRST + 1]!;
      out.push({ label: `the lease passes to ${name(to)}; ${name(office)} goes on as it was`, next: { ...s, lease: to.epoch } });
    }
    return out;
  };
  /** The convergence ends with a pending (or failed) record, saved under the fence; the next one reads afresh. */
  const failed = (s: AliasState, i: number, head: string): Step<AliasState> => {
    const l = s.leaders[i]!;
    if (!inOffice(s, l))
      return { label: `${head}; record fenced (lease epoch ${s.lease}): stops`, next: withLeader(s, i, { ...idle(l.epoch), deposed: true }) };
    return { label: `${head}; pending record saved`, next: withLeader(s, i, idle(l.epoch)) };
  };

  return { name: 'alias', initial, steps, invariants: aliasInvariants, project };
}

/** Revisions matter only as equal to or older than the alias's, and as equal to each other. */
function project(s: AliasState): unknown {
  const revisions = [...new Set([s.alias.revision, ...s.leaders.flatMap((l) => (l.observed ? [l.observed.revision] : []))])].sort((a, b) => a - b);
  const rank = (a: AliasCell) => ({ ...a, revision: revisions.indexOf(a.revision) });
  return { ...s, alias: rank(s.alias), leaders: s.leaders.map((l) => ({ ...l, observed: l.observed && rank(l.observed) })) };
}

// ── invariants ────────────────────────────────────────────────────────────

/**
 * Never more on the new version than the most any committed state of the
 * attempt asked for. And after a committed rollback, once a leader in office
 * has completed a convergence of it (the converged record saved under the
 * fence), 0: that leader wrote 0 or found it, and no write made on an earlier
 * reading may land over it. Completion, not the rollback's commit, is the
 * point from which it must hold: until then a write decided before the
 * rollback may still land, and the convergence heals it.
 */
export const aliasNeverAhead: Invariant<AliasState> = {
  name: 'alias-never-ahead',
  check: (s) => {
    const share = shareOf(s.alias);
    const c = COMMITTED[s.commit];
    if (share > c.highest) return `the alias carries ${share} %, the attempt committed at most ${c.highest} %`;
    if (s.commit.endsWith('rolled-back') && s.reconciled === s.commit && share !== 0) {
      return `the alias carries ${share} % (${describeAlias(s.alias)}) after the rollback, which a leader in office had converged`;
    }
    return null;
  },
};

/**
 * The nearest safety statement to convergence the explorer can check (it
 * checks states, not infinite runs): once a leader in office has completed a
 * convergence of the committed state, the alias carries that state until the
 * next commit.
 */
export const aliasStaysConverged: Invariant<AliasState> = {
  name: 'alias-stays-converged',
  check: (s) => {
    if (s.reconciled !== s.commit) return null;
    const d = COMMITTED[s.commit].desired;
    if (shareOf(s.alias) === shareOf(d) && s.alias.final === d.final) return null;
    return `the alias carries ${describeAlias(s.alias)}, the converged ${describeCommit(s.commit)} asks ${shareOf(d)} %${d.final ? ' (final)' : ''}`;
  },
};

export const aliasInvariants = [aliasNeverAhead, aliasStaysConverged] as const;
