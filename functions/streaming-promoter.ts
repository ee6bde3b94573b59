import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { inboundFromEnvelope, InvalidEventError } from '../shared/rollout/inbound.js';
import { StreamingPromoter, type HandleResult } from '../shared/rollout/promoters.js';
import { invocationScoped, loggerPort, runtimeFrom, type Runtime } from './runtime.js';
import { instrumented } from './handler.js';
import { PromoterTelemetry } from './telemetry.js';
import { activityFlagsFrom, type ActivityFlags } from './activity.js';

/**
 * StreamingPromoter, invoked by an EventBridge rule with one rollout event
 * (detail-type `rollout.metrics_reported`, `rollout.alarm_changed`,
 * `rollout.created`, `rollout.command`). A bad event is logged with its
 * reason and fails the invocation, so the rule's retry policy and DLQ keep it.
 *
 * On Aurora a signal may start work the batch promoter must tick (a rollout
 * created, resumed or retried): the `promotion` activity flag is raised
 * before the signal is stored (activity.ts). A flag that cannot be raised
 * fails the invocation, which is retried: nothing is written unannounced.
 */
export function streamingPromoterHandler(
  runtime: () => Promise<Runtime>,
  logger = lambdaLogger('streaming-promoter'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'streaming-promoter' }),
  o: { readonly activity?: ActivityFlags | null } = {},
) {
  const telemetry = new PromoterTelemetry(logger, metrics);
  return instrumented<unknown, HandleResult>(
    {
      logger,
      metrics,
      failure: 'rollout event failed',
      known: (err, event) =>
        err instanceof InvalidEventError ? { metric: 'InvalidEvents', message: 'rejected rollout event', fields: { reason: err.message, event } } : null,
      atEnd: () => telemetry.publish(),
    },
    async (event) => {
      const inbound = inboundFromEnvelope(event);
      await o.activity?.raise(['promotion']);
      const rt = await runtime();
      telemetry.watch(rt);
      const result = await new StreamingPromoter(rt.engine, rt.leadership).handle(inbound);
      metrics.addMetric('EventsHandled', MetricUnit.Count, 1);
      const transitions = result.actions.filter((a) => a.applied).length;
      if (transitions) metrics.addMetric('Transitions', MetricUnit.Count, transitions);
      if (!result.evaluated) metrics.addMetric('NotLeader', MetricUnit.Count, 1);
      logger.info('rollout event handled', {
        type: inbound.type,
        stored: result.stored,
        evaluated: result.evaluated,
        actions: result.actions.map((a) => `${a.transition}${a.applied ? '' : ' (stale)'}`),
      });
      return result;
    },
  );
}

const logger = lambdaLogger('streaming-promoter');
const scoped = invocationScoped(() => runtimeFrom(process.env, { logger: loggerPort(logger) }));
export const handler = scoped.around(
  streamingPromoterHandler(scoped.runtime, logger, undefined, { activity: activityFlagsFrom(process.env, loggerPort(logger)) }),
);
