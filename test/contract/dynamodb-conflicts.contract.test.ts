/**
 * DynamoDB transaction conflicts are not verdicts. Every fenced transaction
 * condition-checks its lease item, and DynamoDB runs one transaction on an
 * item at a time, cancelling the others with `TransactionConflict`. Such a
 * cancellation applied nothing and says nothing about the state: one process's
 * writes on a lease item wait their turn instead of cancelling each other, and
 * a conflict with another process is retried. Only a failed condition means
 * "the state moved on" (or "fenced"), and it stays a typed error carrying the
 * current row.
 *
 * DynamoDB Local never cancels for a conflict, so the stores talk to it
 * through a proxy that applies DynamoDB's conflict rules (ContentionProxy).
 * A "process" is a document client of its own; each test forces the
 * conflicts it needs by holding one transaction ongoing until the others have
 * run into it.
 */
import type { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import { acquire, steal as stealLease } from '../../shared/lease/transitions.js';
import { claim, steal } from '../../shared/ledger/transitions.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter } from '../../shared/rollout/promoters.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import { conflictStats } from '../../shared/adapters/dynamodb/conflicts.js';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { fencedTransactWrite, WriteConditionFailedError } from '../../shared/adapters/dynamodb/fence.js';
import { DynamoLeaseStore } from '../../shared/adapters/dynamodb/lease-store.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../../shared/adapters/dynamodb/run-lease-store.js';
import { DynamoRolloutStore } from '../../shared/adapters/dynamodb/rollout-store.js';
import { dynamoTable, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { ContentionProxy, dynamoEndpoint } from '../support/dynamodb-contention.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const WRITERS = 8;
const ROUNDS = 3;

describe('concurrent transactions on DynamoDB (conflicts as DynamoDB raises them)', () => {
  let t: Awaited<ReturnType<typeof dynamoTable>>;
  let proxy: ContentionProxy;
  /** One document client per process, each through the proxy. */
  let processes: DynamoDBDocumentClient[];
  let a: DynamoDBDocumentClient;
  let b: DynamoDBDocumentClient;
  beforeAll(async () => {
    t = await dynamoTable();
    proxy = await new ContentionProxy(dynamoEndpoint()).start();
    processes = Array.from({ length: WRITERS }, () => dynamoDocumentClient({ endpoint: proxy.url }));
    [a, b] = processes as [DynamoDBDocumentClient, DynamoDBDocumentClient];
  });
  afterAll(async () => {
    for (const p of processes ?? []) p.destroy();
    await proxy?.stop();
    await t?.close();
  });
  beforeEach(() => proxy.resetPeak());

  async function leader(name: string, doc = a, clock = new ManualClock()): Promise<{ token: LeaseToken; elector: LeaseElector; clock: ManualClock }> {
    const elector = new LeaseElector(new DynamoLeaseStore(doc, t.table), { name, holderId: 'a', clock, ...LEASE });
    expect((await elector.campaign()).leader).toBe(true);
    return { token: elector.token()!, elector, clock };
  }
  const probe = async (key: string) =>
    (await t.doc.send(new GetCommand({ TableName: t.table, Key: { pk: `PROBE#${key}`, sk: 'PROBE' }, ConsistentRead: true }))).Item;
  const put = (doc: DynamoDBDocumentClient, token: LeaseToken, key: string, value: string, onlyIfNew = false) =>
    fencedTransactWrite(doc, t.table, token, [
      {
        Put: {
          TableName: t.table,
          Item: { pk: `PROBE#${key}`, sk: 'PROBE', value },
          ...(onlyIfNew ? { ConditionExpression: 'attribute_not_exists(pk)' } : {}),
        },
      },
    ]);
  /** What the proxy refused for conflicts, and what the stores retried, while `run` ran. */
  async function conflictsDuring<T>(run: () => Promise<T>): Promise<{ result: T; conflicts: number; retries: number }> {
    const before = { conflicts: proxy.stats.conflicts, retries: conflictStats.retries };
    const result = await run();
    return { result, conflicts: proxy.stats.conflicts - before.conflicts, retries: conflictStats.retries - before.retries };
  }
  /** Another process's fenced write, held ongoing on the lease item until `refusals` requests have run into it. */
  async function ongoingElsewhere(token: LeaseToken, refusals = 1): Promise<{ settled: Promise<unknown> }> {
    const held = proxy.holdNextTransaction(refusals);
    const write = put(b, token, uniqueName('k'), 'elsewhere');
    await held;
    return { settled: Promise.allSettled([write]) };
  }

  it(`${WRITERS} processes, one fenced write each at once under one valid lease: every one applies`, async () => {
    const { token } = await leader(uniqueName('lease'));
    for (let round = 0; round < ROUNDS; round++) {
      const keys = Array.from({ length: WRITERS }, () => uniqueName('k'));
      void proxy.holdNextTransaction(WRITERS - 1); // the other seven meet it on the lease item
      const {
        result: outcomes,
        conflicts,
        retries,
      } = await conflictsDuring(() => Promise.allSettled(keys.map((k, i) => put(processes[i]!, token, k, `v-${round}`))));
      expect(conflicts).toBeGreaterThanOrEqual(WRITERS - 1);
      expect(retries).toBeGreaterThanOrEqual(WRITERS - 1);
      expect(
        outcomes.flatMap((o, i) => (o.status === 'rejected' ? [`writer ${i}: ${String(o.reason)}`] : [])),
        `round ${round}`,
      ).toEqual([]);
      for (const k of keys) expect((await probe(k))?.value).toBe(`v-${round}`);
    }
  });

  it(`one process, ${WRITERS} fenced writes and a lease renewal at once: they take turns on the lease item, none cancels another`, async () => {
    const { token, elector } = await leader(uniqueName('lease'));
    proxy.resetPeak();
    const keys = Array.from({ length: WRITERS }, () => uniqueName('k'));
    const { result, conflicts } = await conflictsDuring(() => Promise.allSettled([...keys.map((k) => put(a, token, k, 'v')), elector.campaign()]));
    expect(result.filter((o) => o.status === 'rejected')).toEqual([]);
    expect(conflicts).toBe(0);
    expect(proxy.stats.peak).toBe(1); // never two writes on the lease item at once
    expect(elector.stats).toMatchObject({ renewals: 1, renewFailures: 0 });
    for (const k of keys) expect((await probe(k))?.value).toBe('v');
  });

  it('among conflicting writes, a failed condition is still a typed error carrying the current row, and only those writes fail', async () => {
    const { token } = await leader(uniqueName('lease'));
    for (let round = 0; round < ROUNDS; round++) {
      const taken = uniqueName('taken');
      await put(a, token, taken, 'first');
      const keys = Array.from({ length: WRITERS }, () => uniqueName('k'));
      void proxy.holdNextTransaction(WRITERS - 1);
      // Even writers create fresh keys; odd writers try to create `taken`, which exists.
      const outcomes = await Promise.allSettled(keys.map((k, i) => put(processes[i]!, token, i % 2 === 0 ? k : taken, `v-${i}`, true)));
      outcomes.forEach((o, i) => {
        if (i % 2 === 0) return expect(o, `round ${round}, writer ${i}`).toMatchObject({ status: 'fulfilled' });
        expect(o.status, `round ${round}, writer ${i}`).toBe('rejected');
        const err = (o as PromiseRejectedResult).reason as WriteConditionFailedError;
        expect(err).toBeInstanceOf(WriteConditionFailedError);
        expect(err.reasons).toEqual([{ index: 0, code: 'ConditionalCheckFailed', item: { pk: `PROBE#${taken}`, sk: 'PROBE', value: 'first' } }]);
      });
      expect((await probe(taken))?.value).toBe('first');
    }
  });

  it('a deposed holder’s conflicting writes are all fenced, none applied', async () => {
    const name = uniqueName('lease');
    const { token, clock } = await leader(name);
    const leases = new DynamoLeaseStore(a, t.table);
    const row = (await leases.read(name))!;
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    expect((await leases.compareAndSwap(row, stealLease(row, 'b', clock.now(), LEASE.ttlMs))).ok).toBe(true);
    const keys = Array.from({ length: WRITERS }, () => uniqueName('k'));
    void proxy.holdNextTransaction(WRITERS - 1);
    const outcomes = await Promise.allSettled(keys.map((k, i) => put(processes[i]!, token, k, 'late')));
    for (const o of outcomes) {
      expect(o.status).toBe('rejected');
      const err = (o as PromiseRejectedResult).reason as FencedError;
      expect(err).toBeInstanceOf(FencedError);
      expect(err.current).toEqual({ holder: 'b', epoch: token.epoch + 1 });
    }
    for (const k of keys) expect(await probe(k)).toBeUndefined();
  });

  it(`a BatchPromoter tick (concurrency ${WRITERS}) that meets another process’s transactions promotes every due rollout in that tick: none reads a conflict as "stale"`, async () => {
    const clock = new ManualClock();
    const store = new DynamoRolloutStore(a, t.table);
    const engine = new RolloutEngine({ store, bus: new InProcessBus(), clock });
    const { token } = await leader(uniqueName('promotion'), a, clock);
    const batch = new BatchPromoter(engine, () => Promise.resolve(token), { concurrency: WRITERS });
    const spec = {
      target: { service: 'svc', version: 'v2' },
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10 } },
        { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
      ],
    };
    const ids: string[] = [];
    for (let i = 0; i < WRITERS * 2; i++) ids.push((await createRollout(engine, { spec, actor: 'alice' })).id);
    // Other tests' rollouts share the table: judge only ours.
    const mine = (actions: Awaited<ReturnType<BatchPromoter['tick']>>['actions']) => actions.filter((x) => ids.includes(x.rolloutId));

    let elsewhere = await ongoingElsewhere(token);
    const activated = await conflictsDuring(async () => mine((await batch.tick()).actions));
    await elsewhere.settled;
    expect(activated.conflicts).toBeGreaterThanOrEqual(1);
    expect(activated.result.filter((x) => !x.applied)).toEqual([]);
    expect(activated.result.filter((x) => x.transition === 'activate')).toHaveLength(ids.length);

    for (const id of ids) await store.recordMetrics(id, { stage: 0 }, { requests: 50, errors: 0, p99LatencyMs: null, observedAt: clock.now() });
    elsewhere = await ongoingElsewhere(token);
    const promoted = await conflictsDuring(async () => mine((await batch.tick()).actions));
    await elsewhere.settled;
    expect(promoted.conflicts).toBeGreaterThanOrEqual(1);
    expect(promoted.result.filter((x) => !x.applied)).toEqual([]);
    expect(promoted.result.filter((x) => x.transition === 'promote')).toHaveLength(ids.length);
    for (const id of ids) expect((await store.load(id))!.stages.map((s) => s.phase)).toEqual(['promoted', 'active']);
  });

  it('fenced steals that meet another process’s transaction on the coordinator lease: every one lands', async () => {
    const ledger = new DynamoLedgerStore(a, t.table);
    const runId = uniqueName('run');
    const { token } = await leader(uniqueName('coordinator'));
    await ledger.createRun(runId, {}, 1);
    const { ids } = await ledger.enqueue(
      runId,
      Array.from({ length: WRITERS }, (_, i) => ({ i })),
      1,
    );
    expect(
      (
        await ledger.casMany(
          ids.map((id) => claim(runId, id, 'victim', token.epoch, 2)),
          2,
        )
      ).every((o) => o.ok),
    ).toBe(true);
    const elsewhere = await ongoingElsewhere(token);
    const { result: outcomes, conflicts } = await conflictsDuring(() =>
      ledger.casMany(
        ids.map((id) => steal(token, runId, id, 'victim', 'thief', 3)),
        3,
      ),
    );
    await elsewhere.settled;
    expect(conflicts).toBeGreaterThanOrEqual(1);
    expect(outcomes.map((o) => o.ok)).toEqual(ids.map(() => true));
    for (const id of ids) expect((await ledger.get(runId, id))!.worker).toBe('thief');
  });

  it('a lease renewal that meets another process’s transaction on the lease item is retried, not counted as a failed renewal', async () => {
    const { token, elector } = await leader(uniqueName('lease'));
    const elsewhere = await ongoingElsewhere(token);
    const { result: renewed, conflicts } = await conflictsDuring(() => elector.campaign());
    await elsewhere.settled;
    expect(conflicts).toBeGreaterThanOrEqual(1);
    expect(renewed.leader).toBe(true);
    expect(elector.stats).toMatchObject({ renewals: 1, renewFailures: 0 });
  });

  it('a coordinator lease takeover that meets another process’s transaction on the lease item is retried, not reported as lost', async () => {
    const ledger = new DynamoLedgerStore(a, t.table);
    const runId = uniqueName('run');
    await ledger.createRun(runId, {}, 1);
    const runLeases = new DynamoRunLeaseStore(a, t.table, runId);
    const name = `coordinator:${runId}`;
    const first = acquire(name, 'a', 1_000, LEASE.ttlMs);
    expect((await runLeases.compareAndSwap(null, first)).ok).toBe(true);
    const elsewhere = await ongoingElsewhere({ name, holder: 'a', epoch: first.epoch }); // applied or fenced, whichever reaches the lease item first
    const next = stealLease(first, 'b', 1_000 + LEASE.ttlMs + LEASE.clockSkewMs, LEASE.ttlMs);
    const { result: outcome, conflicts } = await conflictsDuring(() => runLeases.compareAndSwap(first, next));
    await elsewhere.settled;
    expect(conflicts).toBeGreaterThanOrEqual(1);
    expect(outcome).toEqual({ ok: true, record: next });
    expect((await ledger.getRun(runId))!.coordinatorEpoch).toBe(next.epoch);
  });

  it('two nodes creating the same rollout at once: one creates, the other finds it (a conflict is not an error)', async () => {
    const spec = parseRolloutSpec({ target: { service: 'svc', version: 'v2' }, preset: 'canary', bakeSeconds: 0 });
    const id = uniqueName('ro');
    void proxy.holdNextTransaction(1);
    const outcomes = await Promise.allSettled([a, b].map((doc) => new DynamoRolloutStore(doc, t.table).create(id, spec, 1, 'alice')));
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value.created : (o.reason as TransactionCanceledException).message)).sort()).toEqual([
      false,
      true,
    ]);
  });
});
