/** The SQS work queue against an SQS endpoint, and the execution backends. */
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendError, httpBackend, mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { contentId } from '../../shared/ledger/model.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { until } from '../support/gate.js';

const sqs = sqsClient();
const created: string[] = [];
afterAll(async () => {
  for (const url of created) await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
});

interface Line {
  msg: string;
  fields: Record<string, unknown>;
}

/** A work queue with its own DLQ (redrive after `maxReceiveCount` receives), and what its queue adapter logged. */
async function redriven(maxReceiveCount: number) {
  const dlq = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('dlq') }))).QueueUrl!;
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] }));
  const url = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: uniqueName('work'),
        Attributes: { VisibilityTimeout: '30', RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes!.QueueArn, maxReceiveCount }) },
      }),
    )
  ).QueueUrl!;
  created.push(url, dlq);
  const lines: Line[] = [];
  const at = (msg: string, fields: Record<string, unknown> = {}) => void lines.push({ msg, fields });
  const queue = new SqsWorkQueue(sqs, url, { logger: { debug: at, info: at, warn: at, error: at } });
  return { queue, url, dlq, lines };
}

describe('SqsWorkQueue', () => {
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

  it('extensions asked for in one turn go out ten to a ChangeMessageVisibilityBatch; one SQS refuses fails only its own caller', async () => {
    const client = sqsClient();
    const calls: { name: string; entries: number }[] = [];
    client.middlewareStack.add(
      (next, context) => (args) => {
        calls.push({ name: context.commandName ?? '?', entries: (args.input as { Entries?: unknown[] }).Entries?.length ?? 1 });
        return next(args);
      },
      { step: 'initialize', name: 'countCommands' },
    );
    const q = new SqsWorkQueue(client, queueUrl);
    const mine = ids(23, 'batched');
    await q.send('run-b', mine);
    const got: Awaited<ReturnType<SqsWorkQueue['receive']>> = [];
    for (let i = 0; i < 10 && got.length < mine.length; i++) got.push(...(await q.receive(10, 1)));
    expect(got).toHaveLength(23);
    const [gone, ...held] = got;
    await q.delete(gone!); // its receipt is no longer valid
    calls.length = 0;
    const outcomes = await Promise.allSettled(got.map((m) => q.extend(m, 60)));
    expect(calls).toEqual([
      { name: 'ChangeMessageVisibilityBatchCommand', entries: 10 },
      { name: 'ChangeMessageVisibilityBatchCommand', entries: 10 },
      { name: 'ChangeMessageVisibilityBatchCommand', entries: 3 },
    ]);
    expect(outcomes[0]).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/ReceiptHandleIsInvalid/) as unknown } });
    expect(outcomes.slice(1).every((o) => o.status === 'fulfilled')).toBe(true);
    // Extended: none comes back while they are held.
    expect(await q.receive(10, 1)).toEqual([]);
    await q.deleteMany(held);
    client.destroy();
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

  it('a malformed message does not strand the valid ones of its batch: they come on their first delivery; it is logged (id, body, reason) and redriven to the DLQ', async () => {
    const { queue: q, url, dlq, lines } = await redriven(3);
    const good = ids(5, 'mixed');
    await q.send('run-m', good);
    const wrong = JSON.stringify({ runId: 'run-m', itemId: 'not-a-hash' });
    const bad = await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: wrong }));
    const junk = await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'not json at all' }));
    const got = [];
    for (let i = 0; i < 10 && got.length < good.length; i++) got.push(...(await q.receive(10, 1)));
    expect(got.map((m) => m.itemId).sort()).toEqual([...good].sort());
    expect(got.every((m) => m.receiveCount === 1)).toBe(true);
    await q.deleteMany(got);
    const logged = (id: string | undefined) => lines.find((l) => l.msg === 'malformed SQS message left for the DLQ' && l.fields.messageId === id)?.fields;
    expect(logged(bad.MessageId)).toMatchObject({
      body: wrong,
      reason: expect.stringMatching(/itemId: must be a sha256 content id/) as unknown,
      receiveCount: 1,
    });
    expect(logged(junk.MessageId)).toMatchObject({ body: 'not json at all', reason: expect.stringMatching(/not JSON/) as unknown });
    // Workers keep polling; the queue's redrive policy moves each malformed message after maxReceiveCount receives.
    const dead = new Set<string>();
    const later: unknown[] = [];
    await until(
      'both malformed messages are in the DLQ',
      async () => {
        later.push(...(await q.receive(10, 1)));
        const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
        for (const m of Messages ?? []) dead.add(m.Body!);
        return dead.size === 2;
      },
      60_000,
      100,
    );
    expect([...dead].sort()).toEqual(['not json at all', wrong].sort());
    expect(later).toEqual([]); // the valid ones, deleted, never came back; the malformed ones were never handed out
  });
});

describe.each(['postgres', 'dynamodb'] as const)("a malformed SQS message among a run's messages, on %s", (backendName) => {
  let backend: LeaseBackend;
  beforeAll(async () => {
    backend = await openBackend(backendName);
  });
  afterAll(async () => {
    await backend?.close();
  });

  it('the worker keeps going: every valid item is Done, the malformed message ends in the DLQ', async () => {
    const { queue, url, dlq } = await redriven(2);
    const runId = uniqueName('run');
    await backend.ledger.createRun(runId, {}, Date.now());
    const { ids: items } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: 8 }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    await queue.send(runId, items.slice(0, 4));
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify({ runId, itemId: 'x'.repeat(64) }) }));
    await queue.send(runId, items.slice(4));
    const worker = new Worker({ runId, workerId: 'w1', ledger: backend.ledger, queue, backend: mockBackend(), waitSeconds: 1 });
    await worker.run(new AbortController().signal, async () => {
      const c = await backend.ledger.counts(runId);
      return c.pending + c.running === 0;
    });
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 8, failed: 0 });
    await until(
      'the malformed message is in the DLQ',
      async () => {
        await queue.receive(10, 1);
        const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq, WaitTimeSeconds: 0 }));
        return (Messages ?? []).some((m) => m.Body!.includes('x'.repeat(64)));
      },
      60_000,
      100,
    );
  });
});

describe('execution backends', () => {
  let server: Server;
  let url: string;
  /** Answers to `{"hold": true}` wait here until the test lets them go. */
  const held: (() => void)[] = [];
  let arrived: () => void = () => undefined;
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const payload = JSON.parse(body) as { fail?: boolean; prompt?: string; hold?: boolean };
        if (payload.hold) {
          held.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"completion":"at last"}'));
          arrived();
          return;
        }
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

  it('http: a call past its timeout is abandoned; with no timeout it takes as long as the backend does', async () => {
    const signal = new AbortController().signal;
    await expect(httpBackend({ url, timeoutMs: 200 })({ hold: true }, signal)).rejects.toThrow(/timeout|aborted/i);
    held.splice(0).forEach((release) => release());
    const reached = new Promise<void>((r) => (arrived = r));
    const unbounded = httpBackend({ url, timeoutMs: null })({ hold: true }, signal);
    await reached;
    // Held past the default's reach would take a minute; the point is that nothing of ours cuts it: released by hand.
    held.splice(0).forEach((release) => release());
    expect(await unbounded).toEqual({ completion: 'at last' });
  });
});
