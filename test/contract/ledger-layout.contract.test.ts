/**
 * The ledger's layout on DynamoDB: a run's items spread over the shards it
 * was created with, and a run written by the first layout (one partition per
 * run, before sharding) still finishing on the same table beside new ones.
 * The contract suites run every backend's ledger with 4 shards; this file
 * looks at the keys themselves, on DynamoDB Local.
 */
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKeys, shardOf } from '../../shared/adapters/dynamodb/ledger-keys.js';
import { pendingSk } from '../../shared/adapters/dynamodb/ledger-updates.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { contentId } from '../../shared/ledger/model.js';
import { ack as acked, claim as claimed } from '../../shared/ledger/transitions.js';
import { dynamoTable } from '../support/backends.js';

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
  return (await t.doc.send(new QueryCommand({ TableName: t.table, KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': partition }, Select: 'COUNT', ConsistentRead: true }))).Count ?? 0;
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
    await t.doc.send(new PutCommand({ TableName: t.table, Item: { pk: `RUN#${runId}`, sk: 'RUN', id: runId, spec: {}, coordinatorEpoch: -1, createdAt: now, enqueues: 1, gsi1pk: 'RUNS', gsi1sk: runId } }));
    const ids = payloads.map(contentId);
    for (const [i, id] of ids.entries()) {
      await t.doc.send(
        new PutCommand({ TableName: t.table, Item: { pk: `RUN#${runId}`, sk: `ITEM#${id}`, runId, id, payload: payloads[i], state: 'pending', started: false, attempts: 0, version: 0, createdAt: now, gsi1pk: `PENDING#${runId}`, gsi1sk: pendingSk(id, null) } }),
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
    const { ids } = await today.enqueue('after', Array.from({ length: 12 }, (_, i) => ({ y: i })), now);
    expect(await keysIn('RUN#after')).toBe(1); // only its record
    expect((await Promise.all(runKeys('after', 4).partitions.map(keysIn))).reduce((a, b) => a + b, 0)).toBe(12);
    expect((await today.get('after', ids[0]!))?.state).toBe('pending');
  });
});
