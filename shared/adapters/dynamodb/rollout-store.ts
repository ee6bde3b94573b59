import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock, type Clock } from '../../clock.js';
import type { ActuationRecord } from '../../rollout/actuation-record.js';
import type { CohortReport, CohortReportInput } from '../../rollout/cohort-signals.js';
import type { LeaseToken } from '../../lease/record.js';
import type { RolloutEvent } from '../../rollout/events.js';
import type { AlarmState, RolloutView, StageMetrics } from '../../rollout/model.js';
import type { GateReading, ReadingToStore } from '../../rollout/gates.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import type {
  CohortReportsQuery,
  CountedReading,
  GateReadingsQuery,
  DueView,
  HeldReading,
  MetricsTarget,
  ReadingApplied,
  RolloutListQuery,
  RolloutPage,
  RolloutStore,
  SignalOutcome,
} from '../../rollout/store.js';
import type { TransitionPlan } from '../../rollout/transitions.js';
import { DueIndex } from './rollout-due.js';
import { RolloutReads } from './rollout-reads.js';
import { RolloutRecords } from './rollout-records.js';
import { RolloutRetention } from './rollout-retention.js';
import { RolloutSignals } from './rollout-signals.js';
import { RolloutTransitions } from './rollout-transitions.js';

/**
 * Rollouts on DynamoDB, single table:
 *   ROLLOUT#<id> / ROLLOUT              the rollout row (version, state, attempt, …); while running also
 *                                       `dueAt` and `mark`: when a tick next reads it (gsi1: DUE / <dueAt>#<id>)
 *   ROLLOUT#<id> / STAGE#<attempt>#<i>  one item per stage of an attempt
 *   ROLLOUT#<id> / METRICS#<attempt>#<i>
 *   ROLLOUT#<id> / TALLY#<attempt>#<i>#<gate>   a provider gate's counts in its current period
 *   ROLLOUT#<id> / GATEREADING#<attempt>#<i>#<gate>#<at>   every reading (expires after READING_RETENTION_DAYS, by TTL on `ttl`)
 *   ROLLOUT#<id> / GATESERIES#<attempt>#<i>#<gate>#<at>    a judged reading's series (as its reading: read only when asked)
 *   ROLLOUT#<id> / COHORTREPORT#<attempt>#<i>#<observedAt>#<cohort>#<reporter>   a cohort's pushed report (expires as readings do)
 *   ROLLOUT#<id> / EVENT#<event id>     history; carries gsi1pk = OUTBOX until published
 *   ROLLOUT#<id> / ACTUATION#<target>   what was applied to a target (actuation-record.ts)
 *   RUNNING / <id>                      registry of running rollouts (strongly consistent query), with
 *                                       `watches`: the alarms its gates watch (what an alarm change reads);
 *                                       the previous release's carry the due time here (rollout-due.ts)
 *   WATCH#<alarm> / <id>                a rollout that watches the alarm (written at creation; read through RUNNING)
 *   ROLLOUTS / <createdAt>#<id>         every rollout, for listing newest first
 *   ENDED / <id>                        a rollout that ended (gsi1: ENDED / <endedAt>#<id>): what retention deletes
 *   ACTUATING / <id>#<target>           registry of actuation records not settled
 *   ALARM#<name> / ALARM
 * Every transition is one TransactWriteItems: the lease ConditionCheck, the
 * rollout row conditioned on version/state/attempt, each stage on its phase,
 * new items on not existing.
 *
 * The parts, each in its own file: the keys and codecs (rollout-items.ts),
 * transitions (rollout-transitions.ts), reads (rollout-reads.ts), the due
 * index (rollout-due.ts), signals (rollout-signals.ts), retention
 * (rollout-retention.ts), events and actuation records (rollout-records.ts).
 */
export class DynamoRolloutStore implements RolloutStore {
  private readonly reads: RolloutReads;
  private readonly due: DueIndex;
  private readonly signals: RolloutSignals;
  private readonly transitions: RolloutTransitions;
  private readonly retention: RolloutRetention;
  private readonly records: RolloutRecords;

