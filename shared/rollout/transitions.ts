import { z } from 'zod';
import { issueLines } from '../config.js';
import { gateReadingSchema } from './gates.js';
import type { Same } from '../types.js';
import { trafficOf } from './assignment.js';
import { ROLLOUT_EVENT_TYPES, ROLLOUT_SOURCE, rolloutEventId, SEQ_PER_VERSION, rolloutEventSchema, type RolloutEvent } from './events.js';
import {
  ROLLOUT_STATES,
  rolloutSchema,
  STAGE_PHASES,
  stageStatusSchema,
  stageStatusShape,
  TERMINAL_STATES,
  type Rollout,
  type RolloutState,
  type RolloutView,
  type StageStatus,
} from './model.js';
import { PlanDraft } from './plan-draft.js';
import { planInto } from './planners.js';

export { freshStages } from './plan-draft.js';

const gateReadingsSchema = z.array(gateReadingSchema);

/**
 * Every change to a rollout, planned purely from the view it was decided on.
 * A plan states the exact prior state it expects — the rollout row's version,
 * state and attempt, and each touched stage's phase — and a backend applies
 * it in one atomic fenced write only if all of that still holds. So a
 * promoter acting on an older reading cannot promote a stage another promoter
 * has just rolled back, even under the same valid epoch.
 */

import { TRANSITION_KINDS, type StageChange, type StageSet, type Transition, type TransitionContext } from './transition.js';
export type { StageChange, StageSet, Transition, TransitionContext, TransitionOf } from './transition.js';
export { TRANSITION_KINDS } from './transition.js';

export interface TransitionPlan {
  readonly rolloutId: string;
  readonly transition: Transition['kind'];
  /** The rollout row as evaluated: applied only if version, state and attempt still match. */
  readonly expect: { readonly version: number; readonly state: RolloutState; readonly attempt: number };
  /** The rollout row after the change (version + 1). */
  readonly next: Rollout;
  readonly stageChanges: readonly StageChange[];
  /** Stage rows of a new attempt (retry). */
  readonly newStages: readonly StageStatus[];
  readonly events: readonly RolloutEvent[];
}

/** SQL tests each key (`s ? 'phase'`) and skips any other, DynamoDB would write any: an unknown key is refused. */
export const stageSetSchema = z
  .strictObject(stageStatusShape)
  .pick({ phase: true, activatedAt: true, promotedAt: true, promotedEpoch: true, promotedBy: true, rolledBackAt: true, reason: true })
  .partial()
  .readonly();
const _sameStageSet: Same<z.output<typeof stageSetSchema>, StageSet> = true;

/**
 * The plan as the backends read it: rollout_apply (PL/pgSQL, migration 10)
 * reads its JSON by field name, so a field renamed here alone would be read
 * as null there, silently. The interface and this schema are checked against
 * each other at compile time; every plan is checked against the schema as it
 * is made; test/unit/transition-plan.test.ts checks that every JSON path the
 * SQL reads is one the schema requires.
 */
export const transitionPlanSchema = z
  .object({
    rolloutId: z.string().min(1),
    transition: z.enum(TRANSITION_KINDS),
    expect: rolloutSchema.unwrap().pick({ version: true, state: true, attempt: true }).readonly(),
    next: rolloutSchema,
    stageChanges: z
      .array(
        z
          .object({
            index: stageStatusShape.index,
            expect: z.enum(STAGE_PHASES),
            set: stageSetSchema,
          })
          .readonly(),
      )
      .readonly(),
    newStages: z.array(stageStatusSchema).readonly(),
    events: z.array(rolloutEventSchema).readonly(),
  })
  .superRefine((plan, ctx) => {
    // SQL keys every write by rolloutId; DynamoDB keys the rollout row by next.id and marks events published by detail.rolloutId.
    if (plan.next.id !== plan.rolloutId) ctx.addIssue({ code: 'custom', path: ['next', 'id'], message: `must be the rolloutId ${plan.rolloutId}` });
    plan.events.forEach((e, i) => {
      if (e.detail.rolloutId !== plan.rolloutId)
        ctx.addIssue({ code: 'custom', path: ['events', i, 'detail', 'rolloutId'], message: `must be the rolloutId ${plan.rolloutId}` });
    });
  })
  .readonly();
const _samePlan: Same<z.output<typeof transitionPlanSchema>, TransitionPlan> = true;

/** A plan that does not match transitionPlanSchema: a bug in its maker, refused before any store sees it. */
export class MalformedPlanError extends Error {
  override readonly name = 'MalformedPlanError';
  constructor(readonly issues: readonly string[]) {
    super(`malformed transition plan: ${issues.join('; ')}`);
  }
}

