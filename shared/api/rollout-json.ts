import { stageProviders } from '../rollout/spec.js';
import { beforeRolloutHooks, gateJudgeOf, queryOf, type ProviderGate } from '../rollout/gate-spec.js';
import { currentTally, passStreakOf, withoutSeries, type GateReading, type ReadingSeries } from '../rollout/gates.js';
import type { AlarmState, Rollout, RolloutView, StageMetrics, StageStatus } from '../rollout/model.js';
import type { ActuationRecord } from '../rollout/actuation-record.js';
import { waitingOn } from '../rollout/waiting.js';
import { countedTallies } from '../rollout/evaluate.js';
import { relativeBound, type GateJudge } from '../judge/gate.js';

/**
 * A rollout as the API, the status page and the CLI show it: the rollout
 * row, its stages, its pushed signals, and what each provider gate saw.
 */

/** The newest readings of each gate on `GET /rollouts/{id}` and the status page. */
export const READINGS_SHOWN = 30;

export interface GateJson {
  readonly stage: number;
  readonly name: string;
  readonly type: ProviderGate['type'];
  /** How the canary is judged against the baseline (shared/judge/gate.ts); null: against `threshold`. */
  readonly judge: GateJudge['kind'] | null;
  readonly query: string;
  /**
   * Pass when `value <comparison> threshold`: absent for alarm and webhook gates and for judged gates,
   * but for a one-sided `relative` judge, whose bound on the ratio or difference it is. A `sample-ratio`
   * gate has no comparison and the stage's percent as its threshold: the split its value (the canary's
   * observed percent) is tested against.
   */
  readonly comparison: string | null;
  readonly threshold: number | null;
  readonly intervalSeconds: number;
  readonly failureLimit: number;
  readonly inconclusiveLimit: number;
  /** Passes in a row the stage needs before it may promote (1: the newest reading's). */
  readonly consecutiveSuccesses: number;
  /** Declared once in the spec's rolloutGates and read in every stage from its fromStage on, not in this stage's own gates. */
  readonly rolloutWide: boolean;
  /**
   * The newest reading's outcome in the stage's current period (activation
   * or last resume), or `no-data` when the gate has not been read in it. A
   * stage that is no longer active shows the readings it ended with.
   */
  readonly status: GateReading['outcome'] | 'no-data';
  /** The current period's readings, failures and inconclusive readings, and the passes in a row ending with the newest. */
  readonly counts: { readonly readings: number; readonly failures: number; readonly inconclusive: number; readonly passStreak: number };
  readonly last: GateReading | null;
  /** Newest first; only where asked for (one rollout, the status page). */
  readonly readings?: readonly GateReading[];
  /** Where readings are shown: what the newest of them was judged on (both cohorts' series), when it kept any; null otherwise. */
  readonly series?: ReadingSeries | null;
}

