import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Same } from '../types.js';
import { gateReadingSchema, type GateReading } from './gates.js';
import { millisSchema, stageMetricsSchema, type StageMetrics } from './model.js';

/** Source of every rollout event on the bus. */
export const ROLLOUT_SOURCE = 'ai.rollout';

export const ROLLOUT_EVENT_TYPES = [
  'ai.rollout.stage_activated',
  'ai.rollout.stage_promoted',
  'ai.rollout.rollback_detected',
  'ai.rollout.completed',
  'ai.rollout.paused',
  'ai.rollout.resumed',
  'ai.rollout.aborted',
  'ai.rollout.retried',
  'ai.rollout.progress_deadline_exceeded',
  /** A target someone else changed: recorded, and the rollout paused by the same write (actuation/reconcile.ts). */
  'ai.rollout.actuation_drift',
] as const;
export type RolloutEventType = (typeof ROLLOUT_EVENT_TYPES)[number];

export interface RolloutEventDetail {
  readonly rolloutId: string;
  readonly attempt: number;
  readonly service: string;
  readonly version: string;
  /** Stage concerned (promoted, activated, rolled back), when there is one. */
  readonly stage?: { readonly index: number; readonly name: string; readonly percent: number };
  /** The stage activated by the same step (stage_promoted). */
  readonly nextStage?: { readonly index: number; readonly name: string; readonly percent: number };
  readonly reason?: string;
  /** The actuation target concerned (actuation_drift): the operator's name for it. */
  readonly target?: string;
  /** The provider gate readings that decided (stage_promoted: those that passed; rollback_detected, paused: the one over its limit). */
  readonly readings?: readonly GateReading[];
  /** The pushed metrics reading the stage's traffic and threshold gates judged (stage_promoted; rollback_detected on a breach of them). */
  readonly metrics?: StageMetrics;
  /**
   * stage_promoted by `onInsufficientData: "pass"`: what the stage was short of when its stretched bake ended. The
   * readings then include the gates' "not enough data" readings it passed on, and metrics the short pushed reading.
   */
  readonly insufficientData?: string;
  /** Who acted: `promoter:<holder>` for automatic actions, the caller's identity for commands. */
  readonly actor: string;
  /** Lease epoch the action was fenced under. */
  readonly epoch: number;
  /**
   * Orders and deduplicates a rollout's events on an unordered, at-least-once
   * bus: the rollout's version after the transition × 100 + the event's place
   * in it (a transition makes at most MAX_STAGES + 1 events). Strictly
   * increasing per rollout. Absent on events stored before it existed.
   */
  readonly seq?: number;
  /** The traffic share on the new version once the transition is committed, 0–100 (100 once completed). */
  readonly percent?: number;
  /** The spec's target labels and the version the new one replaces (null when the spec does not name it). */
  readonly labels?: Readonly<Record<string, string>>;
  readonly stableVersion?: string | null;
}

/** Events a transition makes at most, and so the step of `seq` per rollout version. */
export const SEQ_PER_VERSION = 100;

/**
 * One event, stored in the outbox in the same atomic write as the transition
 * it reports, then published. Its id is fixed at that write, so a publish
 * retried after a crash or a lost reply carries the same id.
 */
export interface RolloutEvent {
  readonly id: string;
  readonly source: typeof ROLLOUT_SOURCE;
  readonly detailType: RolloutEventType;
  /** Milliseconds since the Unix epoch. */
  readonly time: number;
  readonly detail: RolloutEventDetail;
}

const stageRefSchema = z.object({ index: z.number().int().nonnegative(), name: z.string().min(1), percent: z.number().gt(0).max(100) }).readonly();

export const rolloutEventSchema = z
  .object({
    id: z.string().min(1),
    source: z.literal(ROLLOUT_SOURCE),
    detailType: z.enum(ROLLOUT_EVENT_TYPES),
    time: millisSchema,
    detail: z
      .object({
        rolloutId: z.string().min(1),
        attempt: z.number().int().min(1),
        service: z.string(),
        version: z.string(),
        stage: stageRefSchema.optional(),
        nextStage: stageRefSchema.optional(),
        reason: z.string().optional(),
        target: z.string().optional(),
        readings: z.array(gateReadingSchema).readonly().optional(),
        metrics: stageMetricsSchema.optional(),
        insufficientData: z.string().optional(),
        actor: z.string(),
        epoch: z.number().int().nonnegative(),
        seq: z.number().int().nonnegative().optional(),
        percent: z.number().min(0).max(100).optional(),
        labels: z.record(z.string(), z.string()).readonly().optional(),
        stableVersion: z.string().nullable().optional(),
      })
      .readonly(),
  })
  .readonly();
const _sameEvent: Same<z.output<typeof rolloutEventSchema>, RolloutEvent> = true;

/** Deterministic: the same transition of the same rollout version yields the same id. */
export function rolloutEventId(rolloutId: string, version: number, type: RolloutEventType, discriminator = ''): string {
  return createHash('sha256').update(`${rolloutId}\u0000${version}\u0000${type}\u0000${discriminator}`).digest('hex').slice(0, 32);
}
