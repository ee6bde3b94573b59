import { LogFormatter, LogItem, Logger } from '@aws-lambda-powertools/logger';
import type { LogAttributes, UnformattedAttributes } from '@aws-lambda-powertools/logger/types';
import { logLine, type LogLevel } from '../shared/log.js';

const LEVELS: Record<string, LogLevel> = { TRACE: 'debug', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error', CRITICAL: 'error' };

/**
 * Powertools' Logger writing the line nodes and workers write (`shared/log.ts`
 * `logLine`): the same keys, with the invocation's request id as `requestId`
 * and, where X-Ray traces it, its trace id, so one query spans every runtime.
 */
export class RolloutLogFormatter extends LogFormatter {
  formatAttributes(attributes: UnformattedAttributes, additional: LogAttributes): LogItem {
    const ctx = attributes.lambdaContext;
    const line = logLine(
      LEVELS[attributes.logLevel] ?? 'info',
      attributes.serviceName,
      attributes.message,
      {
        ...(ctx ? { requestId: ctx.awsRequestId, functionName: ctx.functionName, coldStart: ctx.coldStart } : {}),
        ...(attributes.xRayTraceId ? { traceId: attributes.xRayTraceId } : {}),
        ...additional,
      },
      attributes.timestamp,
    );
    return new LogItem({ attributes: { ...line } });
  }
}

/** A function's logger: its service name on every line, in the shape every runtime writes. */
export function lambdaLogger(serviceName: string): Logger {
  return new Logger({ serviceName, logFormatter: new RolloutLogFormatter() });
}
