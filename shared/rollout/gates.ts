import { z } from 'zod';
import type { Same } from '../types.js';
import { gateJudgeOf, MAX_JUDGED_POINTS, onFailOf, passes, PROVIDER_TYPES, queryOf, type AlarmState, type ProviderGate } from './gate-spec.js';
import { own } from '../own.js';
import { isCountsJudge, judgeCounts, judgeSeries, NOT_ENOUGH_DATA, type StepCounts } from '../judge/gate.js';

/**
 * What a provider gate saw, and what it means. Pure: the GateReader asks the
 * providers and stores readings; the evaluator decides from the stored
 * tallies; nothing here does I/O.
 *
 * Every reading has one of three outcomes, and a gate with no reading in the
 * stage's current period has a fourth state, no data:
 *
 *   pass          the provider answered one number and it met the comparison
 *                 (an alarm gate: every alarm OK)
 *   fail          it answered one number and it did not (an alarm gate: an alarm in ALARM)
 *   inconclusive  no usable number: a provider error, a timeout, an empty result,
 *                 NaN or ±Inf, several series where one was expected, an alarm
 *                 in INSUFFICIENT_DATA or not found
 *   (no data)     not read yet in this period: the stage just became active, was
 *                 resumed, or is within the gate's initial delay
 *
 * A stage promotes only while every provider gate's newest reading passes. A
 * gate whose failures exceed its failureLimit rolls the stage back; one whose
 * inconclusive readings exceed its inconclusiveLimit pauses the rollout with a
 * reason naming the gate and the provider's last error. So a provider outage
 * pauses a rollout: it never passes it, and never rolls it back by itself.
 *
 * Counts belong to a period: from the stage's activation, or from the last
 * resume (a resume starts the count again, as an Argo AnalysisRun restarts).
 * The period is identified by the rollout's `lastProgressAt` when the gate
 * was read (it is set on activation and on resume, never in between); a
 * tally of an older period is no data for the current one.
 */

export const GATE_OUTCOMES = ['pass', 'fail', 'inconclusive'] as const;
export type GateOutcome = (typeof GATE_OUTCOMES)[number];

/** Longest provider answer kept with a reading: enough to see what came back, bounded for the store and the event. */
export const MAX_ANSWER_CHARS = 1_000;

export interface GateReading {
  readonly gate: string;
  readonly type: ProviderGate['type'];
  readonly attempt: number;
  readonly stage: number;
  /** When it was read, by the reader's clock (ms since the epoch). */
  readonly at: number;
  readonly outcome: GateOutcome;
  /** The number compared, when the provider gave one. */
  readonly value: number | null;
  /** What was asked. */
  readonly query: string;
  /** The provider's answer as it came back (at most MAX_ANSWER_CHARS). */
  readonly answer: string;
  /** Why it failed or was inconclusive, in words (the provider's error, `empty result`, …); null on a pass. */
  readonly reason: string | null;
  /** `poll`: read on a tick; `event`: from a pushed alarm state change. */
  readonly source: 'poll' | 'event';
  /**
   * What a judged reading was judged on: both cohorts' series (or counts per step), as the provider
   * returned them. Kept in the reading's history only, never in a tally or an event, and read back
   * only when asked (`gateReadings`' `series`): it is up to MAX_JUDGED_POINTS numbers a cohort.
   */
  readonly series?: ReadingSeries;
}

/** A judged reading's input: what the status page draws, a backtest judges again, and the chaos checker recomputes. */
export type ReadingSeries =
  | { readonly kind: 'values'; readonly canary: readonly (number | null)[]; readonly baseline: readonly (number | null)[] }
  | { readonly kind: 'counts'; readonly canary: StepCounts; readonly baseline: StepCounts; readonly percent: number | null };

const points = z.array(z.number().nullable()).max(MAX_JUDGED_POINTS).readonly();
const stepCounts = z.object({ requests: points, errors: points }).strict().readonly();
export const readingSeriesSchema = z.discriminatedUnion('kind', [
  z
    .object({ kind: z.literal('values'), canary: points, baseline: points })
    .strict()
    .readonly(),
  z
    .object({ kind: z.literal('counts'), canary: stepCounts, baseline: stepCounts, percent: z.number().min(0).max(100).nullable() })
    .strict()
    .readonly(),
]);
const _sameSeries: Same<z.output<typeof readingSeriesSchema>, ReadingSeries> = true;

