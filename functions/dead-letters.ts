import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { z } from 'zod';
import type { EventBus } from '../shared/events/bus.js';
import type { FencedError } from '../shared/lease/fencing.js';
import { openCoordinator } from './coordinator.js';
import { FigureMetrics } from './figures.js';
import { instrumented, publishIfAny } from './handler.js';
import { lazy, runtimeFrom, type Runtime } from './runtime.js';

/**
 * The work DLQ's consumer (an SQS event source with partial batch
 * responses): each dead letter's item becomes Failed with the reason, under
 * the run's coordinator lease. A record that cannot be settled now (another
 * stack coordinates the run, the item moved while we looked, the store is
 * unreachable) is reported as a batch item failure and comes back later; the
 * others are deleted. A malformed record is logged with its body and
 * dropped: retrying it could never succeed.
 */
const body = z.object({ runId: z.string().min(1), itemId: z.string().regex(/^[0-9a-f]{64}$/) }).strict();

export class RetryLater extends Error {
  override readonly name = 'RetryLater';
}

export interface DeadLettersOptions {
  bus?: EventBus;
  onFenced?: (err: FencedError) => void;
  /** The work queue's maxReceiveCount, for the reason recorded on the item. */
  maxReceiveCount?: number;
}

export function deadLettersHandler(
  runtime: () => Promise<Runtime>,
  options: DeadLettersOptions = {},
  logger = lambdaLogger('dead-letters'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'dead-letters' }),
  figures = new FigureMetrics(),
) {
  const processor = new BatchProcessor(EventType.SQS);
  const receives = options.maxReceiveCount ?? Number(process.env.ROLLOUT_MAX_RECEIVE_COUNT ?? 5);

  async function record(r: SQSRecord): Promise<void> {
    let parsed: z.infer<typeof body>;
    try {
      parsed = body.parse(JSON.parse(r.body));
    } catch (err) {
      metrics.addMetric('InvalidDeadLetters', MetricUnit.Count, 1);
      logger.error('malformed dead letter dropped', { messageId: r.messageId, body: r.body.slice(0, 500), error: err instanceof Error ? err.message : String(err) });
      return;
    }
    const rt = await runtime();
    const opened = await openCoordinator(rt, parsed.runId, { ...(options.bus ? { bus: options.bus } : {}), ...(options.onFenced ? { onFenced: options.onFenced } : {}), logger });
    if (!opened.coordinator) throw new RetryLater(`run ${parsed.runId} is coordinated by ${opened.holder ?? 'nobody yet'}`);
    const outcome = await opened.coordinator.failDeadLetter({ ...parsed, receiveCount: receives });
    if (outcome === 'moved') throw new RetryLater(`item ${parsed.itemId} moved while its dead letter was handled`);
    metrics.addMetric(outcome === 'failed' ? 'ItemsFailed' : 'DeadLettersDropped', MetricUnit.Count, 1);
    // As a node's /metrics counts them, under the same name.
    if (outcome === 'failed') figures.count('rollout_dead_letters_total', {}, 1);
    logger.info(`dead letter ${outcome}`, { runId: parsed.runId, itemId: parsed.itemId });
  }

  // A batch that fails whole is answered as failures, not thrown: the records come back either way.
  const atEnd = () => {
    figures.flush();
    publishIfAny(metrics);
  };
  return instrumented<SQSEvent, SQSBatchResponse>({ logger, metrics, failure: 'dead letter batch failed', atEnd }, (event) => processPartialResponse(event, record, processor, { throwOnFullBatchFailure: false }));
}

export const handler = deadLettersHandler(lazy(() => runtimeFrom(process.env)));
