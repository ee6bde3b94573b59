import type { LeaseToken } from '../../../shared/lease/record.js';
import { evaluate } from '../../../shared/rollout/evaluate.js';
import type { AlarmState, RolloutView, StageStatus } from '../../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../../shared/rollout/spec.js';
import { freshStages, planTransition, TransitionRejectedError, viewAfter, type TransitionPlan } from '../../../shared/rollout/transitions.js';
import type { Invariant, Model, Step } from '../explorer.js';
import { applyPlan, checksAtIssue, emptyLeaseGhost, fenceAdmits, noLease, planWrite, recordFencedWrite, type HeldToken, type PlanWrite, type RolloutCell, type RolloutRow, type Variant } from '../store.js';
import { contenderSteps, describeRow, freshContender, leaseInvariants, type Budget, type Contender, type HasLease, type LeaseTiming, type LeaseWorld } from './lease.js';

/**
 * The promotion model: nodes contending for `promotion_leader`, each running
 * promoters (a BatchPromoter and a StreamingPromoter are the same thing here:
 * an evaluation of a view it read), an operator's commands, alarm changes.
 *
 * Modeled, with the project's own code: a promoter reads the view and its
 * node's token, asks the pure evaluator (`evaluate`) for a decision and
 * `planTransition` for the plan, and sends it; the store model applies it as
 * `rollout_apply` does (fence, rollout row by version/state/attempt, each
 * stage by its exact phase, all or nothing). On success it goes on from
 * `viewAfter`, as RolloutEngine.evaluateView does; on a stale or fenced
 * answer, or a lost reply, it stops and reads afresh next time. The operator
 * plans commands (abort, retry; pause, resume and promote-full in the large
 * scope) with `planTransition` on the view it read and sends them through a
 * node that believes it leads. An alarm named by both stages' gates turns
 * ALARM or OK (recordAlarm), which makes the evaluator roll back or promote.
 * Nodes are the lean contenders of the lease model; a node that crashes
 * takes its promoters with it (their plans on the wire still arrive).
 *
 * Not modeled: bake time and the progress deadline (every stage bakes for 0
 * s and the deadline never passes: the rollout's clock is one constant, the
 * lease's clock ticks), metrics (the alarm drives the same decisions), the
 * outbox and event publishing (stored in the same write; they decide
 * nothing), the StreamingPromoter's trigger (any promoter may evaluate at any
 * time, a superset of when it does).
 */

const ROLLOUT = 'rollout';
const NOW = 1_000;
const ALARM = 'errors';

const SPEC = parseRolloutSpec({
  target: { service: 'svc', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { alarms: [ALARM] } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { alarms: [ALARM] } },
  ],
});

export type Command = 'abort' | 'retry' | 'pause' | 'resume' | 'promote_full';

export interface PromotionBudget extends Budget {
  /** Alarm changes. */
  readonly signals: number;
  /** Operator commands sent. */
  readonly commands: number;
}

export interface PromotionScope {
  /** Promoters per node, e.g. [2, 1]: a BatchPromoter and a StreamingPromoter on n0, one on n1. */
  readonly promoters: readonly number[];
  readonly commands: readonly Command[];
  readonly budget: PromotionBudget;
  readonly maxDepth: number;
}

/** What a promoter read: the rollout without its spec, the current attempt's stages, the alarm. */
interface ViewLite {
  readonly rollout: RolloutRow;
  readonly stages: readonly StageStatus[];
  readonly alarm: AlarmState;
}

interface Promoter {
  readonly node: number;
  /** The view its plan in flight was made on (null: idle). */
  readonly view: ViewLite | null;
}

interface Apply {
  /** `n0/1` for a promoter, `ops` for the operator. */
  readonly from: string;
  readonly token: HeldToken;
  readonly plan: PlanWrite;
  /** Its sender still awaits the answer. */
  readonly listening: boolean;
  readonly admitted: boolean | null;
}

interface StageGhost {
  readonly promotions: number;
  readonly rolledBack: boolean;
  readonly promotedAfterEnd: string | null;
  readonly leftPromoted: string | null;
}

export interface PromotionState extends HasLease {
  readonly now: number;
  readonly store: RolloutCell;
  readonly alarm: AlarmState;
  readonly nodes: readonly Contender[];
  readonly promoters: readonly Promoter[];
  readonly net: readonly Apply[];
  /** Per attempt (index attempt − 1): each stage's history, and whether the attempt was rolled back or aborted. */
  readonly ghost: readonly { readonly ended: boolean; readonly stages: readonly StageGhost[] }[];
  readonly budget: PromotionBudget;
}

export const PROMOTION_TIMING: LeaseTiming = { name: 'promotion_leader', tickMs: 1_000, ttlMs: 1_000, skewMs: 0 };

