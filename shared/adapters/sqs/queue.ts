import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import type { QueueMessage, WorkQueue } from '../../queue/port.js';

const bodySchema = z.object({ runId: z.string().min(1), itemId: z.string().regex(/^[0-9a-f]{64}$/, 'must be a sha256 content id') }).strict();

/** A malformed message comes back after 1, 2, 4… s (at most this), not after the whole visibility timeout. */
const MALFORMED_RETRY_MAX_S = 60;
const BODY_EXCERPT = 500;

/**
 * A run's work queue on SQS. Long polling (up to 20 s), visibility timeout
 * extended while an item runs, redrive to a DLQ after the queue's
 * maxReceiveCount (set on the queue, by the stack).
 *
 * Extensions asked for in one turn of the event loop (a worker's claims of
 * a batch, its heartbeat round) go out together, ten to a
 * ChangeMessageVisibilityBatch, each caller answered for its own message:
 * one request per ten messages, not one per message.
 *
 * A malformed message never costs the valid messages of its batch: they are
 * returned; it is logged (id, body excerpt, reason) and left on the queue,
 * neither deleted nor handed out, for the redrive policy to move to the DLQ
 * (whose consumer logs and drops it). So that takes seconds, not
 * maxReceiveCount × the visibility timeout, it is made visible again after a
 * delay that doubles with each receive (1 s, 2 s, 4 s…): with the stack's
 * maxReceiveCount of 5 it is moved at the first receive after about 31 s
 * (1 + 2 + 4 + 8 + 16), instead of 5 × 60 s; on a queue without a redrive
 * policy it comes back at most once a minute.
 * (Sending it to the DLQ ourselves would need the DLQ's URL and a grant on
 * it in every worker, and would lose the receive count the DLQ records.)
 */
export interface SqsQueueOptions {
  logger?: Logger;
}

/** An extension waiting for this turn's batch. */
interface Extension {
  readonly receipt: string;
  readonly seconds: number;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

export class SqsWorkQueue implements WorkQueue {
  private readonly logger: Logger;
  private extensions: Extension[] = [];

  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
    options: SqsQueueOptions = {},
  ) {
    this.logger = options.logger ?? silentLogger;
  }

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
    const malformed: Promise<void>[] = [];
    for (const m of res.Messages ?? []) {
      const receiveCount = Number(m.Attributes?.ApproximateReceiveCount ?? 1);
      const parsed = parseBody(m.Body);
      if (parsed.ok) out.push({ ...parsed.body, receipt: m.ReceiptHandle!, receiveCount });
      else malformed.push(this.leaveForDlq(m.MessageId ?? '(no id)', m.Body ?? '', m.ReceiptHandle!, receiveCount, parsed.reason));
    }
    await Promise.all(malformed);
    return out;
  }

  private async leaveForDlq(messageId: string, body: string, receipt: string, receiveCount: number, reason: string): Promise<void> {
    const retryInS = Math.min(MALFORMED_RETRY_MAX_S, 2 ** (receiveCount - 1));
    this.logger.error('malformed SQS message left for the DLQ', {
      queueUrl: this.queueUrl,
      messageId,
      body: body.slice(0, BODY_EXCERPT),
      reason,
      receiveCount,
      retryInS,
    });
    try {
      await this.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: receipt, VisibilityTimeout: retryInS }));
    } catch (err) {
      // It still comes back, after the queue's visibility timeout: later, not lost.
      this.logger.warn('malformed SQS message: could not shorten its visibility', { messageId, error: errorMessage(err) });
    }
  }

  async delete(message: QueueMessage): Promise<void> {
    await this.sqs.send(new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: message.receipt }));
  }

  async deleteMany(messages: readonly QueueMessage[]): Promise<void> {
    for (let i = 0; i < messages.length; i += 10) {
      const batch = messages.slice(i, i + 10);
      const res = await this.sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: batch.map((m, j) => ({ Id: String(j), ReceiptHandle: m.receipt })) }),
      );
      // A failed delete only means a redelivery, which the queue rule absorbs: retry those once one by one,
      // and let a refusal there cost that message a redelivery, not the rest of the batch their deletes.
      for (const f of res.Failed ?? []) {
        await this.delete(batch[Number(f.Id)]!).catch((err: unknown) =>
          this.logger.warn('SQS refused a delete: the message will be delivered again', { queueUrl: this.queueUrl, code: f.Code, error: errorMessage(err) }),
        );
      }
    }
  }

  extend(message: QueueMessage, seconds: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (!this.extensions.length) queueMicrotask(() => void this.sendExtensions());
      this.extensions.push({ receipt: message.receipt, seconds: Math.min(43_200, Math.max(0, Math.ceil(seconds))), resolve, reject });
    });
  }

  /** This turn's extensions, ten to a request, the requests in parallel; an entry SQS refuses fails its own caller only. */
  private async sendExtensions(): Promise<void> {
    const all = this.extensions;
    this.extensions = [];
    const batches = Array.from({ length: Math.ceil(all.length / 10) }, (_, i) => all.slice(i * 10, i * 10 + 10));
    await Promise.all(
      batches.map(async (batch) => {
        try {
          const res = await this.sqs.send(
            new ChangeMessageVisibilityBatchCommand({
              QueueUrl: this.queueUrl,
              Entries: batch.map((e, j) => ({ Id: String(j), ReceiptHandle: e.receipt, VisibilityTimeout: e.seconds })),
            }),
          );
          const failed = new Map((res.Failed ?? []).map((f) => [f.Id, f]));
          batch.forEach((e, j) => {
            const f = failed.get(String(j));
            if (f) e.reject(new Error(`SQS refused a visibility extension: ${f.Code}: ${f.Message ?? ''}`));
            else e.resolve();
          });
        } catch (err) {
          for (const e of batch) e.reject(err);
        }
      }),
    );
  }

  async release(message: QueueMessage): Promise<void> {
    await this.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.queueUrl, ReceiptHandle: message.receipt, VisibilityTimeout: 0 }));
  }
}

/** A message body, checked: `{ runId, itemId }` and nothing else; otherwise the reason, naming the field. */
function parseBody(raw: string | undefined): { ok: true; body: z.infer<typeof bodySchema> } | { ok: false; reason: string } {
  let body: unknown;
  try {
    body = JSON.parse(raw ?? '');
  } catch {
    return { ok: false, reason: 'body: not JSON' };
  }
  const parsed = bodySchema.safeParse(body);
  if (parsed.success) return { ok: true, body: parsed.data };
  return { ok: false, reason: parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ') };
}
