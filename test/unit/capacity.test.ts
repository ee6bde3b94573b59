import { describe, expect, it } from 'vitest';
import { ITEM_WRITES, perItem, shardsFor, type ItemWrite } from '../../shared/ledger/capacity.js';
import { AWS_LIMITS, planCapacity, PLAN_DEFAULTS, type PlanInput } from '../../infra/capacity/plan.js';
import { benchModelInput, simulate, type ModelInput } from '../../infra/capacity/model.js';
import { PRICES } from '../../infra/cost.js';

const plan = (o: Partial<PlanInput> & Pick<PlanInput, 'items' | 'rate'>) => planCapacity({ ...PLAN_DEFAULTS, ...o });

describe('the ledger writes of an item', () => {
  it.each([
    [1, 0],
    [1, 1],
    [3, 2.5],
  ])('add up to perItem (%d KB, %d heartbeats)', (itemKb, heartbeats) => {
    const w = Math.ceil(itemKb);
    const sum = (key: 'item' | 'pending' | 'running') =>
      (Object.entries(ITEM_WRITES) as [ItemWrite, (typeof ITEM_WRITES)[ItemWrite]][]).reduce((s, [write, c]) => s + c[key] * w * (write === 'heartbeat' ? heartbeats : 1), 0);
    const p = perItem({ itemKb, heartbeats });
    expect(p.itemWcu).toBeCloseTo(sum('item'), 9);
    expect(p.pendingWcu).toBeCloseTo(sum('pending'), 9);
    expect(p.runningWcu).toBeCloseTo(sum('running'), 9);
  });
});

describe('the capacity plan (hand-checked at 1 KB, 1 s items, batch 10, 5 ms DynamoDB / 10 ms SQS)', () => {
  // One item a chunk (1 s ≥ the 100 ms chunk budget). A batch: receive 10 + run record 5 + claims 5 (one round of
  // 10 at 16 in flight) + extensions 10 + 10 × (start 5 + ack 5 + delete 10) + 10 × 1,000 ms = 10,230 ms.
  const p = plan({ items: 1_000_000, rate: 100 });

  it('times a worker: 1.023 s an item, held 5.5 × 1.023 + 0.01 = 5.6365 s, 1.1273 heartbeats at 5 s', () => {
    expect(p.timing.chunk).toBe(1);
    expect(p.timing.workerSecondsPerItem).toBeCloseTo(1.023, 9);
    expect(p.timing.heldSeconds).toBeCloseTo(5.6365, 9);
    expect(p.timing.heartbeatsPerItem).toBeCloseTo(1.1273, 9);
  });

  it('counts the units an item costs: 5 writes + 1.1273 heartbeats on its partition, 4 PENDING, 4 + 2 × 1.1273 RUNNING', () => {
    expect(p.perItem.itemWcu).toBeCloseTo(6.1273 + 1 / 10_000, 9); // + the run record, once per 10,000-item API request
    expect(p.perItem.pendingWcu).toBe(4);
    expect(p.perItem.runningWcu).toBeCloseTo(6.2546, 9);
    expect(p.perItem.rcu).toBeGreaterThanOrEqual(0.1); // the run record, one consistent read per batch of 10
  });

  it('sizes the shards so the hottest key (RUNNING, 6.2546 WCU an item) stays under half a partition', () => {
    expect(p.shards.needed).toBe(2); // ceil(100 × 6.2546 / 500)
    expect(plan({ items: 1e7, rate: 10_000 }).shards.needed).toBe(126); // ceil(10,000 × 6.2546 / 500)
    expect(p.shards.apiDefault).toBe(shardsFor(100));
    for (const c of plan({ items: 1e7, rate: 10_000 }).shards.perKey) expect(c.ok).toBe(true);
  });

  it('counts SQS requests: 0.1 send + 0.1 receive + 1 extension + 1.1273 heartbeat extensions + 1 delete = 3.3273 an item', () => {
    expect(p.perItem.sqsRequests).toBeCloseTo(3.3273, 9);
    expect(plan({ items: 1e6, rate: 1_000 }).sqs.requestsPerSecond).toBeCloseTo(3_327.3, 6);
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

  it('prices an item at its units: 16.3819 WRU × US$ 0.625 per million, and the rest', () => {
    const writes = p.cost.lines.find((l) => l.what === 'DynamoDB writes')!;
    expect(writes.perMillionUsd).toBeCloseTo((6.1273 + 1e-4 + 4 + 6.2546) * 1e6 * PRICES.dynamoWrite.usd, 6);
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

  it('charges each request what ITEM_WRITES says: 4 item and 6 index units an item without heartbeats', () => {
    const r = simulate(input({ limits: { partitionWcu: 1e9, partitionRcu: 1e9, windowMs: 1_000 }, worker: { ...input().worker, heartbeatMs: 1e9 } }));
    expect(r.throttledRequests).toBe(0);
    expect(r.units.wcu).toBe(200 * 4 + 1); // enqueue, claim, start, ack; + the run record once
    expect(r.units.indexWcu).toBe(200 * 6); // PENDING put + delete, RUNNING put, delete + put, delete
  });

  it('reproduces one key’s ceiling: 40 WCU/s over 4 RUNNING units an item is at most 10 items/s', () => {
    // One shard, no heartbeats, no machine limit: the RUNNING key (claim 1 + start 2 + ack 1) binds before the
    // item partition (3 an item: 13.3/s) and PENDING (1: 40/s). The ceiling is 10 items/s; the model may overdraw
    // a window by the last request it admitted (≤ 2 of 40 units: +5 %) and loses part of some windows to backoff
    // (the SDK waits up to 1 s, then 2 s, after a refusal): it must land within [-35 %, +5 %] of it.
    const r = simulate(input({ items: 300, shards: 1, machineRequestsPerSecond: Number.POSITIVE_INFINITY, worker: { ...input().worker, heartbeatMs: 1e9 } }));
    const working = 300 / (r.seconds - r.workStartedSeconds);
    expect(working).toBeLessThanOrEqual(10 * 1.05);
    expect(working).toBeGreaterThanOrEqual(10 * 0.65);
    expect(r.hottest.family).toBe('gsi1:RUNNING#*#*');
    expect(r.peakPerKey.running.wcu).toBeLessThanOrEqual(40 + 2);
  });
});
