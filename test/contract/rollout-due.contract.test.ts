/**
 * Promotion is O(due): a BatchPromoter tick reads the running rollouts whose
 * time has come or that a signal or a transition marked, not every running
 * one. On every backend; time is a ManualClock.
 */
import { beforeEach, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter } from '../../shared/rollout/promoters.js';
import { DynamoRolloutStore } from '../../shared/adapters/dynamodb/rollout-store.js';
import { DynamoLeaseStore } from '../../shared/adapters/dynamodb/lease-store.js';
import { rolloutKey } from '../../shared/adapters/dynamodb/rollout-items.js';
import { dynamoTable, forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import type { RolloutStore } from '../../shared/rollout/store.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const stages = (alarms: string[] = []) => [
  { name: 'canary', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100, alarms } },
  { name: 'all', percent: 100, bakeSeconds: 0 },
];
const SPEC = { target: { service: 'checkout', version: 'v2' }, progressDeadlineSeconds: 600, stages: stages() };

function node(store: RolloutStore, lease: ConstructorParameters<typeof LeaseElector>[0], clock: ManualClock, duePerTick?: number) {
  const elector = new LeaseElector(lease, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
  const engine = new RolloutEngine({ store, bus: new InProcessBus(), clock });
  const leadership = campaignEachTime(elector);
  return { elector, engine, batch: new BatchPromoter(engine, leadership, duePerTick === undefined ? {} : { duePerTick }) };
}

/** Ticks until one finds nothing due; how many each evaluated. */
async function settle(batch: BatchPromoter): Promise<number[]> {
  const counts: number[] = [];
  for (let i = 0; i < 10; i++) {
    const { evaluated } = await batch.tick();
    counts.push(evaluated);
    if (evaluated === 0) return counts;
  }
  throw new Error(`still due after 10 ticks: ${counts.join(', ')}`);
}

forEachBackend('due rollouts on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock();
  });
  const healthy = (observedAt = clock.now()) => ({ requests: 200, errors: 0, p99LatencyMs: 50, observedAt });

  it('a tick evaluates what is due: new rollouts, a transition’s rollout, then none until a bake ends', async () => {
    const a = node(backend.rollouts, backend.store, clock);
    const ids = await Promise.all([1, 2, 3].map(async () => (await createRollout(a.engine, { spec: SPEC, actor: 'alice' })).id));
    // Created: due. Activated: due again (the transition marked them), evaluated, then scheduled for the bake's end.
    expect(await settle(a.batch)).toEqual([3, 3, 0]);
    expect((await backend.rollouts.loadDue(clock.now(), 100)).length).toBe(0);
    clock.advance(59_999);
    expect((await a.batch.tick()).evaluated).toBe(0);
    clock.advance(1);
    // The bake ends: each is looked at; with no traffic none promotes, and each waits for a signal or its deadline.
    const atBakeEnd = await a.batch.tick();
    expect([atBakeEnd.evaluated, atBakeEnd.actions.length]).toEqual([3, 0]);
    expect((await a.batch.tick()).evaluated).toBe(0);
    // A reading stored for one rollout makes that one due, whoever stores it.
    await backend.rollouts.recordMetrics(ids[1]!, { stage: 0 }, healthy());
    const after = await a.batch.tick();
    expect(after.evaluated).toBe(1);
    expect(after.actions.map((x) => [x.rolloutId, x.transition, x.stage])).toEqual([
      [ids[1], 'promote', 0],
      [ids[1], 'promote', 1],
    ]);
    // The deadline: the other two are looked at once it has passed (the deadline transition flags them).
    await settle(a.batch);
    clock.advance(600_000 - 60_000);
    expect((await a.batch.tick()).evaluated).toBe(0);
    clock.advance(1);
    const late = await a.batch.tick();
    expect(late.actions.map((x) => x.transition).sort()).toEqual(['deadline', 'deadline']);
    expect(late.evaluated).toBe(2);
  });

  it('an alarm’s change makes due the rollouts that watch it, and no other', async () => {
    const a = node(backend.rollouts, backend.store, clock);
    const watching = (await createRollout(a.engine, { spec: { ...SPEC, stages: stages(['checkout-5xx']) }, actor: 'alice' })).id;
    await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await settle(a.batch);
    await backend.rollouts.recordAlarm('someone-elses-alarm', 'ALARM', clock.now());
    expect((await a.batch.tick()).evaluated).toBe(0);
    await backend.rollouts.recordAlarm('checkout-5xx', 'ALARM', clock.now());
    const tick = await a.batch.tick();
    expect(tick.evaluated).toBe(1);
    expect(tick.actions.map((x) => [x.rolloutId, x.transition])).toEqual([[watching, 'rollback']]);
  });

  it('a reschedule decided on a view older than a signal is refused: the rollout stays due', async () => {
    const a = node(backend.rollouts, backend.store, clock);
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await settle(a.batch);
    await backend.rollouts.recordMetrics(id, { stage: 0 }, { requests: 10, errors: 0, p99LatencyMs: null, observedAt: clock.now() });
    const [due] = await backend.rollouts.loadDue(clock.now(), 10);
    expect(due?.view.rollout.id).toBe(id);
    // A signal lands between the tick's reading and its reschedule.
    await backend.rollouts.recordMetrics(id, { stage: 0 }, { requests: 20, errors: 0, p99LatencyMs: null, observedAt: clock.now() + 1 });
    expect(await backend.rollouts.reschedule(id, due!.mark, clock.now() + 60_000)).toBe(false);
    expect((await backend.rollouts.loadDue(clock.now(), 10)).map((d) => d.view.rollout.id)).toEqual([id]);
    // Read again, with the mark it has now: the reschedule holds, until its time.
    const [again] = await backend.rollouts.loadDue(clock.now(), 10);
    expect(again!.view.metrics.get(0)?.requests).toBe(20);
    expect(await backend.rollouts.reschedule(id, again!.mark, clock.now() + 60_000)).toBe(true);
    expect(await backend.rollouts.loadDue(clock.now() + 59_999, 10)).toEqual([]);
    expect((await backend.rollouts.loadDue(clock.now() + 60_000, 10)).map((d) => d.view.rollout.id)).toEqual([id]);
    // A rollout that is not running is never due, and cannot be rescheduled.
    await a.elector.campaign();
    await a.engine.command(id, () => ({ kind: 'pause', reason: 'by hand' }), a.elector.token()!, 'alice');
    expect(await backend.rollouts.loadDue(clock.now() + 10_000_000, 10)).toEqual([]);
    expect(await backend.rollouts.reschedule(id, again!.mark, clock.now())).toBe(false);
  });

  it('more due than a tick takes: the rest are the next tick’s, the longest due first', async () => {
    const a = node(backend.rollouts, backend.store, clock, 2);
    for (let i = 0; i < 5; i++) await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    const first = await a.batch.tick();
    expect([first.evaluated, first.left]).toEqual([2, true]);
    // 3 never looked at, 2 marked by their activation: the next ticks take them all; none is left behind.
    const counts = await settle(a.batch);
    expect(counts.at(-1)).toBe(0);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(8);
    const running = await backend.rollouts.loadRunning();
    expect(running.every((v) => v.stages[0]?.phase === 'active')).toBe(true);
  });
});

