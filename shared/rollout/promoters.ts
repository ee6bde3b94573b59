import { z } from 'zod';
import { parseConfig } from '../config.js';
import { mapLimit } from '../concurrency.js';
import { movesTargets, type Action, type Leadership, type RolloutEngine } from './engine.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import { recordReadings, toStoreOf, type GateReader } from './gate-reader.js';
import { judge, READING_RETENTION_DAYS, type ReadingToStore } from './gates.js';
import { CLOUDWATCH_ALARM_CHANGE, READING_SKEW_MARGIN_MS, refuseFromTheFuture, type InboundEvent } from './inbound.js';
import { activeStage, type RolloutView, type StageMetrics } from './model.js';
import { stageIndexOf, stageProviders } from './spec.js';
import { BoundedMap } from '../bounded-map.js';
import { DAY_MS, retentionSchema, type Retention } from '../retention.js';
import type { LeaseToken } from '../lease/record.js';
import { NEVER_DUE, UnknownRolloutError, type DueView, type RolloutStore } from './store.js';
import { nextEvaluationAt } from './schedule.js';
import { own } from '../own.js';
import type { CohortReportInput } from './cohort-signals.js';

/** Views a StreamingPromoter keeps for its fast path: every running rollout of a busy deployment. */
const HELD_VIEWS = 10_000;

/** Rollouts beyond the running ones whose targets a tick reconciles at most (the oldest first). */
const RECONCILE_PER_TICK = 100;

/** Ended rollouts deleted per tick at most: 8,640 a day at a 10 s tick, 1,440 at the Lambda's minute. */
const ENDED_PER_TICK = 25;

/** Readings deleted per tick at most: 360,000 an hour at a 10 s tick, more than 1,000 gates read every 10 s write. */
const PRUNE_PER_TICK = 1_000;

/** Due rollouts a tick evaluates at most, those due longest first; the rest are the next tick's. */
const DUE_PER_TICK = 1_000;

export interface TickResult {
  readonly leader: boolean;
  /** Rollouts evaluated: those that were due. */
  readonly evaluated: number;
  readonly actions: Action[];
  readonly republished: number;
  readonly readings: number;
  /** Gate readings deleted past their retention. */
  readonly pruned: number;
  /** Rollouts deleted, whole, past their retention after they ended. */
  readonly ended: number;
  readonly actuated: number;
  /** More were due than a tick takes: the rest are left for the next one. */
  readonly left: boolean;
}

/**
 * BatchPromoter: each tick takes or renews leadership and, if leader, reads
 * the provider gates that are due (GateReader: outside the fence, each
 * reading stored) and evaluates every running rollout that is due (its
 * nextEvaluationAt has come, or a signal or transition marked it). It is the
 * correctness fallback: whatever the streaming path missed, the next tick
 * catches up, since every stored signal marks its rollouts due.
 * Who ticks it — the batch-promoter Lambda within its minute, a node's
 * schedule trigger — never overlaps two ticks.
 */
export class BatchPromoter {
  private readonly concurrency: number;
  private readonly duePerTick: number;
  private readonly retention: Retention;
  private readonly reader: GateReader | undefined;
  private readonly logger: Logger;

  constructor(
    private readonly engine: RolloutEngine,
    private readonly leadership: Leadership,
    options: { concurrency?: number; duePerTick?: number; retention?: Partial<Retention>; reader?: GateReader; logger?: Logger } = {},
  ) {
    const config = parseConfig(
      'batch promoter',
      z.object({ concurrency: z.number().int().min(1).max(64).default(8), duePerTick: z.number().int().min(1).max(100_000).default(DUE_PER_TICK) }),
      { concurrency: options.concurrency, duePerTick: options.duePerTick },
    );
    this.concurrency = config.concurrency;
    this.duePerTick = config.duePerTick;
    this.retention = parseConfig('retention', retentionSchema, options.retention ?? {});
    this.reader = options.reader;
    this.logger = options.logger ?? silentLogger;
  }

  /**
   * Whether a tick would have anything to do: a rollout running, an event
   * left in the outbox, or a target not yet settled on its rollout's end. Small reads and no lease write, so a runtime that
   * pays by the second (the batch-promoter Lambda) can stop ticking while
   * nothing runs; whatever starts in the meantime is caught up by its next
   * invocation.
   */
  async hasWork(): Promise<boolean> {
    const store = this.engine.store;
    const [running, unpublished, unsettled] = await Promise.all([
      store.anyRunning(),
      store.unpublishedEvents(1),
      this.engine.actuation ? store.unsettledActuations(1) : [],
    ]);
    return running || unpublished.length > 0 || unsettled.length > 0;
  }

