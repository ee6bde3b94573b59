import type { LeaseToken } from '../../../shared/lease/record.js';
import { evaluate } from '../../../shared/rollout/evaluate.js';
import { isShortOfData, judge, type GateOutcome, type GateReading, type GateTally } from '../../../shared/rollout/gates.js';
import type { ProviderGate } from '../../../shared/rollout/gate-spec.js';
import { type AlarmState, type RolloutView, type StageMetrics, type StageStatus } from '../../../shared/rollout/model.js';
import { parseRolloutSpec, stageProviders, type RolloutSpec } from '../../../shared/rollout/spec.js';
import { freshStages, planTransition, TransitionRejectedError, viewAfter, type TransitionPlan } from '../../../shared/rollout/transitions.js';
import { canonicalJson } from '../../../shared/canonical-json.js';
import type { Invariant, Model, Step } from '../explorer.js';
import {
  applyPlan,
  checksAtIssue,
  countReading,
  emptyLeaseGhost,
  fenceAdmits,
  noLease,
  planWrite,
  recordFencedWrite,
  type HeldToken,
  type PlanWrite,
  type RolloutCell,
  type RolloutRow,
  type Variant,
} from '../store.js';
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
 *
 * With `held` (the held-view scope), the leader's one-write path for a
 * metrics reading instead: stages bake for 1 s on a rollout clock that can
 * move once, and gate on a reading (at least one request, error rate ≤ 0.5)
 * as well as the alarm. Each node has one StreamingPromoter, which holds the
 * view its last evaluation left (n0 starts holding the canary active with a
 * good reading). A good or bad reading for the active or the next stage,
 * observed after every one before it or delivered late, reaches a node:
 * on a held view that decides with it, the promoter sends the reading, the
 * view it held and the plan in one write, applied as
 * `rollout_apply_with_reading` does (the reading stored if newer; the plan
 * only if it was, the rollout row's version and attempt, the active stage's
 * reading and the alarm are as held, and the fence and `rollout_apply`'s
 * conditions hold; otherwise it decides again on the store as it now is);
 * anywhere else the reading is stored (recordMetrics) and any promoter may
 * evaluate later. `held-decision-current` then checks what the write exists
 * for: a plan it applies is the one the evaluator makes on the store at that
 * moment, the reading included.
 *
 * With `judged` (the judged-gate scope), provider gates instead of the alarm:
 * three stages, the first two (10 % and 50 %) read by a rollout-wide
 * `relative` Prometheus gate counted across the rollout (`count: rollout`,
 * failureLimit 1, inconclusiveLimit 0, consecutiveSuccesses 2); the last, at
 * 100 %, has no baseline left and no gate. The canary starts active.
 * The gate reader takes a reading of the active stage of a running rollout
 * (pass, fail or inconclusive, made by the product's `judge` from canned
 * series) in the period it read (`lastProgressAt`), each at a later time on
 * the rollout clock; the store counts it into its (attempt, stage, gate)
 * tally with `tallyWith` as `recordGateReadings` does, at once or late (one
 * may be in flight: delivered after newer readings, a promotion, a pause or
 * a resume). Promoters read the tallies with the view, so `evaluate` decides
 * on them through `providerVerdict` and `countedTallies`; a failure past the
 * limit rolls back, an inconclusive reading pauses, the operator pauses and
 * resumes (a new period). `promotion-needs-passing-verdict` checks every
 * committed promote against a ghost record of the readings delivered, with
 * its own rule, not the verdict's: the promote carries, for each non-dryRun
 * gate of the stage, a passing reading that was delivered before the
 * decision, of that stage and attempt, taken in the stage's period current at
 * the decision (as the ghost saw activations and resumes commit), and the
 * newest of that period; and that period's consecutiveSuccesses newest
 * readings (by when they were taken) all pass. An operator's promote-full
 * skips the gates by design and is not judged.
 *
 * With `stretch` as well (the stretch scope), the two gated stages stretch
 * their bake to maxBakeSeconds 1 and then say `onInsufficientData: "pass"`:
 * the gate reader may also take a reading short of data (the product's "not
 * enough data" judgement of too few points), and the rollout clock may move
 * once past the stretch. The invariant then accepts, in place of the passes,
 * a promote decided at or after the period's origin plus the stretch, marked
 * `insufficientData`, that carries the period's newest reading, short of
 * data; never a failing or otherwise inconclusive one, never before the
 * stretch is over.
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

/** The held-view scope's: a bake, so a held view can come to decide as time passes; a reading gate beside the alarm. */
const HELD_SPEC = parseRolloutSpec({
  target: { service: 'svc', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 1, gates: { alarms: [ALARM], minRequests: 1, maxErrorRate: 0.5 } },
    { name: 'all', percent: 100, bakeSeconds: 1, gates: { alarms: [ALARM], minRequests: 1, maxErrorRate: 0.5 } },
  ],
});
const BAKE_MS = 1_000;

