import { beforeRolloutHooks } from './gate-spec.js';
import { currentTally, isShortOfData, providerVerdict, type GateReading, type GateTally } from './gates.js';
import { activeStage, type RolloutView, type StageMetrics } from './model.js';
import { stageIndexOf, stageProviders, type Gates } from './spec.js';
import { own } from '../own.js';
import type { TransitionOf } from './transitions.js';

/**
 * The pure evaluator: (rollout, stage statuses, signals, now) → the next
 * decision, or null when nothing should happen. No I/O. Both promoters call
 * it; each decision is applied as one fenced conditional write on exactly the
 * state evaluated here, then the view is read again.
 */

/**
 * The transitions the evaluator decides on its own, as Transition states them:
 * - `promote`: `readings` are the provider gates' passing readings that allowed it; `metrics` the
 *   pushed reading the stage's traffic and threshold gates judged, when it has any. No `reason`:
 *   that is what a person says when promoting by hand.
 * - `rollback`: `readings`, the provider gate reading that decided, when a provider gate did;
 *   `metrics`, the pushed reading, when it breached.
 * - `pause`: a provider gate's inconclusive readings are over its limit: stop and say why (the
 *   reason and readings are always there), neither promote nor roll back. Never for drift.
 * - `abort`: a hook before the first stage refused past its limit: the attempt ends having moved
 *   no traffic (the reason and readings are always there).
 */
export type Decision =
  | TransitionOf<'activate' | 'rollback' | 'deadline'>
  | Omit<TransitionOf<'promote'>, 'reason'>
  | Required<Omit<TransitionOf<'pause'>, 'drift'>>
  | Required<TransitionOf<'abort'>>;

export function evaluate(view: RolloutView, now: number): Decision | null {
  const { rollout, stages } = view;
  if (rollout.state !== 'running') return null;

  const active = activeStage(view);
  if (!active) {
    // The first stage (or, defensively, the next pending one) has not been activated yet.
    const next = stages.find((s) => s.phase === 'pending');
    if (next && stages.slice(0, next.index).every((s) => s.phase === 'promoted')) {
      // The attempt's first stage waits on the spec's before-rollout hooks (tallied with stage 0, since the attempt began).
      const before = next.index === 0 ? beforeRolloutHooks(rollout.spec.hooks) : [];
      if (before.length) {
        const hooks = providerVerdict(before, view.gates, 0, rollout.lastProgressAt);
        if (hooks.kind === 'rollback') return { kind: 'abort', reason: hooks.reason, readings: hooks.readings };
        if (hooks.kind === 'pause') return { kind: 'pause', reason: hooks.reason, readings: hooks.readings };
        if (hooks.kind === 'wait') return deadline(view, now);
      }
      return { kind: 'activate', stage: next.index };
    }
    return deadline(view, now);
  }

  const spec = rollout.spec.stages[active.index];
  if (!spec) throw new Error(`rollout ${rollout.id}: stage ${active.index} is active but the spec has ${rollout.spec.stages.length} stages`);
  const { gates } = spec;

  // Breaches first: a breach seen together with an elapsed bake still rolls back.
  const m = stageReading(view, active.index);
  const alarmBreach = alarmBreachOf(view, gates.alarms);
  if (alarmBreach) return { kind: 'rollback', stage: active.index, reason: alarmBreach };
  const metricsBreach = metricsBreachOf(gates, m);
  if (metricsBreach) return { kind: 'rollback', stage: active.index, reason: metricsBreach, metrics: m! };
  // Provider gates count readings since the stage's activation or last resume: both set lastProgressAt.
  // In a stage that stretches its bake, readings short of data wait for it: onInsufficientData decides (below), not the limit.
  const stretch = stretchEndOf(view);
  const counted = countedTallies(view, active.index);
  const providers = providerVerdict(stageProviders(rollout.spec, active.index), counted.tallies, active.index, rollout.lastProgressAt, {
    shortOfDataWaits: stretch !== null,
    countedFrom: counted.from,
  });
  if (providers.kind === 'rollback') return { kind: 'rollback', stage: active.index, reason: providers.reason, readings: providers.readings };
  if (providers.kind === 'pause') return { kind: 'pause', reason: providers.reason, readings: providers.readings };

  const holds = stageHolds(view, active.index, m, now);
  const baked = !holds.baking;
  const alarmsOk = holds.alarmsNotOk.length === 0;
  const enoughTraffic = !holds.requestsShort;
  if (baked && alarmsOk && enoughTraffic && providers.kind === 'pass') {
    const last = active.index === stages.length - 1;
    const judged = m !== undefined && (gates.minRequests > 0 || gates.maxErrorRate !== undefined || gates.maxP99LatencyMs !== undefined);
    return {
      kind: 'promote',
      stage: active.index,
      then: last ? 'complete' : 'activate_next',
      ...(providers.readings.length ? { readings: providers.readings } : {}),
      ...(judged ? { metrics: m } : {}),
    };
  }
  // Too little data to judge once the bake, stretched to maxBakeSeconds, is over: the stage does what it says.
  if (baked && alarmsOk && stretch !== null && now >= stretch) {
    const short = insufficientData(view, active.index, enoughTraffic ? null : m);
    if (short) {
      const reason = `stage ${spec.name}: not enough data ${Math.round((now - rollout.lastProgressAt) / 1000)} s into its period (maxBakeSeconds ${spec.maxBakeSeconds ?? spec.bakeSeconds}): ${short.reason}`;
      if (spec.onInsufficientData === 'rollback')
        return { kind: 'rollback', stage: active.index, reason, ...(short.readings.length ? { readings: short.readings } : {}) };
      if (spec.onInsufficientData !== 'pass') return { kind: 'pause', reason, readings: short.readings };
      // Pass what was short, never what was seen failing: a short pushed reading over the thresholds pauses instead.
      const seenOver = enoughTraffic ? null : thresholdsExceededBy(gates, m);
      if (seenOver)
        return { kind: 'pause', reason: `${reason}; onInsufficientData pass does not pass over what was seen: ${seenOver}`, readings: short.readings };
      // Every other gate must pass as ever: only those short of data stand as passed.
      const passing = providerVerdict(stageProviders(rollout.spec, active.index), counted.tallies, active.index, rollout.lastProgressAt, {
        shortOfDataWaits: true,
        shortOfDataPasses: true,
        countedFrom: counted.from,
      });
      if (passing.kind === 'pass') {
        return {
          kind: 'promote',
          stage: active.index,
          then: active.index === stages.length - 1 ? 'complete' : 'activate_next',
          ...(passing.readings.length ? { readings: passing.readings } : {}),
          ...(m !== undefined ? { metrics: m } : {}),
          insufficientData: reason,
        };
      }
    }
  }
  return deadline(view, now);
}

