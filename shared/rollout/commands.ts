import { randomUUID } from 'node:crypto';
import type { LeaseToken } from '../lease/record.js';
import type { Command } from './command-names.js';
import type { Action, RolloutEngine } from './engine.js';
import { activeStage } from './model.js';
import { parseRolloutSpec } from './spec.js';
import { TransitionRejectedError, type Transition } from './transitions.js';

/**
 * Manual controls, for the API and CLI. Each is fenced by the caller's lease
 * token, recorded with who and when (on the rollout row and in its event),
 * and emits its event.
 */
export interface CommandInput {
  readonly rolloutId: string;
  readonly command: Command;
  /** Who asked: an IAM principal, a user name. */
  readonly actor: string;
  readonly reason?: string;
  /**
   * Whether the caller may start an aborted rollout again. An abort is final
   * for whoever may only operate (the API grants this to admin only); a
   * rolled-back rollout is retried by either. Absent: it may.
   */
  readonly retryAborted?: boolean;
}

/** A retry of an aborted rollout by a caller that may not undo an abort: nothing was applied. */
export class AbortIsFinalError extends Error {
  override readonly name = 'AbortIsFinalError';
  constructor(readonly rolloutId: string) {
    super(`rollout ${rolloutId} was aborted: only a caller that may abort it may retry it`);
  }
}

export async function runCommand(engine: RolloutEngine, token: LeaseToken, input: CommandInput): Promise<Action> {
  if (!input.actor.trim()) throw new TransitionRejectedError(input.rolloutId, 'pause', 'actor must not be empty');
  // What the person said, on the command's events (and, for pause and abort, the rollout's state reason).
  const why = input.reason ? { reason: input.reason } : {};
  const make = (view: Parameters<Parameters<RolloutEngine['command']>[1]>[0]): Transition => {
    switch (input.command) {
      case 'promote': {
        // Skip the rest of the current stage's bake (and its waiting gates): promote it now.
        const a = activeStage(view);
        if (!a) throw new TransitionRejectedError(view.rollout.id, 'promote', `no active stage (rollout is ${view.rollout.state})`);
        return { kind: 'promote', stage: a.index, then: a.index === view.stages.length - 1 ? 'complete' : 'activate_next', ...why };
      }
      case 'promote-full':
        return { kind: 'promote_full', ...why };
      case 'pause':
        return { kind: 'pause', ...why };
      case 'resume':
        return { kind: 'resume', ...why };
      case 'abort':
        return { kind: 'abort', ...why };
      case 'retry':
        // Judged on the view the transition is planned from: an abort that lands first is seen on the next try.
        if (view.rollout.state === 'aborted' && input.retryAborted === false) throw new AbortIsFinalError(view.rollout.id);
        return { kind: 'retry', ...why };
    }
  };
  const action = await engine.command(input.rolloutId, make, token, input.actor);
  // Resume and retry hand the rollout back to the promoters: take the next step now.
  if (input.command === 'resume' || input.command === 'retry') await engine.evaluate(input.rolloutId, token);
  return action;
}

/** Validate a spec and store a new running rollout. Idempotent on `id`. */
export async function createRollout(engine: RolloutEngine, input: { spec: unknown; actor: string; id?: string }): Promise<{ id: string; created: boolean }> {
  const spec = parseRolloutSpec(input.spec);
  const id = input.id ?? `ro_${randomUUID()}`;
  const { created } = await engine.store.create(id, spec, engine.clock.now(), input.actor);
  return { id, created };
}