/**
 * The plan itself once it matches the schema; MalformedPlanError naming every bad field otherwise.
 * A plan the hand-written `isWellFormedPlan` accepts is one the schema accepts too (it is at least as
 * strict; test/unit/transition-plan.test.ts checks that on every field of every kind of plan), so
 * the schema's full parse, which copies the whole plan, runs only for a plan it doubts: on the
 * promotion path the parse cost more than evaluating and planning together.
 */
export function checkPlan(plan: unknown): TransitionPlan {
  if (isWellFormedPlan(plan)) return plan as TransitionPlan;
  const result = transitionPlanSchema.safeParse(plan);
  if (!result.success) throw new MalformedPlanError(issueLines(result.error));
  return plan as TransitionPlan;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === 'string';
const isName = (v: unknown) => isStr(v) && v.length > 0;
/** z.number().int() with a lower bound: a safe integer. */
const isInt = (v: unknown, min: number) => Number.isSafeInteger(v) && (v as number) >= min;
const isMillis = (v: unknown) => isInt(v, 0);
const orNull = (v: unknown, test: (v: unknown) => boolean) => v === null || test(v);
const isIn = (values: readonly string[]) => (v: unknown) => isStr(v) && values.includes(v);
const isState = isIn(ROLLOUT_STATES);
const isPhase = isIn(STAGE_PHASES);
const isEventType = isIn(ROLLOUT_EVENT_TYPES);
const isTransition = isIn(TRANSITION_KINDS);
const STAGE_SET_KEYS = new Set(Object.keys(stageSetSchema.unwrap().shape));

/** stageMetricsSchema, by hand: it rides on every plan a pushed reading decides, where a full parse would cost more than the check. */
function isStageMetrics(v: unknown): boolean {
  if (!isObj(v) || !isInt(v.requests, 0) || !isInt(v.errors, 0) || !isMillis(v.observedAt)) return false;
  return v.p99LatencyMs === null || (typeof v.p99LatencyMs === 'number' && Number.isFinite(v.p99LatencyMs) && v.p99LatencyMs >= 0);
}

function isStageRef(v: unknown): boolean {
  return isObj(v) && isInt(v.index, 0) && isName(v.name) && typeof v.percent === 'number' && v.percent > 0 && v.percent <= 100;
}

/** transitionPlanSchema, by hand: true only for a plan the schema accepts (false may still be one it accepts). */
export function isWellFormedPlan(p: unknown): boolean {
  if (!isObj(p) || !isName(p.rolloutId) || !isTransition(p.transition)) return false;
  const { expect: x, next: n, stageChanges, newStages, events } = p;
  if (!isObj(x) || !isInt(x.version, 0) || !isState(x.state) || !isInt(x.attempt, 1)) return false;
  if (!isObj(n) || n.id !== p.rolloutId || !isName(n.id) || !isObj(n.spec) || !Array.isArray(n.spec.stages) || !isState(n.state) || !isInt(n.attempt, 1))
    return false;
  if (!isInt(n.version, 0) || !isMillis(n.createdAt) || !isMillis(n.updatedAt) || !isMillis(n.lastProgressAt) || !orNull(n.deadlineExceededAt, isMillis))
    return false;
  if (!orNull(n.stateBy, isStr) || !orNull(n.stateReason, isStr)) return false;
  if (!Array.isArray(stageChanges) || !Array.isArray(newStages) || !Array.isArray(events)) return false;
  for (const c of stageChanges as unknown[]) {
    if (!isObj(c) || !isInt(c.index, 0) || !isPhase(c.expect) || !isObj(c.set)) return false;
    const set = c.set;
    for (const key of Object.keys(set)) if (!STAGE_SET_KEYS.has(key)) return false;
    if (set.phase !== undefined && !isPhase(set.phase)) return false;
    for (const key of ['activatedAt', 'promotedAt', 'rolledBackAt'] as const) if (set[key] !== undefined && !orNull(set[key], isMillis)) return false;
    if (set.promotedEpoch !== undefined && !orNull(set.promotedEpoch, (v) => isInt(v, 0))) return false;
    for (const key of ['promotedBy', 'reason'] as const) if (set[key] !== undefined && !orNull(set[key], isStr)) return false;
  }
  for (const s of newStages as unknown[]) {
    if (!isObj(s) || !isInt(s.index, 0) || !isName(s.name) || !isPhase(s.phase) || !orNull(s.promotedEpoch, (v) => isInt(v, 0))) return false;
    if (
      !orNull(s.activatedAt, isMillis) ||
      !orNull(s.promotedAt, isMillis) ||
      !orNull(s.rolledBackAt, isMillis) ||
      !orNull(s.promotedBy, isStr) ||
      !orNull(s.reason, isStr)
    )
      return false;
  }
  for (const e of events as unknown[]) {
    if (!isObj(e) || !isName(e.id) || e.source !== ROLLOUT_SOURCE || !isEventType(e.detailType) || !isMillis(e.time) || !isObj(e.detail)) return false;
    const d = e.detail;
    if (d.rolloutId !== p.rolloutId || !isInt(d.attempt, 1) || !isStr(d.service) || !isStr(d.version) || !isStr(d.actor) || !isInt(d.epoch, 0)) return false;
    if (
      (d.stage !== undefined && !isStageRef(d.stage)) ||
      (d.nextStage !== undefined && !isStageRef(d.nextStage)) ||
      (d.reason !== undefined && !isStr(d.reason))
    )
      return false;
    if ((d.target !== undefined && !isStr(d.target)) || (d.insufficientData !== undefined && !isStr(d.insufficientData))) return false;
    if ((d.seq !== undefined && !isInt(d.seq, 0)) || (d.percent !== undefined && !(typeof d.percent === 'number' && d.percent >= 0 && d.percent <= 100)))
      return false;
    if (d.stableVersion !== undefined && !orNull(d.stableVersion, isStr)) return false;
    if (d.labels !== undefined && !(isObj(d.labels) && Object.values(d.labels).every(isStr))) return false;
    // Readings and metrics ride only on gate-decided transitions: their schemas check them.
    if (d.readings !== undefined && !gateReadingsSchema.safeParse(d.readings).success) return false;
    if (d.metrics !== undefined && !isStageMetrics(d.metrics)) return false;
  }
  return true;
}

/** A command that does not apply to the rollout as it is (e.g. pausing a completed rollout). */
export class TransitionRejectedError extends Error {
  override readonly name = 'TransitionRejectedError';
  constructor(
    readonly rolloutId: string,
    readonly transition: Transition['kind'],
    readonly reason: string,
  ) {
    super(`${transition} ${rolloutId}: ${reason}`);
  }
}

/**
 * The plan of `t` on exactly `view`: its planner (planners.ts) records the
 * changes on a draft, then every event gets its id, its sequence number and
 * the traffic in force once the plan is committed. TransitionRejectedError
 * when `t` does not apply to the rollout as it is.
 */
export function planTransition(view: RolloutView, t: Transition, ctx: TransitionContext): TransitionPlan {
  const { rollout } = view;
  const d = new PlanDraft(view, ctx, (reason) => new TransitionRejectedError(rollout.id, t.kind, reason));
  planInto(d, t);
  const { now } = ctx;
  const { stageChanges, newStages } = d;
  const version = rollout.version + 1;
  const nextRollout: Rollout = { ...d.next, version, updatedAt: now };
  const { target } = rollout.spec;
  // The traffic in force once this plan is committed: the stages as they will be.
  const changed = new Map(stageChanges.map((c) => [c.index, c.set.phase]));
  const stagesAfter = newStages.length ? newStages : view.stages.map((s) => ({ ...s, phase: changed.get(s.index) ?? s.phase }));
  const inForce = trafficOf({ rollout: nextRollout, stages: stagesAfter });
  return checkPlan({
    rolloutId: rollout.id,
    transition: t.kind,
    expect: { version: rollout.version, state: rollout.state, attempt: rollout.attempt },
    next: nextRollout,
    stageChanges,
    newStages,
    events: d.events.map(({ type, discriminator, extra }, i) => ({
      id: rolloutEventId(rollout.id, version, type, discriminator),
      source: ROLLOUT_SOURCE,
      detailType: type,
      time: now,
      detail: {
        rolloutId: rollout.id,
        attempt: nextRollout.attempt,
        service: rollout.spec.target.service,
        version: rollout.spec.target.version,
        actor: ctx.actor,
        epoch: ctx.token.epoch,
        seq: version * SEQ_PER_VERSION + i,
        percent: inForce.final ? 100 : inForce.percent,
        labels: target.labels,
        stableVersion: target.stableVersion ?? null,
        ...extra,
      },
    })),
  } satisfies TransitionPlan);
}

export function isTerminal(state: RolloutState): boolean {
  return TERMINAL_STATES.includes(state);
}

/**
 * The view once `plan` has been applied. Exact for the rollout and its stages
 * (the write was conditioned on the exact prior state); signals are as they
 * were read, just as if the next evaluation had run a moment earlier.
 */
export function viewAfter(view: RolloutView, plan: TransitionPlan): RolloutView {
  if (plan.newStages.length) return { rollout: plan.next, stages: plan.newStages, metrics: new Map(), alarms: view.alarms, gates: new Map() };
  const changes = new Map(plan.stageChanges.map((c) => [c.index, c.set]));
  return {
    ...view,
    rollout: plan.next,
    stages: view.stages.map((s) => {
      const set = changes.get(s.index);
      return set ? { ...s, ...set } : s;
    }),
  };
}
