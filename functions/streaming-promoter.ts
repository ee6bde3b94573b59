import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { inboundFromEnvelope, InvalidEventError } from '../shared/rollout/inbound.js';
import { StreamingPromoter, type HandleResult } from '../shared/rollout/promoters.js';
import { lazy, loggerPort, runtimeFrom, type Runtime } from './runtime.js';
import { instrumented } from './handler.js';
import { PromoterTelemetry } from './telemetry.js';

/**
 * StreamingPromoter, invoked by an EventBridge rule with one rollout event
 * (detail-type `rollout.metrics_reported`, `rollout.alarm_changed`,
 * `rollout.created`, `rollout.command`). A bad event is logged with its
 * reason and fails the invocation, so the rule's retry policy and DLQ keep it.
 */
export function streamingPromoterHandler(runtime: () => Promise<Runtime>, logger = lambdaLogger('streaming-promoter'), metrics = new Metrics({ namespace: 'Rollout', serviceName: 'streaming-promoter' })) {
  const telemetry = new PromoterTelemetry(logger, metrics);
  return instrumented<unknown, HandleResult>(
    {
      logger,
      metrics,
      failure: 'rollout event failed',
      known: (err, event) => (err instanceof InvalidEventError ? { metric: 'InvalidEvents', message: 'rejected rollout event', fields: { reason: err.message, event } } : null),
      atEnd: () => telemetry.publish(),
    },
    async (event) => {
      const inbound = inboundFromEnvelope(event);
      const rt = await runtime();
      telemetry.watch(rt);
      const result = await new StreamingPromoter(rt.engine, rt.leadership).handle(inbound);
      metrics.addMetric('EventsHandled', MetricUnit.Count, 1);
      const transitions = result.actions.filter((a) => a.applied).length;
      if (transitions) metrics.addMetric('Transitions', MetricUnit.Count, transitions);
      if (!result.evaluated) metrics.addMetric('NotLeader', MetricUnit.Count, 1);
      logger.info('rollout event handled', { type: inbound.type, stored: result.stored, evaluated: result.evaluated, actions: result.actions.map((a) => `${a.transition}${a.applied ? '' : ' (stale)'}`) });
      return result;
    },
  );
}

const logger = lambdaLogger('streaming-promoter');
export const handler = streamingPromoterHandler(lazy(() => runtimeFrom(process.env, { logger: loggerPort(logger) })), logger);
