/**
 * Throttling as back-pressure a user sees, on DynamoDB Local behind the
 * throttling simulator (test/support/dynamodb-throttle.ts): a run whose
 * items all land on one hot key is slowed down, not failed — every refused
 * write is sent again after a jittered backoff and every item is stored —
 * and the run's record says when it was throttled and on which key family,
 * which `GET /runs/{id}` (and `rollout runs status`) show. A run spread over
 * shards, at the same limits, is not throttled.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { runKeys, runPk } from '../../shared/adapters/dynamodb/ledger-keys.js';
import { queryAll } from '../../shared/adapters/dynamodb/query.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureTable } from '../../shared/adapters/dynamodb/table.js';
import { StoreThrottledError, throttleStats } from '../../shared/adapters/dynamodb/throttles.js';
import { openControlPlane, type ControlPlane } from '../../shared/compose/control-plane.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { uniqueName } from '../support/backends.js';
import { ThrottleProxy } from '../support/dynamodb-throttle.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { rollout } from '../support/cli.js';

describe('a throttled run', () => {
  let proxy: ThrottleProxy;
  let plane: ControlPlane;
  let api: ReturnType<ControlPlane['api']>;
  let table: string;
  beforeAll(async () => {
    const upstream = new URL(process.env.AWS_ENDPOINT_URL_DYNAMODB!);
    // 20 write units a second per key: one key takes ~5 items a second, far less than one request enqueues at once.
    proxy = await new ThrottleProxy(upstream, { partitionWcu: 20, partitionRcu: 200 }).start();
    table = uniqueName('throttled');
    await ensureTable(new DynamoDBClient({ endpoint: upstream.toString() }), table);
    plane = await openControlPlane({
      store: { kind: 'dynamodb', table, client: new DynamoDBClient({ endpoint: proxy.url }) },
      holderId: 'throttle-test',
      timings: { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000 },
      election: { kind: 'static' },
      bus: new InProcessBus(),
    });
    api = plane.api({ workQueue: () => ({ send: () => Promise.resolve(), receive: () => Promise.resolve([]) }) as never });
  }, 60_000);
  afterAll(async () => {
    await plane?.close();
    await proxy?.stop();
  });

  const status = async (id: string) => {
    const res = await api({ method: 'GET', path: `/runs/${id}`, body: null, actor: 'test' });
    expect(res.status).toBe(200);
    return res.body as { shards: number; counts: Record<string, number>; throttled: { secondsAgo: number; keyFamily: string; requests: number } | null };
  };

  it('on one hot key: every item stored though writes were refused, and the run says when and where', async () => {
    const before = throttleStats.throttled;
    const created = await api({
      method: 'POST',
      path: '/runs',
      body: JSON.stringify({ id: 'hot', shards: 1, items: Array.from({ length: 60 }, (_, i) => ({ i })) }),
      actor: 'test',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ id: 'hot', items: 60, added: 60 });
    expect(throttleStats.throttled).toBeGreaterThan(before);
    expect(proxy.stats().totals.refused).toBeGreaterThan(0);
    const s = await status('hot');
    expect(s.shards).toBe(1);
    expect(s.counts.pending).toBe(60);
    expect(s.throttled).not.toBeNull();
    expect(s.throttled!.keyFamily).toMatch(/^(RUN#\*#\*|gsi1 \(RUN#\*#\* writes\))$/);
    expect(s.throttled!.requests).toBeGreaterThan(0);

    // What an operator reads: the CLI against the same API.
    const server = await serveApi(api);
    try {
      const shown = await rollout(['runs', 'status', 'hot', '--url', server.url]);
      expect(shown.code, shown.err).toBe(0);
      expect(shown.out).toMatch(/^hot {2}in progress {2}1 shard\n/);
      expect(shown.out).toMatch(
        /\nTHROTTLED \d+ s ago on (RUN#\*#\*|gsi1 \(RUN#\*#\* writes\)) \(\d+ requests refused and retried so far\): a hot key; more shards spread it/,
      );
    } finally {
      await server.close();
    }
  });

  it('spread over shards at the same limits, the same request is not throttled', async () => {
    proxy.resetStats();
    const created = await api({
      method: 'POST',
      path: '/runs',
      body: JSON.stringify({ id: 'spread', shards: 32, items: Array.from({ length: 60 }, (_, i) => ({ j: i })) }),
      actor: 'test',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const s = await status('spread');
    expect(s).toMatchObject({ shards: 32, counts: { pending: 60 }, throttled: null });
  });

  it('a request refused part way counts what it stored: its retry adds the rest, and the run record counts every item once', async () => {
    // One write unit a second on a key: most of the request's writes give up after their retries.
    const starved = await new ThrottleProxy(new URL(process.env.AWS_ENDPOINT_URL_DYNAMODB!), { partitionWcu: 1, partitionRcu: 200 }).start();
    const items = Array.from({ length: 30 }, (_, i) => ({ n: i }));
    const body = JSON.stringify({ id: 'partial', shards: 1, items });
    try {
      const slow = new DynamoLedgerStore(DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: starved.url })), table);
      await slow.createRun('partial', {}, Date.now(), { shards: 1 });
      await expect(slow.enqueue('partial', items, Date.now())).rejects.toBeInstanceOf(StoreThrottledError);
    } finally {
      await starved.stop();
    }
    const doc = DynamoDBDocumentClient.from(new DynamoDBClient({}));
    const stored = async () =>
      (
        await queryAll(doc, {
          TableName: table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
          ExpressionAttributeValues: { ':p': runKeys('partial', 1).partitions[0], ':i': 'ITEM#' },
          ConsistentRead: true,
        })
      ).length;
    const counted = async () =>
      Number((await doc.send(new GetCommand({ TableName: table, Key: { pk: runPk('partial'), sk: 'RUN' }, ConsistentRead: true }))).Item?.items ?? 0);
    const storedFirst = await stored();
    expect(storedFirst).toBeGreaterThan(0);
    expect(storedFirst).toBeLessThan(items.length);
    expect(await counted()).toBe(storedFirst);
    const again = await api({ method: 'POST', path: '/runs', body, actor: 'test' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ added: items.length - storedFirst });
    expect(await stored()).toBe(items.length);
    expect(await counted()).toBe(items.length);
  });

  it('refuses a rate that would need more shards than a run may have, naming the field', async () => {
    const res = await api({
      method: 'POST',
      path: '/runs',
      body: JSON.stringify({ id: 'too-fast', itemsPerSecond: 100_000, items: [{ k: 1 }] }),
      actor: 'test',
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toMatch(/itemsPerSecond: 100000 items\/s needs 1200 shards of 1 KB items; a run takes at most 512: split it into runs/);
  });
});
