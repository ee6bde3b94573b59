/**
 * What a held item costs while it waits and runs, counted on the real
 * services: the ledger's versions (every write moves an item's version on)
 * and the commands fauxqs receives. A heartbeat round writes only the items
 * that would otherwise go an interval without a write, and extends only the
 * messages with fewer than two intervals of visibility left, ten to a
 * ChangeMessageVisibilityBatch. The rounds measure intervals on a clock the
 * test moves, and the test calls each round itself.
 */
import { CreateQueueCommand, DeleteQueueCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { RUN_RECORD_TTL_MS, Worker } from '../../shared/ledger/worker/index.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { gate } from '../support/gate.js';

/** Every command an SQS client sends, with how many entries a batch carried. */
function counted(client: SQSClient): { name: string; entries: number }[] {
  const sent: { name: string; entries: number }[] = [];
  client.middlewareStack.add(
    (next, context) => (args) => {
      const entries = (args.input as { Entries?: unknown[] }).Entries;
      sent.push({ name: context.commandName ?? '?', entries: entries?.length ?? 1 });
      return next(args);
    },
    { step: 'initialize', name: 'countCommands' },
  );
  return sent;
}

describe.each(['dynamodb', 'postgres'] as const)('heartbeat rounds on %s with SQS', (backendName) => {
  let backend: LeaseBackend;
  const admin = sqsClient();
  const queues: string[] = [];
  beforeAll(async () => {
    backend = await openBackend(backendName);
  });
  afterAll(async () => {
    for (const q of queues) await admin.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
    await backend?.close();
  });

  it('writes a held item only once an interval less a round has passed since its last write, and extends its message only once under two intervals of visibility remain, ten to a request', async () => {
    const HEARTBEAT_MS = 10_000; // rounds every 2.5 s: due after 7.5 s without a write; extended once under 20 s of its 30 s remain
    const runId = uniqueName('run');
    const url = (await admin.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
    queues.push(url);
    const ledger = backend.ledger;
    await ledger.createRun(runId, {}, Date.now());
    const { ids } = await ledger.enqueue(
      runId,
      Array.from({ length: 10 }, (_, i) => ({ i })),
      Date.now(),
    );
    await new SqsWorkQueue(admin, url).send(runId, ids);

    const client = sqsClient();
    const sent = counted(client);
    const visibility = () => sent.filter((c) => c.name.startsWith('ChangeMessageVisibility'));
    const monotonic = new ManualClock(0);
    const entered = gate();
    const release = gate();
    let first = true;
    const w = new Worker({
      runId,
      workerId: 'w',
      ledger,
      queue: new SqsWorkQueue(client, url),
      // The first item waits at the gate while the test runs the rounds; the rest wait behind it.
      backend: async (payload) => {
        if (first) {
          first = false;
          entered.open();
          await release.wait;
        }
        return { done: payload };
      },
      heartbeatMs: HEARTBEAT_MS,
      visibilitySeconds: 30,
      waitSeconds: 0,
      receiveBatch: 10,
      monotonic,
    });
    const versions = async () => Promise.all(ids.map(async (id) => (await ledger.get(runId, id))!.version));
    /** A round at `ms` from the claims: any round in flight finishes first, then the clock moves and the round runs at once. */
    const roundAt = async (ms: number) => {
      await w.heartbeat();
      monotonic.set(ms);
      await w.heartbeat();
    };

    // Received and claimed at 0: the ten messages extended in one request.
    expect(await w.pull(undefined, 0)).toBe(10);
    expect(visibility()).toEqual([{ name: 'ChangeMessageVisibilityBatchCommand', entries: 10 }]);
    const running = w.step(); // starts the first item, which waits at the gate
    await entered.wait;
    const claimed = await versions();
    expect(claimed.filter((v) => v === 1)).toHaveLength(9); // claimed
    expect(claimed.filter((v) => v === 2)).toHaveLength(1); // claimed and started

    // Written at 0 (a claim, a start): not due until 7.5 s; visible until 30 s: not extended until under 20 s remain.
    await roundAt(0);
    await roundAt(7_499);
    expect(await versions()).toEqual(claimed);
    expect(visibility()).toHaveLength(1);

    await roundAt(7_500);
    const once = await versions();
    expect(once).toEqual(claimed.map((v) => v + 1)); // each heartbeated once
    expect(visibility()).toHaveLength(1); // 22.5 s of visibility left: not yet
    await roundAt(7_500); // just written: nothing due
    expect(await versions()).toEqual(once);

    await roundAt(15_000);
    expect(await versions()).toEqual(claimed.map((v) => v + 2));
    // 15 s left: the ten extended together, one request.
    expect(visibility()).toEqual([
      { name: 'ChangeMessageVisibilityBatchCommand', entries: 10 },
      { name: 'ChangeMessageVisibilityBatchCommand', entries: 10 },
    ]);
    await roundAt(15_000);
    expect(visibility()).toHaveLength(2);

    release.open();
    await running;
    for (let i = 0; i < 20 && w.held.length; i++) await w.step();
    expect(w.stats.done).toBe(10);
    // Not once a message at a time: every visibility change of the run went in a batch.
    expect(sent.filter((c) => c.name === 'ChangeMessageVisibilityCommand')).toEqual([]);
    expect(w.beats.ok).toBe(2); // the two rounds that wrote anything
    client.destroy();
  });

  it('reads the run record (the epoch it stamps on claims) once per RUN_RECORD_TTL_MS, not once per received batch', async () => {
    const runId = uniqueName('run');
    const url = (await admin.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    queues.push(url);
    const real = backend.ledger;
    await real.createRun(runId, {}, Date.now());
    const { ids } = await real.enqueue(
      runId,
      Array.from({ length: 30 }, (_, i) => ({ i })),
      Date.now(),
    );
    await new SqsWorkQueue(admin, url).send(runId, ids);
    let runReads = 0;
    const ledger = new Proxy(real, {
      get(target, prop) {
        const value = Reflect.get(target, prop) as unknown;
        if (prop === 'getRun') return (id: string) => (runReads++, real.getRun(id));
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const monotonic = new ManualClock(0);
    const w = new Worker({
      runId,
      workerId: 'w',
      ledger,
      queue: new SqsWorkQueue(admin, url),
      backend: (p) => Promise.resolve(p),
      monotonic,
      waitSeconds: 0,
      receiveBatch: 10,
    });
    let claimed = 0;
    while (claimed < 20) claimed += await w.pull(undefined, 0);
    expect(runReads).toBe(1);
    monotonic.advance(RUN_RECORD_TTL_MS);
    while (claimed < 30) claimed += await w.pull(undefined, 0);
    expect(runReads).toBe(2);
  });
});
