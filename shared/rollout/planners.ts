import { activeStage } from './model.js';
import { freshStages, metricsOf, readingsOf, type PlanDraft } from './plan-draft.js';
import type { Transition, TransitionOf as Of } from './transition.js';

/**
 * One planner per kind of transition, each on the draft they share
 * (plan-draft.ts): it checks the rollout is in a state the transition applies
 * to, then records the stage changes, the rollout row after and the events.
 *
 *   running ──activate / promote (activate_next)──▶ running
 *   running ──promote (complete)──────────────────▶ completed
 *   running ──rollback────────────────────────────▶ rolled_back
 *   running ──deadline (abort)────────────────────▶ aborted      (without abort: flagged, still running)
 *   running ──pause──▶ paused ──resume──▶ running
 *   running | paused ──promote_full──▶ completed
 *   running | paused ──abort─────────▶ aborted
 *   rolled_back | aborted ──retry──▶ running (a new attempt)
 */

export type Planner<K extends Transition['kind']> = (d: PlanDraft, t: Of<K>) => void;

function activate(d: PlanDraft, t: Of<'activate'>): void {
  d.requireState('running');
  d.stageAt(t.stage, 'pending');
  if (activeStage(d.view)) throw d.reject('another stage is active');
  d.activate(t.stage);
  d.update({ lastProgressAt: d.now });
  d.emit('ai.rollout.stage_activated', { discriminator: String(t.stage), extra: { stage: d.stageRef(t.stage) } });
}

function promote(d: PlanDraft, t: Of<'promote'>): void {
  d.requireState('running');
  d.stageAt(t.stage, 'active');
  // A pass on too little data says so where the stage is read, as a rollback's reason does.
  d.promote(t.stage, t.insufficientData === undefined ? undefined : `passed on insufficient data (onInsufficientData pass): ${t.insufficientData}`);
  d.update({ lastProgressAt: d.now });
  const decided = {
    ...readingsOf(t),
    ...metricsOf(t),
    ...(t.reason ? { reason: t.reason } : {}),
    ...(t.insufficientData === undefined ? {} : { insufficientData: t.insufficientData }),
  };
  if (t.then === 'activate_next') {
    d.stageAt(t.stage + 1, 'pending');
    d.activate(t.stage + 1);
    d.emit('ai.rollout.stage_promoted', {
      discriminator: String(t.stage),
      extra: { stage: d.stageRef(t.stage), nextStage: d.stageRef(t.stage + 1), ...decided },
    });
    return;
  }
  if (t.stage !== d.view.stages.length - 1) throw d.reject(`stage ${t.stage} is not the last stage`);
  d.update({ state: 'completed', stateBy: d.ctx.actor, stateReason: null });
  d.emit('ai.rollout.stage_promoted', { discriminator: String(t.stage), extra: { stage: d.stageRef(t.stage), ...decided } });
  d.emit('ai.rollout.completed');
}

function rollback(d: PlanDraft, t: Of<'rollback'>): void {
  d.requireState('running');
  d.stageAt(t.stage, 'active');
  d.rollBack(t.stage, t.reason);
  d.update({ state: 'rolled_back', stateBy: d.ctx.actor, stateReason: t.reason });
  d.emit('ai.rollout.rollback_detected', { extra: { stage: d.stageRef(t.stage), reason: t.reason, ...readingsOf(t), ...metricsOf(t) } });
}

function deadline(d: PlanDraft, t: Of<'deadline'>): void {
  d.requireState('running');
  if (d.rollout.deadlineExceededAt !== null) throw d.reject('progress deadline already flagged');
  const reason = `no progress for ${d.rollout.spec.progressDeadlineSeconds} s`;
  d.update({ deadlineExceededAt: d.now });
  d.emit('ai.rollout.progress_deadline_exceeded', { extra: { reason } });
  if (!t.abort) return;
  const a = d.rollBackActive(reason);
  d.update({ state: 'aborted', stateBy: d.ctx.actor, stateReason: reason });
  d.emit('ai.rollout.aborted', { extra: { reason, ...(a ? { stage: d.stageRef(a.index) } : {}) } });
}

function promoteFull(d: PlanDraft, t: Of<'promote_full'>): void {
  d.requireState('running', 'paused');
  const { now, ctx } = d;
  for (const s of d.view.stages) {
    if (s.phase === 'promoted') continue;
    if (s.phase === 'rolled_back') throw d.reject(`stage ${s.index} was rolled back`);
    if (s.phase === 'pending')
      d.stageChanges.push({
        index: s.index,
        expect: 'pending',
        set: { phase: 'promoted', activatedAt: now, promotedAt: now, promotedEpoch: ctx.token.epoch, promotedBy: ctx.actor },
      });
    else d.promote(s.index);
    d.emit('ai.rollout.stage_promoted', { discriminator: String(s.index), extra: { stage: d.stageRef(s.index), reason: t.reason ?? 'promote-full' } });
  }
  d.update({ state: 'completed', lastProgressAt: now, stateBy: ctx.actor, stateReason: 'promote-full' });
  d.emit('ai.rollout.completed', { extra: { reason: t.reason ?? 'promote-full' } });
}

function pause(d: PlanDraft, t: Of<'pause'>): void {
  d.requireState('running');
  d.update({ state: 'paused', stateBy: d.ctx.actor, stateReason: t.reason ?? null });
  const a = activeStage(d.view);
  if (t.drift)
    d.emit('ai.rollout.actuation_drift', { discriminator: t.drift.target, extra: { target: t.drift.target, ...(t.reason ? { reason: t.reason } : {}) } });
  d.emit('ai.rollout.paused', {
    extra: { ...(t.reason ? { reason: t.reason } : {}), ...(a && t.readings?.length ? { stage: d.stageRef(a.index) } : {}), ...readingsOf(t) },
  });
}

function resume(d: PlanDraft, t: Of<'resume'>): void {
  d.requireState('paused');
  // Paused time does not count against the progress deadline.
  d.update({ state: 'running', lastProgressAt: d.now, deadlineExceededAt: null, stateBy: d.ctx.actor, stateReason: null });
  d.emit('ai.rollout.resumed', t.reason ? { extra: { reason: t.reason } } : {});
}

function abort(d: PlanDraft, t: Of<'abort'>): void {
  d.requireState('running', 'paused');
  const reason = t.reason ?? 'aborted';
  const a = d.rollBackActive(reason);
  d.update({ state: 'aborted', stateBy: d.ctx.actor, stateReason: reason });
  d.emit('ai.rollout.aborted', { extra: { reason, ...(a ? { stage: d.stageRef(a.index) } : {}), ...readingsOf(t) } });
}

function retry(d: PlanDraft, t: Of<'retry'>): void {
  d.requireState('rolled_back', 'aborted');
  d.update({
    state: 'running',
    attempt: d.rollout.attempt + 1,
    lastProgressAt: d.now,
    deadlineExceededAt: null,
    stateBy: d.ctx.actor,
    stateReason: null,
  });
  d.newStages = freshStages(d.view);
  d.emit('ai.rollout.retried', t.reason ? { extra: { reason: t.reason } } : {});
}

/** Every kind has its planner: a kind added to Transition without one does not compile. */
export const PLANNERS: { readonly [K in Transition['kind']]: Planner<K> } = {
  activate,
  promote,
  rollback,
  deadline,
  promote_full: promoteFull,
  pause,
  resume,
  abort,
  retry,
};

/** Records `t` on the draft, by the planner of its kind. */
export function planInto(d: PlanDraft, t: Transition): void {
  (PLANNERS[t.kind] as Planner<Transition['kind']>)(d, t);
}