  async tick(): Promise<TickResult> {
    const token = await this.leadership();
    if (!token) return { leader: false, evaluated: 0, actions: [], republished: 0, readings: 0, pruned: 0, ended: 0, actuated: 0, left: false };
    const republished = await this.engine.flushOutbox();
    // Only the rollouts whose time has come or that a signal or a transition marked: a tick costs what is due, not what runs.
    const due = await this.engine.store.loadDue(this.engine.clock.now(), this.duePerTick);
    let views = due.map((d) => d.view);
    let readings = 0;
    if (this.reader) {
      try {
        const read = await this.reader.read(views, { epoch: token.epoch });
        views = read.views;
        readings = read.readings.length;
      } catch (err) {
        // The gates not read this tick keep their last tallies: a stage whose gate has no new reading does not promote on it.
        this.logger.warn('gate readings not stored this tick', { error: errorMessage(err) });
      }
    }
    // A FencedError from any rollout ends the whole tick: we are no longer leader.
    const evaluated = await mapLimit(views, this.concurrency, (view) => this.engine.evaluateFrom(view, token));
    const actions = evaluated.flatMap((e) => e.actions);
    const actuated = await this.reconcile(views, evaluated, token);
    await this.reschedule(due, evaluated);
    // After the decisions, off their path: the readings' history past its retention, a bounded batch a tick.
    const pruned = await this.engine.store
      .pruneGateReadings(this.engine.clock.now() - READING_RETENTION_DAYS * DAY_MS, PRUNE_PER_TICK)
      .catch((err: unknown) => {
        this.logger.warn('gate readings not pruned this tick', { error: errorMessage(err) });
        return 0;
      });
    const ended = await this.pruneEnded();
    return { leader: true, evaluated: views.length, actions, republished, readings, pruned, ended, actuated, left: due.length >= this.duePerTick };
  }

  /**
   * Rollouts that ended longer ago than the retention, a bounded batch a
   * tick; what a tick that finds nothing due does on an idle deployment.
   * Also what a runtime that does not tick while idle calls on its own.
   */
  async pruneEnded(): Promise<number> {
    return this.engine.store.pruneEnded(this.engine.clock.now() - this.retention.rolloutDays * DAY_MS, ENDED_PER_TICK).catch((err: unknown) => {
      this.logger.warn('ended rollouts not pruned this tick', { error: errorMessage(err) });
      return 0;
    });
  }

  /**
   * Each rollout this tick evaluated without a transition is next due at its
   * nextEvaluationAt, unless something marked it since it was read. One that
   * moved stays due (the transition marked it): the next tick looks at it
   * from where it is now.
   */
  private async reschedule(due: readonly DueView[], evaluated: readonly { actions: readonly Action[]; view: RolloutView | null }[]): Promise<void> {
    const now = this.engine.clock.now();
    await mapLimit(due, this.concurrency, async (d, i) => {
      const e = evaluated[i];
      if (!e?.view || e.actions.length > 0) return;
      // Due still (targets to read back, a gate to read again): written all the same, so the rollout queues behind
      // those due longer, and a tick that takes a limited number does not keep taking the same ones.
      const at = Math.min(nextEvaluationAt(e.view, now), NEVER_DUE);
      await this.engine.store.reschedule(d.view.rollout.id, d.mark, at).catch((err: unknown) => {
        this.logger.warn('rollout not rescheduled; it stays due', { rolloutId: d.view.rollout.id, error: errorMessage(err) });
      });
    });
  }

  /**
   * Every tick, the targets of every running rollout and of every rollout
   * whose targets have not settled on its end are read and, where they do not
   * carry the committed state (a crash between a commit and its effect, a
   * lost reply, a write that failed), converged. A rollout an evaluation just
   * moved was converged by it.
   */
  private async reconcile(
    views: readonly RolloutView[],
    evaluated: readonly { actions: readonly Action[]; view: RolloutView | null }[],
    token: LeaseToken,
  ): Promise<number> {
    if (!this.engine.actuation) return 0;
    const moved = new Set(evaluated.filter((e) => e.actions.some((a) => a.applied)).map((e) => e.actions[0]!.rolloutId));
    const due = views.filter((v) => movesTargets(v) && !moved.has(v.rollout.id));
    const seen = new Set(views.map((v) => v.rollout.id));
    for (const id of await this.engine.store.unsettledActuations(RECONCILE_PER_TICK)) {
      if (seen.has(id)) continue;
      const view = await this.engine.store.load(id);
      if (view) due.push(view);
    }
    await mapLimit(due, this.concurrency, (view) => this.engine.actuate(view, token));
    return due.length;
  }
}

