/**
 * The ledger's layout on DynamoDB: a run's items spread over the shards it
 * was created with, a run written by the first layout (one partition per
 * run, before sharding) still finishing on the same table beside new ones,
 * and what gsi1 holds of an item: an entry written when it is claimed and
 * left alone by its start and heartbeats, on a table whose index projects
 * a few attributes or (made before) all of them. The contract suites run
 * every backend's ledger with 4 shards; this file looks at the keys
 * themselves, on DynamoDB Local.
 */
import { CreateTableCommand, DeleteTableCommand, DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { runKeys, shardOf } from '../../shared/adapters/dynamodb/ledger-keys.js';
import { ledgerUpdate, pad, pendingSk } from '../../shared/adapters/dynamodb/ledger-updates.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { ensureTable, GSI1, GSI1_PROJECTED, tableDefinition } from '../../shared/adapters/dynamodb/table.js';
import { contentId } from '../../shared/ledger/model.js';
import { ack as acked, claim as claimed, heartbeat as beat, start as started } from '../../shared/ledger/transitions.js';
import { dynamoTable, uniqueName } from '../support/backends.js';

let t: Awaited<ReturnType<typeof dynamoTable>>;
let ledger: DynamoLedgerStore;
beforeAll(async () => {
  t = await dynamoTable();
  ledger = new DynamoLedgerStore(t.doc, t.table, { defaultShards: 1 });
});
afterAll(() => t?.close());

const now = 1_750_000_000_000;
const claim = (runId: string, itemId: string, worker: string) => claimed(runId, itemId, worker, 0, now);
const ack = (runId: string, itemId: string, worker: string) => acked(runId, itemId, worker, { ok: true });

async function keysIn(partition: string): Promise<number> {
  return (
    (
      await t.doc.send(
        new QueryCommand({
          TableName: t.table,
          KeyConditionExpression: 'pk = :p',
          ExpressionAttributeValues: { ':p': partition },
          Select: 'COUNT',
          ConsistentRead: true,
        }),
      )
    ).Count ?? 0
  );
}

describe('the sharded layout', () => {
  it('spreads a run’s items over its shards by their content hash, and reads them back across all of them', async () => {
    await ledger.createRun('wide', {}, now, { shards: 8 });
    expect((await ledger.getRun('wide'))?.shards).toBe(8);
    const payloads = Array.from({ length: 200 }, (_, i) => ({ i }));
    const { ids, added } = await ledger.enqueue('wide', payloads, now);
    expect(added).toBe(200);
    const keys = runKeys('wide', 8);
    const perShard = await Promise.all(keys.partitions.map(keysIn));
    expect(perShard.reduce((a, b) => a + b, 0)).toBe(200);
    expect(perShard.every((n) => n > 0)).toBe(true); // 200 hashes over 8 shards: none empty
    expect(keys.item(ids[0]!).pk).toBe(`RUN#wide#${shardOf(ids[0]!, 8)}`);

    // Pending, in the store's order across shards, page after page: every item once.
    const seen: string[] = [];
    for (let page = await ledger.pending('wide', 30); page.length; page = await ledger.pending('wide', 30, page.at(-1))) seen.push(...page.map((i) => i.id));
    expect(seen).toHaveLength(200);
    expect(new Set(seen).size).toBe(200);
    expect(seen).toEqual([...seen].sort((a, b) => pendingSk(a, null).localeCompare(pendingSk(b, null))));

    // Claims and acks land in the items' shards; running is read across them; counts come from the index and the record.
    for (const id of ids.slice(0, 50)) expect((await ledger.cas(claim('wide', id, 'w1'), now)).ok).toBe(true);
    expect((await ledger.running('wide')).map((i) => i.id).sort()).toEqual(ids.slice(0, 50).sort());
    for (const id of ids.slice(0, 30)) expect((await ledger.cas(ack('wide', id, 'w1'), now)).ok).toBe(true);
    await expect.poll(() => ledger.counts('wide')).toEqual({ pending: 150, running: 20, done: 30, failed: 0 });
    expect((await ledger.unsent('wide', now + 1, 500)).length).toBe(150);
  });

  it('a finished run is reported finished only once its items confirm it, and then leaves the open runs', async () => {
    await ledger.createRun('small', {}, now, { shards: 4 });
    const { ids } = await ledger.enqueue('small', [{ a: 1 }, { a: 2 }, { a: 3 }], now);
    for (const id of ids) await ledger.cas(claim('small', id, 'w'), now);
    for (const id of ids) await ledger.cas(ack('small', id, 'w'), now);
    expect(await ledger.openRuns()).toContain('wide');
    await expect.poll(() => ledger.counts('small')).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
    expect(await ledger.openRuns()).not.toContain('small');
    // More items reopen it.
    await ledger.enqueue('small', [{ a: 4 }], now);
    expect(await ledger.openRuns()).toContain('small');
    expect(await ledger.counts('small')).toMatchObject({ done: 3 });
  });

  it('refuses a shard count it cannot honour, naming it', async () => {
    await expect(ledger.createRun('zero', {}, now, { shards: 0 })).rejects.toThrow(/run zero: shards must be a whole number from 1 to 512, got 0/);
    await expect(ledger.createRun('huge', {}, now, { shards: 513 })).rejects.toThrow(/got 513/);
    expect(await ledger.getRun('zero')).toBeNull();
  });
});

describe('a table written by the first layout', () => {
  /** A run and its items exactly as the ledger wrote them before sharding: one partition, unsharded index keys, no shard count on the run. */
  async function legacyRun(runId: string, payloads: unknown[]): Promise<string[]> {
    await t.doc.send(
      new PutCommand({
        TableName: t.table,
        Item: { pk: `RUN#${runId}`, sk: 'RUN', id: runId, spec: {}, coordinatorEpoch: -1, createdAt: now, enqueues: 1, gsi1pk: 'RUNS', gsi1sk: runId },
      }),
    );
    const ids = payloads.map(contentId);
    for (const [i, id] of ids.entries()) {
      await t.doc.send(
        new PutCommand({
          TableName: t.table,
          Item: {
            pk: `RUN#${runId}`,
            sk: `ITEM#${id}`,
            runId,
            id,
            payload: payloads[i],
            state: 'pending',
            started: false,
            attempts: 0,
            version: 0,
            createdAt: now,
            gsi1pk: `PENDING#${runId}`,
            gsi1sk: pendingSk(id, null),
          },
        }),
      );
    }
    return ids;
  }

  it('keeps its runs where they started: they finish on the first layout while new runs use shards', async () => {
    const old = await legacyRun('before', [{ x: 1 }, { x: 2 }]);
    // A store of today, on the same table.
    const today = new DynamoLedgerStore(t.doc, t.table, { defaultShards: 4 });
    expect((await today.getRun('before'))?.shards).toBeNull();
    const { ids: more } = await today.enqueue('before', [{ x: 3 }], now);
    expect(await keysIn('RUN#before')).toBe(4); // the record and three items, one partition
    expect(await keysIn('RUN#before#0')).toBe(0);
    const all = [...old, ...more];
    expect((await today.pending('before', 10)).length).toBe(3);
    for (const id of all) expect((await today.cas(claim('before', id, 'w'), now)).ok).toBe(true);
    expect((await today.running('before')).length).toBe(3);
    for (const id of all) expect((await today.cas(ack('before', id, 'w'), now)).ok).toBe(true);
    expect(await today.counts('before')).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
    expect(await today.openRuns()).not.toContain('before');

    await today.createRun('after', {}, now);
    expect((await today.getRun('after'))?.shards).toBe(4);
    const { ids } = await today.enqueue(
      'after',
      Array.from({ length: 12 }, (_, i) => ({ y: i })),
      now,
    );
    expect(await keysIn('RUN#after')).toBe(1); // only its record
    expect((await Promise.all(runKeys('after', 4).partitions.map(keysIn))).reduce((a, b) => a + b, 0)).toBe(12);
    expect((await today.get('after', ids[0]!))?.state).toBe('pending');
  });
});

describe('gsi1: an entry per item that its start and heartbeats leave alone', () => {
  const start = (runId: string, itemId: string, worker: string) => started(runId, itemId, worker, now);
  const heartbeat = (runId: string, itemId: string, worker: string, at: number) => beat(runId, itemId, worker, at);
  const raw = async (runId: string, itemId: string, shards: number | null = 1) =>
    (await t.doc.send(new GetCommand({ TableName: t.table, Key: runKeys(runId, shards).item(itemId), ConsistentRead: true }))).Item!;
  const entries = (key: string) =>
    t.doc
      .send(new QueryCommand({ TableName: t.table, IndexName: GSI1.name, KeyConditionExpression: `${GSI1.pk} = :k`, ExpressionAttributeValues: { ':k': key } }))
      .then((r) => r.Items ?? []);

  it('projects only what no start or heartbeat changes', async () => {
    const { Table } = await t.client.send(new DescribeTableCommand({ TableName: t.table }));
    const index = Table!.GlobalSecondaryIndexes!.find((i) => i.IndexName === GSI1.name)!;
    expect(index.Projection).toEqual({ ProjectionType: 'INCLUDE', NonKeyAttributes: [...GSI1_PROJECTED] });
    for (const changing of ['started', 'heartbeatAt', 'version', 'updatedAt']) expect(GSI1_PROJECTED).not.toContain(changing);
  });

  it('keeps a running item under its RUNNING key by its id: its sort key does not move with its start and heartbeats', async () => {
    await ledger.createRun('steady', {}, now, { shards: 1 });
    const { ids } = await ledger.enqueue('steady', [{ s: 1 }], now);
    const id = ids[0]!;
    expect((await ledger.cas(claim('steady', id, 'w1'), now)).ok).toBe(true);
    const claimedRow = await raw('steady', id);
    expect(claimedRow).toMatchObject({ [GSI1.pk]: 'RUNNING#steady#0', [GSI1.sk]: id, version: 1 });
    expect(claimedRow.pendingVersion).toBeUndefined();
    expect((await ledger.cas(start('steady', id, 'w1'), now)).ok).toBe(true);
    for (let i = 1; i <= 3; i++) expect((await ledger.cas(heartbeat('steady', id, 'w1', now + i * 5_000), now + i * 5_000)).ok).toBe(true);
    const row = await raw('steady', id);
    expect(row).toMatchObject({ [GSI1.pk]: 'RUNNING#steady#0', [GSI1.sk]: id, version: 5, started: true, heartbeatAt: now + 15_000 });
    // The entry: the keys and the projected attributes, none of what those four writes changed.
    await expect.poll(() => entries('RUNNING#steady#0')).toHaveLength(1);
    const [entry] = await entries('RUNNING#steady#0');
    expect(entry).toMatchObject({ id, runId: 'steady', state: 'running', worker: 'w1', claimedAt: now, [GSI1.sk]: id });
    for (const absent of ['started', 'heartbeatAt', 'version', 'updatedAt', 'payload', 'epoch']) expect(entry).not.toHaveProperty(absent);
    // Who holds it comes from the entry alone; the item whole, heartbeat and all, from the table.
    expect(await ledger.holders('steady')).toEqual([{ runId: 'steady', id, worker: 'w1', claimedAt: now }]);
    expect(await ledger.running('steady')).toMatchObject([{ id, worker: 'w1', started: true, heartbeatAt: now + 15_000, version: 5, payload: { s: 1 } }]);
  });

  it('writes the index only when an item changes key: a start and a heartbeat consume no index capacity', async () => {
    await ledger.createRun('units', {}, now, { shards: 1 });
    const { ids } = await ledger.enqueue('units', [{ u: 1 }], now);
    const id = ids[0]!;
    const keys = runKeys('units', 1);
    // Each transition sent as the store sends it, asking DynamoDB what it consumed, table and index apart.
    const consumed = async (change: Parameters<typeof ledgerUpdate>[0]) => {
      const out = await t.doc.send(
        new UpdateCommand({ TableName: t.table, Key: keys.item(id), ...ledgerUpdate(change, now, keys.index(id)), ReturnConsumedCapacity: 'INDEXES' }),
      );
      return out.ConsumedCapacity?.GlobalSecondaryIndexes?.[GSI1.name]?.CapacityUnits ?? 0;
    };
    expect(await consumed(claim('units', id, 'w1'))).toBeGreaterThan(0); // out of PENDING, into RUNNING
    expect(await consumed(start('units', id, 'w1'))).toBe(0);
    expect(await consumed(heartbeat('units', id, 'w1', now + 5_000))).toBe(0);
    expect(await consumed(heartbeat('units', id, 'w1', now + 10_000))).toBe(0);
    expect(await consumed(ack('units', id, 'w1'))).toBeGreaterThan(0); // out of RUNNING
  });

  it('finishes the items a table holds from before: a running item under a heartbeat sort key, a pending one without pendingVersion', async () => {
    await ledger.createRun('older', {}, now, { shards: 1 });
    const keys = runKeys('older', 1);
    const [waiting, runningId] = [{ o: 'waiting' }, { o: 'running' }].map(contentId) as [string, string];
    // Written as the ledger wrote them before: no pendingVersion, and the RUNNING sort key was the heartbeat.
    await t.doc.send(
      new PutCommand({
        TableName: t.table,
        Item: {
          ...keys.item(waiting),
          runId: 'older',
          id: waiting,
          payload: { o: 'waiting' },
          state: 'pending',
          started: false,
          attempts: 0,
          version: 2,
          createdAt: now,
          [GSI1.pk]: keys.index(waiting).pending,
          [GSI1.sk]: pendingSk(waiting, null),
        },
      }),
    );
    await t.doc.send(
      new PutCommand({
        TableName: t.table,
        Item: {
          ...keys.item(runningId),
          runId: 'older',
          id: runningId,
          payload: { o: 'running' },
          state: 'running',
          worker: 'w1',
          epoch: 0,
          claimedAt: now,
          started: false,
          heartbeatAt: now,
          attempts: 0,
          version: 1,
          createdAt: now,
          [GSI1.pk]: keys.index(runningId).running,
          [GSI1.sk]: `${pad(now)}#${runningId}`,
        },
      }),
    );
    // Pending: listed with its version, read from the item (the index does not carry `version`), so its message is recorded sent.
    await expect.poll(() => ledger.unsent('older', now + 1, 10)).toEqual([{ runId: 'older', id: waiting, state: 'pending', version: 2, sentAt: null }]);
    await ledger.markSent('older', [{ id: waiting, version: 2 }], now + 1);
    expect(await raw('older', waiting)).toMatchObject({ sentAt: now + 1, [GSI1.sk]: pendingSk(waiting, now + 1) });
    // Running: found, heartbeated and started where it is (its old sort key stays: nothing reads that order), then acked out.
    expect(await ledger.holders('older')).toEqual([{ runId: 'older', id: runningId, worker: 'w1', claimedAt: now }]);
    expect((await ledger.cas(heartbeat('older', runningId, 'w1', now + 5_000), now + 5_000)).ok).toBe(true);
    expect((await ledger.cas(start('older', runningId, 'w1'), now)).ok).toBe(true);
    expect(await raw('older', runningId)).toMatchObject({ [GSI1.sk]: `${pad(now)}#${runningId}`, version: 3, started: true });
    expect(await ledger.running('older')).toMatchObject([{ id: runningId, started: true, version: 3 }]);
    expect((await ledger.cas(ack('older', runningId, 'w1'), now)).ok).toBe(true);
    await expect.poll(() => ledger.holders('older')).toEqual([]);
    // The pending one is claimed and finished as any other.
    expect((await ledger.cas(claim('older', waiting, 'w2'), now)).ok).toBe(true);
    expect((await ledger.cas(ack('older', waiting, 'w2'), now)).ok).toBe(true);
    for (const id of [waiting, runningId]) expect(await ledger.get('older', id)).toMatchObject({ state: 'done' });
    await expect.poll(async () => [...(await entries(keys.index(waiting).pending)), ...(await entries(keys.index(waiting).running))]).toEqual([]);
  });

  it('runs the same on a table whose gsi1 still projects ALL (made before the projection was narrowed)', async () => {
    const name = uniqueName('rollout-all');
    const def = tableDefinition(name);
    await t.client.send(
      new CreateTableCommand({ ...def, GlobalSecondaryIndexes: def.GlobalSecondaryIndexes!.map((g) => ({ ...g, Projection: { ProjectionType: 'ALL' } })) }),
    );
    try {
      await ensureTable(t.client, name);
      const all = new DynamoLedgerStore(dynamoDocumentClient(t.client), name, { defaultShards: 2 });
      await all.createRun('r', {}, now);
      const { ids } = await all.enqueue('r', [{ a: 1 }, { a: 2 }, { a: 3 }], now);
      await expect.poll(async () => (await all.pending('r', 10)).map((i) => i.version)).toEqual([0, 0, 0]);
      for (const id of ids.slice(0, 2)) expect((await all.cas(claimed('r', id, 'w1', 0, now), now)).ok).toBe(true);
      expect((await all.cas(started('r', ids[0]!, 'w1', now), now)).ok).toBe(true);
      // The entries are the items whole: whether each started is there already.
      await expect
        .poll(async () => (await all.holders('r')).map((h) => [h.id, h.started]).sort())
        .toEqual(
          [
            [ids[0], true],
            [ids[1], false],
          ].sort(),
        );
      expect((await all.running('r')).map((i) => [i.id, i.started]).sort()).toEqual(
        [
          [ids[0], true],
          [ids[1], false],
        ].sort(),
      );
      expect((await all.cas(acked('r', ids[0]!, 'w1', 'x'), now)).ok).toBe(true);
      await expect.poll(() => all.counts('r')).toEqual({ pending: 1, running: 1, done: 1, failed: 0 });
    } finally {
      await t.client.send(new DeleteTableCommand({ TableName: name })).catch(() => undefined);
    }
  });
});