/**
 * The series a provider's result carries, to keep with its reading; null for any other answer. A
 * provider never returns more than MAX_JUDGED_POINTS a cohort (gate-spec.ts refuses a window that
 * would); a longer one is not kept rather than kept in part, since a part would judge differently.
 */
export function seriesOf(result: ProviderResult): ReadingSeries | null {
  const fits = (...xs: readonly (readonly unknown[])[]) => xs.every((x) => x.length <= MAX_JUDGED_POINTS);
  // JSON has no NaN or Infinity: a point that is not a finite number is a missing one, as the judges read it.
  const finite = (xs: readonly (number | null)[]) => xs.map((v) => (v !== null && Number.isFinite(v) ? v : null));
  const counts = (c: StepCounts): StepCounts => ({ requests: finite(c.requests), errors: finite(c.errors) });
  if (result.kind === 'cohorts' && fits(result.canary, result.baseline))
    return { kind: 'values', canary: finite(result.canary), baseline: finite(result.baseline) };
  if (result.kind === 'counts' && fits(result.canary.requests, result.canary.errors, result.baseline.requests, result.baseline.errors))
    return { kind: 'counts', canary: counts(result.canary), baseline: counts(result.baseline), percent: result.percent };
  return null;
}

/** A reading as a tally or an event carries it: without its series. */
export function withoutSeries(r: GateReading): GateReading {
  if (r.series === undefined) return r;
  const { series: _series, ...rest } = r;
  return rest;
}

/** How long a reading's history is kept: a record for people, not for decisions (the tallies stay). */
export const READING_RETENTION_DAYS = 30;

export const gateReadingSchema = z
  .object({
    gate: z.string().min(1),
    type: z.enum(PROVIDER_TYPES),
    attempt: z.number().int().min(1),
    stage: z.number().int().nonnegative(),
    at: z.number().int().nonnegative(),
    outcome: z.enum(GATE_OUTCOMES),
    value: z.number().nullable(),
    query: z.string(),
    answer: z.string(),
    reason: z.string().nullable(),
    source: z.enum(['poll', 'event']),
    series: readingSeriesSchema.optional(),
  })
  .readonly();
const _sameReading: Same<z.output<typeof gateReadingSchema>, GateReading> = true;

/** A gate's counts in one period of its stage, with the readings a decision names. */
export interface GateTally {
  readonly gate: string;
  readonly stage: number;
  /** The period: the rollout's lastProgressAt when these readings were taken. */
  readonly origin: number;
  readonly readings: number;
  readonly failures: number;
  readonly inconclusive: number;
  /**
   * Passes in a row ending with `last` (0 when it did not pass): what `consecutiveSuccesses` asks
   * for. A pass that arrives after a newer reading adds nothing; a failure or an inconclusive reading
   * that arrives late ends the streak all the same, since it may have been taken inside it.
   */
  readonly passStreak: number;
  readonly last: GateReading;
  readonly lastFailure: GateReading | null;
  readonly lastInconclusive: GateReading | null;
}

/** A reading to store, with the period it was taken in. */
export interface ReadingToStore {
  readonly rolloutId: string;
  readonly origin: number;
  readonly reading: GateReading;
  /** What a judged reading was judged on, kept with its history row (null or absent: nothing to keep). */
  readonly series?: ReadingSeries | null;
  /**
   * The gate's tally as the reader saw it (null: none yet). A hint: a store
   * may count on it and read the tally again only when its write finds it
   * changed, which saves a read per reading on a tick that read them all.
   */
  readonly prior?: GateTally | null;
}

/**
 * The tally once `reading` (taken in period `origin`) is counted, or null when
 * it belongs to an older period than the tally's and does not count. Every
 * store applies this rule: DynamoDB calls it, PostgreSQL's upsert mirrors it
 * in SQL; the gate readings contract test holds both to it.
 */
