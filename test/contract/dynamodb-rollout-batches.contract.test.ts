/**
 * DynamoDB reads and writes many rollouts' items together: a tick's views in
 * a few BatchGetItems instead of a query each, and the marks of published
 * events in transactions of up to 100 instead of an UpdateItem each. These
 * check that what is read and written is what the one-at-a-time way reads
 * and writes, on DynamoDB Local, requests counted by a middleware on the
 * store's client.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { DeleteCommand, GetCommand, TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter } from '../../shared/rollout/promoters.js';
import type { RolloutView } from '../../shared/rollout/model.js';
import type { GateReading } from '../../shared/rollout/gates.js';
import { DynamoRolloutStore } from '../../shared/adapters/dynamodb/rollout-store.js';
import { DynamoLeaseStore } from '../../shared/adapters/dynamodb/lease-store.js';
import { dynamoTable } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const target = { service: 'checkout', version: 'v2' };
const PROM = { type: 'prometheus', name: 'error-rate', address: 'http://prometheus.invalid:9090', query: 'q', comparison: '<', threshold: 0.05 };
const PLAIN = {
  target,
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10, maxErrorRate: 0.5, alarms: ['checkout-5xx'] } },
    { name: 'half', percent: 50, bakeSeconds: 0, gates: { minRequests: 10, maxErrorRate: 0.5 } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};
/** Stage gates, rollout-wide gates from the second stage, and a before-rollout hook: every kind of tally a view holds. */
const GATED = {
  target,
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [PROM] } },
    { name: 'half', percent: 50, bakeSeconds: 3_600, gates: { providers: [{ ...PROM, name: 'latency' }] } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
  rolloutGates: { fromStage: 'half', providers: [{ ...PROM, name: 'wide' }] },
  hooks: [{ type: 'webhook', name: 'ready', hook: 'pre-rollout', url: 'https://hooks.example.com/ready' }],
};

let t: Awaited<ReturnType<typeof dynamoTable>>;
let clock: ManualClock;
beforeEach(async () => {
  t = await dynamoTable();
  clock = new ManualClock();
});
afterEach(() => t.close());

/** Requests a client sends, by command, while counting. */
function counted(doc: DynamoDBDocumentClient) {
  let counts: Record<string, number> = {};
  doc.middlewareStack.add(
    (next, context) => (args) => {
      counts[context.commandName ?? '?'] = (counts[context.commandName ?? '?'] ?? 0) + 1;
      return next(args);
    },
    { step: 'initialize', name: 'countedRequests' },
  );
  return {
    take() {
      const out = counts;
      counts = {};
      return out;
    },
  };
}

