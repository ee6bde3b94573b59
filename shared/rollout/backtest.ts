import { gateJudgeOf, judgeOfQuery, passes, type ProviderGate } from './gate-spec.js';
import { tallyWith, providerVerdict, type GateReading, type GateTally } from './gates.js';
import { isCountsJudge, judgeCounts, judgeSeries } from '../judge/gate.js';
import type { RolloutState } from './model.js';
import { rejudgeSampleRatio } from '../judge/sample-ratio.js';

/**
 * Backtesting a proposed gate: its judgement and limits replayed over the
 * stored readings of past rollouts, against what happened to each. Pure: the
 * CLI fetches the rollouts and readings, this decides.
 *
 * A reading is judged again from what it kept:
 * - a judged reading's series (both cohorts' points, or their counts per
 *   step), by the proposed judge, whichever judge took it: so a mann-whitney
 *   gate's readings can be replayed as a stricter mann-whitney or a relative
 *   one, and a sequential-rate gate's counts with another alpha;
 * - without its series (a reading stored before they were kept, or one whose
 *   series the API left out for size): a relative gate's value against the
 *   proposed bound, or a mann-whitney or sequential-rate gate's outcome as
 *   stored when the proposed judge is the stored one (only the limits change);
 * - a sample-ratio gate's counts, kept in its answer when a reading has no
 *   series, against the proposed alpha and minSamples;
 * - a threshold gate's value against the proposed comparison and threshold.
 * An inconclusive reading without series stays inconclusive. Then the proposed limits
 * (initialDelaySeconds, failureLimit, inconclusiveLimit, onFail,
 * consecutiveSuccesses) are applied stage by stage with the promoter's own
 * rule (tallyWith, providerVerdict), counted from the stage's activation (a
 * resume, which starts the promoter's count again, is not seen here). A
 * stage that went on while the proposal would still have waited is a hold.
 */

export interface PastRollout {
  readonly id: string;
  readonly state: RolloutState;
  readonly stateReason: string | null;
  /** When it ended (or was last updated, if running). */
  readonly updatedAt: number;
  readonly stages: readonly { readonly index: number; readonly name: string; readonly activatedAt: number | null }[];
}

export type Replayed =
  /** It would have rolled back or paused; or held a stage that in fact went on (its newest reading failing under onFail hold, or passes short of consecutiveSuccesses). */
  | { readonly kind: 'stop'; readonly action: 'rollback' | 'pause' | 'hold'; readonly stage: number; readonly at: number; readonly reason: string }
  /** Every stage it read passed, or waited within its limits. */
  | { readonly kind: 'pass'; readonly stages: number; readonly readings: number }
  /** Nothing of it to replay: no readings of that gate, or none the proposed judge can be judged from. */
  | { readonly kind: 'none'; readonly reason: string };

export interface BacktestRow {
  readonly rollout: string;
  /** What happened (null: the rollout could not be read). */
  readonly outcome: RolloutState | null;
  readonly reason: string | null;
  readonly replayed: Replayed;
  /**
   * caught: a rollout that ended badly (rolled back or aborted) the gate would have stopped, `earlierMs`
   * before it did; falseAlarm: a completed rollout it would have stopped; missed: a bad one it passed;
   * agreed: a completed one it passed; unknown: nothing to replay, or still running.
   */
  readonly verdict: 'caught' | 'falseAlarm' | 'missed' | 'agreed' | 'unknown';
  readonly earlierMs: number | null;
}

const BAD: readonly RolloutState[] = ['rolled_back', 'aborted'];

