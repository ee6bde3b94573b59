/**
 * The throttling simulator (test/support/dynamodb-throttle.ts) as the
 * unmodified AWS SDK meets it: writes and reads under a key's limit go
 * through unchanged; past it the SDK gets DynamoDB's own throttling errors
 * (ThrottlingException on this on-demand table, a ThrottlingError
 * cancellation reason in a transaction, unprocessed elements in a batch) and
 * its retries land once the window rolls; GSI keys are metered apart and a hot
 * one throttles the base writes that would write it; units are counted as
 * DynamoDB counts them, checked against DynamoDB Local's own
 * ReturnConsumedCapacity.
 *
 * Every proxy here cuts its windows from a clock the test moves: a window
 * rolls when the test has seen what it waits for, never after a sleep.
 *
 * The table here is the store's own but for gsi1's projection, ALL (an entry
 * is its item, as on a table made before the projection was narrowed): the
 * cases size index entries by the items they write. One case meters the
 * store's INCLUDE projection against DynamoDB Local.
 */
import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  CreateTableCommand,
  DeleteTableCommand,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand as LowQueryCommand,
  ThrottlingException,
  TransactGetItemsCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type AttributeValue,
  type ConsumedCapacity,
} from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  BatchWriteCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { ensureTable, tableDefinition } from '../../shared/adapters/dynamodb/table.js';
import { claim, heartbeat, start } from '../../shared/ledger/transitions.js';
import { dynamoTable, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { dynamoEndpoint } from '../support/dynamodb-contention.js';
import { defaultFamily, itemSize, ThrottleProxy, type KeyStats, type ThrottleLimits } from '../support/dynamodb-throttle.js';

const WINDOW_MS = 1_000;

interface Simulator {
  readonly proxy: ThrottleProxy;
  readonly clock: ManualClock;
  /** The plain client, one attempt per request: what DynamoDB answers, as the SDK surfaces it. */
  readonly low: DynamoDBClient;
  /** A document client over it. */
  readonly doc: DynamoDBDocumentClient;
  /** A document client with the SDK's default retries (throttling errors retried with backoff). */
  readonly retrying: DynamoDBDocumentClient;
}

describe('DynamoDB throttling simulator, through the unmodified SDK', () => {
  let t: Awaited<ReturnType<typeof dynamoTable>>;
  let open: { proxy: ThrottleProxy; clients: DynamoDBClient[] }[] = [];
  beforeAll(async () => {
    t = await dynamoTable();
    // The same table again under another name, but with gsi1 projecting ALL.
    const store = t.table;
    const def = tableDefinition(`${store}-all`);
    await t.client.send(
      new CreateTableCommand({ ...def, GlobalSecondaryIndexes: def.GlobalSecondaryIndexes!.map((g) => ({ ...g, Projection: { ProjectionType: 'ALL' } })) }),
    );
    await ensureTable(t.client, def.TableName!);
    const own = t;
    t = {
      ...own,
      table: def.TableName!,
      close: async () => {
        await own.client.send(new DeleteTableCommand({ TableName: def.TableName! })).catch(() => undefined);
        await own.close();
      },
    };
    storeTable = store;
  });
  /** The store's own table (gsi1 INCLUDE). */
  let storeTable = '';
  afterEach(async () => {
    for (const o of open) {
      for (const c of o.clients) c.destroy();
      await o.proxy.stop();
    }
    open = [];
  });
  afterAll(async () => {
    await t?.close();
  });

  async function simulator(limits: Omit<ThrottleLimits, 'windowMs'>): Promise<Simulator> {
    const clock = new ManualClock();
    const proxy = await new ThrottleProxy(dynamoEndpoint(), { ...limits, windowMs: WINDOW_MS }, { now: () => clock.now() }).start();
    const client = (maxAttempts?: number) =>
      new DynamoDBClient({
        endpoint: proxy.url,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        ...(maxAttempts ? { maxAttempts } : {}),
      });
    const low = client(1);
    const retryingClient = client();
    open.push({ proxy, clients: [low, retryingClient] });
    return { proxy, clock, low, doc: dynamoDocumentClient(low), retrying: dynamoDocumentClient(retryingClient) };
  }

  const table = () => t.table;
  /** The item as DynamoDB Local holds it, read around the proxy. */
  const stored = async (pk: string, sk: string) => (await t.doc.send(new GetCommand({ TableName: t.table, Key: { pk, sk }, ConsistentRead: true }))).Item;
  const keyStats = (proxy: ThrottleProxy, key: string): KeyStats | undefined => proxy.stats().keys.find((k) => k.key === key);
  async function failure(p: Promise<unknown>): Promise<Error & { $metadata: { httpStatusCode?: number; attempts?: number } }> {
    try {
      await p;
    } catch (err) {
      return err as Error & { $metadata: { httpStatusCode?: number; attempts?: number } };
    }
    throw new Error('expected the request to fail');
  }
  /** Polls an observed condition (the proxy's counters) until it holds. */
  async function until(condition: () => boolean): Promise<void> {
    while (!condition()) await new Promise((r) => setTimeout(r, 5));
  }

  it('(a) writes to one key under its limit all pass, and go through unchanged', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 10, partitionRcu: 10 });
    const pk = uniqueName('A');
    const items = Array.from({ length: 5 }, (_, i) => ({
      pk,
      sk: `S${i}`,
      n: i,
      doc: { list: [1, 'two', true, null], m: { x: 1.5 } },
      tags: new Set(['a', 'b']),
    }));
    for (const Item of items) await doc.send(new PutCommand({ TableName: table(), Item }));
    const updated = await doc.send(
      new UpdateCommand({
        TableName: table(),
        Key: { pk, sk: 'S0' },
        UpdateExpression: 'SET n = n + :one',
        ExpressionAttributeValues: { ':one': 1 },
        ReturnValues: 'ALL_NEW',
      }),
    );

    for (const item of items.slice(1)) expect(await stored(pk, item.sk)).toEqual(item);
    expect(updated.Attributes).toEqual({ ...items[0], n: 1 });
    expect(await stored(pk, 'S0')).toEqual(updated.Attributes);
    const query = { TableName: table(), KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': pk }, ConsistentRead: true };
    const viaProxy = await doc.send(new QueryCommand(query));
    const around = await t.doc.send(new QueryCommand(query));
    expect(viaProxy.Items).toEqual(around.Items);
    expect(viaProxy.Items).toHaveLength(5);

    expect(keyStats(proxy, pk)).toMatchObject({ wcu: 6, refused: 0 });
    expect(proxy.stats().totals).toMatchObject({ refused: 0, unprocessed: 0 });
  });

  it('(b) past the limit: ThrottlingException at once with maxAttempts 1, nothing applied; with the default retries the writes land once the window rolls', async () => {
    const { proxy, clock, doc, retrying } = await simulator({ partitionWcu: 3, partitionRcu: 100 });
    const pk = uniqueName('B');
    const put = (client: DynamoDBDocumentClient, sk: string) => client.send(new PutCommand({ TableName: table(), Item: { pk, sk, v: sk } }));
    for (const sk of ['s1', 's2', 's3']) await put(doc, sk);

    const err = await failure(put(doc, 's4'));
    expect(err).toBeInstanceOf(ThrottlingException);
    expect(err.name).toBe('ThrottlingException');
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect(err.$metadata.attempts).toBe(1);
    expect(err.message).toMatch(/^Throughput exceeds the current capacity of your table or index\..*hot key/);
    expect((err as ThrottlingException).throttlingReasons).toEqual([
      { reason: 'TableWriteKeyRangeThroughputExceeded', resource: expect.stringMatching(new RegExp(`:table/${t.table}$`)) as unknown },
    ]);
    expect(await stored(pk, 's4')).toBeUndefined();
    expect(keyStats(proxy, pk)).toMatchObject({ wcu: 3, refused: 1 });

    // Three writes with the SDK's default retries: every first attempt is refused in this window…
    const writes = ['r1', 'r2', 'r3'].map((sk) => put(retrying, sk));
    await until(() => keyStats(proxy, pk)!.refused >= 1 + 3);
    // …and the retries land in the next one, where the three fit.
    clock.advance(WINDOW_MS);
    const done = await Promise.all(writes);
    const retries = done.reduce((n, r) => n + r.$metadata.attempts! - 1, 0);
    for (const r of done) expect(r.$metadata.attempts).toBeGreaterThanOrEqual(2);
    expect(keyStats(proxy, pk)).toMatchObject({ wcu: 6, refused: 1 + retries, peakWcu: 3 });
    for (const sk of ['r1', 'r2', 'r3']) expect(await stored(pk, sk)).toEqual({ pk, sk, v: sk });
    expect(proxy.stats().totals.refused).toBe(1 + retries);
  });

  it('(c) two keys are metered apart', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 2, partitionRcu: 100 });
    const [a, b] = [uniqueName('C'), uniqueName('C')];
    const put = (pk: string, sk: string) => doc.send(new PutCommand({ TableName: table(), Item: { pk, sk } }));
    await put(a, '1');
    await put(a, '2');
    expect((await failure(put(a, '3'))).name).toBe('ThrottlingException');
    await put(b, '1'); // a is at its limit, b is not
    await put(b, '2');
    expect((await failure(put(b, '3'))).name).toBe('ThrottlingException');
    expect(keyStats(proxy, a)).toMatchObject({ wcu: 2, refused: 1 });
    expect(keyStats(proxy, b)).toMatchObject({ wcu: 2, refused: 1 });
    expect(await stored(b, '2')).toEqual({ pk: b, sk: '2' });
  });

  it('(d) a hot GSI key throttles the base writes that would write it, and only those', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 100, partitionRcu: 100, gsiWcu: 2 });
    const [hot, cold] = [uniqueName('HOT'), uniqueName('COLD')];
    const [p1, p2, p3, p4] = [1, 2, 3, 4].map((i) => uniqueName(`D${i}`)) as [string, string, string, string];
    const put = (pk: string, gsi1pk?: string) =>
      doc.send(new PutCommand({ TableName: table(), Item: { pk, sk: 'x', ...(gsi1pk ? { gsi1pk, gsi1sk: pk } : {}) } }));
    const update = (pk: string, set: string, values: Record<string, unknown>) =>
      doc.send(new UpdateCommand({ TableName: table(), Key: { pk, sk: 'x' }, UpdateExpression: `SET ${set}`, ExpressionAttributeValues: values }));
    await put(p1, hot);
    await put(p2, hot);
    expect(keyStats(proxy, `gsi1:${hot}`)).toMatchObject({ index: 'gsi1', wcu: 2 });

    // A new base item (its own cold partition key) that would enter the index under the hot key.
    const err = await failure(put(p3, hot));
    expect(err).toBeInstanceOf(ThrottlingException);
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect(err.message).toMatch(/global secondary indexes/);
    expect((err as ThrottlingException).throttlingReasons).toEqual([
      { reason: 'IndexWriteKeyRangeThroughputExceeded', resource: expect.stringMatching(new RegExp(`:table/${t.table}/index/gsi1$`)) as unknown },
    ]);
    expect(await stored(p3, 'x')).toBeUndefined();

    await put(p3, cold); // the same base key under a cold index key
    await put(p4); // not in the index at all
    // Moving p3 onto the hot key, or rewriting p1's entry under it: refused.
    expect((await failure(update(p3, 'gsi1pk = :k', { ':k': hot }))).name).toBe('ThrottlingException');
    expect((await failure(update(p1, 'note = :n', { ':n': 'x' }))).name).toBe('ThrottlingException');
    expect(await stored(p3, 'x')).toMatchObject({ gsi1pk: cold });
    expect(await stored(p1, 'x')).not.toHaveProperty('note');
    await update(p3, 'note = :n', { ':n': 'x' }); // its entry lives under the cold key

    expect(keyStats(proxy, `gsi1:${hot}`)).toMatchObject({ wcu: 2, refused: 3 });
    expect(keyStats(proxy, `gsi1:${cold}`)).toMatchObject({ wcu: 2, refused: 0 });
    for (const pk of [p1, p3]) expect(keyStats(proxy, pk)).toMatchObject({ refused: 0 }); // the base keys themselves are cold
  });

  it('(e) a TransactWriteItems over a hot key is cancelled with a ThrottlingError reason, nothing applied; once the window rolls it goes through', async () => {
    const { proxy, clock, doc } = await simulator({ partitionWcu: 2, partitionRcu: 100 });
    const [hot, cold] = [uniqueName('H'), uniqueName('K')];
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: hot, sk: 'h1', v: 'old' } }));
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: hot, sk: 'h2', v: 'old' } }));
    const transaction = () =>
      doc.send(
        new TransactWriteCommand({
          TransactItems: [
            { Put: { TableName: table(), Item: { pk: cold, sk: 'c', v: 'new' } } },
            { Update: { TableName: table(), Key: { pk: hot, sk: 'h1' }, UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': 'new' } } },
          ],
        }),
      );

    const err = await failure(transaction());
    expect(err).toBeInstanceOf(TransactionCanceledException);
    expect(err.name).toBe('TransactionCanceledException');
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect((err as TransactionCanceledException).CancellationReasons).toEqual([
      { Code: 'None' },
      { Code: 'ThrottlingError', Message: expect.stringMatching(/^Throughput exceeds the current capacity of your table or index\./) as unknown },
    ]);
    expect(err.message).toBe('Transaction cancelled, please refer cancellation reasons for specific reasons [None, ThrottlingError]');
    expect(await stored(cold, 'c')).toBeUndefined();
    expect(await stored(hot, 'h1')).toMatchObject({ v: 'old' });
    expect(keyStats(proxy, hot)).toMatchObject({ refused: 1 });
    expect(keyStats(proxy, cold)?.refused ?? 0).toBe(0);

    clock.advance(WINDOW_MS);
    await transaction();
    expect(await stored(cold, 'c')).toMatchObject({ v: 'new' });
    expect(await stored(hot, 'h1')).toMatchObject({ v: 'new' });
    expect(keyStats(proxy, hot)).toMatchObject({ wcu: 2 + 2, peakWcu: 2 }); // two plain writes, then one transactional (×2)
    expect(keyStats(proxy, cold)).toMatchObject({ wcu: 2 });
  });

  it('(f) a BatchWriteItem with some elements on a hot key returns them unprocessed and applies the rest; all on it: the exception', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 2, partitionRcu: 100 });
    const [hot, c1, c2] = [uniqueName('H'), uniqueName('K'), uniqueName('K')];
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: hot, sk: '1' } }));
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: hot, sk: '2' } }));
    const put = (pk: string, sk: string) => ({ PutRequest: { Item: { pk, sk, v: 'batch' } } });

    const res = await doc.send(new BatchWriteCommand({ RequestItems: { [table()]: [put(hot, 'b1'), put(c1, 'b'), put(hot, 'b2'), put(c2, 'b')] } }));
    expect(res.UnprocessedItems?.[table()]).toEqual([put(hot, 'b1'), put(hot, 'b2')]);
    expect(await stored(c1, 'b')).toEqual({ pk: c1, sk: 'b', v: 'batch' });
    expect(await stored(c2, 'b')).toEqual({ pk: c2, sk: 'b', v: 'batch' });
    expect(await stored(hot, 'b1')).toBeUndefined();
    expect(await stored(hot, 'b2')).toBeUndefined();
    expect(keyStats(proxy, hot)).toMatchObject({ wcu: 2, refused: 2 });
    expect(proxy.stats().totals).toMatchObject({ unprocessed: 2, refused: 0 });

    const err = await failure(doc.send(new BatchWriteCommand({ RequestItems: { [table()]: [put(hot, 'b1'), put(hot, 'b2')] } })));
    expect(err).toBeInstanceOf(ThrottlingException);
    expect(err.$metadata.httpStatusCode).toBe(400);
    expect(proxy.stats().totals.refused).toBe(1);
  });

  it('(f) a BatchGetItem with some keys on a read-hot key returns them in UnprocessedKeys; all on it: the exception', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 100, partitionRcu: 1 });
    const [hot, cold] = [uniqueName('H'), uniqueName('K')];
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: hot, sk: '1' } }));
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: cold, sk: '1' } }));
    await doc.send(new GetCommand({ TableName: table(), Key: { pk: hot, sk: '1' }, ConsistentRead: true })); // 1 RCU: the key is at its limit

    const res = await doc.send(
      new BatchGetCommand({
        RequestItems: {
          [table()]: {
            Keys: [
              { pk: hot, sk: '1' },
              { pk: cold, sk: '1' },
            ],
            ConsistentRead: true,
          },
        },
      }),
    );
    expect(res.Responses?.[table()]).toEqual([{ pk: cold, sk: '1' }]);
    expect(res.UnprocessedKeys?.[table()]).toEqual({ Keys: [{ pk: hot, sk: '1' }], ConsistentRead: true });
    const err = await failure(doc.send(new BatchGetCommand({ RequestItems: { [table()]: { Keys: [{ pk: hot, sk: '1' }] } } })));
    expect(err).toBeInstanceOf(ThrottlingException);
    expect((err as ThrottlingException).throttlingReasons?.[0]?.reason).toBe('TableReadKeyRangeThroughputExceeded');
    expect(keyStats(proxy, hot)).toMatchObject({ rcu: 1, refused: 2 });
  });

  it('(g) item sizes: a 3.5 KB item costs 4 WCU, 8 in a transaction, 1 RCU strongly consistent, ½ eventually — as DynamoDB Local counts too', async () => {
    const { proxy, low } = await simulator({ partitionWcu: 1_000, partitionRcu: 1_000, gsiWcu: 1_000 });
    const item = (pk: string, extra: Record<string, AttributeValue> = {}): Record<string, AttributeValue> => {
      const base: Record<string, AttributeValue> = { pk: { S: pk }, sk: { S: 's' }, ...extra, v: { S: '' } };
      return { ...base, v: { S: 'x'.repeat(3_584 - itemSize(base)) } };
    };
    const [p, q, r] = [uniqueName('G'), uniqueName('G'), uniqueName('G')];
    expect(itemSize(item(p))).toBe(3_584);
    /** What the proxy charged `key` during `run`, and what DynamoDB Local reported. */
    async function charged(key: string, run: () => Promise<{ ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }>) {
      const before = keyStats(proxy, key) ?? { wcu: 0, rcu: 0 };
      const out = await run();
      const after = keyStats(proxy, key)!;
      const reported = [out.ConsumedCapacity ?? []].flat()[0]!;
      return { wcu: after.wcu - before.wcu, rcu: after.rcu - before.rcu, reported };
    }
    const TOTAL = { ReturnConsumedCapacity: 'INDEXES' } as const;

    const put = await charged(p, () => low.send(new PutItemCommand({ TableName: table(), Item: item(p), ...TOTAL })));
    expect(put).toMatchObject({ wcu: 4, reported: { Table: { CapacityUnits: 4 } } });
    const tx = await charged(q, () => low.send(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: table(), Item: item(q) } }], ...TOTAL })));
    expect(tx).toMatchObject({ wcu: 8, reported: { Table: { CapacityUnits: 8 } } });
    const strong = await charged(p, () =>
      low.send(new GetItemCommand({ TableName: table(), Key: { pk: { S: p }, sk: { S: 's' } }, ConsistentRead: true, ...TOTAL })),
    );
    expect(strong).toMatchObject({ rcu: 1, reported: { Table: { CapacityUnits: 1 } } });
    const eventual = await charged(p, () => low.send(new GetItemCommand({ TableName: table(), Key: { pk: { S: p }, sk: { S: 's' } }, ...TOTAL })));
    expect(eventual).toMatchObject({ rcu: 0.5, reported: { Table: { CapacityUnits: 0.5 } } });

    // In the index: the entry is the item (projection ALL); changing its sort key there is a delete plus a put.
    const indexed = item(r, { gsi1pk: { S: `${r}-i` }, gsi1sk: { S: '1' } });
    const entry = await charged(`gsi1:${r}-i`, () => low.send(new PutItemCommand({ TableName: table(), Item: indexed, ...TOTAL })));
    expect(entry).toMatchObject({ wcu: 4, reported: { GlobalSecondaryIndexes: { gsi1: { CapacityUnits: 4 } } } });
    const moved = await charged(`gsi1:${r}-i`, () =>
      low.send(
        new UpdateItemCommand({
          TableName: table(),
          Key: { pk: { S: r }, sk: { S: 's' } },
          UpdateExpression: 'SET gsi1sk = :s',
          ExpressionAttributeValues: { ':s': { S: '2' } },
          ...TOTAL,
        }),
      ),
    );
    expect(moved).toMatchObject({ wcu: 8, reported: { GlobalSecondaryIndexes: { gsi1: { CapacityUnits: 8 } } } });
    expect(keyStats(proxy, r)).toMatchObject({ wcu: 4 + 4 });
  });

  it('charges agree with DynamoDB Local’s ReturnConsumedCapacity on each kind of request', async () => {
    const { proxy, low } = await simulator({ partitionWcu: 1_000_000, partitionRcu: 1_000_000 });
    const S = (s: string) => ({ S: s });
    const big = 'x'.repeat(3_000);
    const [a, b, q] = [uniqueName('X'), uniqueName('X'), uniqueName('X')];
    const INDEXES = { ReturnConsumedCapacity: 'INDEXES' } as const;
    /** Table and gsi1 units: the proxy's (all keys together) and DynamoDB Local's for one request. */
    async function both(run: () => Promise<{ ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }>) {
      const sum = () =>
        proxy
          .stats()
          .keys.reduce((s, k) => (k.index ? { ...s, index: s.index + k.wcu + k.rcu } : { ...s, table: s.table + k.wcu + k.rcu }), { table: 0, index: 0 });
      const before = sum();
      const out = await run();
      const after = sum();
      const reported = [out.ConsumedCapacity ?? []].flat()[0];
      return {
        proxy: { table: after.table - before.table, index: after.index - before.index },
        local: { table: reported?.Table?.CapacityUnits ?? 0, index: reported?.GlobalSecondaryIndexes?.gsi1?.CapacityUnits ?? 0 },
      };
    }
    const same = async (label: string, run: () => Promise<{ ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }>) => {
      const { proxy: p, local } = await both(run);
      expect(p, label).toEqual(local);
    };
    const key = (pk: string, sk = '1') => ({ pk: S(pk), sk: S(sk) });
    const update = (pk: string, expr: string, values?: Record<string, { S: string }>, extra = {}) =>
      low.send(
        new UpdateItemCommand({
          TableName: table(),
          Key: key(pk),
          UpdateExpression: expr,
          ...(values ? { ExpressionAttributeValues: values } : {}),
          ...extra,
          ...INDEXES,
        }),
      );

    await same('put, new, in the index', () =>
      low.send(new PutItemCommand({ TableName: table(), Item: { ...key(a), gsi1pk: S(a), gsi1sk: S('1'), v: S('small') }, ...INDEXES })),
    );
    await same('put, replacing with a larger item', () =>
      low.send(new PutItemCommand({ TableName: table(), Item: { ...key(a), gsi1pk: S(a), gsi1sk: S('1'), v: S(big) }, ...INDEXES })),
    );
    await same('update of the index partition key', () => update(a, 'SET gsi1pk = :k', { ':k': S(`${a}-moved`) }));
    await same('update of a projected attribute', () => update(a, 'SET w = :w', { ':w': S('w') }));
    await same('update to the same value', () => update(a, 'SET w = :w', { ':w': S('w') }));
    await same('update with ALL_NEW, shrinking', () => update(a, 'SET v = :v', { ':v': S('s') }, { ReturnValues: 'ALL_NEW' }));
    await same('update leaving the index', () => update(a, 'REMOVE gsi1pk, gsi1sk'));
    await same('update creating an item in the index', () => update(b, 'SET gsi1pk = :k, gsi1sk = :s, v = :v', { ':k': S(b), ':s': S('1'), ':v': S(big) }));
    await same('get, eventually consistent', () => low.send(new GetItemCommand({ TableName: table(), Key: key(b), ...INDEXES })));
    await same('get of a missing item, consistent', () =>
      low.send(new GetItemCommand({ TableName: table(), Key: key(b, 'none'), ConsistentRead: true, ...INDEXES })),
    );
    for (let i = 0; i < 5; i++)
      await low.send(
        new PutItemCommand({
          TableName: table(),
          Item: { ...key(q, String(i)), v: S(big), gsi1pk: S(`${q}-i`), gsi1sk: S(String(i)), odd: { BOOL: i % 2 === 1 } },
        }),
      );
    await same('query, consistent', () =>
      low.send(
        new LowQueryCommand({
          TableName: table(),
          KeyConditionExpression: 'pk = :p',
          ExpressionAttributeValues: { ':p': S(q) },
          ConsistentRead: true,
          ...INDEXES,
        }),
      ),
    );
    await same('query with a filter (items read, not returned)', () =>
      low.send(
        new LowQueryCommand({
          TableName: table(),
          KeyConditionExpression: 'pk = :p',
          FilterExpression: 'odd = :t',
          ExpressionAttributeValues: { ':p': S(q), ':t': { BOOL: true } },
          ...INDEXES,
        }),
      ),
    );
    await same('query of the index, limited', () =>
      low.send(
        new LowQueryCommand({
          TableName: table(),
          IndexName: 'gsi1',
          KeyConditionExpression: 'gsi1pk = :p AND gsi1sk > :s',
          ExpressionAttributeValues: { ':p': S(`${q}-i`), ':s': S('1') },
          Limit: 2,
          ...INDEXES,
        }),
      ),
    );
    await same('transactional update moving an index entry', () =>
      low.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Update: { TableName: table(), Key: key(q, '1'), UpdateExpression: 'SET gsi1sk = :s', ExpressionAttributeValues: { ':s': S('x') } } },
          ],
          ...INDEXES,
        }),
      ),
    );
    await same('transactional condition check', () =>
      low.send(
        new TransactWriteItemsCommand({
          TransactItems: [{ ConditionCheck: { TableName: table(), Key: key(q, '2'), ConditionExpression: 'attribute_exists(pk)' } }],
          ...INDEXES,
        }),
      ),
    );
    await same('transactional delete', () =>
      low.send(new TransactWriteItemsCommand({ TransactItems: [{ Delete: { TableName: table(), Key: key(q, '3') } }], ...INDEXES })),
    );
    await same('transactional get', () =>
      low.send(
        new TransactGetItemsCommand({
          TransactItems: [{ Get: { TableName: table(), Key: key(q, '1') } }, { Get: { TableName: table(), Key: key(q, '2') } }],
          ...INDEXES,
        }),
      ),
    );
    await same('batch write of puts and a delete', () =>
      low.send(
        new BatchWriteItemCommand({
          RequestItems: {
            [table()]: [{ PutRequest: { Item: { ...key(b, '2'), v: S(big), gsi1pk: S(b), gsi1sk: S('2') } } }, { DeleteRequest: { Key: key(q, '4') } }],
          },
          ...INDEXES,
        }),
      ),
    );
    await same('batch get, consistent', () =>
      low.send(new BatchGetItemCommand({ RequestItems: { [table()]: { Keys: [key(b), key(b, '2')], ConsistentRead: true } }, ...INDEXES })),
    );
    await same('delete', () => low.send(new DeleteItemCommand({ TableName: table(), Key: key(b, '2'), ...INDEXES })));
    expect(proxy.stats().totals).toMatchObject({ refused: 0, unmetered: 0 });
  });

  it('stats: per key and per key family (ids replaced), totals; resetStats starts the counters over but not the window', async () => {
    expect(defaultFamily('RUN#3f9a1c#S3')).toBe('RUN#*#S*');
    expect(defaultFamily('PENDING#run-1a2b')).toBe('PENDING#*');
    expect(defaultFamily('RUNS')).toBe('RUNS');
    const { proxy, doc } = await simulator({ partitionWcu: 2, partitionRcu: 100, gsiWcu: 100 });
    const [r1, r2] = [uniqueName('r'), uniqueName('r')];
    for (const [run, shard] of [
      [r1, 1],
      [r1, 2],
      [r2, 1],
    ] as const) {
      await doc.send(new PutCommand({ TableName: table(), Item: { pk: `RUN#${run}#S${shard}`, sk: 'x', gsi1pk: `RUNNING#${run}`, gsi1sk: String(shard) } }));
    }
    await doc.send(new PutCommand({ TableName: table(), Item: { pk: `RUN#${r1}#S1`, sk: 'y' } }));
    expect((await failure(doc.send(new PutCommand({ TableName: table(), Item: { pk: `RUN#${r1}#S1`, sk: 'z' } })))).name).toBe('ThrottlingException');

    const { families, keys, totals } = proxy.stats();
    expect(families.find((f) => f.family === 'RUN#*#S*')).toEqual({ family: 'RUN#*#S*', keys: 3, wcu: 4, rcu: 0, refused: 1, peakKeyWcu: 2, peakKeyRcu: 0 });
    expect(families.find((f) => f.family === 'gsi1:RUNNING#*')).toMatchObject({ keys: 2, wcu: 3, refused: 0 });
    expect(keys[0]).toMatchObject({ key: `RUN#${r1}#S1`, family: 'RUN#*#S*', index: null, wcu: 2, refused: 1 });
    expect(keys.find((k) => k.key === `gsi1:RUNNING#${r1}`)).toMatchObject({ family: 'gsi1:RUNNING#*', index: 'gsi1', wcu: 2 });
    expect(totals).toMatchObject({ requests: 5, refused: 1, wcu: 4 + 3 });

    proxy.resetStats();
    expect(proxy.stats()).toMatchObject({ keys: [], families: [], totals: { requests: 0, refused: 0, wcu: 0 } });
    expect((await failure(doc.send(new PutCommand({ TableName: table(), Item: { pk: `RUN#${r1}#S1`, sk: 'z' } })))).name).toBe('ThrottlingException');
  });

  it('the DynamoDB ledger runs through it unchanged, its keys and index keys metered', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 10_000, partitionRcu: 10_000 });
    const ledger = new DynamoLedgerStore(doc, table());
    const runId = uniqueName('run');
    expect(await ledger.createRun(runId, { name: 'throttle' }, 1)).toEqual({ created: true });
    const { ids, added } = await ledger.enqueue(
      runId,
      Array.from({ length: 6 }, (_, i) => ({ i })),
      1,
    );
    expect(added).toBe(6);
    expect((await ledger.pending(runId, 10)).map((i) => i.id).sort()).toEqual([...ids].sort());
    const outcomes = await ledger.casMany(
      ids.slice(0, 3).map((id) => claim(runId, id, 'w1', 0, 2)),
      2,
    );
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect((await ledger.running(runId)).map((i) => i.id).sort()).toEqual(ids.slice(0, 3).sort());
    expect(await ledger.counts(runId)).toEqual({ pending: 3, running: 3, done: 0, failed: 0 });

    // Whatever its key layout (one partition per run, or shards), every key is metered under a family without the run's id.
    const { families, totals } = proxy.stats();
    for (const f of families) expect(f.family).not.toContain(runId);
    const wcu = (prefix: string) => families.filter((f) => f.family.startsWith(prefix)).reduce((n, f) => n + f.wcu, 0);
    expect(wcu('RUN#')).toBeGreaterThanOrEqual(1 + 6 + 3); // the run, its items, the claims
    expect(wcu('gsi1:PENDING#')).toBeGreaterThanOrEqual(6 + 3); // into the index, then out for the claimed ones
    expect(wcu('gsi1:RUNNING#')).toBeGreaterThanOrEqual(3);
    expect(totals.wcu).toBe(families.reduce((n, f) => n + f.wcu, 0));
    expect(proxy.stats().totals).toMatchObject({ refused: 0, unmetered: 0 });
  });

  it('on the store’s own table (gsi1 INCLUDE) a ledger start and heartbeat charge the item alone, none of its index keys', async () => {
    const { proxy, doc } = await simulator({ partitionWcu: 10_000, partitionRcu: 10_000 });
    const ledger = new DynamoLedgerStore(doc, storeTable);
    const runId = uniqueName('run');
    await ledger.createRun(runId, {}, 1, { shards: 1 });
    const { ids } = await ledger.enqueue(runId, [{ i: 1 }, { i: 2 }], 1);
    for (const id of ids) expect((await ledger.cas(claim(runId, id, 'w1', 0, 2), 2)).ok).toBe(true);
    const wcu = (prefix: string) =>
      proxy
        .stats()
        .families.filter((f) => f.family.startsWith(prefix))
        .reduce((n, f) => n + f.wcu, 0);
    const before = { item: wcu('RUN#'), pending: wcu('gsi1:PENDING#'), running: wcu('gsi1:RUNNING#') };
    for (const id of ids) {
      expect((await ledger.cas(start(runId, id, 'w1', 3), 3)).ok).toBe(true);
      expect((await ledger.cas(heartbeat(runId, id, 'w1', 4), 4)).ok).toBe(true);
    }
    expect({ item: wcu('RUN#'), pending: wcu('gsi1:PENDING#'), running: wcu('gsi1:RUNNING#') }).toEqual({ ...before, item: before.item + 2 * ids.length });
  });
});