export interface HandleResult {
  /** The signal or notification was stored (or was a duplicate / older than what is stored). */
  readonly stored: 'stored' | 'stale' | 'none';
  /** False when this node does not lead: the BatchPromoter covers it within one tick. */
  readonly evaluated: boolean;
  readonly actions: readonly Action[];
}

/**
 * A signal's time, clamped to when we received it: a reading is a claim, and
 * its time may not outrank a reading received after it (the newest reading of
 * a stage wins). A reporter stamping its readings ahead (within the skew
 * margin; beyond it they are refused) gains nothing: they count as received
 * now, so a real breach reported a moment later is newer and is judged.
 */
export function clampedToReceipt(event: InboundEvent, now: number): InboundEvent {
  // A cohort's report is not clamped: its time is its key (a report delivered again must land on itself), and nothing outranks anything there.
  const cohorted = event.type === 'rollout.metrics_reported' && (event.cohort !== undefined || event.version !== undefined);
  if (event.type === 'rollout.metrics_reported' && !cohorted && event.observedAt > now) return { ...event, observedAt: now };
  if ((event.type === 'rollout.alarm_changed' || event.type === CLOUDWATCH_ALARM_CHANGE) && event.changedAt > now) return { ...event, changedAt: now };
  return event;
}

/** The report a cohort's `rollout.metrics_reported` carries. */
function cohortReportOf(e: InboundEvent & { type: 'rollout.metrics_reported' }): CohortReportInput {
  return {
    cohort: e.cohort ?? { version: e.version! },
    reporter: e.reporter ?? '',
    requests: e.requests,
    errors: e.errors,
    samples: e.samples ?? null,
    observedAt: e.observedAt,
  };
}

/**
 * StreamingPromoter: one evaluation of the affected rollout(s) per inbound
 * event, for latency. The signal is stored whoever leads (nothing accepted is
 * lost); the evaluation happens only on the leader. A signal stamped later
 * than now + `readingSkewMarginMs` (by the engine's clock) is refused with
 * InvalidEventError before anything is stored; one stamped later than now,
 * within the margin, counts as received now (`clampedToReceipt`).
 */
export class StreamingPromoter {
  private readonly readingSkewMarginMs: number;
  /** The view each running rollout was left in by this promoter's last evaluation of it. */
  private readonly held = new BoundedMap<string, RolloutView>(HELD_VIEWS);

  constructor(
    private readonly engine: RolloutEngine,
    private readonly leadership: Leadership,
    options: { readingSkewMarginMs?: number } = {},
  ) {
    this.readingSkewMarginMs = parseConfig(
      'streaming promoter',
      z.object({ readingSkewMarginMs: z.number().int().nonnegative().default(READING_SKEW_MARGIN_MS) }),
      { readingSkewMarginMs: options.readingSkewMarginMs },
    ).readingSkewMarginMs;
  }

