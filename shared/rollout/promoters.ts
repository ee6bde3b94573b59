import { z } from 'zod';
import { parseConfig } from '../config.js';
import { mapLimit } from '../concurrency.js';
import type { Action, Leadership, RolloutEngine } from './engine.js';
import { READING_SKEW_MARGIN_MS, refuseFromTheFuture, type InboundEvent } from './inbound.js';
import type { RolloutView } from './model.js';
import { UnknownRolloutError } from './store.js';

/**
 * BatchPromoter: each tick takes or renews leadership and, if leader,
 * evaluates every running rollout. It is the correctness fallback: whatever
 * the streaming path missed, the next tick catches up. Who ticks it — the
 * batch-promoter Lambda within its minute, a node's schedule trigger — never
 * overlaps two ticks.
 */
export class BatchPromoter {
  private readonly concurrency: number;

  constructor(
    private readonly engine: RolloutEngine,
    private readonly leadership: Leadership,
    options: { concurrency?: number } = {},
  ) {
    this.concurrency = parseConfig('batch promoter', z.object({ concurrency: z.number().int().min(1).max(64).default(8) }), { concurrency: options.concurrency }).concurrency;
  }

  async tick(): Promise<{ leader: boolean; evaluated: number; actions: Action[]; republished: number }> {
    const token = await this.leadership();
    if (!token) return { leader: false, evaluated: 0, actions: [], republished: 0 };
    const republished = await this.engine.flushOutbox();
    const views = await this.engine.store.loadRunning();
    // A FencedError from any rollout ends the whole tick: we are no longer leader.
    const actions = (await mapLimit(views, this.concurrency, (view) => this.engine.evaluateView(view, token))).flat();
    return { leader: true, evaluated: views.length, actions, republished };
  }
}

export interface HandleResult {
  /** The signal or notification was stored (or was a duplicate / older than what is stored). */
  readonly stored: 'stored' | 'stale' | 'none';
  /** False when this node does not lead: the BatchPromoter covers it within one tick. */
  readonly evaluated: boolean;
  readonly actions: readonly Action[];
}

/**
 * StreamingPromoter: one evaluation of the affected rollout(s) per inbound
 * event, for latency. The signal is stored whoever leads (nothing accepted is
 * lost); the evaluation happens only on the leader. A signal stamped later
 * than now + `readingSkewMarginMs` (by the engine's clock) is refused with
 * InvalidEventError before anything is stored.
 */
export class StreamingPromoter {
  private readonly readingSkewMarginMs: number;

  constructor(
    private readonly engine: RolloutEngine,
    private readonly leadership: Leadership,
    options: { readingSkewMarginMs?: number } = {},
  ) {
    this.readingSkewMarginMs = parseConfig(
      'streaming promoter',
      z.object({ readingSkewMarginMs: z.number().int().nonnegative().default(READING_SKEW_MARGIN_MS) }),
      { readingSkewMarginMs: options.readingSkewMarginMs },
    ).readingSkewMarginMs;
  }

  async handle(event: InboundEvent): Promise<HandleResult> {
    refuseFromTheFuture(event, this.engine.clock.now(), this.readingSkewMarginMs);
    const store = this.engine.store;
    let stored: HandleResult['stored'] = 'none';
    let affected: () => Promise<RolloutView[]>;
    switch (event.type) {
      case 'rollout.metrics_reported': {
        const r = await store.recordMetricsAndLoad(
          event.rolloutId,
          { stage: event.stage, attempt: event.attempt },
          { requests: event.requests, errors: event.errors, p99LatencyMs: event.p99LatencyMs, observedAt: event.observedAt },
        );
        stored = r.outcome;
        affected = () => Promise.resolve([r.view]);
        break;
      }
      case 'rollout.alarm_changed': {
        stored = await store.recordAlarm(event.alarm, event.state, event.changedAt);
        affected = async () => (await store.loadRunning()).filter((v) => v.rollout.spec.stages.some((s) => s.gates.alarms.includes(event.alarm)));
        break;
      }
      case 'rollout.created':
      case 'rollout.command': {
        affected = async () => {
          const view = await store.load(event.rolloutId);
          if (!view) throw new UnknownRolloutError(event.rolloutId);
          return [view];
        };
        break;
      }
    }
    const token = await this.leadership();
    if (!token) return { stored, evaluated: false, actions: [] };
    const actions: Action[] = [];
    for (const view of await affected()) actions.push(...(await this.engine.evaluateView(view, token)));
    return { stored, evaluated: true, actions };
  }
}
