import type { ActuationRecord } from './actuation-record.js';
import type { CohortReport, CohortReportInput } from './cohort-signals.js';
import type { LeaseToken } from '../lease/record.js';
import type { RolloutEvent } from './events.js';
import type { GateReading, GateTally, ReadingToStore } from './gates.js';
import type { AlarmState, Rollout, RolloutState, RolloutView, StageMetrics } from './model.js';
import type { RolloutSpec } from './spec.js';
import type { TransitionPlan } from './transitions.js';

/** Which readings `gateReadings` answers, and with which series. */
export interface GateReadingsQuery {
  readonly perGate?: number;
  readonly attempt?: number;
  readonly gate?: string;
  readonly series?: 'newest' | 'all';
}

export type SignalOutcome = 'stored' | 'stale';

/** Which of a stage's cohort reports `cohortReports` answers. */
export interface CohortReportsQuery {
  readonly since: number;
  readonly limit: number;
  readonly order: 'oldest' | 'newest';
  /** Read each report's latency samples (up to MAX_REPORT_SAMPLES numbers each); otherwise `samples` is null. */
  readonly samples: boolean;
}
export interface MetricsTarget {
  readonly stage: number | string;
  readonly attempt?: number | undefined;
}

/** A metrics reading for recordMetricsAndApply: its stage as an index (a name resolved on the held view's spec). */
export interface HeldReading {
  readonly stage: number;
  readonly attempt?: number | undefined;
  readonly metrics: StageMetrics;
}

export type ReadingApplied =
  /** The reading stored and the plan applied, in one write. */
  | { readonly applied: true }
  /** The store no longer holds what the view was read from: the reading stored (or stale), and the view as it is now. */
  | { readonly applied: false; readonly outcome: SignalOutcome; readonly view: RolloutView }
  /** Nothing written, the reading included (a stage had moved under the plan): record it the usual way. */
  | { readonly applied: false; readonly outcome: null; readonly view: null };

export interface RolloutListQuery {
  readonly state?: RolloutState;
  readonly cursor?: string;
  readonly limit: number;
}

export interface RolloutPage {
  readonly rollouts: readonly Rollout[];
  readonly next: string | null;
}

