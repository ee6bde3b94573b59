import { systemClock, type Clock } from '../clock.js';
import type { EventBus } from '../events/bus.js';
import type { LeaderElector, LeaseElector } from '../lease/elector.js';
import type { LeaseToken } from '../lease/record.js';
import type { Attributes } from '@opentelemetry/api';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import { FencedError } from '../lease/fencing.js';
import { inSpan, SPAN } from '../tracing.js';
import { Batcher } from '../concurrency.js';
import { evaluate } from './evaluate.js';
import type { RolloutEvent } from './events.js';
import type { RolloutView } from './model.js';
import { UnknownRolloutError, type HeldReading, type RolloutStore, type SignalOutcome } from './store.js';
import { planTransition, TransitionRejectedError, viewAfter, type Transition, type TransitionPlan } from './transitions.js';

/** How a rollout is paused for drift: a fenced transition by the leader; the rollout's version after it, or null if it was not running. */
export type PauseForDrift = (rolloutId: string, target: string, reason: string, token: LeaseToken) => Promise<number | null>;

/** Transitions whose published events one markPublished call marks at most. */
const MARKS_PER_CALL = 100;

/** markPublished calls of one engine under way at once. */
const MARKS_IN_FLIGHT = 4;

/** Where committed traffic is carried out to a rollout's targets (actuation/reconcile.ts's Actuation). */
export interface TrafficActuation {
  converge(view: RolloutView, token: LeaseToken, pause: PauseForDrift): Promise<readonly unknown[]>;
}

/** Whether a rollout has effects outside the store to carry out: targets to move, post-rollout hooks to send. */
export function movesTargets(view: Pick<RolloutView, 'rollout'>): boolean {
  const { spec } = view.rollout;
  return (spec.actuators?.length ?? 0) > 0 || (spec.hooks?.some((h) => h.hook === 'post-rollout') ?? false);
}

/** Who leads now: a token to fence writes with, or null. */
export type Leadership = () => Promise<LeaseToken | null>;

/** For a process whose elector loop runs: the cached local view (IsLeader). */
export function leadershipOf(elector: LeaderElector): Leadership {
  return async () => ((await elector.isLeader()) ? elector.token() : null);
}

/** For a short-lived invocation (Lambda): one campaign step, then the result. */
export function campaignEachTime(elector: LeaseElector): Leadership {
  return async () => ((await elector.campaign()).leader ? elector.token() : null);
}

export interface Action {
  readonly rolloutId: string;
  readonly transition: Transition['kind'];
  readonly stage?: number;
  /** False: the state evaluated had moved on when we wrote; nothing was written. */
  readonly applied: boolean;
  readonly events: readonly RolloutEvent[];
}

export interface EngineOptions {
  store: RolloutStore;
  bus: EventBus;
  clock?: Clock;
  logger?: Logger;
  /**
   * Leave events in the outbox instead of publishing them: for an engine whose
   * writes sit in an enclosing transaction, where publishing (and marking
   * published) before the commit could announce a change that never happened.
   * The owner flushes the outbox after the commit.
   */
  deferPublish?: boolean;
  /** Where committed traffic is carried out (actuation/reconcile.ts): converged after every transition this engine writes. */
  actuation?: TrafficActuation;
}

/**
 * The evaluation code both promoters share. Each decision of the pure
 * evaluator becomes a plan on exactly the state read, applied as one fenced
 * conditional write; its events go out from the outbox afterwards.
 */
export class RolloutEngine {
  readonly store: RolloutStore;
  private readonly bus: EventBus;
  readonly clock: Clock;
  private readonly logger: Logger;
  private readonly deferPublish: boolean;
  readonly actuation: TrafficActuation | undefined;
  /**
   * Marks of published events, group-committed: the events of transitions published while a mark is
   * under way (a tick's, many events' at once) are marked together in one store call, not one each.
   */
  private readonly marks: Batcher<readonly RolloutEvent[], undefined>;

  constructor(opts: EngineOptions) {
    this.deferPublish = opts.deferPublish ?? false;
    this.actuation = opts.actuation;
    this.store = opts.store;
    this.bus = opts.bus;
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? silentLogger;
    this.marks = new Batcher(
      async (batches) => {
        await this.store.markPublished(batches.flat());
        return batches.map(() => undefined);
      },
      // Several at once: a slow mark holds back no other transition's.
      { maxBatch: MARKS_PER_CALL, maxInFlight: MARKS_IN_FLIGHT, linger: true },
    );
  }