const nodeId = (i: number) => `n${i}`;
const freshStageGhost: StageGhost = { promotions: 0, rolledBack: false, promotedAfterEnd: null, leftPromoted: null };
const freshAttempt = { ended: false, stages: SPEC.stages.map(() => freshStageGhost) };

function fenceOf(t: HeldToken): LeaseToken {
  return { name: t.name, holder: t.holder, epoch: t.epoch };
}

function setAt<T>(xs: readonly T[], i: number, x: T): T[] {
  return xs.map((y, j) => (j === i ? x : y));
}

function fullView(v: ViewLite): RolloutView {
  return { rollout: { ...v.rollout, spec: SPEC }, stages: v.stages, metrics: new Map(), alarms: { [ALARM]: v.alarm }, gates: new Map() };
}

function liteView(v: RolloutView): ViewLite {
  const { spec: _spec, ...rollout } = v.rollout;
  return { rollout, stages: v.stages, alarm: v.alarms[ALARM] ?? 'INSUFFICIENT_DATA' };
}

function read(s: PromotionState): ViewLite {
  return { rollout: s.store.rollout, stages: s.store.stages[s.store.rollout.attempt] ?? [], alarm: s.alarm };
}

function describeStages(c: RolloutCell): string {
  const r = c.rollout;
  return `${r.state} attempt ${r.attempt} v${r.version} [${(c.stages[r.attempt] ?? []).map((s) => s.phase).join(', ')}]`;
}

function describePlan(p: PlanWrite): string {
  const stages = p.stageChanges.map((c) => `stage ${c.index} ${c.expect}→${c.set.phase ?? c.expect}`).join(', ');
  return `${p.transition}${stages ? ` (${stages})` : ''} on v${p.expect.version}`;
}

/** A decision of the evaluator on `view`, planned: the step the engine would send, or null. */
function decide(view: ViewLite, token: HeldToken, actor: string): PlanWrite | null {
  const full = fullView(view);
  const decision = evaluate(full, NOW);
  if (decision === null) return null;
  return planWrite(planTransition(full, decision, { now: NOW, token: fenceOf(token), actor }));
}

/** Ghost: what a committed plan did to each stage and attempt. */
function recordPlan(ghost: PromotionState['ghost'], before: RolloutCell, plan: PlanWrite): PromotionState['ghost'] {
  const out = [...ghost];
  const attempt = plan.expect.attempt;
  let g = out[attempt - 1] ?? freshAttempt;
  const stages = [...g.stages];
  for (const c of plan.stageChanges) {
    const prior = before.stages[attempt]?.[c.index]?.phase;
    const to = c.set.phase;
    let sg = stages[c.index]!;
    if (to === 'promoted') {
      const after = sg.rolledBack ? 'after it was rolled back' : g.ended ? `after attempt ${attempt} ended` : null;
      sg = { ...sg, promotions: sg.promotions + 1, promotedAfterEnd: sg.promotedAfterEnd ?? (after && `stage ${c.index} of attempt ${attempt} promoted ${after} (by ${plan.transition})`) };
    }
    if (prior === 'promoted' && to !== undefined && to !== 'promoted') {
      sg = { ...sg, leftPromoted: sg.leftPromoted ?? `stage ${c.index} of attempt ${attempt} went from promoted to ${to} (by ${plan.transition})` };
    }
    if (to === 'rolled_back') sg = { ...sg, rolledBack: true };
    stages[c.index] = sg;
  }
  g = { ...g, stages, ended: g.ended || plan.next.state === 'rolled_back' || plan.next.state === 'aborted' };
  out[attempt - 1] = g;
  if (plan.newStages.length && !out[plan.next.attempt - 1]) out[plan.next.attempt - 1] = freshAttempt;
  return out;
}

