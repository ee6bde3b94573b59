import { describe, expect, it } from 'vitest';
import { INDEX_ENTRY_KB, ITEM_WRITES, perItem, shardsFor, type ItemWrite } from '../../shared/ledger/capacity.js';
import { AWS_LIMITS, heldWrites, planCapacity, PLAN_DEFAULTS, type PlanInput } from '../../infra/capacity/plan.js';
import { benchModelInput, simulate, type ModelInput } from '../../infra/capacity/model.js';
import { PRICES } from '../../infra/cost.js';

const plan = (o: Partial<PlanInput> & Pick<PlanInput, 'items' | 'rate'>) => planCapacity({ ...PLAN_DEFAULTS, ...o });

describe('the ledger writes of an item', () => {
  it.each([
    [1, 0],
    [1, 1],
    [3, 2.5],
  ])('add up to perItem (%d KB, %d heartbeats): the item’s writes by its size, the index’s by its entry’s', (itemKb, heartbeats) => {
    const w = Math.ceil(itemKb);
    const e = Math.ceil(INDEX_ENTRY_KB);
    const sum = (key: 'item' | 'pending' | 'running', units: number) =>
      (Object.entries(ITEM_WRITES) as [ItemWrite, (typeof ITEM_WRITES)[ItemWrite]][]).reduce((s, [write, c]) => s + c[key] * units * (write === 'heartbeat' ? heartbeats : 1), 0);
    const p = perItem({ itemKb, heartbeats });
    expect(p.itemWcu).toBeCloseTo(sum('item', w), 9);
    expect(p.pendingWcu).toBeCloseTo(sum('pending', e), 9);
    expect(p.runningWcu).toBeCloseTo(sum('running', e), 9);
  });

  it('leave the index alone on a start and a heartbeat: an entry is written when the item is claimed and when it leaves', () => {
    expect(ITEM_WRITES.start).toEqual({ item: 1, pending: 0, running: 0 });
    expect(ITEM_WRITES.heartbeat).toEqual({ item: 1, pending: 0, running: 0 });
    expect(INDEX_ENTRY_KB).toBeLessThanOrEqual(1);
  });
});

describe('the writes of a held batch (worker.ts heartbeatDue, extensionDue)', () => {
  const times = { batch: 10, chunk: 1, itemSeconds: 1, dynamodbSeconds: 0.005, sqsSeconds: 0.01, concurrency: 16, heartbeatSeconds: 5, visibilitySeconds: 30 };

  it('writes an item only once an interval less a round has passed since its claim, start or last heartbeat', () => {
    // Rounds every 1.25 s; an item is due 3.75 s after its last write. Item k starts 15 + 1,020 k ms after the claims and
    // is held 1,010 ms more: items 0–3 start before any is due; item 4 (starts at 4.095 s) is due if a round falls in
    // [3.75, 4.095): 0.276; items 5–7 get one; item 8 a second if it falls before 8.175 s: 1.54; item 9 two.
    expect(heldWrites(times).heartbeats).toBeCloseTo((0.276 + 1 + 1 + 1 + 1.54 + 2) / 10, 3);
    // Items that outlast their interval take one write per 3.75–5 s, never fewer than one per interval.
    const long = heldWrites({ ...times, batch: 1, itemSeconds: 60 });
    expect(long.heartbeats).toBeGreaterThanOrEqual(60 / 5 - 1);
    expect(long.heartbeats).toBeLessThanOrEqual(60 / 3.75);
  });

  it('extends a message only when fewer than two intervals of its visibility remain, ten to a request', () => {
    expect(heldWrites(times).extensions).toBe(0); // held ≤ 10.2 s of a 30 s visibility
    // A 60 s item: extended about every 20–21 s (30 s less two intervals, to a round), alone in its request.
    const long = heldWrites({ ...times, batch: 1, itemSeconds: 60 });
    expect(long.extensions).toBeGreaterThanOrEqual(2);
    expect(long.extensions).toBeLessThanOrEqual(3);
    expect(long.extensionCalls).toBe(long.extensions);
    // Ten 60 s items claimed together are extended together, one request a round for those still held (the last is
    // held 600 s: about 29 rounds extend, 2.9 requests an item, against 15 extensions an item).
    const ten = heldWrites({ ...times, itemSeconds: 60 });
    expect(ten.extensionCalls).toBeGreaterThanOrEqual(ten.extensions / 10);
    expect(ten.extensionCalls).toBeLessThan(ten.extensions / 4);
    expect(ten.extensionCalls).toBeCloseTo(2.9, 0);
  });
});

