import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DrainOutcome } from '../shared/registry/registry.js';
import { InvalidNoticeError, noticeFromEvent } from '../shared/drain/sources.js';
import { instrumented } from './handler.js';
import { invocationScoped, runtimeFrom, type Runtime } from './runtime.js';

/**
 * Spot drain, invoked by the default-bus rule for `EC2 Spot Instance
 * Interruption Warning` and `EC2 Instance Rebalance Recommendation`. It marks
 * the instance's workers draining in the registry; each worker sees that on
 * its next registry heartbeat and runs the drain (stop pulling → nack →
 * deregister → exit) against a deadline counted from the notice's own time,
 * or from its receipt if the notice claims a later one.
 *
 * The instance is looked up under both its names: the ARN the notice's
 * `resources` carry (a worker fleet's instances register under it) and its id.
 *
 * Notices for an instance we do not know, duplicates and notices arriving
 * after the worker left are answered and logged, never thrown: a retried
 * event can never succeed, and retrying it forever is a known failure of
 * other termination handlers. A malformed event — an instance id that is no
 * EC2 instance id among them — is thrown with its reason so the rule's DLQ
 * keeps it; it never reaches the registry.
 */
export interface DrainResult {
  readonly instanceId: string;
  /** The instance's ARN from the notice, null when it carried none. */
  readonly instanceArn: string | null;
  readonly kind: 'interruption' | 'rebalance';
  readonly outcome: DrainOutcome;
  readonly workers: readonly string[];
}

const METRIC: Record<DrainOutcome, string> = { requested: 'DrainsRequested', duplicate: 'DuplicateNotices', unknown: 'UnknownInstances', gone: 'LateNotices' };

export function spotDrainHandler(
  runtime: () => Promise<Runtime>,
  logger = lambdaLogger('spot-drain'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'spot-drain' }),
) {
  return instrumented<unknown, DrainResult>(
    {
      logger,
      metrics,
      failure: 'spot drain failed',
      known: (err, event) =>
        err instanceof InvalidNoticeError ? { metric: 'InvalidNotices', message: 'rejected spot event', fields: { reason: err.message, event } } : null,
    },
    async (event) => {
      const notice = noticeFromEvent(event, Date.now());
      const rt = await runtime();
      const { outcome, workers } = await rt.registry.requestDrain(notice, Date.now());
      metrics.addMetric(METRIC[outcome], MetricUnit.Count, 1);
      const fields = {
        instanceId: notice.instanceId,
        instanceArn: notice.instanceArn,
        kind: notice.kind,
        outcome,
        workers,
        noticeAgeMs: Date.now() - notice.noticeAt,
      };
      if (outcome === 'requested') logger.info('drain requested', fields);
      else logger.warn(`spot notice acknowledged without a drain: ${outcome}`, fields);
      return { instanceId: notice.instanceId, instanceArn: notice.instanceArn, kind: notice.kind, outcome, workers };
    },
  );
}

const scoped = invocationScoped(() => runtimeFrom(process.env));
export const handler = scoped.around(spotDrainHandler(scoped.runtime));