/** The judged-gate scope's gate: read in the stages below 100 % (a judged gate needs a baseline), its failures counted across them. */
const GATE = 'latency';
const JUDGED_GATE = {
  type: 'prometheus',
  name: GATE,
  address: 'http://prometheus:9090',
  query: 'avg(rate(http_request_duration_seconds_sum{version="{{version}}"}[1m]))',
  judge: { kind: 'relative', measure: 'ratio', tolerance: 0.2 },
  consecutiveSuccesses: 2,
  failureLimit: 1,
  inconclusiveLimit: 0,
} as const;
const JUDGED_SPEC = parseRolloutSpec({
  target: { service: 'svc', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0 },
    { name: 'half', percent: 50, bakeSeconds: 0 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
  rolloutGates: { count: 'rollout', providers: [JUDGED_GATE] },
});
/**
 * What the invariant asks of each stage's promotion, written out by the model, not derived by the
 * product's helpers: the non-dryRun gates the stage is read by, and their passes in a row.
 */
const REQUIRED: readonly (readonly { readonly gate: string; readonly passes: number }[])[] = [
  [{ gate: GATE, passes: JUDGED_GATE.consecutiveSuccesses }],
  [{ gate: GATE, passes: JUDGED_GATE.consecutiveSuccesses }],
  // At 100 % no baseline is left: the judged gate does not read the last stage.
  [],
];
/** The verdicts the broken variants make, as the evaluator would with these specs. */
const withGates = (spec: RolloutSpec, f: (g: ProviderGate) => ProviderGate): RolloutSpec => ({
  ...spec,
  rolloutGates: spec.rolloutGates && { ...spec.rolloutGates, providers: spec.rolloutGates.providers.map(f) },
});
/** The stretch scope's: the gated stages stretch for data for 1 s, then pass on what was seen. */
const STRETCH_MS = 1_000;
const STRETCH_SPEC: RolloutSpec = {
  ...JUDGED_SPEC,
  stages: JUDGED_SPEC.stages.map((x, i) => (i < 2 ? { ...x, maxBakeSeconds: STRETCH_MS / 1000, onInsufficientData: 'pass' as const } : x)),
};
/** insufficient-pass-early: the verdict passes on too little data with no stretch at all. */
const EARLY_SPEC: RolloutSpec = { ...STRETCH_SPEC, stages: STRETCH_SPEC.stages.map((x) => (x.maxBakeSeconds === undefined ? x : { ...x, maxBakeSeconds: 0 })) };
const NO_STREAK_SPEC = withGates(JUDGED_SPEC, ({ consecutiveSuccesses: _c, ...g }) => g);
const DRY_RUN_SPEC = withGates(JUDGED_SPEC, (g) => ({ ...g, dryRun: true }));

/** What the gate reader may read: the three outcomes, and (stretch scope) an inconclusive reading short of data. */
type Read = GateOutcome | 'short';

/** The product's judgement of canned cohort series (or a provider error), one reading per outcome, re-stamped for each reading taken. */
const READINGS: Readonly<Record<Read, GateReading>> = (() => {
  const gate = stageProviders(JUDGED_SPEC, 0)[0]!;
  const where = { attempt: 1, stage: 0, at: 0, source: 'poll' as const };
  const cohorts = (canary: number[]) => ({ kind: 'cohorts' as const, canary, baseline: [0.1, 0.1, 0.1], answer: '' });
  const out = {
    pass: judge(gate, cohorts([0.1, 0.1, 0.1]), where),
    fail: judge(gate, cohorts([0.2, 0.2, 0.2]), where),
    inconclusive: judge(gate, { kind: 'error', message: 'connect ECONNREFUSED', answer: '' }, where),
    short: judge(gate, cohorts([]), where),
  };
  for (const [want, r] of Object.entries(out))
    if (r.outcome !== (want === 'short' ? 'inconclusive' : want) || (want === 'short') !== isShortOfData(r))
      throw new Error(`the canned ${want} series judged ${r.outcome}`);
  return out;
})();
const OUTCOMES: readonly Read[] = ['pass', 'fail', 'inconclusive'];
const STRETCH_OUTCOMES: readonly Read[] = [...OUTCOMES, 'short'];
/** Readings the store may have been handed and not yet counted. */
const IN_FLIGHT = 1;
/** Every reading reports this many requests: a good one has no errors, a bad one nothing else. */
const REQUESTS = 2;

export type Command = 'abort' | 'retry' | 'pause' | 'resume' | 'promote_full';

export interface PromotionBudget extends Budget {
  /** Alarm changes. */
  readonly signals: number;
  /** Operator commands sent. */
  readonly commands: number;
  /** Metrics readings arriving (held-view scope); gate readings taken (judged-gate scope). */
  readonly readings: number;
  /** Moves of the rollout clock past a bake (held-view scope). */
  readonly bakes: number;
}

export interface PromotionScope {
  /** Promoters per node, e.g. [2, 1]: a BatchPromoter and a StreamingPromoter on n0, one on n1. */
  readonly promoters: readonly number[];
  readonly commands: readonly Command[];
  readonly budget: PromotionBudget;
  readonly maxDepth: number;
  /** The held-view scope: readings, bakes and the one-write path (see the model's comment). */
  readonly held?: boolean;
  /** The judged-gate scope: provider gate readings, counted into tallies, instead of the alarm (see the model's comment). */
  readonly judged?: boolean;
  /** With judged: the stretch scope (maxBakeSeconds, onInsufficientData pass, readings short of data; see the model's comment). */
  readonly stretch?: boolean;
}

/** A stored metrics reading, as far as the evaluator tells readings apart. */
interface Reading {
  readonly errors: number;
  readonly observedAt: number;
}

/** What a promoter read: the rollout without its spec, the current attempt's stages and readings, the alarm. */
interface ViewLite {
  readonly rollout: RolloutRow;
  readonly stages: readonly StageStatus[];
  readonly metrics: Readonly<Record<number, Reading>>;
  readonly alarm: AlarmState;
  /** Judged-gate scope: the gate tallies read, and (ghost) how many readings had been delivered then. */
  readonly gates?: Tallies;
  readonly seen?: number;
}

interface Promoter {
  readonly node: number;
  /** The view its plan in flight was made on (null: idle). */
  readonly view: ViewLite | null;
  /** Held-view scope: the view its last evaluation left, which a reading may be decided on. */
  readonly held: ViewLite | null;
}

/** A reading sent with the decision it made on a held view. */
interface HeldWrite {
  readonly stage: number;
  readonly reading: Reading;
  /** The view the decision was made on, before the reading. */
  readonly held: ViewLite;
}

interface Apply {
  /** `n0/1` for a promoter, `ops` for the operator. */
  readonly from: string;
  readonly token: HeldToken;
  readonly plan: Sent;
  /** Its sender still awaits the answer. */
  readonly listening: boolean;
  readonly admitted: boolean | null;
  /** Held-view scope: the write also stores a reading, and applies only on the view held. */
  readonly withReading?: HeldWrite;
}

/** Judged-gate scope, ghost: the period a stage of an attempt is in (set when its activation or a resume commits). */
interface Period {
  readonly attempt: number;
  readonly stage: number;
  readonly origin: number;
}

/** Judged-gate scope, ghost: what a promote was decided on. */
interface Decided {
  /** The period current when it was decided (null: no stage active, as the ghost saw it). */
  readonly period: Period | null;
  /** How many readings had been delivered when the view decided on was read. */
  readonly seen: number;
  /** The readings the plan carries (its stage_promoted event's). */
  readonly readings: readonly GateReading[];
  /** The rollout clock it was decided at. */
  readonly at: number;
  /** The plan says it passed on insufficient data (its event's `insufficientData`). */
  readonly insufficient: boolean;
}

/** A plan as a promoter sends it; judged-gate scope: with what a promote was decided on (ghost). */
type Sent = PlanWrite & { readonly decided?: Decided };

/** Judged-gate scope, ghost: a reading the store was handed, as it was taken. */
interface Delivered {
  readonly gate: string;
  readonly attempt: number;
  readonly stage: number;
  readonly origin: number;
  readonly at: number;
  readonly outcome: Read;
}

/** Tallies of one attempt, by stage, then gate. */
type Tallies = Readonly<Record<number, Readonly<Record<string, GateTally>>>>;

interface StageGhost {
  readonly promotions: number;
  readonly rolledBack: boolean;
  readonly promotedAfterEnd: string | null;
  readonly leftPromoted: string | null;
}

export interface PromotionState extends HasLease {
  readonly now: number;
  /** The rollout's clock (what evaluate and the plans read); the lease keeps its own, `now`. */
  readonly clock: number;
  readonly store: RolloutCell;
  /** Stored readings by attempt, then stage (as the store's stages). */
  readonly metrics: Readonly<Record<number, Readonly<Record<number, Reading>>>>;
  /** The latest time a reading sent so far was observed at. */
  readonly observed: number;
  readonly alarm: AlarmState;
  readonly nodes: readonly Contender[];
  readonly promoters: readonly Promoter[];
  readonly net: readonly Apply[];
  /** Per attempt (index attempt − 1): each stage's history, and whether the attempt was rolled back or aborted. */
  readonly ghost: readonly { readonly ended: boolean; readonly stages: readonly StageGhost[] }[];
  readonly budget: PromotionBudget;
  /** Ghost: the first held-view write that applied a plan the evaluator would not make on the store as it was. */
  readonly staleDecision: string | null;
  /** Judged-gate scope: gate tallies by attempt; readings taken, not yet counted, with their period. */
  readonly tallies?: Readonly<Record<number, Tallies>>;
  readonly inFlight?: readonly { readonly reading: GateReading; readonly origin: number }[];
  /** Judged-gate scope, ghost: every reading handed to the store, in order; the current period; the first promote without a passing verdict. */
  readonly delivered?: readonly Delivered[];
  readonly period?: Period | null;
  readonly unjustified?: string | null;
}

export const PROMOTION_TIMING: LeaseTiming = { name: 'promotion_leader', tickMs: 1_000, ttlMs: 1_000, skewMs: 0 };

const nodeId = (i: number) => `n${i}`;
const freshStageGhost: StageGhost = { promotions: 0, rolledBack: false, promotedAfterEnd: null, leftPromoted: null };
const freshAttempt = (stages: number) => ({ ended: false, stages: Array.from({ length: stages }, () => freshStageGhost) });

function fenceOf(t: HeldToken): LeaseToken {
  return { name: t.name, holder: t.holder, epoch: t.epoch };
}

function setAt<T>(xs: readonly T[], i: number, x: T): T[] {
  return xs.map((y, j) => (j === i ? x : y));
}

const metricsOf = (r: Reading): StageMetrics => ({ requests: REQUESTS, errors: r.errors, p99LatencyMs: null, observedAt: r.observedAt });

function fullView(v: ViewLite, spec: RolloutSpec): RolloutView {
  const metrics = new Map(Object.entries(v.metrics).map(([stage, r]) => [Number(stage), metricsOf(r)]));
  const gates = new Map(Object.entries(v.gates ?? {}).map(([stage, g]) => [Number(stage), new Map(Object.entries(g))]));
  return { rollout: { ...v.rollout, spec }, stages: v.stages, metrics, alarms: { [ALARM]: v.alarm }, gates };
}

/** Judged-gate scope: `seen`, the ghost count of readings delivered when the tallies were read, is kept with them. */
function liteView(v: RolloutView, seen?: number): ViewLite {
  const { spec: _spec, ...rollout } = v.rollout;
  const metrics = Object.fromEntries([...v.metrics].map(([stage, m]) => [stage, { errors: m.errors, observedAt: m.observedAt }]));
  const lite = { rollout, stages: v.stages, metrics, alarm: v.alarms[ALARM] ?? 'INSUFFICIENT_DATA' };
  if (seen === undefined) return lite;
  return { ...lite, gates: Object.fromEntries([...v.gates].map(([stage, g]) => [stage, Object.fromEntries(g)])), seen };
}

/**
 * The view as a promoter reads it. gates-any-period: tallies read without their period, as if each
 * were of the stage's current one (a verdict that counts a tally of an older period).
 */
function read(s: PromotionState, variant: Variant = 'correct'): ViewLite {
  const attempt = s.store.rollout.attempt;
  const view = { rollout: s.store.rollout, stages: s.store.stages[attempt] ?? [], metrics: s.metrics[attempt] ?? {}, alarm: s.alarm };
  if (s.tallies === undefined) return view;
  const origin = s.store.rollout.lastProgressAt;
  const gates = s.tallies[attempt] ?? {};
  const anyPeriod = (g: Tallies[number]) => Object.fromEntries(Object.entries(g).map(([name, t]) => [name, { ...t, origin }]));
  const read = variant === 'gates-any-period' ? Object.fromEntries(Object.entries(gates).map(([stage, g]) => [stage, anyPeriod(g)])) : gates;
  return { ...view, gates: read, seen: s.delivered?.length ?? 0 };
}

/** The active stage of a view, as evaluate finds it. */
function activeOf(v: ViewLite): number | undefined {
  return v.rollout.state === 'running' ? v.stages.find((x) => x.phase === 'active')?.index : undefined;
}

function describeStages(c: RolloutCell): string {
  const r = c.rollout;
  return `${r.state} attempt ${r.attempt} v${r.version} [${(c.stages[r.attempt] ?? []).map((s) => s.phase).join(', ')}]`;
}

function describePlan(p: PlanWrite): string {
  const stages = p.stageChanges.map((c) => `stage ${c.index} ${c.expect}→${c.set.phase ?? c.expect}`).join(', ');
  return `${p.transition}${stages ? ` (${stages})` : ''} on v${p.expect.version}`;
}

/**
 * A decision of the evaluator on `view` at `now`, planned: the step the engine would send, or null.
 * Judged-gate scope: a promote goes with what it was decided on (ghost): the period current then, the
 * readings delivered by the time the view was read, and the readings its event carries.
 */
function decide(spec: RolloutSpec, view: ViewLite, token: HeldToken, actor: string, now: number, period: Period | null = null): Sent | null {
  const full = fullView(view, spec);
  const decision = evaluate(full, now);
  if (decision === null) return null;
  const plan = planTransition(full, decision, { now, token: fenceOf(token), actor });
  const w = planWrite(plan);
  if (view.seen === undefined || plan.transition !== 'promote') return w;
  const promoted = plan.events.find((e) => e.detailType === 'ai.rollout.stage_promoted')?.detail;
  return { ...w, decided: { period, seen: view.seen, readings: promoted?.readings ?? [], at: now, insufficient: promoted?.insufficientData !== undefined } };
}

const outcomesOf = (xs: readonly Delivered[]) => `[${xs.map((x) => `${x.outcome} at ${x.at}`).join(', ')}]`;

/**
 * promotion-needs-passing-verdict, at a promote's commit: why it was not decided on passing readings of
 * each of its stage's gates (REQUIRED) in the stage's current period, by the ghost's record of the
 * readings delivered; null when it was. Its own rule, not providerVerdict's: by when readings were taken.
 */
function unjustifiedPromotion(plan: Sent, delivered: readonly Delivered[], stretchMs: number | null): string | null {
  const change = plan.stageChanges.find((c) => c.set.phase === 'promoted');
  if (!change) return null;
  const attempt = plan.expect.attempt;
  const stage = change.index;
  const what = `the promote of stage ${stage} of attempt ${attempt}`;
  const d = plan.decided;
  if (!d) return `${what} carries no record of what it was decided on`;
  const p = d.period;
  if (!p || p.attempt !== attempt || p.stage !== stage)
    return `${what} was decided while ${p ? `stage ${p.stage} of attempt ${p.attempt}` : 'no stage'} was in its current period`;
  const known = delivered.slice(0, d.seen);
  for (const { gate, passes } of REQUIRED[stage] ?? []) {
    const period = known.filter((x) => x.gate === gate && x.attempt === attempt && x.stage === stage && x.origin === p.origin).sort((a, b) => b.at - a.at);
    const carried = d.readings.filter((r) => r.gate === gate);
    if (!carried.length) return `${what} carries no reading of gate ${gate} (delivered in its period ${p.origin}: ${outcomesOf(period)})`;
    for (const r of carried) {
      const x = known.find((k) => k.gate === gate && k.at === r.at);
      if (!x) return `${what} carries a reading of gate ${gate} taken at ${r.at}, not delivered before the decision`;
      // A reading short of data stands for a pass only as onInsufficientData pass allows (below).
      if ((x.outcome !== 'pass' && x.outcome !== 'short') || (x.outcome === 'pass') !== (r.outcome === 'pass'))
        return `${what} carries gate ${gate}'s ${x.outcome} reading taken at ${x.at}`;
      if (x.attempt !== attempt || x.stage !== stage) return `${what} carries gate ${gate}'s reading of stage ${x.stage} of attempt ${x.attempt}`;
      if (x.origin !== p.origin)
        return `${what} carries gate ${gate}'s reading taken at ${x.at} in period ${x.origin}, not in the stage's current period ${p.origin}`;
      if (x.at !== period[0]!.at) return `${what} carries gate ${gate}'s reading taken at ${x.at}, not its period's newest (taken at ${period[0]!.at})`;
    }
    if (period[0]!.outcome === 'short') {
      // onInsufficientData pass: the spec says so, the stretch is over, the newest reading is short of data, and the promote says so.
      if (stretchMs === null) return `${what} passed gate ${gate}'s reading short of data, and the stage does not say onInsufficientData pass`;
      if (d.at < p.origin + stretchMs)
        return `${what} passed gate ${gate}'s reading short of data at ${d.at}, before the stretch of period ${p.origin} was over (at ${p.origin + stretchMs})`;
      if (!d.insufficient) return `${what} passed gate ${gate}'s reading short of data without saying it passed on insufficient data`;
      continue;
    }
    const newest = period.slice(0, passes);
    if (newest.length < passes || newest.some((x) => x.outcome !== 'pass'))
      return `${what}: gate ${gate}'s newest readings in period ${p.origin} are ${outcomesOf(newest)}, not ${passes} passes in a row (consecutiveSuccesses)`;
  }
  return null;
}

/** Ghost: what a committed plan did to each stage and attempt. */
function recordPlan(ghost: PromotionState['ghost'], before: RolloutCell, plan: PlanWrite): PromotionState['ghost'] {
  const out = [...ghost];
  const attempt = plan.expect.attempt;
  let g = out[attempt - 1] ?? freshAttempt(ghost[0]!.stages.length);
  const stages = [...g.stages];
  for (const c of plan.stageChanges) {
    const prior = before.stages[attempt]?.[c.index]?.phase;
    const to = c.set.phase;
    let sg = stages[c.index]!;
    if (to === 'promoted') {
      const after = sg.rolledBack ? 'after it was rolled back' : g.ended ? `after attempt ${attempt} ended` : null;
      sg = {
        ...sg,
        promotions: sg.promotions + 1,
        promotedAfterEnd: sg.promotedAfterEnd ?? (after && `stage ${c.index} of attempt ${attempt} promoted ${after} (by ${plan.transition})`),
      };
    }
    if (prior === 'promoted' && to !== undefined && to !== 'promoted') {
      sg = { ...sg, leftPromoted: sg.leftPromoted ?? `stage ${c.index} of attempt ${attempt} went from promoted to ${to} (by ${plan.transition})` };
    }
    if (to === 'rolled_back') sg = { ...sg, rolledBack: true };
    stages[c.index] = sg;
  }
  g = { ...g, stages, ended: g.ended || plan.next.state === 'rolled_back' || plan.next.state === 'aborted' };
  out[attempt - 1] = g;
  if (plan.newStages.length && !out[plan.next.attempt - 1]) out[plan.next.attempt - 1] = freshAttempt(plan.newStages.length);
  return out;
}

export function promotionModel(scope: PromotionScope, variant: Variant = 'correct', timing: LeaseTiming = PROMOTION_TIMING): Model<PromotionState> {
  const held = scope.held === true;
  const judged = scope.judged === true;
  const stretch = judged && scope.stretch === true;
  const spec = held ? HELD_SPEC : stretch ? STRETCH_SPEC : judged ? JUDGED_SPEC : SPEC;
  // The spec the evaluator decides with: a broken verdict of the judged-gate scope reads the gate otherwise.
  const verdictSpec =
    variant === 'gates-no-streak'
      ? NO_STREAK_SPEC
      : variant === 'gates-dry-run'
        ? DRY_RUN_SPEC
        : variant === 'insufficient-pass-early' && stretch
          ? EARLY_SPEC
          : spec;
  const rollout: RolloutRow = {
    id: ROLLOUT,
    state: 'running',
    attempt: 1,
    version: held || judged ? 1 : 0,
    createdAt: NOW,
    updatedAt: NOW,
    lastProgressAt: NOW,
    deadlineExceededAt: null,
    stateBy: 'ops',
    stateReason: null,
  };
  // Held-view scope: the canary active with a good reading, baking; n0's promoter left it so and holds that view.
  // Judged-gate scope: the canary active, its gate not read yet.
  const fresh = freshStages({ rollout: { ...rollout, spec } });
  const stages = held || judged ? fresh.map((x) => (x.index === 0 ? { ...x, phase: 'active' as const, activatedAt: NOW } : x)) : fresh;
  const canary: Record<number, Reading> = held ? { 0: { errors: 0, observedAt: NOW } } : {};
  const heldView: ViewLite = { rollout, stages, metrics: canary, alarm: 'OK' };
  const initial: PromotionState = {
    now: 0,
    clock: NOW,
    lease: noLease,
    leaseGhost: emptyLeaseGhost,
    store: { rollout, stages: { 1: stages } },
    metrics: held ? { 1: canary } : {},
    observed: NOW,
    alarm: 'OK',
    nodes: scope.promoters.map(() => freshContender),
    promoters: scope.promoters.flatMap((n, node) =>
      Array.from({ length: n }, (_, i) => ({ node, view: null, held: held && node === 0 && i === 0 ? heldView : null })),
    ),
    net: [],
    ghost: [freshAttempt(spec.stages.length)],
    budget: scope.budget,
    staleDecision: null,
    ...(judged ? { tallies: { 1: {} }, inFlight: [], delivered: [], period: { attempt: 1, stage: 0, origin: NOW }, unjustified: null } : {}),
  };
  /** Promoter `pi`'s decision on `view` at the rollout clock (with the period current in `s`, for the ghost). */
  const decideAt = (s: PromotionState, view: ViewLite, token: HeldToken, pi: number) =>
    decide(verdictSpec, view, token, `promoter:${nodeId(s.promoters[pi]!.node)}`, s.clock, s.period ?? null);
  /** Judged-gate scope: the store handed a reading taken in period `origin`, counted as recordGateReadings counts it. */
  const deliver = (s: PromotionState, reading: GateReading, origin: number): { state: PromotionState; counted: GateTally | null } => {
    const { gate, attempt, stage, at } = reading;
    const outcome: Read = isShortOfData(reading) ? 'short' : reading.outcome;
    const byStage = s.tallies?.[attempt] ?? {};
    const counted = countReading(byStage[stage]?.[gate], reading, origin, variant);
    const delivered = [...(s.delivered ?? []), { gate, attempt, stage, origin, at, outcome }];
    if (counted === null) return { state: { ...s, delivered }, counted };
    const tallies = { ...s.tallies, [attempt]: { ...byStage, [stage]: { ...byStage[stage], [gate]: counted } } };
    return { state: { ...s, delivered, tallies }, counted };
  };
  const describeCount = (t: GateTally | null) =>
    t === null
      ? 'not counted (an older period than its tally)'
      : `counted: period ${t.origin}, ${t.readings} read, ${t.failures} failed, ${t.inconclusive} inconclusive, ${t.passStreak} passes in a row`;
  /** Judged-gate scope, ghost: the period after a committed plan, and the first promote without a passing verdict. */
  const judgedGhost = (s: PromotionState, plan: Sent): Pick<PromotionState, 'period' | 'unjustified'> => {
    const activated = plan.stageChanges.find((c) => c.set.phase === 'active');
    const prior = s.period ?? null;
    const period = activated
      ? { attempt: plan.next.attempt, stage: activated.index, origin: plan.next.lastProgressAt }
      : plan.newStages.length
        ? null
        : plan.transition === 'resume' && prior
          ? { ...prior, origin: plan.next.lastProgressAt }
          : prior;
    const why = plan.transition === 'promote' ? unjustifiedPromotion(plan, s.delivered ?? [], stretch ? STRETCH_MS : null) : null;
    return { period, unjustified: s.unjustified ?? why };
  };
  /** The store with a reading recorded as recordMetrics does (the current attempt; only over an older one). */
  const withReading = (s: PromotionState, stage: number, r: Reading): { state: PromotionState; stored: boolean } => {
    const attempt = s.store.rollout.attempt;
    const prior = s.metrics[attempt]?.[stage];
    if (prior && prior.observedAt >= r.observedAt) return { state: s, stored: false };
    return { state: { ...s, metrics: { ...s.metrics, [attempt]: { ...s.metrics[attempt], [stage]: r } } }, stored: true };
  };
  const spend = (s: PromotionState, what: keyof PromotionBudget): PromotionState => ({ ...s, budget: { ...s.budget, [what]: s.budget[what] - 1 } });
  const promoterId = (s: PromotionState, pi: number) =>
    `${nodeId(s.promoters[pi]!.node)}/${s.promoters.slice(0, pi).filter((p) => p.node === s.promoters[pi]!.node).length}`;
  const send = (s: PromotionState, m: Omit<Apply, 'admitted'>): PromotionState => ({
    ...s,
    net: [...s.net, { ...m, admitted: checksAtIssue(variant) ? fenceAdmits(s.lease, m.token, variant) : null }],
  });

  const steps = (s: PromotionState): Step<PromotionState>[] => {
    const describeReading = (stage: number, r: Reading) => `a ${r.errors ? 'bad' : 'good'} reading of stage ${stage} (observed ${r.observedAt})`;
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
          promoters: s.promoters.map((p) => (p.node === ni ? { ...p, view: null, held: null } : p)),
          net: s.net.map((m) => (gone(m.from) ? { ...m, listening: false } : m)),
        };
        out.push({ label: `${me} crashes (its promoters with it)`, next: spend(next, 'crashes') });
      }
    });

    s.promoters.forEach((p, pi) => {
      const token = s.nodes[p.node]!.token;
      if (p.view !== null || token === null) return;
      const view = read(s, variant);
      const plan = decideAt(s, view, token, pi);
      if (plan === null) {
        // Held-view scope: an evaluation that decides nothing still leaves the promoter holding what it read.
        if (held && canonicalJson(p.held) !== canonicalJson(view)) {
          out.push({
            label: `${promoterId(s, pi)} reads ${describeStages(s.store)}, alarm ${s.alarm}: nothing to decide; holds it`,
            next: { ...s, promoters: setAt(s.promoters, pi, { ...p, held: view }) },
          });
        }
        return;
      }
      const from = promoterId(s, pi);
      out.push({
        label: `${from} reads ${describeStages(s.store)}, alarm ${s.alarm}; sends ${describePlan(plan)} under epoch ${token.epoch}`,
        next: send({ ...s, promoters: setAt(s.promoters, pi, { ...p, view }) }, { from, token, plan, listening: true }),
      });
    });

    if (s.budget.commands > 0 && !s.net.some((m) => m.from === 'ops' && m.listening)) {
      s.nodes.forEach((c, ni) => {
        if (c.token === null) return;
        const view = fullView(read(s), spec);
        for (const kind of scope.commands) {
          // Judged-gate scope: a command that starts a period is made a moment later on the rollout clock, so the period is a new one.
          const now = judged && (kind === 'resume' || kind === 'retry') ? s.clock + 1 : s.clock;
          let plan: TransitionPlan;
          try {
            plan = planTransition(view, { kind }, { now, token: fenceOf(c.token), actor: 'ops' });
          } catch (err) {
            if (err instanceof TransitionRejectedError) continue;
            throw err;
          }
          const w = planWrite(plan);
          out.push({
            label: `ops sends ${describePlan(w)} through ${nodeId(ni)} (epoch ${c.token.epoch}), having read ${describeStages(s.store)}`,
            next: spend(send({ ...s, clock: now }, { from: 'ops', token: c.token, plan: w, listening: true }), 'commands'),
          });
        }
      });
    }

    s.net.forEach((m, k) => {
      const rest = s.net.filter((_, j) => j !== k);
      const admitted = m.admitted ?? fenceAdmits(s.lease, fenceOf(m.token), variant);
      const pi = m.from === 'ops' ? -1 : s.promoters.findIndex((_, i) => promoterId(s, i) === m.from);
      const head = `${m.from}'s ${describePlan(m.plan)} under epoch ${m.token.epoch}${m.withReading ? ` with ${describeReading(m.withReading.stage, m.withReading.reading)}` : ''} arrives`;
      // Its evaluation ends: the promoter holds what it was left with (nothing, after a write that did not apply).
      const idle = (st: PromotionState, keep: ViewLite | null = null): PromotionState =>
        pi >= 0 && m.listening ? { ...st, promoters: setAt(st.promoters, pi, { ...st.promoters[pi]!, view: null, held: held ? keep : null }) } : st;
      let before = s;
      // A held write's plan, tried on the store with its reading (then applied as it is).
      let tried: ReturnType<typeof applyPlan> | null = null;
      if (m.withReading) {
        // rollout_apply_with_reading: the reading is stored whoever leads; the plan applies only on the view held.
        const w = m.withReading;
        const { state, stored } = withReading(s, w.stage, w.reading);
        // What the decision read, as held against the store before this reading (signalsRead): row, active stage's reading, alarm.
        const current = read(s);
        const sig = activeOf(w.held);
        const sameRow = w.held.rollout.version === current.rollout.version && w.held.rollout.attempt === current.rollout.attempt;
        const sameReading = variant === 'held-no-metrics-check' || sig === undefined || w.held.metrics[sig]?.observedAt === current.metrics[sig]?.observedAt;
        const sameAlarm = variant === 'held-no-alarm-check' || w.held.alarm === current.alarm;
        const moved = !stored ? 'an equal or newer reading was stored' : !(sameRow && sameReading && sameAlarm) ? 'the store moved from the view held' : null;
        const fresh = read(state);
        tried = moved === null && admitted ? applyPlan(state.store, m.plan, variant) : null;
        if (tried?.status !== 'ok') {
          // The fence is asked only of a plan that would apply: fenced, FencedError ends the evaluation and
          // the promoter keeps the view it held. Otherwise the write returned the view as it is now and the
          // caller decides again on it.
          const fenced = moved === null && !admitted;
          const why = moved ?? (fenced ? `fenced (lease ${describeRow(s.lease.row)})` : `stale (${describeStages(s.store)})`);
          const after = { ...state, net: rest };
          const again = !fenced && m.listening && pi >= 0 ? decideAt(s, fresh, m.token, pi) : null;
          const label = `${head}: reading ${stored ? 'stored' : 'not stored'}, plan not applied (${why})`;
          if (again === null) out.push({ label, next: idle(after, fenced ? w.held : fresh) });
          else {
            const resent = send(
              { ...after, promoters: setAt(after.promoters, pi, { ...after.promoters[pi]!, view: fresh }) },
              { from: m.from, token: m.token, plan: again, listening: true },
            );
            out.push({ label: `${label}; decides again: sends ${describePlan(again)}`, next: resent });
          }
          return;
        }
        // What the write is for: the plan it applies is the evaluator's on the store as it is, the reading included.
        const expected = decideAt(s, fresh, m.token, pi);
        const got = describePlan(m.plan);
        const wanted = expected ? describePlan(expected) : 'nothing';
        before =
          wanted === got || state.staleDecision !== null
            ? state
            : { ...state, staleDecision: `${m.from} applied ${got} on a held view; on the store as it was the evaluator decides ${wanted}` };
      } else if (!admitted) {
        out.push({ label: `${head}: fenced (lease ${describeRow(s.lease.row)})`, next: idle({ ...s, net: rest }) });
        return;
      }
      const r = tried ?? applyPlan(before.store, m.plan, variant);
      if (r.status !== 'ok') {
        out.push({ label: `${head}: stale, nothing written (${describeStages(s.store)})`, next: idle({ ...s, net: rest }) });
        return;
      }
      const applied: PromotionState = {
        ...before,
        net: rest,
        store: r.cell,
        ghost: recordPlan(before.ghost, before.store, m.plan),
        leaseGhost: recordFencedWrite(before.leaseGhost, before.lease, m.token),
        ...(judged ? judgedGhost(before, m.plan) : {}),
      };
      const what = `${head}: applied → ${describeStages(r.cell)}`;
      const p = pi >= 0 ? s.promoters[pi]! : null;
      if (p === null || p.view === null || !m.listening) {
        out.push({ label: what, next: applied });
        return;
      }
      // RolloutEngine.evaluateView: go on from the view after the plan, without reading again.
      const plan: TransitionPlan = { rolloutId: ROLLOUT, events: [], ...m.plan, next: { ...m.plan.next, spec } };
      const view = liteView(viewAfter(fullView(p.view, spec), plan), p.view.seen);
      const again = decideAt(applied, view, m.token, pi);
      if (again === null) out.push({ label: what, next: idle(applied, view) });
      else {
        out.push({
          label: `${what}; ${m.from} goes on: sends ${describePlan(again)}`,
          next: send({ ...applied, promoters: setAt(applied.promoters, pi, { ...p, view }) }, { from: m.from, token: m.token, plan: again, listening: true }),
        });
      }
      // The engine's write threw: the evaluation ends, the next one reads afresh; a StreamingPromoter still holds what it held.
      if (s.budget.lost > 0) out.push({ label: `${what}, reply lost`, next: spend(idle(applied, p.held), 'lost') });
    });

    if (held && s.budget.readings > 0) {
      s.promoters.forEach((p, pi) => {
        const token = s.nodes[p.node]!.token;
        const current = activeOf(read(s));
        const heldActive = p.held ? activeOf(p.held) : undefined;
        const targets = [...new Set([current, heldActive].flatMap((a) => (a === undefined ? [] : [a, a + 1])))].filter((x) => x < spec.stages.length).sort();
        for (const stage of targets) {
          // A reading observed after every one before it, or one delivered late: observed before the last one sent.
          const times = [Math.max(s.observed, s.clock) + 2, ...(s.observed > NOW ? [s.observed - 1] : [])];
          for (const [errors, observedAt] of [0, REQUESTS].flatMap((e) => times.map((t) => [e, t] as const))) {
            const reading: Reading = { errors, observedAt };
            const base = spend({ ...s, observed: Math.max(s.observed, observedAt) }, 'readings');
            const at = `${describeReading(stage, reading)} reaches ${promoterId(s, pi)}`;
            // decideWithReading: a running held view, a reading newer than the one it holds, a decision.
            const prior = p.held?.metrics[stage];
            const onHeld =
              p.view === null && token !== null && p.held !== null && p.held.rollout.state === 'running' && !(prior && prior.observedAt >= reading.observedAt)
                ? { ...p.held, metrics: { ...p.held.metrics, [stage]: reading } }
                : null;
            const plan = onHeld && token ? decideAt(s, onHeld, token, pi) : null;
            if (plan && onHeld && token) {
              const next = send(
                { ...base, promoters: setAt(base.promoters, pi, { ...p, view: onHeld }) },
                { from: promoterId(s, pi), token, plan, listening: true, withReading: { stage, reading, held: p.held! } },
              );
              out.push({ label: `${at}; on its held view it sends ${describePlan(plan)} with it, under epoch ${token.epoch}`, next });
            } else {
              const { state, stored } = withReading(base, stage, reading);
              out.push({ label: `${at}; recorded: ${stored ? 'stored' : 'older than the one stored'}`, next: state });
            }
          }
        }
      });
    }
    if (judged) {
      // The gate reader: a reading of the active stage of a running rollout, in the period it read.
      const { attempt, lastProgressAt: origin } = s.store.rollout;
      const active = activeOf(read(s));
      const inFlight = s.inFlight ?? [];
      if (s.budget.readings > 0 && active !== undefined) {
        for (const gate of stageProviders(spec, active)) {
          for (const outcome of stretch ? STRETCH_OUTCOMES : OUTCOMES) {
            const at = s.clock + 1;
            const reading: GateReading = { ...READINGS[outcome], gate: gate.name, attempt, stage: active, at };
            const taken = spend({ ...s, clock: at }, 'readings');
            const what = `the gate reader reads ${gate.name} on stage ${active} (period ${origin}) at ${at}: ${outcome}`;
            const { state, counted } = deliver(taken, reading, origin);
            out.push({ label: `${what}; ${describeCount(counted)}`, next: state });
            if (inFlight.length < IN_FLIGHT)
              out.push({ label: `${what}; held up on its way to the store`, next: { ...taken, inFlight: [...inFlight, { reading, origin }] } });
          }
        }
      }
      inFlight.forEach((f, k) => {
        const { state, counted } = deliver({ ...s, inFlight: inFlight.filter((_, j) => j !== k) }, f.reading, f.origin);
        const r = f.reading;
        out.push({
          label: `the ${r.outcome} reading of ${r.gate} on stage ${r.stage} (attempt ${r.attempt}, period ${f.origin}) taken at ${r.at} reaches the store late; ${describeCount(counted)}`,
          next: state,
        });
      });
    }
    if (held && s.budget.bakes > 0) {
      out.push({ label: `the rollout clock passes a bake: ${s.clock + BAKE_MS}`, next: spend({ ...s, clock: s.clock + BAKE_MS }, 'bakes') });
    }
    if (stretch && s.budget.bakes > 0) {
      out.push({ label: `the rollout clock passes a stretch: ${s.clock + STRETCH_MS}`, next: spend({ ...s, clock: s.clock + STRETCH_MS }, 'bakes') });
    }

    if (s.budget.signals > 0) {
      const to: AlarmState = s.alarm === 'OK' ? 'ALARM' : 'OK';
      out.push({ label: `alarm ${ALARM} turns ${to}`, next: spend({ ...s, alarm: to }, 'signals') });
    }
    if (s.budget.ticks > 0) out.push({ label: `time passes: ${s.now + timing.tickMs} ms`, next: spend({ ...s, now: s.now + timing.tickMs }, 'ticks') });
    return out;
  };

  return {
    name: held ? 'held' : stretch ? 'stretch' : judged ? 'judged' : 'promotion',
    initial,
    steps,
    invariants: [...leaseInvariants, ...promotionInvariants, ...(held ? [heldDecisionCurrent] : []), ...(judged ? [promotionNeedsPassingVerdict] : [])],
    project: (s) => project(s, held, judged),
  };
}