/**
 * What holds the active stage besides its provider gates: its bake (until
 * `bakeEndsAt`; a stage never activated has not baked), each alarm it names
 * that is not OK, and pushed traffic short of `minRequests`. `evaluate`
 * promotes once none holds and the gates pass; `waitingOn` words the same.
 */
export interface StageHolds {
  readonly baking: boolean;
  readonly bakeEndsAt: number | null;
  readonly alarmsNotOk: readonly string[];
  readonly requestsShort: boolean;
}

export function stageHolds(view: RolloutView, stage: number, m: StageMetrics | undefined, now: number): StageHolds {
  const spec = view.rollout.spec.stages[stage]!;
  const activatedAt = view.stages[stage]?.activatedAt ?? null;
  const bakeEndsAt = activatedAt === null ? null : activatedAt + spec.bakeSeconds * 1000;
  const { gates } = spec;
  return {
    baking: bakeEndsAt === null || now < bakeEndsAt,
    bakeEndsAt,
    // Most stages name no alarm: nothing to allocate on the promotion path.
    alarmsNotOk: gates.alarms.length ? [...new Set(gates.alarms)].filter((a) => own(view.alarms, a) !== 'OK') : [],
    requestsShort: gates.minRequests > 0 && (m === undefined || m.requests < gates.minRequests),
  };
}

/**
 * When the active stage stops waiting for data: its bake stretched to maxBakeSeconds, counted from the
 * stage's current period (its activation, or the last resume: a resume gives the stage that time again,
 * as its gates count afresh). Null when the stage has neither field: it waits for its data, up to the
 * progress deadline.
 */
export function stretchEndOf(view: RolloutView): number | null {
  const active = activeStage(view);
  const stage = active && view.rollout.spec.stages[active.index];
  if (!stage || (stage.maxBakeSeconds === undefined && stage.onInsufficientData === undefined)) return null;
  return view.rollout.lastProgressAt + (stage.maxBakeSeconds ?? stage.bakeSeconds) * 1000;
}

/**
 * What the active stage is short of: too few pushed requests for `minRequests`, or provider gates whose
 * newest reading is "not enough data" (with those readings). Null when nothing is short of data.
 */
function insufficientData(view: RolloutView, stage: number, shortReading: StageMetrics | undefined | null): { reason: string; readings: GateReading[] } | null {
  const { rollout } = view;
  const gates = rollout.spec.stages[stage]!.gates;
  const reasons: string[] = [];
  const readings: GateReading[] = [];
  if (shortReading !== null) reasons.push(`${shortReading?.requests ?? 0} of ${gates.minRequests} requests reported`);
  for (const g of stageProviders(rollout.spec, stage)) {
    if (g.dryRun) continue;
    const last = currentTally(view.gates, stage, g.name, rollout.lastProgressAt)?.last;
    if (last && isShortOfData(last)) {
      reasons.push(`gate ${g.name}: ${last.reason}`);
      readings.push(last);
    }
  }
  return reasons.length ? { reason: reasons.join('; '), readings } : null;
}

/**
 * What evaluate() reads of a view besides the rollout row and its stages
 * (every transition rewrites the row and bumps its version, which so stands
 * for both): the active stage's metrics, the alarms its gates name and its
 * provider gates' tallies. Null when no stage is active: then the row and
 * the stages are all it reads. A store that checks these are unchanged
 * knows a decision made on the view still holds.
 */
