import type { RolloutSpec } from './spec.js';

export type RolloutState = 'running' | 'paused' | 'completed' | 'rolled_back' | 'aborted';
export type StagePhase = 'pending' | 'active' | 'promoted' | 'rolled_back';
export type AlarmState = 'OK' | 'ALARM' | 'INSUFFICIENT_DATA';

export const TERMINAL_STATES: readonly RolloutState[] = ['completed', 'rolled_back', 'aborted'];

export interface Rollout {
  readonly id: string;
  readonly spec: RolloutSpec;
  readonly state: RolloutState;
  /** 1 for the first run; `retry` starts attempt + 1 with fresh stages. */
  readonly attempt: number;
  /** +1 on every transition; event ids derive from it. */
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Last activation, promotion, resume or retry: what the progress deadline measures from. */
  readonly lastProgressAt: number;
  readonly deadlineExceededAt: number | null;
  /** Who made the last state change, and why. */
  readonly stateBy: string | null;
  readonly stateReason: string | null;
}

export interface StageStatus {
  readonly index: number;
  readonly name: string;
  readonly phase: StagePhase;
  readonly activatedAt: number | null;
  readonly promotedAt: number | null;
  /** The lease epoch under which the stage was promoted. */
  readonly promotedEpoch: number | null;
  readonly promotedBy: string | null;
  readonly rolledBackAt: number | null;
  readonly reason: string | null;
}

/** Cumulative for the stage since it was activated; the newest `observedAt` wins. */
export interface StageMetrics {
  readonly requests: number;
  readonly errors: number;
  readonly p99LatencyMs: number | null;
  readonly observedAt: number;
}

/** Everything the evaluator needs about one rollout, as read at one moment. */
export interface RolloutView {
  readonly rollout: Rollout;
  /** The current attempt's stages, by index. */
  readonly stages: readonly StageStatus[];
  /** Metrics per stage index of the current attempt. */
  readonly metrics: ReadonlyMap<number, StageMetrics>;
  /** Current state of every alarm a stage of this rollout names. */
  readonly alarms: Readonly<Record<string, AlarmState>>;
}

export function activeStage(view: RolloutView): StageStatus | undefined {
  return view.stages.find((s) => s.phase === 'active');
}
