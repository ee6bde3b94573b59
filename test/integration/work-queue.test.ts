/** The SQS work queue against an SQS endpoint, and the execution backends. */
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendError, httpBackend, mockBackend } from '../../shared/ledger/backends.js';
import { contentId } from '../../shared/ledger/model.js';
import { InvalidMessageError } from '../../shared/queue/port.js';
import { sqsClient } from '../../shared/queue/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/queue/sqs/queue.js';
import { uniqueName } from '../support/backends.js';

describe('SqsWorkQueue', () => {
  const sqs = sqsClient();
  const urls: string[] = [];
  let queue: SqsWorkQueue;
  let dlqUrl: string;
  let queueUrl: string;

  beforeAll(async () => {
    dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('work-dlq') }))).QueueUrl!;
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }));
    queueUrl = (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: uniqueName('work'),
          Attributes: { VisibilityTimeout: '30', RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes!.QueueArn, maxReceiveCount: 3 }) },
        }),
      )
    ).QueueUrl!;
    urls.push(queueUrl, dlqUrl);
    queue = new SqsWorkQueue(sqs, queueUrl);
  });
  afterAll(async () => {
    for (const url of urls) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
  });

  const ids = (n: number, tag: string) => Array.from({ length: n }, (_, i) => contentId({ tag, i }));
  async function drain(max = 100) {
    const got = [];
    for (;;) {
      const batch = await queue.receive(10, 1);
      if (!batch.length || got.length >= max) return got;
      got.push(...batch);
    }
  }

  it('sends in batches and delivers every item once, counting receives', async () => {
    const sent = ids(25, 'send');
    await queue.send('run-1', sent);
    const got = await drain();
    expect(got.map((m) => m.itemId).sort()).toEqual([...sent].sort());
    expect(got.every((m) => m.runId === 'run-1' && m.receiveCount === 1)).toBe(true);
    for (const m of got) await queue.delete(m);
    expect(await queue.receive(10, 1)).toEqual([]);
  });

  it('extend keeps a message hidden while it runs; release hands it back at once', async () => {
    const [id] = ids(1, 'extend');
    await queue.send('run-2', [id!]);
    const [m] = await queue.receive(1, 5);
    await queue.extend(m!, 60);
    expect(await queue.receive(10, 1)).toEqual([]);
    await queue.release(m!);
    const [again] = await queue.receive(1, 5);
    expect(again).toMatchObject({ itemId: id, receiveCount: 2 });
    await queue.delete(again!);
  });

  it('a message received maxReceiveCount times goes to the DLQ', async () => {
    const [id] = ids(1, 'poison');
    await queue.send('run-3', [id!]);
    for (let i = 1; i <= 3; i++) {
      const [m] = await queue.receive(1, 5);
      expect(m).toMatchObject({ itemId: id, receiveCount: i });
      await queue.release(m!);
    }
    expect(await queue.receive(10, 1)).toEqual([]);
    const dead = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl, WaitTimeSeconds: 5 }));
    expect(JSON.parse(dead.Messages![0]!.Body!)).toEqual({ runId: 'run-3', itemId: id });
  });

  it('refuses a malformed message with the field named', async () => {
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify({ runId: 'r', itemId: 'not-a-hash' }) }));
    const err = await queue.receive(1, 5).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidMessageError);
    expect((err as Error).message).toMatch(/itemId: must be a sha256 content id/);
  });
});

describe('execution backends', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const payload = JSON.parse(body) as { fail?: boolean; prompt?: string };
        if (payload.fail) {
          res.statusCode = 500;
          res.end('model overloaded');
          return;
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ completion: `echo: ${payload.prompt}` }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const addr = server.address();
    url = `http://127.0.0.1:${addr && typeof addr === 'object' ? addr.port : 0}/generate`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  it('mock: deterministic result, deterministic failures, stops when aborted', async () => {
    const ok = mockBackend();
    const signal = new AbortController().signal;
    expect(await ok({ a: 1 }, signal)).toEqual(await ok({ a: 1 }, signal));
    expect(await ok({ a: 1 }, signal)).not.toEqual(await ok({ a: 2 }, signal));
    await expect(mockBackend({ failureRate: 1 })({ a: 1 }, signal)).rejects.toBeInstanceOf(BackendError);
    const ctl = new AbortController();
    const slow = mockBackend({ durationMs: 60_000 })({ a: 1 }, ctl.signal);
    ctl.abort(new Error('claim lost'));
    await expect(slow).rejects.toThrow(/claim lost|aborted/i);
    expect(() => mockBackend({ failureRate: 2 })).toThrow(/mock backend config: failureRate/);
  });

  it('http: POSTs the payload, the response body is the result; an error status is a BackendError', async () => {
    const backend = httpBackend({ url });
    expect(await backend({ prompt: 'hi' }, new AbortController().signal)).toEqual({ completion: 'echo: hi' });
    await expect(backend({ fail: true }, new AbortController().signal)).rejects.toThrow(/HTTP 500 model overloaded/);
    expect(() => httpBackend({ url: 'not a url' })).toThrow(/http backend config: url/);
  });
});