export function promotionModel(scope: PromotionScope, variant: Variant = 'correct', timing: LeaseTiming = PROMOTION_TIMING): Model<PromotionState> {
  const rollout: RolloutRow = {
    id: ROLLOUT,
    state: 'running',
    attempt: 1,
    version: 0,
    createdAt: NOW,
    updatedAt: NOW,
    lastProgressAt: NOW,
    deadlineExceededAt: null,
    stateBy: 'ops',
    stateReason: null,
  };
  const initial: PromotionState = {
    now: 0,
    lease: noLease,
    leaseGhost: emptyLeaseGhost,
    store: { rollout, stages: { 1: freshStages({ rollout: { ...rollout, spec: SPEC } }) } },
    alarm: 'OK',
    nodes: scope.promoters.map(() => freshContender),
    promoters: scope.promoters.flatMap((n, node) => Array.from({ length: n }, () => ({ node, view: null }))),
    net: [],
    ghost: [freshAttempt],
    budget: scope.budget,
  };
  const spend = (s: PromotionState, what: keyof PromotionBudget): PromotionState => ({ ...s, budget: { ...s.budget, [what]: s.budget[what] - 1 } });
  const promoterId = (s: PromotionState, pi: number) => `${nodeId(s.promoters[pi]!.node)}/${s.promoters.slice(0, pi).filter((p) => p.node === s.promoters[pi]!.node).length}`;
  const send = (s: PromotionState, m: Omit<Apply, 'admitted'>): PromotionState => ({
    ...s,
    net: [...s.net, { ...m, admitted: checksAtIssue(variant) ? fenceAdmits(s.lease, m.token, variant) : null }],
  });

  const steps = (s: PromotionState): Step<PromotionState>[] => {
    const out: Step<PromotionState>[] = [];
    const world: LeaseWorld = { now: s.now, lease: s.lease, ghost: s.leaseGhost, mayLoseReply: false, mayStop: s.budget.crashes > 0 };

    s.nodes.forEach((c, ni) => {
      const me = nodeId(ni);
      for (const step of contenderSteps(world, c, me, timing, variant, false)) {
        const next: PromotionState = { ...s, lease: step.lease, leaseGhost: step.ghost, nodes: setAt(s.nodes, ni, step.contender) };
        out.push({ label: step.label, next: step.stopped ? spend(next, 'crashes') : next });
      }
      if (s.budget.crashes > 0 && c.token !== null) {
        // The node's promoters die with it; what they sent still arrives, unanswered.
        const gone = (from: string) => from.startsWith(`${me}/`);
        const next: PromotionState = {
          ...s,
          nodes: setAt(s.nodes, ni, freshContender),
          promoters: s.promoters.map((p) => (p.node === ni ? { ...p, view: null } : p)),
          net: s.net.map((m) => (gone(m.from) ? { ...m, listening: false } : m)),
        };
        out.push({ label: `${me} crashes (its promoters with it)`, next: spend(next, 'crashes') });
      }
    });

    s.promoters.forEach((p, pi) => {
      const token = s.nodes[p.node]!.token;
      if (p.view !== null || token === null) return;
      const view = read(s);
      const plan = decide(view, token, `promoter:${nodeId(p.node)}`);
      if (plan === null) return;
      const from = promoterId(s, pi);
      out.push({
        label: `${from} reads ${describeStages(s.store)}, alarm ${s.alarm}; sends ${describePlan(plan)} under epoch ${token.epoch}`,
        next: send({ ...s, promoters: setAt(s.promoters, pi, { ...p, view }) }, { from, token, plan, listening: true }),
      });
    });

    if (s.budget.commands > 0 && !s.net.some((m) => m.from === 'ops' && m.listening)) {
      s.nodes.forEach((c, ni) => {
        if (c.token === null) return;
        const view = fullView(read(s));
        for (const kind of scope.commands) {
          let plan: TransitionPlan;
          try {
            plan = planTransition(view, { kind }, { now: NOW, token: fenceOf(c.token), actor: 'ops' });
          } catch (err) {
            if (err instanceof TransitionRejectedError) continue;
            throw err;
          }
          const w = planWrite(plan);
          out.push({
            label: `ops sends ${describePlan(w)} through ${nodeId(ni)} (epoch ${c.token.epoch}), having read ${describeStages(s.store)}`,
            next: spend(send(s, { from: 'ops', token: c.token, plan: w, listening: true }), 'commands'),
          });
        }
      });
    }

    s.net.forEach((m, k) => {
      const rest = s.net.filter((_, j) => j !== k);
      const admitted = m.admitted ?? fenceAdmits(s.lease, fenceOf(m.token), variant);
      const pi = m.from === 'ops' ? -1 : s.promoters.findIndex((_, i) => promoterId(s, i) === m.from);
      const head = `${m.from}'s ${describePlan(m.plan)} under epoch ${m.token.epoch} arrives`;
      const idle = (st: PromotionState): PromotionState => (pi >= 0 && m.listening ? { ...st, promoters: setAt(st.promoters, pi, { ...st.promoters[pi]!, view: null }) } : st);
      if (!admitted) {
        out.push({ label: `${head}: fenced (lease ${describeRow(s.lease.row)})`, next: idle({ ...s, net: rest }) });
        return;
      }
      const r = applyPlan(s.store, m.plan, variant);
      if (r.status !== 'ok') {
        out.push({ label: `${head}: stale, nothing written (${describeStages(s.store)})`, next: idle({ ...s, net: rest }) });
        return;
      }
      const applied: PromotionState = { ...s, net: rest, store: r.cell, ghost: recordPlan(s.ghost, s.store, m.plan), leaseGhost: recordFencedWrite(s.leaseGhost, s.lease, m.token) };
      const what = `${head}: applied → ${describeStages(r.cell)}`;
      const p = pi >= 0 ? s.promoters[pi]! : null;
      if (p === null || p.view === null || !m.listening) {
        out.push({ label: what, next: applied });
        return;
      }
      // RolloutEngine.evaluateView: go on from the view after the plan, without reading again.
      const plan: TransitionPlan = { rolloutId: ROLLOUT, events: [], ...m.plan, next: { ...m.plan.next, spec: SPEC } };
      const view = liteView(viewAfter(fullView(p.view), plan));
      const again = decide(view, m.token, `promoter:${nodeId(p.node)}`);
      if (again === null) out.push({ label: what, next: idle(applied) });
      else {
        out.push({
          label: `${what}; ${m.from} goes on: sends ${describePlan(again)}`,
          next: send({ ...applied, promoters: setAt(applied.promoters, pi, { ...p, view }) }, { from: m.from, token: m.token, plan: again, listening: true }),
        });
      }
      // The engine's write threw: the evaluation ends, the next one reads afresh.
      if (s.budget.lost > 0) out.push({ label: `${what}, reply lost`, next: spend(idle(applied), 'lost') });
    });

    if (s.budget.signals > 0) {
      const to: AlarmState = s.alarm === 'OK' ? 'ALARM' : 'OK';
      out.push({ label: `alarm ${ALARM} turns ${to}`, next: spend({ ...s, alarm: to }, 'signals') });
    }
    if (s.budget.ticks > 0) out.push({ label: `time passes: ${s.now + timing.tickMs} ms`, next: spend({ ...s, now: s.now + timing.tickMs }, 'ticks') });
    return out;
  };

  return { name: 'promotion', initial, steps, invariants: [...leaseInvariants, ...promotionInvariants], project };
}

