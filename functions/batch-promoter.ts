import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchPromoter } from '../shared/rollout/promoters.js';
import { lazy, loggerPort, runtimeFrom, type Runtime } from './runtime.js';
import { instrumented } from './handler.js';
import { PromoterTelemetry } from './telemetry.js';

/**
 * BatchPromoter on a schedule. EventBridge schedules fire at most once a
 * minute, so each invocation ticks every ROLLOUT_TICK_INTERVAL_MS (10 s) while
 * its remaining time allows another full tick: a 1-minute schedule, a 70 s
 * timeout and reserved concurrency 1 give one tick every 10 s, one at a time
 * (ticks never overlap; an invocation that would overlap the next is
 * throttled by the reserved concurrency). See README for the cost.
 */
interface LambdaContext {
  getRemainingTimeInMillis(): number;
}

export function batchPromoterHandler(runtime: () => Promise<Runtime>, logger = new Logger({ serviceName: 'batch-promoter' }), metrics = new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' })) {
  const telemetry = new PromoterTelemetry(logger, metrics);
  return instrumented<unknown, { ticks: number; transitions: number; leader: boolean }, LambdaContext>({ logger, metrics, failure: 'batch promoter tick failed', atEnd: () => telemetry.publish() }, async (_event, context) => {
    const rt = await runtime();
    const interval = rt.env.ROLLOUT_TICK_INTERVAL_MS;
    const batch = new BatchPromoter(rt.engine, rt.leadership, { reader: rt.gateReader, logger: loggerPort(logger) });
    telemetry.watch(rt);
    let ticks = 0;
    let transitions = 0;
    let leader = false;
    for (;;) {
      const started = Date.now();
      const r = await batch.tick();
      ticks++;
      leader = r.leader;
      transitions += r.actions.filter((a) => a.applied).length;
      metrics.addMetric('TickMs', MetricUnit.Milliseconds, Date.now() - started);
      // Another tick only if it can start on time and finish (one interval) before the invocation ends.
      const wait = Math.max(0, interval - (Date.now() - started));
      if (context.getRemainingTimeInMillis() < wait + interval) break;
      await sleep(wait);
    }
    metrics.addMetric('Transitions', MetricUnit.Count, transitions);
    logger.info('batch promoter invocation done', { ticks, transitions, leader });
    return { ticks, transitions, leader };
  });
}

const logger = new Logger({ serviceName: 'batch-promoter' });
export const handler = batchPromoterHandler(lazy(() => runtimeFrom(process.env, { logger: loggerPort(logger) })), logger);