  async handle(received: InboundEvent): Promise<HandleResult> {
    const now = this.engine.clock.now();
    refuseFromTheFuture(received, now, this.readingSkewMarginMs);
    const event = clampedToReceipt(received, now);
    const store = this.engine.store;
    let stored: HandleResult['stored'] = 'none';
    let affected: () => Promise<RolloutView[]>;
    let leadership: Promise<LeaseToken | null> | undefined;
    const lead = () => (leadership ??= this.leadership());
    switch (event.type) {
      case 'rollout.metrics_reported': {
        if (event.cohort !== undefined || event.version !== undefined) {
          // A cohort's report: kept for the stage's signals gates, which judge it at their next read.
          stored = await store.recordCohortReport(event.rolloutId, { stage: event.stage, attempt: event.attempt }, cohortReportOf(event));
          affected = async () => {
            const view = await store.load(event.rolloutId);
            return view ? [view] : [];
          };
          break;
        }
        const metrics = { requests: event.requests, errors: event.errors, p99LatencyMs: event.p99LatencyMs, observedAt: event.observedAt };
        const fast = await this.withHeldView(event, metrics, lead);
        if (fast) return fast;
        const r = await store.recordMetricsAndLoad(event.rolloutId, { stage: event.stage, attempt: event.attempt }, metrics);
        stored = r.outcome;
        affected = () => Promise.resolve([r.view]);
        break;
      }
      case 'rollout.alarm_changed':
      case CLOUDWATCH_ALARM_CHANGE: {
        stored = await store.recordAlarm(event.alarm, event.state, event.changedAt);
        // The rollouts that watch this alarm, by the store's index: a change of an alarm nobody watches reads none.
        const watching = () => store.loadWatching(event.alarm);
        if (stored === 'stored') {
          // Stored whoever leads: what the alarm's newest state says of every gate that watches it.
          const region = event.type === CLOUDWATCH_ALARM_CHANGE ? event.region : undefined;
          const views = await alarmReadings(store, await watching(), event.alarm, region, this.engine.clock.now());
          affected = () => Promise.resolve(views);
        } else {
          affected = watching;
        }
        break;
      }
      case 'rollout.created':
      case 'rollout.command': {
        affected = async () => {
          const view = await store.load(event.rolloutId);
          if (!view) throw new UnknownRolloutError(event.rolloutId);
          return [view];
        };
        break;
      }
    }
    const token = await lead();
    if (!token) return { stored, evaluated: false, actions: [] };
    const actions: Action[] = [];
    for (const view of await affected()) {
      const done = await this.engine.evaluateFrom(view, token);
      this.hold(view.rollout.id, done.view);
      actions.push(...done.actions);
    }
    return { stored, evaluated: true, actions };
  }

  /**
   * The leader's fast path for a metrics reading: decided on the view this
   * promoter last left the rollout in, and written with its first decision in
   * one round trip (RolloutEngine.decideWithReading). Undefined when there is
   * no such view, we do not lead, or the reading decides nothing on it.
   */
  private async withHeldView(
    event: InboundEvent & { type: 'rollout.metrics_reported' },
    metrics: StageMetrics,
    lead: () => Promise<LeaseToken | null>,
  ): Promise<HandleResult | undefined> {
    // Where the store has no such write, the reading is stored before leadership is asked, as ever.
    const held = this.engine.store.recordMetricsAndApply ? this.held.get(event.rolloutId) : undefined;
    const stage = held ? stageIndexOf(held.rollout.spec, event.stage) : null;
    if (!held || stage === null) return undefined;
    const token = await lead();
    if (!token) return undefined;
    const done = await this.engine.decideWithReading(held, { stage, attempt: event.attempt, metrics }, token);
    if (!done) return undefined;
    this.hold(event.rolloutId, done.view);
    return { stored: done.outcome, evaluated: true, actions: done.actions };
  }

  /** Kept while running; the store checks it is current before a decision made on it is written. */
  private hold(rolloutId: string, view: RolloutView | null): void {
    if (view?.rollout.state === 'running') this.held.set(rolloutId, view);
    else this.held.delete(rolloutId);
  }
}

/**
 * The readings an alarm's state change makes: one for each cloudwatchAlarm
 * gate of an active stage that names the alarm, judged on the states the
 * views hold (the change among them). A change settles a gate only when it
 * fails it (an alarm in ALARM) or passes it (all OK); anything else is left
 * to the next DescribeAlarms reading, which sees every alarm as it is.
 */
async function alarmReadings(
  store: RolloutStore,
  views: readonly RolloutView[],
  alarm: string,
  region: string | undefined,
  at: number,
): Promise<RolloutView[]> {
  const toStore: ReadingToStore[] = [];
  for (const v of views) {
    const active = v.rollout.state === 'running' ? activeStage(v) : undefined;
    if (!active) continue;
    for (const gate of stageProviders(v.rollout.spec, active.index)) {
      if (gate.type !== 'cloudwatchAlarm' || !gate.alarms.includes(alarm)) continue;
      // As the tick reads it: not before its initial delay, and not from a same-named alarm of another region.
      if (at < v.rollout.lastProgressAt + gate.initialDelaySeconds * 1000) continue;
      if (gate.region && region && gate.region !== region) continue;
      const states = Object.fromEntries(gate.alarms.map((a) => [a, own(v.alarms, a) ?? ('missing' as const)]));
      const answer = `state change of ${alarm}: ${gate.alarms.map((a) => `${a} ${own(states, a)}`).join(', ')}`;
      const reading = judge(gate, { kind: 'alarms', states, answer }, { attempt: v.rollout.attempt, stage: active.index, at, source: 'event' });
      if (reading.outcome !== 'inconclusive') toStore.push(toStoreOf(v, gate, reading));
    }
  }
  return recordReadings(store, views, toStore);
}
