import { stageProviders } from './spec.js';
import { beforeRolloutHooks } from './gate-spec.js';
import { providerVerdict } from './gates.js';
import { activeStage, type RolloutView } from './model.js';
import { stageHolds, stageReading, stretchEndOf } from './evaluate.js';
import { own } from '../own.js';

/**
 * What a running rollout waits for before its next step, in the evaluator's
 * terms (`evaluate` promotes the active stage once none of these holds): the
 * bake, each alarm not OK, traffic short of `minRequests`, each provider
 * gate whose newest reading of the stage's period is not a pass, and the
 * hooks before the first stage. A paused rollout waits for a resume. Empty
 * when it is not running or would act at its next evaluation. Times are
 * absolute, so the answer is the same whoever reads it when.
 */
export function waitingOn(view: RolloutView, now: number): string[] {
  const { rollout } = view;
  if (rollout.state === 'paused') return [`a resume (paused${rollout.stateReason ? `: ${rollout.stateReason}` : ''})`];
  if (rollout.state !== 'running') return [];
  const active = activeStage(view);
  if (!active) {
    const next = view.stages.find((s) => s.phase === 'pending');
    if (next?.index !== 0) return [];
    return gateWaits(view, beforeRolloutHooks(rollout.spec.hooks), 0);
  }
  const spec = rollout.spec.stages[active.index]!;
  const m = stageReading(view, active.index);
  const holds = stageHolds(view, active.index, m, now);
  const out: string[] = [];
  if (holds.baking)
    out.push(holds.bakeEndsAt === null ? 'the bake, not begun' : `the bake, until ${new Date(holds.bakeEndsAt).toISOString()} (${spec.bakeSeconds} s)`);
  for (const a of holds.alarmsNotOk) out.push(`alarm ${a} to be OK (${own(view.alarms, a) ?? 'not reported yet'})`);
  if (holds.requestsShort) out.push(`${spec.gates.minRequests} requests reported (${m?.requests ?? 0} so far)`);
  out.push(...gateWaits(view, stageProviders(rollout.spec, active.index), active.index));
  const stretch = stretchEndOf(view);
  if (out.length && stretch !== null && now < stretch)
    out.push(`or the end of maxBakeSeconds at ${new Date(stretch).toISOString()}, when it does what onInsufficientData says`);
  return out;
}

/** Each gate (not dry-run) whose newest reading of the period is not a pass, as the evaluator's verdict words it. */
function gateWaits(view: RolloutView, gates: Parameters<typeof providerVerdict>[0], stage: number): string[] {
  return gates.flatMap((g) => {
    if (g.dryRun) return [];
    const v = providerVerdict([g], view.gates, stage, view.rollout.lastProgressAt);
    return v.kind === 'wait' ? [v.reason] : [];
  });
}
