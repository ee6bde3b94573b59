/**
 * The coordinator's shard fences on DynamoDB (ledger-fences.ts): a run's
 * fenced writes check their shard's fence, not the one lease item, and a new
 * coordinator raises every fence (under a check of the lease) before it
 * writes anything. What must hold: once the new holder has written, no write
 * of the old epoch lands on any shard; a deposed holder cannot raise a fence;
 * and the lease item takes no write of the steady path.
 */
import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKeys, shardOf } from '../../shared/adapters/dynamodb/ledger-keys.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../../shared/adapters/dynamodb/run-lease-store.js';
import { leaseKey } from '../../shared/adapters/dynamodb/table.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { claim, fail, steal } from '../../shared/ledger/transitions.js';
import { dynamoTable, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const TIMINGS = { ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 100 };
const SHARDS = 8;
const now = 1_750_000_000_000;

let t: Awaited<ReturnType<typeof dynamoTable>>;
beforeAll(async () => {
  t = await dynamoTable();
});
afterAll(() => t?.close());

/** A run with items in every shard, each claimed by worker v; and an elector per holder on its coordinator lease. */
async function setup() {
  const runId = uniqueName('fenced');
  const ledger = new DynamoLedgerStore(t.doc, t.table);
  await ledger.createRun(runId, {}, now, { shards: SHARDS });
  const { ids } = await ledger.enqueue(
    runId,
    Array.from({ length: 64 }, (_, i) => ({ i })),
    now,
  );
  for (const id of ids) expect((await ledger.cas(claim(runId, id, 'v', 0, now), now)).ok).toBe(true);
  // One item per shard to write to.
  const byShard = new Map<number, string[]>();
  for (const id of ids) byShard.set(shardOf(id, SHARDS), [...(byShard.get(shardOf(id, SHARDS)) ?? []), id]);
  expect(byShard.size).toBe(SHARDS);
  const clock = new ManualClock(now);
  const leases = new DynamoRunLeaseStore(t.doc, t.table, runId);
  const elector = (holderId: string) => new LeaseElector(leases, { name: coordinatorLease(runId), holderId, clock, ...TIMINGS });
  return { runId, ledger, byShard, clock, elector };
}

async function fenceOf(runId: string, shard: number): Promise<{ holder: string; epoch: number } | null> {
  const { Item } = await t.doc.send(new GetCommand({ TableName: t.table, Key: runKeys(runId, SHARDS).fences[shard]!, ConsistentRead: true }));
  return Item ? { holder: String(Item.holder), epoch: Number(Item.epoch) } : null;
}

async function leaseVersion(runId: string): Promise<number> {
  const { Item } = await t.doc.send(new GetCommand({ TableName: t.table, Key: leaseKey(coordinatorLease(runId)), ConsistentRead: true }));
  return Number(Item?.version);
}

const failIt = (token: LeaseToken, runId: string, id: string) => fail(token, runId, id, { state: 'running', worker: 'v' }, 'test', { counts: true });

describe('shard fences', () => {
  it('a first fenced write raises every shard’s fence to the epoch; later writes check the fence, not the lease item', async () => {
    const { runId, ledger, byShard, elector } = await setup();
    const a = elector('a');
    await a.campaign();
    const token = a.token()!;
    for (let s = 0; s < SHARDS; s++) expect(await fenceOf(runId, s)).toBeNull();
    const [first, ...rest] = byShard.get(0)!;
    expect((await ledger.cas(steal(token, runId, first!, 'v', 'thief', now), now)).ok).toBe(true);
    for (let s = 0; s < SHARDS; s++) expect(await fenceOf(runId, s)).toEqual({ holder: 'a', epoch: token.epoch });
    const version = await leaseVersion(runId);
    for (let s = 1; s < SHARDS; s++) expect((await ledger.cas(failIt(token, runId, byShard.get(s)![0]!), now)).ok).toBe(true);
    expect((await ledger.cas(steal(token, runId, rest[0]!, 'v', 'thief', now), now)).ok).toBe(true);
    // The lease item was not written by any of them (a ConditionCheck writes nothing; a raise would bump nothing either, but none happened).
    expect(await leaseVersion(runId)).toBe(version);
    const stolen = await ledger.get(runId, rest[0]!);
    expect(stolen).toMatchObject({ state: 'running', worker: 'thief' });
  });

  it('once the new holder has written, every write of the old epoch is refused on every shard, and writes nothing', async () => {
    const { runId, ledger, byShard, clock, elector } = await setup();
    const a = elector('a');
    await a.campaign();
    const old = a.token()!;
    expect((await ledger.cas(failIt(old, runId, byShard.get(0)![0]!), now)).ok).toBe(true);
    clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
    const b = elector('b');
    expect((await b.campaign()).leader).toBe(true);
    const next = b.token()!;
    expect(next.epoch).toBe(old.epoch + 1);
    // B's own store (another process): its first write raises the fences.
    const other = new DynamoLedgerStore(t.doc, t.table);
    expect((await other.cas(failIt(next, runId, byShard.get(1)![0]!), now)).ok).toBe(true);
    for (let s = 0; s < SHARDS; s++) {
      const id = byShard.get(s)!.at(-1)!;
      await expect(ledger.cas(steal(old, runId, id, 'v', 'thief', now), now)).rejects.toBeInstanceOf(FencedError);
      expect(await ledger.get(runId, id)).toMatchObject({ state: 'running', worker: 'v' });
      expect(await fenceOf(runId, s)).toEqual({ holder: 'b', epoch: next.epoch });
    }
  });

  it('a deposed holder cannot raise a fence: a process of the old epoch that had not raised them is refused by the lease check', async () => {
    const { runId, byShard, clock, elector } = await setup();
    const a = elector('a');
    await a.campaign();
    const old = a.token()!;
    clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
    expect((await elector('b').campaign()).leader).toBe(true);
    // Nobody has raised anything yet; the old holder's fresh process tries first.
    const late = new DynamoLedgerStore(t.doc, t.table);
    const err = await late.cas(failIt(old, runId, byShard.get(2)![0]!), now).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FencedError);
    expect((err as FencedError).current).toMatchObject({ holder: 'b', epoch: old.epoch + 1 });
    for (let s = 0; s < SHARDS; s++) expect(await fenceOf(runId, s)).toBeNull();
    expect(await late.get(runId, byShard.get(2)![0]!)).toMatchObject({ state: 'running', worker: 'v' });
  });

  it('a fence found below the epoch (lost since it was raised) is raised again, and the write goes through', async () => {
    const { runId, ledger, byShard, elector } = await setup();
    const a = elector('a');
    await a.campaign();
    const token = a.token()!;
    expect((await ledger.cas(failIt(token, runId, byShard.get(0)![0]!), now)).ok).toBe(true);
    await t.doc.send(new DeleteCommand({ TableName: t.table, Key: runKeys(runId, SHARDS).fences[3]! }));
    expect((await ledger.cas(failIt(token, runId, byShard.get(3)![0]!), now)).ok).toBe(true);
    expect(await fenceOf(runId, 3)).toEqual({ holder: 'a', epoch: token.epoch });
  });
});