describe('the capacity plan (hand-checked at 1 KB, 1 s items, batch 10, 5 ms DynamoDB / 10 ms SQS)', () => {
  // One item a chunk (1 s ≥ the 100 ms chunk budget). A batch: receive 10 + run record 5 + claims 5 (one round of
  // 10 at 16 in flight) + extensions 10 + 10 × (start 5 + ack 5 + delete 10) + 10 × 1,000 ms = 10,230 ms.
  const p = plan({ items: 1_000_000, rate: 100 });

  const h = heldWrites({ batch: 10, chunk: 1, itemSeconds: 1, dynamodbSeconds: 0.005, sqsSeconds: 0.01, concurrency: 16, heartbeatSeconds: 5, visibilitySeconds: 30 }).heartbeats;

  it('times a worker: 1.023 s an item, held 5.5 × 1.023 + 0.01 = 5.6365 s, about 0.68 heartbeat writes at 5 s', () => {
    expect(p.timing.chunk).toBe(1);
    expect(p.timing.workerSecondsPerItem).toBeCloseTo(1.023, 9);
    expect(p.timing.heldSeconds).toBeCloseTo(5.6365, 9);
    expect(p.timing.heartbeatsPerItem).toBe(h);
    expect(h).toBeCloseTo(0.6816, 3);
  });

  it('counts the units an item costs: 5 writes + the heartbeats on its partition, 4 PENDING, 2 RUNNING', () => {
    expect(p.perItem.itemWcu).toBeCloseTo(5 + h + 1 / 10_000, 9); // + the run record, once per 10,000-item API request
    expect(p.perItem.pendingWcu).toBe(4);
    expect(p.perItem.runningWcu).toBe(2);
    expect(p.perItem.itemWcu + p.perItem.pendingWcu + p.perItem.runningWcu).toBeLessThanOrEqual(12);
    expect(p.perItem.rcu).toBeGreaterThanOrEqual(0.1); // the run record, one consistent read per batch of 10
  });

  it('sizes the shards so the hottest key (the item partition, 5.68 WCU an item) stays under half a partition', () => {
    expect(p.shards.needed).toBe(2); // ceil(100 × 5.68 / 500)
    expect(plan({ items: 1e7, rate: 10_000 }).shards.needed).toBe(Math.ceil((10_000 * (5 + h)) / 500));
    expect(p.shards.apiDefault).toBe(shardsFor(100));
    for (const c of plan({ items: 1e7, rate: 10_000 }).shards.perKey) expect(c.ok).toBe(true);
  });

  it('counts SQS requests: 0.1 send + 0.1 receive + 0.1 extension (one batch) + no heartbeat extension + 1 delete = 1.3 an item', () => {
    expect(p.perItem.sqsRequests).toBeCloseTo(1.3, 9);
    expect(p.perItem.sqsRequests).toBeLessThanOrEqual(2);
    expect(plan({ items: 1e6, rate: 1_000 }).sqs.requestsPerSecond).toBeCloseTo(1_300, 6);
  });

  it('warns when the in-flight messages (rate × held) pass 120,000', () => {
    const ok = plan({ items: 1e7, rate: 10_000 });
    expect(ok.sqs.inFlight).toBeCloseTo(10_000 * 5.6465, 6); // held + the delete's round trip
    expect(ok.sqs.check.ok).toBe(true);
    expect(ok.warnings.some((w) => w.includes('SQS in flight'))).toBe(false);
    const over = plan({ items: 1e7, rate: 30_000 });
    expect(over.sqs.inFlight).toBeGreaterThan(AWS_LIMITS.sqsInFlight.value);
    expect(over.warnings.some((w) => w.startsWith('SQS in flight'))).toBe(true);
  });

  it('prices an item at its units: 11.68 WRU × US$ 0.625 per million, and the rest', () => {
    const writes = p.cost.lines.find((l) => l.what === 'DynamoDB writes')!;
    expect(writes.perMillionUsd).toBeCloseTo((5 + h + 1e-4 + 4 + 2) * 1e6 * PRICES.dynamoWrite.usd, 6);
    expect(p.cost.perMillionUsd).toBeCloseTo(p.cost.lines.reduce((s, l) => s + l.perMillionUsd, 0), 9);
    expect(p.cost.runUsd).toBeCloseTo(p.cost.perItemUsd * 1_000_000, 6);
  });

  it('checks the table against the on-demand quota: 10,000 items/s is over 40,000 WRU/s', () => {
    const big = plan({ items: 1e7, rate: 10_000 });
    expect(big.table[0]!.ok).toBe(false);
    expect(big.beforeRun.some((s) => s.includes('Pre-warm'))).toBe(true);
    expect(plan({ items: 1e5, rate: 100 }).table.slice(0, 3).every((c) => c.ok)).toBe(true);
  });
});