/** Every provider gate of every stage of the current attempt, with its tally and, given `history`, its recent readings. */
export function gatesJson(v: RolloutView, history?: readonly GateReading[]): GateJson[] {
  // The spec's before-rollout hooks are read and counted with the first stage.
  const hooks = beforeRolloutHooks(v.rollout.spec.hooks);
  const wide = new Set<ProviderGate>(v.rollout.spec.rolloutGates?.providers);
  return v.rollout.spec.stages.flatMap((stage, index) =>
    [...(index === 0 ? hooks : []), ...stageProviders(v.rollout.spec, index)].map((g) => {
      const status = v.stages[index];
      // The active stage counts from its current period; a finished one shows what it ended with.
      // A rollout-wide gate that counts across the rollout shows the counts its limits are held to.
      const t =
        status?.phase === 'active' ? currentTally(countedTallies(v, index).tallies, index, g.name, v.rollout.lastProgressAt) : v.gates.get(index)?.get(g.name);
      const judge = gateJudgeOf(g);
      const bound = judge?.kind === 'relative' ? relativeBound(judge) : null;
      const intended = judge?.kind === 'sample-ratio' ? stage.percent : null;
      return {
        stage: index,
        name: g.name,
        type: g.type,
        judge: judge?.kind ?? null,
        query: t?.last.query ?? queryOf(g),
        comparison: bound ? bound.comparison : g.type === 'cloudwatchAlarm' || g.type === 'webhook' || g.type === 'signals' ? null : (g.comparison ?? null),
        threshold: bound
          ? bound.threshold
          : (intended ?? (g.type === 'cloudwatchAlarm' || g.type === 'webhook' || g.type === 'signals' ? null : (g.threshold ?? null))),
        intervalSeconds: g.intervalSeconds,
        failureLimit: g.failureLimit,
        inconclusiveLimit: g.inconclusiveLimit,
        consecutiveSuccesses: g.consecutiveSuccesses ?? 1,
        rolloutWide: wide.has(g),
        status: t ? t.last.outcome : 'no-data',
        counts: { readings: t?.readings ?? 0, failures: t?.failures ?? 0, inconclusive: t?.inconclusive ?? 0, passStreak: t ? passStreakOf(t) : 0 },
        last: t?.last ? withoutSeries(t.last) : null,
        ...(history ? shown(history.filter((r) => r.stage === index && r.gate === g.name).slice(0, READINGS_SHOWN)) : {}),
      };
    }),
  );
}

/** A gate's recent readings, each without its series, and the newest one's series beside them. */
function shown(readings: readonly GateReading[]): Pick<GateJson, 'readings' | 'series'> {
  return { readings: readings.map(withoutSeries), series: readings[0]?.series ?? null };
}

/** What was applied to one target (or sent as a post-rollout hook), as the API shows it. */
export interface ActuationJson {
  readonly target: string;
  readonly kind: ActuationRecord['kind'];
  readonly state: ActuationRecord['state'];
  readonly attempt: number;
  readonly stage: number | null;
  readonly percent: number;
  readonly final: boolean;
  readonly epoch: number;
  /** ISO 8601. */
  readonly appliedAt: string | null;
  readonly updatedAt: string | null;
  readonly observed: ActuationRecord['observed'];
  readonly reason: string | null;
  readonly settled: boolean;
}

/** A rollout as `GET /rollouts/{id}` answers it (`gates` with readings, `actuation` where it has effects outside the store). */
export interface RolloutJson extends Rollout {
  readonly stages: readonly StageStatus[];
  /** Pushed metrics by stage index. */
  readonly metrics: Readonly<Record<string, StageMetrics>>;
  readonly alarms: Readonly<Record<string, AlarmState>>;
  readonly gates: readonly GateJson[];
  readonly actuation?: readonly ActuationJson[];
  /** What a running rollout waits for before its next step (`waitingOn`); empty when it is not running or would act now. */
  readonly waiting: readonly string[];
}

/** What was applied to each target (a rollout that moves targets), and when, as the API shows it. */
export function actuationJson(records: readonly ActuationRecord[]): ActuationJson[] {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return records.map((r) => ({
    target: r.target,
    kind: r.kind,
    state: r.state,
    attempt: r.attempt,
    stage: r.stage,
    percent: r.percent,
    final: r.final,
    epoch: r.epoch,
    appliedAt: iso(r.appliedAt),
    updatedAt: iso(r.updatedAt),
    observed: r.observed,
    reason: r.reason,
    settled: r.settled,
  }));
}

export function viewJson(v: RolloutView, now: number, history?: readonly GateReading[], actuations?: readonly ActuationRecord[]): RolloutJson {
  return {
    ...v.rollout,
    stages: v.stages,
    metrics: Object.fromEntries(v.metrics),
    alarms: v.alarms,
    gates: gatesJson(v, history),
    ...(actuations ? { actuation: actuationJson(actuations) } : {}),
    waiting: waitingOn(v, now),
  };
}