/** One reading judged again as the proposed gate would, or why it cannot be. */
export function rejudge(proposed: ProviderGate, r: GateReading): GateReading['outcome'] | { readonly cannot: string } {
  if (r.type !== proposed.type) return { cannot: `a ${r.type} reading, not a ${proposed.type} one` };
  const judge = gateJudgeOf(proposed) ?? undefined;
  if (judge && r.series) {
    const s = r.series;
    if (isCountsJudge(judge)) {
      if (s.kind !== 'counts') return { cannot: `the readings kept series of values; a ${judge.kind} gate judges counts` };
      return judgeCounts(judge, s.canary, s.baseline, s.percent).outcome;
    }
    if (s.kind !== 'values') return { cannot: `the readings kept counts; a ${judge.kind} gate judges series of values` };
    return judgeSeries(judge, s.canary, s.baseline).outcome;
  }
  if (r.outcome === 'inconclusive') return 'inconclusive';
  if (!judge && (proposed.type === 'prometheus' || proposed.type === 'cloudwatchMetric')) {
    const stored = judgeOfQuery(r.query);
    if (stored) return { cannot: `the readings were judged ${stored}, the proposed gate against a threshold` };
    if (r.value === null || proposed.comparison === undefined || proposed.threshold === undefined) return { cannot: 'the reading kept no value' };
    return passes(r.value, proposed.comparison, proposed.threshold) ? 'pass' : 'fail';
  }
  if (judge) {
    const stored = judgeOfQuery(r.query);
    if (stored !== judge.kind) return { cannot: `the readings were judged ${stored ?? 'against a threshold'}, the proposed gate ${judge.kind}` };
    if (judge.kind === 'relative') {
      if (r.value === null) return 'inconclusive';
      const center = judge.measure === 'ratio' ? 1 : 0;
      const high = judge.direction !== 'decrease' && r.value > center + judge.tolerance;
      const low = judge.direction !== 'increase' && r.value < center - judge.tolerance;
      return high || low ? 'fail' : 'pass';
    }
    // The counts a sample-ratio reading kept are the whole of its judgement: judged again with the proposed alpha and minSamples.
    if (judge.kind === 'sample-ratio') return rejudgeSampleRatio(judge, r.answer) ?? r.outcome;
    return r.outcome;
  }
  // Alarm states and hook answers are kept as outcomes: the limits are what a proposal changes.
  return r.outcome;
}

/** The proposed gate replayed over one rollout's readings of it (any order), stage by stage. */
export function replay(proposed: ProviderGate, past: PastRollout, readings: readonly GateReading[]): Replayed {
  const mine = readings.filter((r) => r.gate === proposed.name).sort((a, b) => a.at - b.at);
  if (!mine.length) return { kind: 'none', reason: `no readings of gate ${proposed.name}` };
  // A gate on trial is backtested as if it acted: what it would have done is the question.
  const acting: ProviderGate = { ...proposed, dryRun: false };
  let judged = 0;
  let why: string | null = null;
  const stages = [...new Set(mine.map((r) => r.stage))].sort((a, b) => a - b);
  for (const stage of stages) {
    const activatedAt = past.stages.find((s) => s.index === stage)?.activatedAt ?? null;
    let tally: GateTally | undefined;
    for (const r of mine.filter((x) => x.stage === stage)) {
      const origin = activatedAt ?? mine[0]!.at;
      if (r.at < origin + proposed.initialDelaySeconds * 1000) continue;
      const outcome = rejudge(proposed, r);
      if (typeof outcome !== 'string') {
        why ??= outcome.cannot;
        continue;
      }
      judged++;
      const next: GateTally | null | undefined = tallyWith(tally, { ...r, outcome }, origin) ?? tally;
      if (!next) continue;
      tally = next;
      const verdict = providerVerdict([acting], new Map([[stage, new Map([[proposed.name, next]])]]), stage, origin);
      if (verdict.kind === 'rollback' || verdict.kind === 'pause') return { kind: 'stop', action: verdict.kind, stage, at: r.at, reason: verdict.reason };
    }
    // A stage that went on (a later stage was read, or the rollout completed) while the proposal would still wait: it would have held it.
    const wentOn = stage < stages.at(-1)! || past.state === 'completed';
    if (tally && wentOn) {
      const verdict = providerVerdict([acting], new Map([[stage, new Map([[proposed.name, tally]])]]), stage, tally.origin);
      if (verdict.kind === 'wait') return { kind: 'stop', action: 'hold', stage, at: tally.last.at, reason: verdict.reason };
    }
  }
  if (!judged) return { kind: 'none', reason: why ?? 'every reading came before the initial delay' };
  return { kind: 'pass', stages: stages.length, readings: judged };
}

/** The replay against what happened. */
export function backtestRow(proposed: ProviderGate, past: PastRollout, readings: readonly GateReading[]): BacktestRow {
  const replayed = replay(proposed, past, readings);
  const bad = BAD.includes(past.state);
  const ended = bad || past.state === 'completed';
  const row = { rollout: past.id, outcome: past.state, reason: past.stateReason, replayed };
  if (replayed.kind === 'none' || !ended) return { ...row, verdict: 'unknown', earlierMs: null };
  if (replayed.kind === 'stop') {
    if (!bad) return { ...row, verdict: 'falseAlarm', earlierMs: null };
    return { ...row, verdict: 'caught', earlierMs: Math.max(0, past.updatedAt - replayed.at) };
  }
  return { ...row, verdict: bad ? 'missed' : 'agreed', earlierMs: null };
}

/** The counts a backtest reports under its rows. */
export function backtestSummary(rows: readonly BacktestRow[]): Readonly<Record<BacktestRow['verdict'], number>> {
  const out = { caught: 0, falseAlarm: 0, missed: 0, agreed: 0, unknown: 0 };
  for (const r of rows) out[r.verdict]++;
  return out;
}