/**
 * What the future depends on: the rollout row's version only as ranked among
 * the versions pinned by plans in flight and views being worked on; phases,
 * not who promoted when; fenced writes that were fine.
 */
function project(s: PromotionState): unknown {
  const versions = [...new Set([s.store.rollout.version, ...s.net.map((m) => m.plan.expect.version), ...s.promoters.flatMap((p) => (p.view ? [p.view.rollout.version] : []))])].sort((a, b) => a - b);
  const rank = (v: number) => versions.indexOf(v);
  const row = (r: RolloutRow) => ({ state: r.state, attempt: r.attempt, version: rank(r.version) });
  const phases = (stages: readonly StageStatus[]) => stages.map((x) => x.phase);
  return {
    ...s,
    leaseGhost: { ...s.leaseGhost, writes: s.leaseGhost.writes.filter((w) => w.under !== w.atCommit) },
    lease: { ...s.lease, row: s.lease.row && { ...s.lease.row, version: 0 } },
    store: { rollout: row(s.store.rollout), stages: Object.fromEntries(Object.entries(s.store.stages).map(([a, st]) => [a, phases(st)])) },
    promoters: s.promoters.map((p) => ({ node: p.node, view: p.view && { rollout: row(p.view.rollout), stages: phases(p.view.stages), alarm: p.view.alarm } })),
    net: s.net.map((m) => ({
      ...m,
      plan: {
        transition: m.plan.transition,
        expect: { ...m.plan.expect, version: rank(m.plan.expect.version) },
        next: { state: m.plan.next.state, attempt: m.plan.next.attempt },
        stageChanges: m.plan.stageChanges.map((c) => ({ index: c.index, expect: c.expect, phase: c.set.phase })),
        newStages: m.plan.newStages.length,
      },
    })),
  };
}

// ── invariants ────────────────────────────────────────────────────────────

const stageFacts = (s: PromotionState) => s.ghost.flatMap((a, i) => a.stages.map((g, index) => ({ attempt: i + 1, index, g })));

export const stagePromotedAtMostOnce: Invariant<PromotionState> = {
  name: 'stage-promoted-at-most-once',
  check: (s) => {
    const twice = stageFacts(s).find((f) => f.g.promotions > 1);
    return twice ? `stage ${twice.index} of attempt ${twice.attempt} promoted ${twice.g.promotions} times` : null;
  },
};

export const noPromotionAfterRollback: Invariant<PromotionState> = {
  name: 'no-promotion-after-rollback',
  check: (s) => stageFacts(s).find((f) => f.g.promotedAfterEnd !== null)?.g.promotedAfterEnd ?? null,
};

export const promotionMonotonic: Invariant<PromotionState> = {
  name: 'promotion-monotonic',
  check: (s) => stageFacts(s).find((f) => f.g.leftPromoted !== null)?.g.leftPromoted ?? null,
};

export const promotionInvariants = [stagePromotedAtMostOnce, noPromotionAfterRollback, promotionMonotonic] as const;
