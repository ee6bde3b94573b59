import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { lambdaLogger } from './log.js';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { settleDeadLetter, type DeadLettersOptions } from './coordinator.js';
import { FigureMetrics } from './figures.js';
import { instrumented, publishIfAny } from './handler.js';
import { invocationScoped, runtimeFrom, type Runtime } from './runtime.js';

/**
 * The work DLQ's dead letters settled behind an SQS event source with partial
 * batch responses (`settleDeadLetter`, coordinator.ts): a record that cannot
 * be settled now is reported as a batch item failure and comes back later.
 * The stack wires no such event source (its pollers would long-poll the DLQ
 * all month, idle or not): the coordinator's scheduled scan drains the DLQ
 * with the same settling.
 */
export { RetryLater, type DeadLettersOptions } from './coordinator.js';

export function deadLettersHandler(
  runtime: () => Promise<Runtime>,
  options: DeadLettersOptions = {},
  logger = lambdaLogger('dead-letters'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'dead-letters' }),
  figures = new FigureMetrics(),
) {
  const processor = new BatchProcessor(EventType.SQS);
  const record = async (r: SQSRecord): Promise<void> => {
    await settleDeadLetter(runtime, r, { ...options, logger, metrics, figures });
  };

  // A batch that fails whole is answered as failures, not thrown: the records come back either way.
  const atEnd = () => {
    figures.flush();
    publishIfAny(metrics);
  };
  return instrumented<SQSEvent, SQSBatchResponse>({ logger, metrics, failure: 'dead letter batch failed', atEnd }, (event) =>
    processPartialResponse(event, record, processor, { throwOnFullBatchFailure: false }),
  );
}

const scoped = invocationScoped(() => runtimeFrom(process.env));
export const handler = scoped.around(deadLettersHandler(scoped.runtime));
