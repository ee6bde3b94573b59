/**
 * A worker whose claims are throttled in part, on DynamoDB Local behind the
 * throttling simulator with its window held still: the key takes one write
 * and refuses every other until the test lets time move. The claims that
 * landed must be held (forgotten, they would be Running with no holder, no
 * heartbeat and no message: stranded until a scan of the whole running set),
 * the refused ones stay Pending with their messages, and the worker slows
 * down instead of failing its step.
 */
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { ensureTable } from '../../shared/adapters/dynamodb/table.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { PartialBatchError } from '../../shared/ledger/store.js';
import { claim } from '../../shared/ledger/transitions.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { uniqueName } from '../support/backends.js';
import { ThrottleProxy } from '../support/dynamodb-throttle.js';

describe('claims throttled in part', () => {
  const upstream = new URL(process.env.AWS_ENDPOINT_URL_DYNAMODB!);
  const sqs = sqsClient();
  let proxy: ThrottleProxy;
  let table: string;
  let window = 0;
  beforeAll(async () => {
    // One write unit a key, in a window that does not move unless the test moves it.
    proxy = await new ThrottleProxy(upstream, { partitionWcu: 1, partitionRcu: 1_000 }, { now: () => window }).start();
    table = uniqueName('claims');
    await ensureTable(new DynamoDBClient({ endpoint: upstream.toString() }), table);
  }, 60_000);
  afterAll(async () => {
    await proxy?.stop();
  });

  it('casMany answers what landed and names what was refused; the worker holds the landed claims, leaves the rest Pending with their messages, and halves its batch', async () => {
    const direct = new DynamoLedgerStore(dynamoDocumentClient(new DynamoDBClient({ endpoint: upstream.toString() })), table);
    const throttled = new DynamoLedgerStore(dynamoDocumentClient(new DynamoDBClient({ endpoint: proxy.url })), table);
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    try {
      // The store itself: one run, one shard, so every claim writes the same item partition key.
      const probe = uniqueName('probe');
      await direct.createRun(probe, {}, Date.now(), { shards: 1 });
      const { ids: probeIds } = await direct.enqueue(probe, [{ a: 1 }, { a: 2 }, { a: 3 }], Date.now());
      window += 1_000;
      const err = await throttled
        .casMany(
          probeIds.map((id) => claim(probe, id, 'p', 0, Date.now())),
          Date.now(),
        )
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PartialBatchError);
      const partial = err as PartialBatchError<{ ok: boolean }>;
      expect(partial.refusedOnly).toBe(true);
      expect(partial.outcomes.filter((o) => o?.ok)).toHaveLength(1);
      expect(partial.outcomes.filter((o) => o === undefined)).toHaveLength(2);
      expect(await direct.counts(probe)).toMatchObject({ running: 1, pending: 2 });

      // A worker pulling a batch of ten over the same starved key.
      const runId = uniqueName('run');
      await direct.createRun(runId, {}, Date.now(), { shards: 1 });
      const { ids } = await direct.enqueue(
        runId,
        Array.from({ length: 10 }, (_, i) => ({ i })),
        Date.now(),
      );
      const queue = new SqsWorkQueue(sqs, url);
      await queue.send(runId, ids);
      window += 1_000;
      const worker = new Worker({ runId, workerId: 'w', ledger: throttled, queue, backend: mockBackend(), waitSeconds: 1, receiveBatch: 10 });
      let received = 0;
      while (received < 10) received += await worker.pull(undefined, 1);
      const running = (await direct.running(runId)).map((i) => i.id).sort();
      expect(running.length).toBeGreaterThan(0);
      expect(running.length).toBeLessThan(10);
      // Every item Running is held by the worker: none stranded.
      expect([...worker.held].sort()).toEqual(running);
      expect(await direct.counts(runId)).toMatchObject({ running: running.length, pending: 10 - running.length });
      expect(worker.stats.throttledRounds).toBeGreaterThanOrEqual(1);
      expect(worker.stats.errors).toBe(0);
    } finally {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    }
  }, 120_000);
});
