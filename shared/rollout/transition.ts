import type { LeaseToken } from '../lease/record.js';
import type { Same } from '../types.js';
import type { GateReading } from './gates.js';
import type { StageMetrics, StagePhase, StageStatus } from './model.js';

/**
 * What can happen to a rollout: one arm per kind, each planned by its own
 * planner (planners.ts) into a TransitionPlan (transitions.ts). Kept apart
 * from the planning so the planners and the plan's checks import the words
 * without importing each other.
 */

export type Transition =
  | { readonly kind: 'activate'; readonly stage: number }
  /** `readings`, `metrics`: what the gates saw when the evaluator decided (Decision); they ride on the event. */
  /** `reason`: what a person said when promoting by hand (on its events). */
  | {
      readonly kind: 'promote';
      readonly stage: number;
      readonly then: 'activate_next' | 'complete';
      readonly readings?: readonly GateReading[];
      readonly metrics?: StageMetrics;
      readonly reason?: string;
      /** Why the stage passed on too little data (`onInsufficientData: "pass"` once its stretch was over): on its event and stage row. */
      readonly insufficientData?: string;
    }
  | { readonly kind: 'rollback'; readonly stage: number; readonly reason: string; readonly readings?: readonly GateReading[]; readonly metrics?: StageMetrics }
  | { readonly kind: 'deadline'; readonly abort: boolean }
  | { readonly kind: 'promote_full'; readonly reason?: string }
  /** `readings`: the gate readings that decided an automatic pause; `drift`: the actuation target found changed by someone else. */
  | { readonly kind: 'pause'; readonly reason?: string; readonly readings?: readonly GateReading[]; readonly drift?: { readonly target: string } }
  | { readonly kind: 'resume'; readonly reason?: string }
  /** `readings`: the hook readings that ended the attempt before its first stage (an automatic abort). */
  | { readonly kind: 'abort'; readonly reason?: string; readonly readings?: readonly GateReading[] }
  | { readonly kind: 'retry'; readonly reason?: string };

/** The arm of Transition of kind K. */
export type TransitionOf<K extends Transition['kind']> = Extract<Transition, { readonly kind: K }>;

export const TRANSITION_KINDS = ['activate', 'promote', 'rollback', 'deadline', 'promote_full', 'pause', 'resume', 'abort', 'retry'] as const;
const _sameKinds: Same<(typeof TRANSITION_KINDS)[number], Transition['kind']> = true;

export type StageSet = Partial<Pick<StageStatus, 'phase' | 'activatedAt' | 'promotedAt' | 'promotedEpoch' | 'promotedBy' | 'rolledBackAt' | 'reason'>>;

export interface StageChange {
  readonly index: number;
  readonly expect: StagePhase;
  readonly set: StageSet;
}

export interface TransitionContext {
  readonly now: number;
  readonly token: LeaseToken;
  /** `promoter:<holder>` for automatic decisions; the caller's identity for commands. */
  readonly actor: string;
}
