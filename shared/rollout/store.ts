import type { LeaseToken } from '../lease/record.js';
import type { RolloutEvent } from './events.js';
import type { AlarmState, RolloutView, StageMetrics } from './model.js';
import type { RolloutSpec } from './spec.js';
import type { TransitionPlan } from './transitions.js';

export type SignalOutcome = 'stored' | 'stale';

/** The rollout half of the store port; PostgreSQL/PGlite and DynamoDB implement it. */
export interface RolloutStore {
  /** Idempotent on id: creating an existing id with the same spec is a no-op; with another spec, an error. */
  create(id: string, spec: RolloutSpec, now: number, actor: string): Promise<{ created: boolean }>;
  /** One consistent reading of a rollout, its current attempt's stages and signals. */
  load(id: string): Promise<RolloutView | null>;
  /** Every running rollout, read the same way (what a BatchPromoter tick evaluates). */
  loadRunning(): Promise<RolloutView[]>;
  /** Metrics are cumulative per stage; an older or equal `observedAt` is ignored ('stale'). */
  recordMetrics(rolloutId: string, attempt: number, stage: number, metrics: StageMetrics): Promise<SignalOutcome>;
  recordAlarm(name: string, state: AlarmState, changedAt: number): Promise<SignalOutcome>;
  /**
   * Applies a plan in one atomic write, fenced by `token`: only if the rollout
   * row still has the plan's expected version, state and attempt and each
   * touched stage its expected phase. Returns false when the evaluated state
   * has changed (nothing written); throws FencedError when deposed.
   * The plan's events are stored in the same write (the outbox).
   */
  apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean>;
  /** Outbox: stored events not yet published, oldest first. */
  unpublishedEvents(limit: number): Promise<RolloutEvent[]>;
  markPublished(events: readonly RolloutEvent[]): Promise<void>;
  /** Every event of a rollout, oldest first (its history). */
  events(rolloutId: string): Promise<RolloutEvent[]>;
}

/** Metrics or a command for a rollout id that does not exist. */
export class UnknownRolloutError extends Error {
  override readonly name = 'UnknownRolloutError';
  constructor(readonly rolloutId: string) {
    super(`unknown rollout ${rolloutId}`);
  }
}

export class RolloutConflictError extends Error {
  override readonly name = 'RolloutConflictError';
  constructor(readonly rolloutId: string) {
    super(`rollout ${rolloutId} already exists with a different spec`);
  }
}
