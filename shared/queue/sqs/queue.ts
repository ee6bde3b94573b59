import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { InvalidMessageError, type QueueMessage, type WorkQueue } from '../port.js';

const bodySchema = z.object({ runId: z.string().min(1), itemId: z.string().regex(/^[0-9a-f]{64}$/, 'must be a sha256 content id') }).strict();

/**
 * A run's work queue on SQS. Long polling (up to 20 s), visibility timeout
 * extended while an item runs, redrive to a DLQ after the queue's
 * maxReceiveCount (set on the queue, by the stack). A malformed message is
 * refused with the reason and left for the DLQ — never silently dropped.
 */
export class SqsWorkQueue implements WorkQueue {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async send(runId: string, itemIds: readonly string[]): Promise<void> {
    for (let i = 0; i < itemIds.length; i += 10) {
      const batch = itemIds.slice(i, i + 10);
      let entries = batch.map((itemId, j) => ({ Id: String(j), MessageBody: JSON.stringify({ runId, itemId }) }));
      // SendMessageBatch can fail per entry: resend those (throttling) a few times, then give up loudly.
      for (let attempt = 0; entries.length; attempt++) {
        const res = await this.sqs.send(new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: entries }));
        const failed = new Set((res.Failed ?? []).map((f) => f.Id));
        if (!failed.size) break;
        if (attempt >= 4) throw new Error(`SQS refused ${failed.size} messages: ${(res.Failed ?? []).map((f) => `${f.Code}: ${f.Message}`).join('; ')}`);
        entries = entries.filter((e) => failed.has(e.Id));
      }
    }
  }

  async receive(max: number, waitSeconds: number, signal?: AbortSignal): Promise<QueueMessage[]> {
    const res = await this.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.queueUrl,
        MaxNumberOfMessages: Math.min(10, Math.max(1, max)),
        WaitTimeSeconds: Math.min(20, Math.max(0, waitSeconds)),
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
      signal ? { abortSignal: signal } : {},
    );
    const out: QueueMessage[] = [];
    for (const m of res.Messages ?? []) {
      const receiveCount = Number(m.Attributes?.ApproximateReceiveCount ?? 1);
      let body: unknown;
      try {
        body = JSON.parse(m.Body ?? '');
      } catch {
        body = undefined;
      }
      const parsed = bodySchema.safeParse(body);
      if (!parsed.success) {
        // Left invisible until its timeout, then redelivered until the DLQ takes it; the error names why.
        throw new InvalidMessageError(
          `SQS message ${m.MessageId}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')} (receive ${receiveCount})`,
        );
      }
      out.push({ ...parsed.data, receipt: m.ReceiptHandle!, receiveCount });
    }
    return out;
  }

  async delete(message: QueueMessage): Promise<void> {
    await this.sqs.send(new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: message.receipt }));
  }

  async deleteMany(messages: readonly QueueMessage[]): Promise<void> {
    for (let i = 0; i < messages.length; i += 10) {
      const batch = messages.slice(i, i + 10);
      const res = await this.sqs.send(new DeleteMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: batch.map((m, j) => ({ Id: String(j), ReceiptHandle: m.receipt })) }));
      // A failed delete only means a redelivery, which the queue rule absorbs; retry those once one by one.
      for (const f of res.Failed ?? []) await this.delete(batch[Number(f.Id)]!);
    }
  }

  async extend(message: QueueMessage, seconds: number): Promise<void> {
    await this.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: message.receipt, VisibilityTimeout: Math.min(43_200, Math.max(0, Math.ceil(seconds))) }));
  }

  async release(message: QueueMessage): Promise<void> {
    await this.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: message.receipt, VisibilityTimeout: 0 }));
  }
}