export function tallyWith(tally: GateTally | undefined, read: GateReading, origin: number): GateTally | null {
  const reading = withoutSeries(read);
  const fresh = !tally || tally.origin < origin;
  if (!fresh && tally.origin > origin) return null;
  const base = fresh ? { readings: 0, failures: 0, inconclusive: 0, passStreak: 0, last: null, lastFailure: null, lastInconclusive: null } : tally;
  const newer = (a: GateReading | null) => (a === null || reading.at >= a.at ? reading : a);
  const newest = base.last === null || reading.at >= base.last.at;
  return {
    gate: reading.gate,
    stage: reading.stage,
    origin,
    readings: base.readings + 1,
    failures: base.failures + (reading.outcome === 'fail' ? 1 : 0),
    inconclusive: base.inconclusive + (reading.outcome === 'inconclusive' ? 1 : 0),
    // A late pass adds nothing; a late failure or inconclusive reading may have been taken inside the streak, so it ends it (safe: it only delays).
    passStreak: reading.outcome !== 'pass' ? 0 : newest ? passStreakOf(base) + 1 : passStreakOf(base),
    last: newer(base.last),
    lastFailure: reading.outcome === 'fail' ? newer(base.lastFailure) : base.lastFailure,
    lastInconclusive: reading.outcome === 'inconclusive' ? newer(base.lastInconclusive) : base.lastInconclusive,
  };
}

/**
 * What a provider returned for one gate, before it is judged. Providers say
 * what they got; whether that passes is decided here, once, for all of them.
 */
export type ProviderResult =
  | { readonly kind: 'number'; readonly value: number; readonly answer: string }
  /** The query ran and matched nothing (an empty vector, no datapoint in the period). */
  | { readonly kind: 'empty'; readonly answer: string }
  /** More than one series where one number was expected. */
  | { readonly kind: 'several'; readonly count: number; readonly answer: string }
  | { readonly kind: 'alarms'; readonly states: Readonly<Record<string, AlarmState | 'missing'>>; readonly answer: string }
  | { readonly kind: 'error'; readonly message: string; readonly answer: string }
  /** A hook's HTTP answer. */
  | { readonly kind: 'http'; readonly status: number; readonly answer: string }
  /** A judged gate's two series over the same window, oldest point first (null: a missing or non-finite point). */
  | { readonly kind: 'cohorts'; readonly canary: readonly (number | null)[]; readonly baseline: readonly (number | null)[]; readonly answer: string }
  /** A counts-judged gate's requests and errors per step of each cohort, since the stage's period began. */
  | {
      readonly kind: 'counts';
      readonly canary: StepCounts;
      readonly baseline: StepCounts;
      /** The canary's intended percent of the traffic (the stage's), for the sample-ratio check; null: none known. */
      readonly percent: number | null;
      readonly answer: string;
    };

const clip = (s: string) => (s.length > MAX_ANSWER_CHARS ? `${s.slice(0, MAX_ANSWER_CHARS - 1)}…` : s);

