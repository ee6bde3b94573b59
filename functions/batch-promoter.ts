import type { Logger } from '@aws-lambda-powertools/logger';
import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchPromoter } from '../shared/rollout/promoters.js';
import { capRollouts, MAX_ROLLOUTS, newestRollouts, rolloutSamples } from '../shared/api/metrics.js';
import { errorMessage } from '../shared/log.js';
import type { CatalogueMetrics } from './metrics.js';
import { FUNCTIONS } from '../shared/topology.js';
import { invocationScoped, loggerPort, runtimeFrom, type Runtime } from './runtime.js';
import { instrumented } from './handler.js';
import { PromoterTelemetry } from './telemetry.js';
import { activityFlagsFrom, type ActivityFlags } from './activity.js';

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
 * invocation, within a minute. See docs/operating/capacity-and-cost.md#monthly-cost.
 *
 * On Aurora those two reads would keep the cluster awake: there the
 * `promotion` activity flag comes first (activity.ts), and the database is
 * read only when something may have started since the last invocation that
 * found nothing to do.
 *
 * While it leads and rollouts run, each invocation ends by publishing the
 * per-rollout gauges of a node's /metrics (rollout_percent,
 * rollout_gate_value…; shared/api/metrics.ts) as EMF, one point a minute
 * for each running rollout, at most MAX_ROLLOUTS of them: a rollout's
 * series stop with the invocation after it ends.
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

export interface BatchPromoterOptions {
  /** The `promotion` flag in front of the database (the Aurora store); none: every invocation reads the database. */
  readonly activity?: ActivityFlags | null;
}

export function batchPromoterHandler(
  runtime: () => Promise<Runtime>,
  logger = lambdaLogger('batch-promoter'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' }),
  o: BatchPromoterOptions = {},
) {
  const telemetry = new PromoterTelemetry(logger, metrics);
  const idle = (): BatchInvocation => ({ ticks: 0, transitions: 0, leader: false, idle: true });
  return instrumented<unknown, BatchInvocation, LambdaContext>(
    { logger, metrics, failure: 'batch promoter tick failed', atEnd: () => telemetry.publish() },
    async (_event, context) => {
      const probe = o.activity ? await o.activity.probe('promotion') : null;
      if (probe?.skip) return idle();
      const rt = await runtime();
      const interval = rt.env.ROLLOUT_TICK_INTERVAL_MS;
      const retention = { rolloutDays: rt.env.ROLLOUT_RETAIN_ROLLOUTS_DAYS };
      const batch = new BatchPromoter(rt.engine, rt.leadership, { reader: rt.gateReader, logger: loggerPort(logger), retention });
      telemetry.watch(rt);
      if (!(await batch.hasWork())) {
        // Idle, the rollouts that ended long ago still go: one small query when none has (on Aurora only when
        // the database is read anyway, at least daily).
        const ended = await batch.pruneEnded();
        if (ended) logger.info('ended rollouts deleted past their retention', { ended, days: retention.rolloutDays });
        await probe?.nothingLeft();
        return idle();
      }
      const invoked = Date.now();
      let ticks = 0;
      let transitions = 0;
      let leader = false;
      let evaluated = false;
      for (;;) {
        const started = Date.now();
        const r = await batch.tick();
        ticks++;
        leader = r.leader;
        evaluated = r.leader && r.evaluated > 0;
        transitions += r.actions.filter((a) => a.applied).length;
        // How close a tick that did work comes to its interval: the figure to act on (memory, concurrency) before ticks fall behind.
        if (r.leader && r.evaluated) metrics.addMetric('TickMs', MetricUnit.Milliseconds, Date.now() - started);
        // Another tick only if it can start on time and finish (one interval) before the invocation ends,
        // and starts before the schedule's next invocation does (which would otherwise be throttled by the reserved concurrency)…
        const wait = Math.max(0, interval - (Date.now() - started));
        if (context.getRemainingTimeInMillis() < wait + interval) break;
        if (Date.now() - invoked + wait > SCHEDULE_MS - interval / 2) break;
        // …and only while there is something to tick for: the last rollout has ended and its events are out.
        if (!(await batch.hasWork())) {
          await probe?.nothingLeft();
          break;
        }
        await sleep(wait);
      }
      if (transitions) metrics.addMetric('Transitions', MetricUnit.Count, transitions);
      if (evaluated) await rolloutGauges(rt, telemetry.catalogue, logger);
      logger.info('batch promoter invocation done', { ticks, transitions, leader });
      return { ticks, transitions, leader, idle: false };
    },
  );
}

/**
 * The running rollouts' gauges as this invocation leaves them: one read after
 * its last tick, of the newest MAX_ROLLOUTS. Paused rollouts have none here (a node's /metrics has them):
 * with only paused rollouts the schedule's invocations end idle, reading
 * nothing. So rollout_actuation_drift, which pauses its rollout, is never
 * among them. A failed read costs the metrics, never the invocation.
 */
async function rolloutGauges(rt: Runtime, catalogue: CatalogueMetrics, logger: Logger): Promise<void> {
  try {
    // The newest MAX_ROLLOUTS running, by the list (one past the cap says some are left out), never a read of all
    // of them: the minute's gauges cost the same at 100 running rollouts as at 10,000.
    const { views, more } = await newestRollouts(rt.engine.store, 'running', MAX_ROLLOUTS);
    const { shown } = capRollouts(views);
    const leftOut = more ? 1 : 0;
    const now = Date.now();
    catalogue.set(shown.flatMap((view) => rolloutSamples(view, [], now)));
    if (leftOut) catalogue.set([{ name: 'rollout_metrics_left_out', labels: { kind: 'rollouts' }, value: leftOut }]);
  } catch (err) {
    logger.warn('rollout metrics not published: the running rollouts could not be read', { error: errorMessage(err) });
  }
}

const logger = lambdaLogger('batch-promoter');
const scoped = invocationScoped(() => runtimeFrom(process.env, { logger: loggerPort(logger) }));
export const handler = scoped.around(batchPromoterHandler(scoped.runtime, logger, undefined, { activity: activityFlagsFrom(process.env, loggerPort(logger)) }));