export function signalsRead(view: RolloutView): { readonly stage: number; readonly alarms: readonly string[]; readonly gates: readonly string[] } | null {
  const active = view.rollout.state === 'running' ? activeStage(view) : undefined;
  const gates = active && view.rollout.spec.stages[active.index]?.gates;
  if (!active || !gates) return null;
  return { stage: active.index, alarms: [...new Set(gates.alarms)], gates: stageProviders(view.rollout.spec, active.index).map((g) => g.name) };
}

/** Why the stage's gates are breached, or null. */
export function breachOf(view: RolloutView, stage: number): string | null {
  const gates = view.rollout.spec.stages[stage]?.gates;
  if (!gates) return null;
  return alarmBreachOf(view, gates.alarms) ?? metricsBreachOf(gates, stageReading(view, stage));
}

function alarmBreachOf(view: RolloutView, alarms: readonly string[]): string | null {
  const alarm = alarms.find((a) => own(view.alarms, a) === 'ALARM');
  return alarm === undefined ? null : `alarm ${alarm} is in ALARM`;
}

/** Why the stage's pushed reading breaches its thresholds, or null (none, too little traffic, within them). */
function metricsBreachOf(gates: Gates, m: StageMetrics | undefined): string | null {
  if (!m || m.requests < gates.minRequests) return null;
  return thresholdsExceededBy(gates, m);
}

/** Why a pushed reading is over the error rate or p99 it is held to, however few requests it counts; null when it is not (or counts none). */
function thresholdsExceededBy(gates: Gates, m: StageMetrics | undefined): string | null {
  if (!m || m.requests === 0) return null;
  const errorRate = m.errors / m.requests;
  if (gates.maxErrorRate !== undefined && errorRate > gates.maxErrorRate) {
    return `error rate ${errorRate.toFixed(4)} > ${gates.maxErrorRate} over ${m.requests} requests`;
  }
  if (gates.maxP99LatencyMs !== undefined && m.p99LatencyMs !== null && m.p99LatencyMs > gates.maxP99LatencyMs) {
    return `p99 latency ${m.p99LatencyMs} ms > ${gates.maxP99LatencyMs} ms`;
  }
  return null;
}

/**
 * The stage's reading, if it was observed while the stage was active. One
 * observed before the stage became active is about other traffic (a previous
 * stage's, a report sent early): it neither breaches nor stands in for the
 * stage's own requests.
 */
export function stageReading(view: RolloutView, stage: number): StageMetrics | undefined {
  const m = view.metrics.get(stage);
  const activatedAt = view.stages[stage]?.activatedAt ?? null;
  return m && activatedAt !== null && m.observedAt >= activatedAt ? m : undefined;
}

function deadline(view: RolloutView, now: number): Decision | null {
  const { rollout } = view;
  if (rollout.deadlineExceededAt !== null) return null;
  if (now - rollout.lastProgressAt <= rollout.spec.progressDeadlineSeconds * 1000) return null;
  return { kind: 'deadline', abort: rollout.spec.progressDeadlineAbort };
}

/**
 * The tallies a stage's gates are counted from. The view's own, but for rollout-wide gates that count
 * across the rollout (`rolloutGates.count: "rollout"`): in a stage after their fromStage, the failures
 * and inconclusive readings each earlier stage from fromStage ended with are added to the active
 * stage's current tally, so one failureLimit holds for the whole run. Nothing else is carried over: a
 * stage waits for a pass of its own traffic split, and passes in a row never cross stages. Until the
 * stage has a reading of its own nothing is added (an earlier stage's count over its limit had already
 * acted there, or the gate holds rather than acts).
 */
export function countedTallies(view: RolloutView, stage: number): { readonly tallies: RolloutView['gates']; readonly from: ReadonlyMap<string, string> } {
  const wide = view.rollout.spec.rolloutGates;
  const none = { tallies: view.gates, from: new Map<string, string>() };
  if (wide?.count !== 'rollout') return none;
  const start = stageIndexOf(view.rollout.spec, wide.fromStage ?? 0);
  if (start === null || stage < start) return none;
  const name = view.rollout.spec.stages[start]!.name;
  const from = new Map(wide.providers.map((g) => [g.name, name]));
  if (stage === start) return { tallies: view.gates, from };
  const newer = (a: GateReading | null, b: GateReading | null) => (a === null ? b : b === null || a.at >= b.at ? a : b);
  const here = new Map(view.gates.get(stage));
  for (const g of wide.providers) {
    const t = currentTally(view.gates, stage, g.name, view.rollout.lastProgressAt);
    if (!t) continue;
    let sum: GateTally = t;
    for (let s = start; s < stage; s++) {
      const e = view.gates.get(s)?.get(g.name);
      if (!e) continue;
      sum = {
        ...sum,
        failures: sum.failures + e.failures,
        inconclusive: sum.inconclusive + e.inconclusive,
        lastFailure: newer(sum.lastFailure, e.lastFailure),
        lastInconclusive: newer(sum.lastInconclusive, e.lastInconclusive),
      };
    }
    here.set(g.name, sum);
  }
  return { tallies: new Map(view.gates).set(stage, here), from };
}