/**
 * What the future depends on: the rollout row's version only as ranked among
 * the versions pinned by plans in flight and views being worked on or held;
 * phases (and, with bakes, when each stage became active), not who promoted
 * when; fenced writes that were fine.
 */
function project(s: PromotionState, held: boolean, judged: boolean): unknown {
  const versions = [
    ...new Set([
      s.store.rollout.version,
      ...s.net.flatMap((m) => [m.plan.expect.version, ...(m.withReading ? [m.withReading.held.rollout.version] : [])]),
      ...s.promoters.flatMap((p) => [...(p.view ? [p.view.rollout.version] : []), ...(p.held ? [p.held.rollout.version] : [])]),
    ]),
  ].sort((a, b) => a - b);
  const rank = (v: number) => versions.indexOf(v);
  // Judged-gate scope: lastProgressAt is the period gate readings are counted in.
  const row = (r: RolloutRow) => ({ state: r.state, attempt: r.attempt, version: rank(r.version), ...(judged ? { period: r.lastProgressAt } : {}) });
  // With bakes, when a stage became active decides when it has baked and which readings are its own.
  const phases = (stages: readonly StageStatus[]) => stages.map((x) => (held ? [x.phase, x.activatedAt] : x.phase));
  // Readings stay whole: which is newer, and equal observedAt, are what the held-view write compares.
  const lite = (v: ViewLite) => ({ rollout: row(v.rollout), stages: phases(v.stages), alarm: v.alarm, metrics: v.metrics, gates: v.gates, seen: v.seen });
  return {
    ...s,
    leaseGhost: { ...s.leaseGhost, writes: s.leaseGhost.writes.filter((w) => w.under !== w.atCommit) },
    lease: { ...s.lease, row: s.lease.row && { ...s.lease.row, version: 0 } },
    store: { rollout: row(s.store.rollout), stages: Object.fromEntries(Object.entries(s.store.stages).map(([a, st]) => [a, phases(st)])) },
    promoters: s.promoters.map((p) => ({ node: p.node, view: p.view && lite(p.view), held: p.held && lite(p.held) })),
    net: s.net.map((m) => ({
      ...m,
      plan: {
        transition: m.plan.transition,
        expect: { ...m.plan.expect, version: rank(m.plan.expect.version) },
        next: { state: m.plan.next.state, attempt: m.plan.next.attempt, ...(judged ? { period: m.plan.next.lastProgressAt } : {}) },
        stageChanges: m.plan.stageChanges.map((c) => ({ index: c.index, expect: c.expect, phase: c.set.phase })),
        newStages: m.plan.newStages.length,
        decided: m.plan.decided,
      },
      ...(m.withReading ? { withReading: { ...m.withReading, held: lite(m.withReading.held) } } : {}),
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

export const promotionNeedsPassingVerdict: Invariant<PromotionState> = {
  name: 'promotion-needs-passing-verdict',
  check: (s) => s.unjustified ?? null,
};

export const heldDecisionCurrent: Invariant<PromotionState> = {
  name: 'held-decision-current',
  check: (s) => s.staleDecision,
};