  // The client and table stay on the store, as before its parts were split out: tests read raw items through them.
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    private readonly readConcurrency = 16,
    private readonly clock: Clock = systemClock,
  ) {
    const t = { doc, table, readConcurrency, clock };
    this.reads = new RolloutReads(t);
    this.due = new DueIndex(t, this.reads);
    this.signals = new RolloutSignals(t, this.reads, this.due);
    this.transitions = new RolloutTransitions(t, this.signals);
    this.retention = new RolloutRetention(t);
    this.records = new RolloutRecords(t);
  }

  create(id: string, spec: RolloutSpec, now: number, actor: string): Promise<{ created: boolean }> {
    return this.transitions.create(id, spec, now, actor);
  }

  apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean> {
    return this.transitions.apply(token, plan);
  }

  recordMetricsAndApply(token: LeaseToken, plan: TransitionPlan, reading: HeldReading, held: RolloutView): Promise<ReadingApplied> {
    return this.transitions.recordMetricsAndApply(token, plan, reading, held);
  }

  load(id: string): Promise<RolloutView | null> {
    return this.reads.load(id);
  }

  list(o: RolloutListQuery): Promise<RolloutPage> {
    return this.reads.list(o);
  }

  anyRunning(): Promise<boolean> {
    return this.reads.anyRunning();
  }

  loadRunning(): Promise<RolloutView[]> {
    return this.reads.loadRunning();
  }

  loadWatching(alarm: string): Promise<RolloutView[]> {
    return this.reads.loadWatching(alarm);
  }

  loadDue(now: number, limit: number): Promise<DueView[]> {
    return this.due.loadDue(now, limit);
  }

  reschedule(rolloutId: string, mark: string, at: number): Promise<boolean> {
    return this.due.reschedule(rolloutId, mark, at);
  }

  recordMetrics(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<SignalOutcome> {
    return this.signals.recordMetrics(rolloutId, at, m);
  }

  recordMetricsAndLoad(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<{ outcome: SignalOutcome; view: RolloutView }> {
    return this.signals.recordMetricsAndLoad(rolloutId, at, m);
  }

  recordCohortReport(rolloutId: string, at: MetricsTarget, report: CohortReportInput): Promise<SignalOutcome> {
    return this.signals.recordCohortReport(rolloutId, at, report);
  }

  cohortReports(rolloutId: string, attempt: number, stage: number, o: CohortReportsQuery): Promise<CohortReport[]> {
    return this.signals.cohortReports(rolloutId, attempt, stage, o);
  }

  recordAlarm(name: string, state: AlarmState, changedAt: number): Promise<SignalOutcome> {
    return this.signals.recordAlarm(name, state, changedAt);
  }

  recordGateReadings(readings: readonly ReadingToStore[]): Promise<CountedReading[]> {
    return this.signals.recordGateReadings(readings);
  }

  gateReadings(rolloutId: string, o: GateReadingsQuery = {}): Promise<GateReading[]> {
    return this.signals.gateReadings(rolloutId, o);
  }

  pruneGateReadings(): Promise<number> {
    return this.retention.pruneGateReadings();
  }

  pruneEnded(before: number, limit: number): Promise<number> {
    return this.retention.pruneEnded(before, limit);
  }

  unpublishedEvents(limit: number): Promise<RolloutEvent[]> {
    return this.records.unpublishedEvents(limit);
  }

  markPublished(events: readonly RolloutEvent[]): Promise<void> {
    return this.records.markPublished(events);
  }

  events(rolloutId: string): Promise<RolloutEvent[]> {
    return this.records.events(rolloutId);
  }

  actuations(rolloutId: string): Promise<ActuationRecord[]> {
    return this.records.actuations(rolloutId);
  }

  recordActuation(token: LeaseToken, record: ActuationRecord): Promise<void> {
    return this.records.recordActuation(token, record);
  }

  unsettledActuations(limit: number): Promise<string[]> {
    return this.records.unsettledActuations(limit);
  }
}
