import { stageProviders } from './spec.js';
import { beforeRolloutHooks } from './gate-spec.js';
import { currentTally } from './gates.js';
import { movesTargets } from './engine.js';
import { evaluate, stretchEndOf } from './evaluate.js';
import { activeStage, type RolloutView } from './model.js';

/**
 * When a running rollout must next be looked at if no signal arrives: the
 * earliest moment evaluate() could decide something on this view, or a
 * provider gate of it falls due for a reading. `now` when it is due already.
 *
 * A BatchPromoter tick reads only rollouts whose time has come (the store's
 * due index), so this must never be late: every time evaluate() and
 * dueGates() compare with `now` is a candidate here. Signals do not move
 * these times; a stored signal makes its rollout due at once instead (the
 * store marks it), and so does every transition.
 *
 * A rollout that moves targets is due every tick: its targets are read back
 * on each one, so that drift is found within a tick.
 */
export function nextEvaluationAt(view: RolloutView, now: number): number {
  const { rollout } = view;
  if (rollout.state !== 'running') return Infinity;
  if (movesTargets(view) || evaluate(view, now) !== null) return now;
  // Times past are no reason to look again: evaluate() found nothing at `now`, so only a signal can change that.
  const at: number[] = [];
  if (rollout.deadlineExceededAt === null) at.push(rollout.lastProgressAt + rollout.spec.progressDeadlineSeconds * 1000 + 1);
  const active = activeStage(view);
  if (active && active.activatedAt !== null) at.push(active.activatedAt + (rollout.spec.stages[active.index]?.bakeSeconds ?? 0) * 1000);
  // A stage short of data acts when its stretched bake ends.
  const stretch = stretchEndOf(view);
  if (stretch !== null) at.push(stretch);
  const gates = active ? stageProviders(rollout.spec, active.index) : view.stages[0]?.phase === 'pending' ? beforeRolloutHooks(rollout.spec.hooks) : undefined;
  const stage = active?.index ?? 0;
  for (const g of gates ?? []) {
    // As dueGates() says: after its initial delay, then one interval after its last reading in this period.
    const t = currentTally(view.gates, stage, g.name, rollout.lastProgressAt);
    const readAt = Math.max(rollout.lastProgressAt + g.initialDelaySeconds * 1000, t ? t.last.at + g.intervalSeconds * 1000 : -Infinity);
    if (readAt <= now) return now;
    at.push(readAt);
  }
  return Math.min(Infinity, ...at.filter((t) => t > now));
}