/** The rollout half of the store port; PostgreSQL/PGlite and DynamoDB implement it. */
export interface RolloutStore {
  /** Idempotent on id: creating an existing id with the same spec is a no-op; with another spec, an error. */
  create(id: string, spec: RolloutSpec, now: number, actor: string): Promise<{ created: boolean }>;
  /** One consistent reading of a rollout, its current attempt's stages and signals. */
  load(id: string): Promise<RolloutView | null>;
  /** Every running rollout, read the same way (for people and gauges; a tick reads loadDue). */
  loadRunning(): Promise<RolloutView[]>;
  /**
   * The running rollouts due at `now`, read the same way: their
   * nextEvaluationAt has come, or a signal or a transition marked them due
   * since (what a BatchPromoter tick evaluates). At most `limit`, those due
   * longest first. Each comes with its mark, read no later than its view.
   */
  loadDue(now: number, limit: number): Promise<DueView[]>;
  /**
   * Sets when a running rollout is next due, only if its mark is still
   * `mark`: nothing was stored for it, and no transition written, since it was
   * read with that mark. False otherwise (it stays due). Not fenced: it
   * decides nothing, and a late one can only make a rollout due too early.
   */
  reschedule(rolloutId: string, mark: string, at: number): Promise<boolean>;
  /**
   * The running rollouts whose gates watch `alarm` (alarmNamesOf), read the
   * same way: what an alarm's change affects. An alarm nobody watches reads
   * no rollout.
   */
  loadWatching(alarm: string): Promise<RolloutView[]>;
  /** Whether any rollout is running: one small read, for a promoter deciding whether to tick at all. */
  anyRunning(): Promise<boolean>;
  /**
   * Rollouts newest first (by creation), all or those in `state`, as rows
   * (no stages or signals): for people listing what ran, not for promotion.
   * `next` continues (an opaque cursor); null once there is nothing more (a
   * store may hand out one last cursor whose page is empty).
   */
  list(o: RolloutListQuery): Promise<RolloutPage>;
  /**
   * Metrics are cumulative per stage; an older or equal `observedAt` is ignored ('stale').
   * `stage` is an index or a stage name; `attempt` defaults to the rollout's current one.
   * Throws UnknownRolloutError for an unknown rollout or stage.
   */
  recordMetrics(rolloutId: string, at: MetricsTarget, metrics: StageMetrics): Promise<SignalOutcome>;
  /** recordMetrics, then the rollout's view including them (one round trip where the backend allows). */
  recordMetricsAndLoad(rolloutId: string, at: MetricsTarget, metrics: StageMetrics): Promise<{ outcome: SignalOutcome; view: RolloutView }>;
  recordAlarm(name: string, state: AlarmState, changedAt: number): Promise<SignalOutcome>;
  /**
   * Stores a cohort's report (cohort-signals.ts) whoever leads, once per (cohort, reporter,
   * observedAt): the same report again is 'stale'. The stage and attempt resolve as recordMetrics's;
   * a version names the cohort that runs it on the rollout's target, and any other version is refused
   * (InvalidEventError, naming `version`). Throws UnknownRolloutError as recordMetrics does.
   */
  recordCohortReport(rolloutId: string, at: MetricsTarget, report: CohortReportInput): Promise<SignalOutcome>;
  /** A stage's reports observed at or after `since` (ms), at most `limit`, the oldest first or the newest; without their samples unless asked. */
  cohortReports(rolloutId: string, attempt: number, stage: number, o: CohortReportsQuery): Promise<CohortReport[]>;
  /**
   * Stores provider gate readings, whoever leads (a reading is a fact, not a
   * decision: no fence), and counts each in its gate's tally by `tallyWith`'s
   * rule. Returns the tallies as they stand after the write, for the readings
   * that counted (one taken in an older period than its tally's does not).
   */
  recordGateReadings(readings: readonly ReadingToStore[]): Promise<CountedReading[]>;
  /**
   * The newest `perGate` (default 50) readings of every gate (or of `gate`) of the rollout's current
   * attempt (or `attempt`), newest first by stage and gate. Judged readings come with their `series`
   * only when asked: `newest`, each stage's newest reading of each gate; `all`, every one returned.
   */
  gateReadings(rolloutId: string, o?: GateReadingsQuery): Promise<GateReading[]>;
  /**
   * Deletes up to `limit` readings taken before `before` (the history only:
   * tallies stay), oldest first, and as many cohort reports observed before
   * it; returns how many of both. A store whose readings
   * expire by themselves (DynamoDB's TTL) deletes none here.
   */
  pruneGateReadings(before: number, limit: number): Promise<number>;
  /**
   * Deletes up to `limit` rollouts that ended (completed, rolled back,
   * aborted) before `before`, oldest first, each whole: stages, metrics,
   * tallies, readings, history, target records, its place in the list. Not one
   * with an event still unpublished or a target record not settled (nothing
   * accepted is lost). With each, the state of an alarm it watched that no
   * other rollout watches and that has not changed since `before`. Returns how
   * many rollouts. Idempotent: one half deleted by a crash is finished later.
   */
  pruneEnded(before: number, limit: number): Promise<number>;
  /**
   * Applies a plan in one atomic write, fenced by `token`: only if the rollout
   * row still has the plan's expected version, state and attempt and each
   * touched stage its expected phase. Returns false when the evaluated state
   * has changed (nothing written); throws FencedError when deposed.
   * The plan's events are stored in the same write (the outbox).
   */
  apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean>;
  /**
   * Optional, for a leader that holds a view of the rollout: the reading and
   * the plan decided on `held` plus the reading, in one round trip. The
   * reading is stored whoever leads (as recordMetrics would). The plan is
   * applied as by apply() only if the store still holds what the decision
   * read of `held` (signalsRead: the rollout's version, the active stage's
   * metrics, its alarms' states, its gates' tallies); otherwise the fresh
   * view comes back, for the caller to decide again on it.
   * FencedError when deposed (the reading stays stored).
   */
  recordMetricsAndApply?(token: LeaseToken, plan: TransitionPlan, reading: HeldReading, held: RolloutView): Promise<ReadingApplied>;
  /** Outbox: stored events not yet published, oldest first. */
  unpublishedEvents(limit: number): Promise<RolloutEvent[]>;
  markPublished(events: readonly RolloutEvent[]): Promise<void>;
  /** Every event of a rollout, oldest first (its history). */
  events(rolloutId: string): Promise<RolloutEvent[]>;
  /** What was applied to each of a rollout's targets (actuation-record.ts), by target name. */
  actuations(rolloutId: string): Promise<ActuationRecord[]>;
  /** Upserts the record of (rollout, target), fenced by `token`: FencedError when deposed, nothing written. */
  recordActuation(token: LeaseToken, record: ActuationRecord): Promise<void>;
  /** Ids of rollouts with a record not settled (oldest write first, at most `limit`): what a tick reconciles beyond the running ones. */
  unsettledActuations(limit: number): Promise<string[]>;
}

/** A due rollout as loadDue reads it: its view, and the mark reschedule is conditioned on. */
export interface DueView {
  readonly view: RolloutView;
  readonly mark: string;
}

/**
 * The latest time a store keeps for "next due": a running rollout nothing
 * will wake but a signal (its deadline passed, no bake or gate ahead).
 */
export const NEVER_DUE = 999_999_999_999_999;

/** A tally as it stands once a reading was counted into it. */
export interface CountedReading {
  readonly rolloutId: string;
  readonly tally: GateTally;
}

/** Metrics or a command for a rollout id that does not exist. */
export class UnknownRolloutError extends Error {
  override readonly name = 'UnknownRolloutError';
  constructor(
    readonly rolloutId: string,
    readonly stage?: number | string,
  ) {
    super(stage === undefined ? `unknown rollout ${rolloutId}` : `rollout ${rolloutId} has no stage ${JSON.stringify(stage)}`);
  }
}

export class RolloutConflictError extends Error {
  override readonly name = 'RolloutConflictError';
  constructor(readonly rolloutId: string) {
    super(`rollout ${rolloutId} already exists with a different spec`);
  }
}