  async evaluate(rolloutId: string, token: LeaseToken): Promise<Action[]> {
    const view = await this.store.load(rolloutId);
    if (!view) throw new UnknownRolloutError(rolloutId);
    return this.evaluateView(view, token);
  }

  /** Apply decisions until the evaluator has none (or our reading goes stale). FencedError propagates. */
  async evaluateView(initial: RolloutView, token: LeaseToken): Promise<Action[]> {
    return (await this.evaluateFrom(initial, token)).actions;
  }

  /**
   * evaluateView, also returning the view its last decision left (what the
   * store holds now, unless another writer came in since), or null when a
   * write found the rollout moved.
   */
  async evaluateFrom(initial: RolloutView, token: LeaseToken, done: Action[] = []): Promise<{ actions: Action[]; view: RolloutView | null }> {
    const actions = [...done];
    let view: RolloutView | null = initial;
    // Bounded: each applied step activates, promotes or ends one stage.
    for (let step = 0; view && step <= 2 * view.stages.length + 2; step++) {
      const decision = evaluate(view, this.clock.now());
      if (!decision) break;
      const { action, plan } = await this.applyTo(view, decision, token, `promoter:${token.holder}`);
      actions.push(action);
      // Another writer moved it; its own evaluation (or the next tick) goes on from there.
      view = action.applied ? viewAfter(view, plan) : null;
    }
    // Whatever this evaluation committed, `done` included (a reading's decision written with it), is carried out now.
    if (view && actions.some((a) => a.applied)) await this.actuate(view, token);
    return { actions, view };
  }

  /**
   * Carry a committed state out to the rollout's targets, right after the
   * commit. Only FencedError escapes (we no longer lead); anything else a
   * target or the store did is logged, and the next tick reconciles it.
   */
  async actuate(view: RolloutView, token: LeaseToken): Promise<readonly unknown[]> {
    if (!this.actuation) return [];
    try {
      return await this.actuation.converge(view, token, (id, target, reason, t) => this.pauseForDrift(id, target, reason, t));
    } catch (err) {
      if (err instanceof FencedError) throw err;
      this.logger.warn('actuation not carried out; the next tick reconciles it', { rolloutId: view.rollout.id, error: errorMessage(err) });
      return [];
    }
  }