it('DynamoDB: a running rollout registered before the due index and the watch entries existed is made due on the first tick, and found by its alarms from then on', async () => {
  const t = await dynamoTable();
  try {
    const clock = new ManualClock();
    const before = node(new DynamoRolloutStore(t.doc, t.table, 16, clock), new DynamoLeaseStore(t.doc, t.table), clock);
    const { id } = await createRollout(before.engine, { spec: { ...SPEC, stages: stages(['checkout-5xx']) }, actor: 'alice' });
    // The registry item and the row as an older release wrote them: no due time, no mark, not in the index, no watch entry.
    await t.doc.send(
      new UpdateCommand({
        TableName: t.table,
        Key: { pk: 'RUNNING', sk: id },
        UpdateExpression: 'REMOVE dueAt, #m, gsi1pk, gsi1sk, watchIndexed, dueOnRow',
        ExpressionAttributeNames: { '#m': 'mark' },
      }),
    );
    await t.doc.send(
      new UpdateCommand({
        TableName: t.table,
        Key: rolloutKey(id),
        UpdateExpression: 'REMOVE dueAt, #m, gsi1pk, gsi1sk',
        ExpressionAttributeNames: { '#m': 'mark' },
      }),
    );
    await t.doc.send(new DeleteCommand({ TableName: t.table, Key: { pk: 'WATCH#checkout-5xx', sk: id } }));
    const store = new DynamoRolloutStore(t.doc, t.table, 16, clock);
    const tick = await node(store, new DynamoLeaseStore(t.doc, t.table), clock).batch.tick();
    expect(tick.actions.map((x) => [x.rolloutId, x.transition])).toEqual([[id, 'activate']]);
    // Its watch entry written by that tick: another store, in another process, finds it by its alarm.
    expect((await new DynamoRolloutStore(t.doc, t.table, 16, clock).loadWatching('checkout-5xx')).map((v) => v.rollout.id)).toEqual([id]);
  } finally {
    await t.close();
  }
});