/** One reading of `gate` from what its provider returned. */
export function judge(
  gate: ProviderGate,
  result: ProviderResult,
  where: { attempt: number; stage: number; at: number; source: GateReading['source'] },
): GateReading {
  const reading = (outcome: GateOutcome, value: number | null, reason: string | null): GateReading => ({
    gate: gate.name,
    type: gate.type,
    ...where,
    outcome,
    value,
    query: queryOf(gate),
    answer: clip(result.answer),
    reason: reason === null ? null : clip(reason),
  });
  switch (result.kind) {
    case 'error':
      return reading('inconclusive', null, result.message);
    case 'empty':
      return reading('inconclusive', null, 'empty result: the query matched no series (or no datapoint in the period)');
    case 'several':
      return reading('inconclusive', null, `the query returned ${result.count} series; a gate needs exactly one number`);
    case 'alarms': {
      if (gate.type !== 'cloudwatchAlarm') return reading('inconclusive', null, `a ${gate.type} gate got alarm states`);
      const state = (a: string) => own(result.states, a);
      const firing = gate.alarms.filter((a) => state(a) === 'ALARM');
      if (firing.length) return reading('fail', null, `in ALARM: ${firing.join(', ')}`);
      const unsure = gate.alarms.filter((a) => state(a) !== 'OK');
      if (unsure.length) {
        return reading(
          'inconclusive',
          null,
          unsure.map((a) => (state(a) === 'missing' || state(a) === undefined ? `alarm ${a} not found` : `alarm ${a} is ${state(a)}`)).join('; '),
        );
      }
      return reading('pass', null, null);
    }
    case 'http': {
      if (gate.type !== 'webhook') return reading('inconclusive', null, `a ${gate.type} gate got an HTTP status`);
      const s = result.status;
      const said = s >= 200 && s < 300 ? 'yes' : s >= 400 && s < 500 ? 'no' : null;
      if (said === null) return reading('inconclusive', s, `the ${gate.hook} hook answered ${s}: neither yes (2xx) nor no (4xx)`);
      if (gate.hook === 'rollback') return said === 'yes' ? reading('fail', s, `the rollback hook asked to roll back (${s})`) : reading('pass', s, null);
      return said === 'yes' ? reading('pass', s, null) : reading('fail', s, `the ${gate.hook} hook refused (${s})`);
    }
    case 'cohorts': {
      const judged = gateJudgeOf(gate);
      if (!judged) return reading('inconclusive', null, `a ${gate.type} gate without a judge got two cohorts' series`);
      if (isCountsJudge(judged)) return reading('inconclusive', null, `a ${judged.kind} gate got series, not counts`);
      const j = judgeSeries(judged, result.canary, result.baseline);
      // The answer keeps what the judgement stands on (sizes, estimate, interval); the series go with the history row (seriesOf).
      return { ...reading(j.outcome, j.value, j.reason), answer: clip(JSON.stringify(j.detail)) };
    }
    case 'counts': {
      const judged = gateJudgeOf(gate);
      if (!judged || !isCountsJudge(judged)) return reading('inconclusive', null, `a ${gate.type} gate that judges no counts got counts`);
      const j = judgeCounts(judged, result.canary, result.baseline, result.percent);
      return { ...reading(j.outcome, j.value, j.reason), answer: clip(JSON.stringify(j.detail)) };
    }
    case 'number': {
      if (gate.type === 'cloudwatchAlarm' || gate.type === 'webhook' || gate.type === 'signals')
        return reading('inconclusive', null, `a ${gate.type} gate got a number`);
      if (gate.comparison === undefined || gate.threshold === undefined)
        return reading('inconclusive', null, `a judged gate got one number, not a series per cohort`);
      const v = result.value;
      if (!Number.isFinite(v)) return reading('inconclusive', null, `the value is ${Number.isNaN(v) ? 'NaN' : v > 0 ? '+Inf' : '-Inf'}: no number to compare`);
      if (passes(v, gate.comparison, gate.threshold)) return reading('pass', v, null);
      return reading('fail', v, `${v} does not meet ${gate.comparison} ${gate.threshold}`);
    }
  }
}

/**
 * A tally's passes in a row. A tally stored before streaks were kept has none: its newest reading
 * stands for a streak of one when it passed.
 */
export function passStreakOf(t: { readonly passStreak?: number; readonly last: GateReading | null }): number {
  return typeof t.passStreak === 'number' ? t.passStreak : t.last?.outcome === 'pass' ? 1 : 0;
}

/** A reading that could not judge for too little data (a judged gate's "not enough data"): what a stretched bake waits for. */
export function isShortOfData(r: Pick<GateReading, 'outcome' | 'reason'>): boolean {
  return r.outcome === 'inconclusive' && r.reason?.startsWith(NOT_ENOUGH_DATA) === true;
}

/** The tally of `gate` for the current period of `stage`, or undefined (no data). */
export function currentTally(tallies: ReadonlyMap<number, ReadonlyMap<string, GateTally>>, stage: number, gate: string, origin: number): GateTally | undefined {
  const t = tallies.get(stage)?.get(gate);
  return t && t.origin === origin ? t : undefined;
}

/**
 * The provider gates due for a reading now: the stage is active, the gate's
 * initial delay has passed, and its last reading in this period (if any) is
 * at least one interval old. So each gate is read at most once per interval.
 */
export function dueGates(
  gates: readonly ProviderGate[],
  tallies: ReadonlyMap<number, ReadonlyMap<string, GateTally>>,
  stage: number,
  origin: number,
  now: number,
): ProviderGate[] {
  return gates.filter((g) => {
    if (now < origin + g.initialDelaySeconds * 1000) return false;
    const t = currentTally(tallies, stage, g.name, origin);
    return !t || now - t.last.at >= g.intervalSeconds * 1000;
  });
}