  /** The pause drift asks for, by the leader; the rollout's version after it, or null when it was not running. */
  private async pauseForDrift(rolloutId: string, target: string, reason: string, token: LeaseToken): Promise<number | null> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const view = await this.store.load(rolloutId);
      if (view?.rollout.state !== 'running') return null;
      const { action, plan } = await this.applyTo(view, { kind: 'pause', reason, drift: { target } }, token, `promoter:${token.holder}`);
      if (action.applied) return plan.next.version;
    }
    return null;
  }

  /**
   * A metrics reading decided on a view this promoter holds, the first
   * decision written with the reading in one round trip (the store's
   * recordMetricsAndApply); then on as evaluateFrom. Undefined when the store
   * cannot, or the reading decides nothing on the held view: the caller
   * records it and reads the view as usual. When the store no longer holds
   * what `held` was read from, the decision is made again on the fresh view.
   */
  async decideWithReading(
    held: RolloutView,
    reading: HeldReading,
    token: LeaseToken,
  ): Promise<{ outcome: SignalOutcome; actions: Action[]; view: RolloutView | null } | undefined> {
    if (!this.store.recordMetricsAndApply || held.rollout.state !== 'running') return undefined;
    if (reading.attempt !== undefined && reading.attempt !== held.rollout.attempt) return undefined;
    const prior = held.metrics.get(reading.stage);
    if (prior && prior.observedAt >= reading.metrics.observedAt) return undefined;
    const view: RolloutView = { ...held, metrics: new Map(held.metrics).set(reading.stage, reading.metrics) };
    const decision = evaluate(view, this.clock.now());
    if (!decision) return undefined;
    const actor = `promoter:${token.holder}`;
    const plan = planTransition(view, decision, { now: this.clock.now(), token, actor });
    const { written, action } = await inSpan(SPAN.decide, decisionAttributes(view, decision, token, actor), async (span) => {
      const w = await this.store.recordMetricsAndApply!(token, plan, reading, held);
      span.setAttributes({ 'rollout.outcome': w.applied ? 'applied' : 'stale', 'rollout.state': w.applied ? plan.next.state : undefined });
      return { written: w, action: w.applied ? await this.applied(view, decision, plan, token) : null };
    });
    if (action) return { outcome: 'stored', ...(await this.evaluateFrom(viewAfter(view, plan), token, [action])) };
    if (written.applied || written.view === null) return undefined;
    return { outcome: written.outcome, ...(await this.evaluateFrom(written.view, token)) };
  }

  /** One decision written, in a `rollout.decide` span: applied, or found stale (nothing written). */
  private applyTo(view: RolloutView, t: Transition, token: LeaseToken, actor: string): Promise<{ action: Action; plan: TransitionPlan }> {
    return inSpan(SPAN.decide, decisionAttributes(view, t, token, actor), async (span) => {
      const plan = planTransition(view, t, { now: this.clock.now(), token, actor });
      const applied = await this.store.apply(token, plan);
      span.setAttributes({ 'rollout.outcome': applied ? 'applied' : 'stale', 'rollout.state': applied ? plan.next.state : undefined });
      if (applied) return { action: await this.applied(view, t, plan, token), plan };
      const stage = 'stage' in t ? t.stage : undefined;
      return { action: { rolloutId: view.rollout.id, transition: t.kind, ...(stage === undefined ? {} : { stage }), applied: false, events: [] }, plan };
    });
  }

  /** A plan the store applied: logged, its events published. */
  private async applied(view: RolloutView, t: Transition, plan: TransitionPlan, token: LeaseToken): Promise<Action> {
    const stage = 'stage' in t ? t.stage : undefined;
    this.logger.info('rollout transition', { rolloutId: view.rollout.id, transition: t.kind, stage, epoch: token.epoch });
    await this.publish(plan.events);
    return { rolloutId: view.rollout.id, transition: t.kind, ...(stage === undefined ? {} : { stage }), applied: true, events: plan.events };
  }

  /**
   * A manual command on the rollout as it is now. Retries on a fresh reading
   * if a promoter moved the rollout between our read and our write; refuses
   * (TransitionRejectedError) when the command does not apply.
   */
  async command(rolloutId: string, make: (view: RolloutView) => Transition, token: LeaseToken, actor: string): Promise<Action> {
    for (let attempt = 0; ; attempt++) {
      const view = await this.store.load(rolloutId);
      if (!view) throw new UnknownRolloutError(rolloutId);
      const { action, plan } = await this.applyTo(view, make(view), token, actor);
      if (action.applied) {
        await this.actuate(viewAfter(view, plan), token);
        return action;
      }
      if (attempt >= 4) throw new TransitionRejectedError(rolloutId, action.transition, 'the rollout kept changing; try again');
    }
  }

  /** Publish, then mark published. On failure the events stay in the outbox for the next flush. */
  async publish(events: readonly RolloutEvent[]): Promise<void> {
    if (!events.length || this.deferPublish) return;
    try {
      await this.bus.publish(events);
      await this.marks.add(events);
    } catch (err) {
      this.logger.warn('event publish failed; left in the outbox', { count: events.length, error: errorMessage(err) });
    }
  }

  /** Re-publish whatever a crash or a failed publish left behind (same ids). */
  async flushOutbox(limit = 500): Promise<number> {
    const pending = await this.store.unpublishedEvents(limit);
    await this.publish(pending);
    return pending.length;
  }
}

/** What a `rollout.decide` span carries (docs/operating/observability.md#operating: traces). */
function decisionAttributes(view: RolloutView, t: Transition, token: LeaseToken, actor: string): Attributes {
  const stage = 'stage' in t ? t.stage : undefined;
  return {
    'rollout.id': view.rollout.id,
    'rollout.attempt': view.rollout.attempt,
    'rollout.transition': t.kind,
    'rollout.stage.index': stage,
    'rollout.stage.name': stage === undefined ? undefined : view.rollout.spec.stages[stage]?.name,
    'rollout.actor': actor,
    'lease.epoch': token.epoch,
  };
}
