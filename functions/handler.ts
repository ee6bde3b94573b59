import type { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import { errorMessage } from '../shared/log.js';
import { throttlesSince } from '../shared/adapters/dynamodb/throttles.js';

/** An error the handler expects (a malformed event, a deposed coordinator): counted under its own metric and logged its own way. */
export interface KnownFailure {
  readonly metric: string;
  readonly message: string;
  readonly fields?: Record<string, unknown>;
}

export interface HandlerInstruments<E> {
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** The log line of an unexpected failure (counted as `Errors`). */
  readonly failure: string;
  /** Failures with a metric and a log line of their own. */
  readonly known?: (err: unknown, event: E) => KnownFailure | null;
  /** At the end of every invocation, whatever happened (default: publish the metrics). */
  readonly atEnd?: () => void;
}

/**
 * The part every Lambda handler shares: a failure is counted and logged, then
 * rethrown so the trigger's retry policy (and its DLQ) keeps the event; the
 * invocation's metrics are published at its end, on success or failure.
 */
export function instrumented<E, R, C = void>(o: HandlerInstruments<E>, run: (event: E, context: C) => Promise<R>): (event: E, context: C) => Promise<R> {
  return async (event, context) => {
    // Every line of this invocation carries its request id (and cold start, function name): the one log shape's requestId.
    if (isLambdaContext(context)) o.logger.addContext(context);
    const throttles = throttlesSince();
    try {
      return await run(event, context);
    } catch (err) {
      const known = o.known?.(err, event) ?? null;
      o.metrics.addMetric(known?.metric ?? 'Errors', MetricUnit.Count, 1);
      if (known) o.logger.error(known.message, known.fields ?? {});
      else o.logger.error(o.failure, { error: errorMessage(err) });
      throw err;
    } finally {
      // DynamoDB refusals on a hot key this invocation retried: back-pressure worth a look (sharding), counted only when it happened.
      const t = throttles();
      if (t.throttled) {
        o.metrics.addMetric('Throttled', MetricUnit.Count, t.throttled);
        o.logger.warn('DynamoDB throttled requests (retried)', { throttled: t.throttled, byKeyFamily: Object.fromEntries(t.byFamily) });
      }
      if (o.atEnd) o.atEnd();
      else publishIfAny(o.metrics);
    }
  };
}

function isLambdaContext(c: unknown): c is Context {
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof (c as { awsRequestId?: unknown }).awsRequestId === 'string' &&
    typeof (c as { functionName?: unknown }).functionName === 'string'
  );
}

/**
 * Publishes the invocation's metrics, if it counted anything. A custom metric
 * is billed for every hour it has data, so an invocation that did nothing
 * (an idle tick, a scan of no runs) publishes nothing rather than zeros.
 */
export function publishIfAny(metrics: Metrics): void {
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
}
