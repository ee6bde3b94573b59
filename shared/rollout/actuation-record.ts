import { z } from 'zod';
import type { Same } from '../types.js';

/**
 * What was applied to one target of one rollout, and when: stored per
 * (rollout, target), written by the leader only (fenced). It is written
 * before a target is changed (`pending`, the write we are about to make)
 * and again once the change is read back, so a rollout whose leader died
 * between the two is found by the next leader's tick (`unsettled`).
 */

export const ACTUATOR_KINDS = ['nginx', 'lambdaAlias', 'albWeights', 'webhook'] as const;
export type ActuatorKind = (typeof ACTUATOR_KINDS)[number];
/** A record's kind: a target's actuator, or a post-rollout hook's delivery (`post-rollout:<hook name>`). */
export type ActuationRecordKind = ActuatorKind | 'postRolloutHook';

/** Our mark on a target: who put there what it carries. */
export interface Stamp {
  readonly rolloutId: string;
  readonly attempt: number;
  readonly stage: number | null;
  /** The promotion lease's epoch of the leader that wrote: a lower epoch never overwrites a higher one. */
  readonly epoch: number;
  /** What the write set: a target whose weights differ from its stamp was changed by someone else. */
  readonly percent: number;
  readonly final: boolean;
  /** The rollout's version of the state written (Desired.version). */
  readonly version?: number;
  /** Where the target keeps it: the version the split is taken from (a Lambda alias's version when the rollout started). */
  readonly base?: string;
}

export const ACTUATION_STATES = ['pending', 'converged', 'drift', 'failed'] as const;
export type ActuationState = (typeof ACTUATION_STATES)[number];

export interface ActuationRecord {
  readonly rolloutId: string;
  readonly target: string;
  readonly kind: ActuationRecordKind;
  /** What we aim the target at: the rollout's traffic as committed. */
  readonly attempt: number;
  readonly stage: number | null;
  readonly percent: number;
  readonly final: boolean;
  /** The lease epoch of the leader that wrote this record. */
  readonly epoch: number;
  /**
   * pending: a write is under way or failed to verify (retried each tick);
   * converged: the target was read back carrying it; drift: someone else
   * changed the target (the rollout was paused, nothing is written until a
   * person acts); failed: the target refused what we asked (retried each tick).
   */
  readonly state: ActuationState;
  /** Why, for drift and failed: the target and what was found. */
  readonly reason: string | null;
  /** The target as last read. */
  readonly observed: { readonly percent: number; readonly final: boolean; readonly detail: string } | null;
  /** The stamp last written to the target (its `base`: a Lambda alias's version when the rollout started). */
  readonly stamp: Stamp | null;
  /** When the target was last read back carrying what we wrote. */
  readonly appliedAt: number | null;
  readonly updatedAt: number;
  /** Drift: the rollout's version once our pause for it was committed; any later version is a person's decision. */
  readonly driftVersion: number | null;
  /** The rollout has ended and the target carries its end: a tick no longer visits it. */
  readonly settled: boolean;
  /** A post-rollout hook: the answers counted against its failureLimit and inconclusiveLimit so far. */
  readonly tries?: { readonly failed: number; readonly inconclusive: number };
}

const stampSchema = z
  .object({
    rolloutId: z.string().min(1),
    attempt: z.number().int().min(1),
    stage: z.number().int().nonnegative().nullable(),
    epoch: z.number().int().nonnegative(),
    percent: z.number().min(0).max(100),
    final: z.boolean(),
    version: z.number().int().nonnegative().optional(),
    base: z.string().optional(),
  })
  .readonly();

export const actuationRecordSchema = z
  .object({
    rolloutId: z.string().min(1),
    target: z.string().min(1),
    kind: z.enum([...ACTUATOR_KINDS, 'postRolloutHook']),
    attempt: z.number().int().min(1),
    stage: z.number().int().nonnegative().nullable(),
    percent: z.number().min(0).max(100),
    final: z.boolean(),
    epoch: z.number().int().nonnegative(),
    state: z.enum(ACTUATION_STATES),
    reason: z.string().nullable(),
    observed: z.object({ percent: z.number(), final: z.boolean(), detail: z.string() }).readonly().nullable(),
    stamp: stampSchema.nullable(),
    appliedAt: z.number().int().nonnegative().nullable(),
    updatedAt: z.number().int().nonnegative(),
    driftVersion: z.number().int().nonnegative().nullable(),
    settled: z.boolean(),
    tries: z.object({ failed: z.number().int().nonnegative(), inconclusive: z.number().int().nonnegative() }).readonly().optional(),
  })
  .readonly();
const _sameRecord: Same<z.output<typeof actuationRecordSchema>, ActuationRecord> = true;

/** A stored record, checked: a row another version of the code wrote wrongly is an error naming the field, not a silent default. */
export function actuationRecordOf(v: unknown): ActuationRecord {
  return actuationRecordSchema.parse(v);
}