function node(store: DynamoRolloutStore, o: { deferPublish?: boolean } = {}) {
  const elector = new LeaseElector(new DynamoLeaseStore(t.doc, t.table), { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
  const engine = new RolloutEngine({ store, bus: new InProcessBus(), clock, ...o });
  return { elector, engine, batch: new BatchPromoter(engine, campaignEachTime(elector)) };
}

const byId = (views: RolloutView[]) => [...views].sort((a, b) => a.rollout.id.localeCompare(b.rollout.id));

const reading = (gate: string, stage: number, attempt: number, at: number): GateReading => ({
  gate,
  type: gate === 'ready' ? 'webhook' : 'prometheus',
  attempt,
  stage,
  outcome: 'pass',
  value: 0.01,
  query: 'q',
  answer: '{}',
  reason: null,
  source: 'poll',
  at,
});

it('DynamoDB: views read in batches are the views one query each reads: every attempt’s stages, metrics, tallies of stage, rollout-wide and hook gates, alarms', async () => {
  // A store that reads more than one view at once in batches, and one that queries up to 64 at once.
  const batched = new DynamoRolloutStore(t.doc, t.table, 1, clock);
  const queried = new DynamoRolloutStore(t.doc, t.table, 64, clock);
  const a = node(queried);
  const plain = await Promise.all([1, 2, 3].map(async () => (await createRollout(a.engine, { spec: PLAIN, actor: 'alice' })).id));
  const gated = await Promise.all([1, 2].map(async () => (await createRollout(a.engine, { spec: GATED, actor: 'alice' })).id));
  const ended = (await createRollout(a.engine, { spec: PLAIN, actor: 'alice' })).id;
  await a.batch.tick();
  await queried.recordAlarm('checkout-5xx', 'OK', clock.now());
  // One promoted a stage; one on its second attempt (its first attempt's items are not its view's); one ended.
  await queried.recordMetrics(plain[0]!, { stage: 0 }, { requests: 100, errors: 1, p99LatencyMs: 80, observedAt: clock.now() });
  await a.batch.tick();
  await a.elector.campaign();
  const token = a.elector.token()!;
  await runCommand(a.engine, token, { rolloutId: plain[1]!, command: 'abort', actor: 'alice' });
  await runCommand(a.engine, token, { rolloutId: plain[1]!, command: 'retry', actor: 'alice' });
  await queried.recordMetrics(plain[1]!, { stage: 0 }, { requests: 3, errors: 0, p99LatencyMs: null, observedAt: clock.now() });
  await runCommand(a.engine, token, { rolloutId: ended, command: 'abort', actor: 'alice' });
  // Tallies of a stage gate and the hook at stage 0, of a stage gate and a rollout-wide gate at stage 1, and one of an earlier attempt's.
  const at = clock.now();
  await queried.recordGateReadings(
    [
      [gated[0]!, 'error-rate', 0],
      [gated[0]!, 'ready', 0],
      [gated[0]!, 'latency', 1],
      [gated[0]!, 'wide', 1],
      [gated[1]!, 'wide', 1],
    ].map(([id, gate, stage]) => ({ rolloutId: String(id), origin: at, reading: reading(String(gate), Number(stage), 1, at) })),
  );

  const count = counted(t.doc);
  const inBatches = byId(await batched.loadRunning());
  const requests = count.take();
  const oneEach = byId(await queried.loadRunning());
  expect(inBatches.map((v) => v.rollout.id).sort()).toEqual([...plain, ...gated].sort());
  expect(inBatches).toEqual(oneEach);
  // What the views hold is there: the retried attempt's stages, the tallies, the alarm, the promoted stage.
  const view = (id: string) => inBatches.find((v) => v.rollout.id === id)!;
  expect(view(plain[1]!).rollout.attempt).toBe(2);
  expect(view(plain[1]!).metrics.get(0)?.requests).toBe(3);
  expect(view(plain[0]!).stages.map((s) => s.phase)).toEqual(['promoted', 'active', 'pending']);
  expect(view(plain[0]!).alarms).toEqual({ 'checkout-5xx': 'OK' });
  expect([...view(gated[0]!).gates].map(([stage, g]) => [stage, [...g.keys()].sort()]).sort()).toEqual([
    [0, ['error-rate', 'ready']],
    [1, ['latency', 'wide']],
  ]);
  // The registry's query, then batches: no query a rollout.
  expect(requests.QueryCommand).toBe(1);
  expect(requests.BatchGetItemCommand).toBeGreaterThanOrEqual(3);
});

it('DynamoDB: a rollout that moves while its views are read in batches is read whole at its new version, never its row of one version with stages of another', async () => {
  const store = new DynamoRolloutStore(t.doc, t.table, 1, clock);
  const a = node(store);
  const ids = await Promise.all([1, 2, 3].map(async () => (await createRollout(a.engine, { spec: PLAIN, actor: 'alice' })).id));
  await a.batch.tick();
  const moving = ids[0]!;
  const before = (await store.load(moving))!;
  // Right after the stage items are read (the batch that names a stage key), a transition commits: version and a stage together.
  let moved = false;
  t.doc.middlewareStack.add(
    (next) => async (args) => {
      const out = await next(args);
      const keys = (args.input as { RequestItems?: Record<string, { Keys?: { sk?: string }[] }> }).RequestItems?.[t.table]?.Keys ?? [];
      if (!moved && keys.some((k) => String(k.sk).startsWith('STAGE#'))) {
        moved = true;
        await t.doc.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                Update: {
                  TableName: t.table,
                  Key: { pk: `ROLLOUT#${moving}`, sk: 'ROLLOUT' },
                  UpdateExpression: 'SET version = version + :one',
                  ExpressionAttributeValues: { ':one': 1 },
                },
              },
              {
                Update: {
                  TableName: t.table,
                  Key: { pk: `ROLLOUT#${moving}`, sk: 'STAGE#000001#000' },
                  UpdateExpression: 'SET phase = :p',
                  ExpressionAttributeValues: { ':p': 'promoted' },
                },
              },
            ],
          }),
        );
      }
      return out;
    },
    { step: 'initialize', name: 'moveMidRead' },
  );
  const views = await store.loadRunning();
  expect(moved).toBe(true);
  const v = views.find((x) => x.rollout.id === moving)!;
  expect([v.rollout.version, v.stages[0]?.phase]).toEqual([before.rollout.version + 1, 'promoted']);
  expect(views).toHaveLength(3);
});

it('DynamoDB: published events are marked a transaction of up to 100 at a time; one whose item is gone is skipped, not written back; a lone event is one update', async () => {
  const store = new DynamoRolloutStore(t.doc, t.table, 16, clock);
  // Events left in the outbox: the engine does not publish them.
  const a = node(store, { deferPublish: true });
  for (let i = 0; i < 120; i += 40) await Promise.all(Array.from({ length: 40 }, () => createRollout(a.engine, { spec: PLAIN, actor: 'alice' })));
  await a.batch.tick();
  const events = await store.unpublishedEvents(1_000);
  expect(events.length).toBeGreaterThan(100);
  // One event's rollout deleted by retention meanwhile (its item with it).
  const gone = events[7]!;
  const goneKey = { pk: `ROLLOUT#${gone.detail.rolloutId}`, sk: `EVENT#${gone.id}` };
  await t.doc.send(new DeleteCommand({ TableName: t.table, Key: goneKey }));
  const lone = events.at(-1)!;
  const count = counted(t.doc);
  // Twice in one call (a flush and the publisher at once): marked once.
  await store.markPublished([...events.slice(0, -1), events[3]!]);
  const requests = count.take();
  const transactions = Math.ceil((events.length - 1) / 100);
  // Each transaction once, and the one that met the gone item once more without it.
  expect(requests).toEqual({ TransactWriteItemsCommand: transactions + 1 });
  expect((await store.unpublishedEvents(1_000)).map((e) => e.id)).toEqual([lone.id]);
  expect((await t.doc.send(new GetCommand({ TableName: t.table, Key: goneKey, ConsistentRead: true }))).Item).toBeUndefined();
  count.take();
  await store.markPublished([lone]);
  expect(count.take()).toEqual({ UpdateItemCommand: 1 });
  expect(await store.unpublishedEvents(1_000)).toEqual([]);
  // A lone event whose item is gone: nothing written, no error.
  await store.markPublished([gone]);
  expect((await t.doc.send(new GetCommand({ TableName: t.table, Key: goneKey, ConsistentRead: true }))).Item).toBeUndefined();
});
