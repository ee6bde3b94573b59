import { z } from 'zod';
import type { Same } from '../types.js';
import type { GateTally } from './gates.js';
import type { RolloutSpec } from './spec.js';

/** As the rollouts and rollout_stages CHECK constraints list them. */
export const ROLLOUT_STATES = ['running', 'paused', 'completed', 'rolled_back', 'aborted'] as const;
export const STAGE_PHASES = ['pending', 'active', 'promoted', 'rolled_back'] as const;
export type RolloutState = (typeof ROLLOUT_STATES)[number];
export type StagePhase = (typeof STAGE_PHASES)[number];
export type { AlarmState } from './gate-spec.js';
import type { AlarmState, ProviderGate } from './gate-spec.js';

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

/** Milliseconds since the Unix epoch. */
export const millisSchema = z.number().int().nonnegative();

export const rolloutSchema = z
  .object({
    id: z.string().min(1),
    // Validated once by parseRolloutSpec when the rollout was created; a plan carries it unchanged.
    spec: z.custom<RolloutSpec>((v) => typeof v === 'object' && v !== null && Array.isArray((v as { stages?: unknown }).stages), 'expected the rollout spec'),
    state: z.enum(ROLLOUT_STATES),
    attempt: z.number().int().min(1),
    version: z.number().int().nonnegative(),
    createdAt: millisSchema,
    updatedAt: millisSchema,
    lastProgressAt: millisSchema,
    deadlineExceededAt: millisSchema.nullable(),
    stateBy: z.string().nullable(),
    stateReason: z.string().nullable(),
  })
  .readonly();
const _sameRollout: Same<z.output<typeof rolloutSchema>, Rollout> = true;

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

export const stageStatusShape = {
  index: z.number().int().nonnegative(),
  name: z.string().min(1),
  phase: z.enum(STAGE_PHASES),
  activatedAt: millisSchema.nullable(),
  promotedAt: millisSchema.nullable(),
  promotedEpoch: z.number().int().nonnegative().nullable(),
  promotedBy: z.string().nullable(),
  rolledBackAt: millisSchema.nullable(),
  reason: z.string().nullable(),
};
export const stageStatusSchema = z.object(stageStatusShape).readonly();
const _sameStageStatus: Same<z.output<typeof stageStatusSchema>, StageStatus> = true;

/** Cumulative for the stage since it was activated; the newest `observedAt` wins. */
export interface StageMetrics {
  readonly requests: number;
  readonly errors: number;
  readonly p99LatencyMs: number | null;
  readonly observedAt: number;
}

export const stageMetricsSchema = z
  .object({
    requests: z.number().int().nonnegative(),
    errors: z.number().int().nonnegative(),
    p99LatencyMs: z.number().nonnegative().nullable(),
    observedAt: millisSchema,
  })
  .readonly();
const _sameStageMetrics: Same<z.output<typeof stageMetricsSchema>, StageMetrics> = true;

/** Everything the evaluator needs about one rollout, as read at one moment. */
export interface RolloutView {
  readonly rollout: Rollout;
  /** The current attempt's stages, by index. */
  readonly stages: readonly StageStatus[];
  /** Metrics per stage index of the current attempt. */
  readonly metrics: ReadonlyMap<number, StageMetrics>;
  /** Current state of every alarm a stage of this rollout names (its `alarms` and its cloudwatchAlarm gates). */
  readonly alarms: Readonly<Record<string, AlarmState>>;
  /** Provider gate tallies of the current attempt, by stage index, then gate name. */
  readonly gates: ReadonlyMap<number, ReadonlyMap<string, GateTally>>;
}

/** The alarm names a spec's stages watch: their `alarms` lists and their cloudwatchAlarm gates. */
export function alarmNamesOf(spec: RolloutSpec): string[] {
  const alarmsOf = (gates: readonly ProviderGate[] | undefined) => (gates ?? []).flatMap((g) => (g.type === 'cloudwatchAlarm' ? g.alarms : []));
  return [...new Set([...spec.stages.flatMap((s) => [...s.gates.alarms, ...alarmsOf(s.gates.providers)]), ...alarmsOf(spec.rolloutGates?.providers)])];
}

/** Tallies as a view holds them, from a flat list. */
export function talliesByStage(tallies: Iterable<GateTally>): Map<number, Map<string, GateTally>> {
  const out = new Map<number, Map<string, GateTally>>();
  for (const t of tallies) {
    let m = out.get(t.stage);
    if (!m) out.set(t.stage, (m = new Map<string, GateTally>()));
    m.set(t.gate, t);
  }
  return out;
}

/** The view with these tallies in place of the ones it holds (readings just stored). */
export function withTallies(view: RolloutView, tallies: readonly GateTally[]): RolloutView {
  if (!tallies.length) return view;
  const merged = new Map([...view.gates].map(([stage, m]) => [stage, new Map(m)]));
  for (const t of tallies) {
    let m = merged.get(t.stage);
    if (!m) merged.set(t.stage, (m = new Map<string, GateTally>()));
    m.set(t.gate, t);
  }
  return { ...view, gates: merged };
}

export function activeStage(view: RolloutView): StageStatus | undefined {
  return view.stages.find((s) => s.phase === 'active');
}
