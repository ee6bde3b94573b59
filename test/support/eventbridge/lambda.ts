/**
 * Lambda's asynchronous invocation, as the tests play it where a function
 * runs in process: the first call and `retries` more on failure, then the
 * event goes to the function's DLQ with the attributes Lambda sets there.
 */
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';

export type Handler = (event: unknown) => Promise<unknown>;

export interface AsyncFunction {
  readonly handler: Handler;
  readonly retries: number;
}

/** What became of one event: taken at attempt `attempts`, or failed after all of them with the last error. */
export async function invokeAsync(fn: AsyncFunction, event: unknown): Promise<{ ok: boolean; attempts: number; error?: string }> {
  let error = '';
  for (let attempt = 1; attempt <= 1 + fn.retries; attempt++) {
    try {
      await fn.handler(event);
      return { ok: true, attempts: attempt };
    } catch (err) {
      error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
  }
  return { ok: false, attempts: 1 + fn.retries, error };
}

/** A failed event on the function's DLQ, with `ErrorCode`/`ErrorMessage`/`RequestID` as Lambda puts them. */
export async function sendToDlq(sqs: SQSClient, queueUrl: string, event: unknown, error: string): Promise<void> {
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: JSON.stringify(event),
      MessageAttributes: {
        ErrorCode: { DataType: 'String', StringValue: '200' },
        ErrorMessage: { DataType: 'String', StringValue: error.slice(0, 1000) },
        RequestID: { DataType: 'String', StringValue: randomUUID() },
      },
    }),
  );
}