describe('the model', () => {
  const input = (o: Partial<ModelInput> = {}): ModelInput => ({
    ...benchModelInput({ items: 200, workers: 4, shards: 4, limited: true, wcu: 40, rcu: 120, windowMs: 1_000, machineRequestsPerSecond: 1_500, seed: 7 }),
    ...o,
  });

  it('is deterministic: the same seed gives the same result, to the request', () => {
    expect(simulate(input())).toEqual(simulate(input()));
    expect(simulate(input({ seed: 8 })).requests).not.toEqual(simulate(input()).requests);
  });

  it('charges each request what ITEM_WRITES says: 4 item and 4 index units an item without heartbeats', () => {
    const r = simulate(input({ limits: { partitionWcu: 1e9, partitionRcu: 1e9, windowMs: 1_000 }, worker: { ...input().worker, heartbeatMs: 1e9 } }));
    expect(r.throttledRequests).toBe(0);
    expect(r.units.wcu).toBe(200 * 4 + 1); // enqueue, claim, start, ack; + the run record once
    expect(r.units.indexWcu).toBe(200 * 4); // PENDING put + delete, RUNNING put, delete
  });

  it('reproduces one key’s ceiling: 40 WCU/s over 3 item-partition units an item is at most 13.3 items/s', () => {
    // One shard, no heartbeats, no machine limit: once the items are enqueued, the item partition (claim, start, ack:
    // 3 an item) binds before RUNNING (claim 1 + ack 1: 20/s) and PENDING (1: 40/s). The ceiling is 13.3 items/s; the
    // model may overdraw a window by the last request it admitted (≤ 2 of 40 units: +5 %) and loses part of some windows
    // to backoff (the SDK waits up to 1 s, then 2 s, after a refusal): it must land within [-35 %, +5 %] of it.
    const r = simulate(input({ items: 300, shards: 1, machineRequestsPerSecond: Number.POSITIVE_INFINITY, worker: { ...input().worker, heartbeatMs: 1e9 } }));
    const working = 300 / (r.seconds - r.workStartedSeconds);
    expect(working).toBeLessThanOrEqual((40 / 3) * 1.05);
    expect(working).toBeGreaterThanOrEqual((40 / 3) * 0.65);
    expect(r.hottest.family).toBe('RUN#*#*');
    expect(r.peakPerKey.item.wcu).toBeLessThanOrEqual(40 + 2);
  });
});