export type GateVerdict =
  | { readonly kind: 'rollback'; readonly reason: string; readonly readings: readonly GateReading[] }
  | { readonly kind: 'pause'; readonly reason: string; readonly readings: readonly GateReading[] }
  /** Every gate's newest reading passes: these are the readings that allow promotion. */
  | { readonly kind: 'pass'; readonly readings: readonly GateReading[] }
  /** Some gate has no data, or its newest reading does not pass (yet within its limits). */
  | { readonly kind: 'wait'; readonly reason: string };

const describe = (g: ProviderGate) => `gate ${g.name} (${g.type})`;
const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/**
 * The provider gates' verdict on the active stage. Failures are looked at
 * before inconclusive readings, across all gates: a breach rolls back even
 * while another gate's provider is down.
 */
export function providerVerdict(
  gates: readonly ProviderGate[],
  tallies: ReadonlyMap<number, ReadonlyMap<string, GateTally>>,
  stage: number,
  origin: number,
  o: {
    /** The stage stretches its bake for data: readings short of data (NOT_ENOUGH_DATA) wait instead of counting towards a pause. */
    readonly shortOfDataWaits?: boolean;
    /**
     * The stage's stretch is over and it says `onInsufficientData: "pass"`: a gate whose newest reading is short of data
     * (NOT_ENOUGH_DATA) stands as passed (its reading is among those returned). Limits are looked at first, as ever.
     */
    readonly shortOfDataPasses?: boolean;
    /** Gates whose tallies count across stages (rolloutGates `count: "rollout"`), by name, with the stage they count from: said in a reason. */
    readonly countedFrom?: ReadonlyMap<string, string>;
  } = {},
): GateVerdict {
  const since = (g: ProviderGate) => (o.countedFrom?.has(g.name) ? ` since stage ${o.countedFrom.get(g.name)}` : '');
  // A dry-run gate is read and recorded like the others; it never holds, pauses or rolls back anything.
  const current = gates.filter((g) => !g.dryRun).map((g) => ({ g, t: currentTally(tallies, stage, g.name, origin) }));
  for (const { g, t } of current) {
    if (t && t.failures > g.failureLimit && onFailOf(g) !== 'hold') {
      const r = t.lastFailure ?? t.last;
      const reason = `${describe(g)}: ${plural(t.failures, 'failed reading')}${since(g)} > failureLimit ${g.failureLimit}; last: ${r.reason ?? r.outcome}`;
      return { kind: onFailOf(g) === 'pause' ? 'pause' : 'rollback', reason, readings: [r] };
    }
  }
  for (const { g, t } of current) {
    if (t && t.inconclusive > g.inconclusiveLimit) {
      const r = t.lastInconclusive ?? t.last;
      if (o.shortOfDataWaits && isShortOfData(r)) continue;
      return {
        kind: 'pause',
        reason: `${describe(g)}: ${plural(t.inconclusive, 'inconclusive reading')}${since(g)} > inconclusiveLimit ${g.inconclusiveLimit}; last: ${r.reason ?? r.outcome}`,
        readings: [r],
      };
    }
  }
  const passedShort = (t: GateTally) => o.shortOfDataPasses === true && isShortOfData(t.last);
  const waiting = current.find(({ g, t }) => !t || (!passedShort(t) && (t.last.outcome !== 'pass' || passStreakOf(t) < (g.consecutiveSuccesses ?? 1))));
  if (waiting) {
    const { g, t } = waiting;
    const held = onFailOf(g) === 'hold' && t?.last.outcome === 'fail' ? ' (onFail hold: the stage waits while it fails)' : '';
    const reason = !t
      ? `${describe(g)}: no data yet`
      : t.last.outcome !== 'pass'
        ? `${describe(g)}: last reading ${t.last.outcome}${held}`
        : `${describe(g)}: ${passStreakOf(t)} of ${g.consecutiveSuccesses} passes in a row (consecutiveSuccesses)`;
    return { kind: 'wait', reason };
  }
  return { kind: 'pass', readings: current.map(({ t }) => t!.last) };
}
