import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchPromoter } from '../shared/rollout/promoters.js';
import { FUNCTIONS } from '../shared/topology.js';
import { lazy, loggerPort, runtimeFrom, type Runtime } from './runtime.js';
import { instrumented } from './handler.js';
import { PromoterTelemetry } from './telemetry.js';

/**
 * BatchPromoter on a schedule. EventBridge schedules fire at most once a
 * minute, so while rollouts run each invocation ticks every
 * ROLLOUT_TICK_INTERVAL_MS (10 s) as long as its remaining time allows
 * another full tick: a 1-minute schedule, a 70 s timeout and reserved
 * concurrency 1 give one tick every 10 s, one at a time (ticks never overlap;
 * an invocation that would overlap the next is throttled by the reserved
 * concurrency).
 *
 * With nothing running and nothing left in the outbox, an invocation ends
 * after two small reads, without a lease write, a metric or a tick; it also
 * stops ticking as soon as the last rollout ends. So an idle control plane
 * pays for a few milliseconds a minute, and a rollout started meanwhile
 * (whose `rollout.created` event was lost) is caught up by the next
 * invocation, within a minute. See README for the cost.
 */
/** How often the schedule invokes it (topology.ts): the next invocation ticks from then on. */
const SCHEDULE_MS = (FUNCTIONS.batchPromoter.triggers.find((t) => t.kind === 'schedule')?.everyMinutes ?? 1) * 60_000;

interface LambdaContext {
  getRemainingTimeInMillis(): number;
}

export interface BatchInvocation {
  readonly ticks: number;
  readonly transitions: number;
  readonly leader: boolean;
  /** Ended at once: nothing ran and the outbox was empty. */
  readonly idle: boolean;
}

export function batchPromoterHandler(runtime: () => Promise<Runtime>, logger = new Logger({ serviceName: 'batch-promoter' }), metrics = new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' })) {
  const telemetry = new PromoterTelemetry(logger, metrics);
  return instrumented<unknown, BatchInvocation, LambdaContext>({ logger, metrics, failure: 'batch promoter tick failed', atEnd: () => telemetry.publish() }, async (_event, context) => {
    const rt = await runtime();
    const interval = rt.env.ROLLOUT_TICK_INTERVAL_MS;
    const batch = new BatchPromoter(rt.engine, rt.leadership, { reader: rt.gateReader, logger: loggerPort(logger) });
    telemetry.watch(rt);
    if (!(await batch.hasWork())) return { ticks: 0, transitions: 0, leader: false, idle: true };
    const invoked = Date.now();
    let ticks = 0;
    let transitions = 0;
    let leader = false;
    for (;;) {
      const started = Date.now();
      const r = await batch.tick();
      ticks++;
      leader = r.leader;
      transitions += r.actions.filter((a) => a.applied).length;
      // How close a tick that did work comes to its interval: the figure to act on (memory, concurrency) before ticks fall behind.
      if (r.leader && r.evaluated) metrics.addMetric('TickMs', MetricUnit.Milliseconds, Date.now() - started);
      // Another tick only if it can start on time and finish (one interval) before the invocation ends,
      // and starts before the schedule's next invocation does (which would otherwise be throttled by the reserved concurrency)…
      const wait = Math.max(0, interval - (Date.now() - started));
      if (context.getRemainingTimeInMillis() < wait + interval) break;
      if (Date.now() - invoked + wait > SCHEDULE_MS - interval / 2) break;
      // …and only while there is something to tick for: the last rollout has ended and its events are out.
      if (!(await batch.hasWork())) break;
      await sleep(wait);
    }
    if (transitions) metrics.addMetric('Transitions', MetricUnit.Count, transitions);
    logger.info('batch promoter invocation done', { ticks, transitions, leader });
    return { ticks, transitions, leader, idle: false };
  });
}

const logger = new Logger({ serviceName: 'batch-promoter' });
export const handler = batchPromoterHandler(lazy(() => runtimeFrom(process.env, { logger: loggerPort(logger) })), logger);