/**
 * The previous release kept the due index on the registry items (RUNNING / <id>) and wrote rows without a
 * due time; its functions keep doing so while an upgrade rolls out. This release reads both and moves a
 * registry entry onto the row when it reschedules it.
 */
it('DynamoDB: due entries the previous release writes on the registry items are read, and moved onto the row', async () => {
  const t = await dynamoTable();
  try {
    const clock = new ManualClock();
    const store = new DynamoRolloutStore(t.doc, t.table, 16, clock);
    const a = node(store, new DynamoLeaseStore(t.doc, t.table), clock);
    const running = (id: string) => t.doc.send(new GetCommand({ TableName: t.table, Key: { pk: 'RUNNING', sk: id }, ConsistentRead: true }));
    const row = (id: string) => t.doc.send(new GetCommand({ TableName: t.table, Key: rolloutKey(id), ConsistentRead: true }));
    // The previous release's writes: a transition's row (no due time) and its mark on the registry item.
    const previousRow = (id: string) =>
      t.doc.send(
        new UpdateCommand({
          TableName: t.table,
          Key: rolloutKey(id),
          UpdateExpression: 'REMOVE dueAt, #m, gsi1pk, gsi1sk',
          ExpressionAttributeNames: { '#m': 'mark' },
        }),
      );
    const previousMarkDue = (id: string) =>
      t.doc.send(
        new UpdateCommand({
          TableName: t.table,
          Key: { pk: 'RUNNING', sk: id },
          UpdateExpression: 'SET dueAt = :at, #m = :m, gsi1pk = :gp, gsi1sk = :gs REMOVE dueOnRow',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeNames: { '#m': 'mark' },
          ExpressionAttributeValues: { ':at': 0, ':m': randomUUID(), ':gp': 'DUE', ':gs': `${'0'.repeat(15)}#${id}` },
        }),
      );
    const [old, current] = (await Promise.all([1, 2].map(async () => (await createRollout(a.engine, { spec: SPEC, actor: 'alice' })).id))) as [string, string];
    // Created by the previous release: its row has no due time, its registry item is in the index.
    await previousRow(old);
    await previousMarkDue(old);
    expect((await store.loadDue(clock.now(), 10)).map((d) => d.view.rollout.id).sort()).toEqual([old, current].sort());
    // Both activated, looked at again, then scheduled for the bake's end: the old entry moved onto the row.
    expect(await settle(a.batch)).toEqual([2, 2, 0]);
    const moved = (await running(old)).Item!;
    expect([moved.gsi1pk, moved.dueAt, moved.dueOnRow]).toEqual([undefined, undefined, true]);
    expect((await row(old)).Item!.dueAt).toBe(clock.now() + 60_000);
    // A signal the previous release stores marks the registry item: read by the next tick, then moved again.
    await previousMarkDue(old);
    expect(await settle(a.batch)).toEqual([1, 0]);
    // A transition by the previous release: the row loses its due time, the registry item is marked.
    await previousRow(old);
    await previousMarkDue(old);
    expect(await settle(a.batch)).toEqual([1, 0]);
    // A reschedule read before the previous release marks the registry item again is refused: it stays due.
    await previousMarkDue(old);
    const [due] = await store.loadDue(clock.now(), 10);
    expect(due?.view.rollout.id).toBe(old);
    await previousMarkDue(old);
    expect(await store.reschedule(old, due!.mark, clock.now() + 60_000)).toBe(false);
    expect((await store.loadDue(clock.now(), 10)).map((d) => d.view.rollout.id)).toEqual([old]);
    expect(await settle(a.batch)).toEqual([1, 0]);
    // At the bake's end both are due on their rows alone.
    clock.advance(60_000);
    expect((await store.loadDue(clock.now(), 10)).map((d) => d.view.rollout.id).sort()).toEqual([old, current].sort());
  } finally {
    await t.close();
  }
});
