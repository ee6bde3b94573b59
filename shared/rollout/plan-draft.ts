import type { GateReading } from './gates.js';
import type { RolloutEventDetail, RolloutEventType } from './events.js';
import { activeStage, type Rollout, type RolloutState, type RolloutView, type StageMetrics, type StagePhase, type StageStatus } from './model.js';
import type { StageChange, TransitionContext } from './transition.js';

/** An event a planner asks for: its id and the fields every rollout event carries are added when the plan is made. */
export interface DraftEvent {
  readonly type: RolloutEventType;
  /** Tells apart two events of one type in one plan (a stage's index, a drifted target). */
  readonly discriminator?: string;
  readonly extra?: Partial<RolloutEventDetail>;
}

/**
 * What every planner shares: the view it plans on, who acts and when, and the
 * plan so far (stage changes, the rollout row after, events). A planner checks
 * what it needs of the view, throws `reject(reason)` when the transition does
 * not apply, and records its changes; planTransition makes the plan of them.
 */
export class PlanDraft {
  readonly rollout: Rollout;
  readonly now: number;
  readonly stageChanges: StageChange[] = [];
  readonly events: DraftEvent[] = [];
  /** The rollout row after the change, but for its version and updatedAt (set when the plan is made). */
  next: Omit<Rollout, 'version' | 'updatedAt'>;
  /** Stage rows of a new attempt (retry); empty otherwise. */
  newStages: StageStatus[] = [];

  constructor(
    readonly view: RolloutView,
    readonly ctx: TransitionContext,
    /** The error refusing this transition on this rollout, for `reason`. */
    readonly reject: (reason: string) => Error,
  ) {
    this.rollout = view.rollout;
    this.next = view.rollout;
    this.now = ctx.now;
  }

  requireState(...allowed: RolloutState[]): void {
    if (!allowed.includes(this.rollout.state)) throw this.reject(`rollout is ${this.rollout.state}, expected ${allowed.join(' or ')}`);
  }

  /** Stage `index`, which must be in `phase`. */
  stageAt(index: number, phase: StagePhase): StageStatus {
    const s = this.view.stages[index];
    if (!s) throw this.reject(`no stage ${index}`);
    if (s.phase !== phase) throw this.reject(`stage ${index} (${s.name}) is ${s.phase}, expected ${phase}`);
    return s;
  }

  /** A stage as events name it. */
  stageRef(i: number): { index: number; name: string; percent: number } {
    const s = this.rollout.spec.stages[i]!;
    return { index: i, name: s.name, percent: s.percent };
  }

  /** The rollout row after, with `fields` changed. */
  update(fields: Partial<Omit<Rollout, 'version' | 'updatedAt'>>): void {
    this.next = { ...this.next, ...fields };
  }

  emit(type: RolloutEventType, o: { readonly discriminator?: string; readonly extra?: Partial<RolloutEventDetail> } = {}): void {
    this.events.push({ type, ...o });
  }

  activate(i: number): void {
    this.stageChanges.push({ index: i, expect: 'pending', set: { phase: 'active', activatedAt: this.now } });
  }

  /** `reason`: why a stage promoted on less than its gates ask (onInsufficientData pass), kept on its row. */
  promote(i: number, reason?: string): void {
    this.stageChanges.push({
      index: i,
      expect: 'active',
      set: { phase: 'promoted', promotedAt: this.now, promotedEpoch: this.ctx.token.epoch, promotedBy: this.ctx.actor, ...(reason ? { reason } : {}) },
    });
  }

  rollBack(i: number, reason: string): void {
    this.stageChanges.push({ index: i, expect: 'active', set: { phase: 'rolled_back', rolledBackAt: this.now, reason } });
  }

  /** Rolls back the active stage, if there is one; that stage. */
  rollBackActive(reason: string): StageStatus | undefined {
    const a = activeStage(this.view);
    if (a) this.rollBack(a.index, reason);
    return a;
  }
}

/** The stage rows of a new attempt: every stage pending. */
export function freshStages(view: Pick<RolloutView, 'rollout'>): StageStatus[] {
  return view.rollout.spec.stages.map((s, index) => ({
    index,
    name: s.name,
    phase: 'pending',
    activatedAt: null,
    promotedAt: null,
    promotedEpoch: null,
    promotedBy: null,
    rolledBackAt: null,
    reason: null,
  }));
}

/** The readings a decision carries, as an event detail field (absent when there are none). */
export function readingsOf(t: { readonly readings?: readonly GateReading[] }): { readings?: readonly GateReading[] } {
  return t.readings?.length ? { readings: t.readings } : {};
}

/** The pushed reading a decision judged, as an event detail field (absent when it judged none). */
export function metricsOf(t: { readonly metrics?: StageMetrics }): { metrics?: StageMetrics } {
  return t.metrics ? { metrics: t.metrics } : {};
}
