import { describe, expect, it } from 'vitest';
import { INDEX_ENTRY_KB, ITEM_WRITES, PARTITION_RCU, PARTITION_WCU, perItem, shardsFor, type ItemWrite } from '../../shared/ledger/capacity.js';
import { MAX_STEAL_BATCH } from '../../shared/ledger/coordinator.js';
import { STEAL_HINT_FRESH_MS, STEAL_HINT_VICTIMS } from '../../shared/ledger/steal-hint.js';
import { RUN_RECORD_TTL_MS } from '../../shared/ledger/worker/index.js';
import { heldWrites } from '../../tools/capacity/held-writes.js';
import { AWS_LIMITS, PLAN_ASSUMPTIONS } from '../../tools/capacity/limits.js';
import { planCapacity } from '../../tools/capacity/plan.js';
import { PLAN_DEFAULTS, type PlanInput } from '../../tools/capacity/plan-types.js';
import { busiestFirstTakes, COORDINATOR_LEASE_TTL_MS, hintReadRru, hintWriteWcu, stealHintBytes, STEAL_READ_ITEMS } from '../../tools/capacity/steal-hint.js';
import {
  benchModelInput,
  BENCH_COORDINATOR_LEASE,
  deploymentModelInput,
  simulate,
  simulatedTake,
  takeOrder,
  type ModelInput,
  type ModelTrace,
} from '../../tools/capacity/model.js';
import { PRICES } from '../../tools/cost/prices.js';
import { PRODUCER_PACE } from '../../shared/client/producer.js';

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
      (Object.entries(ITEM_WRITES) as [ItemWrite, (typeof ITEM_WRITES)[ItemWrite]][]).reduce(
        (s, [write, c]) => s + c[key] * units * (write === 'heartbeat' ? heartbeats : 1),
        0,
      );
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
  // One item a chunk (1 s ≥ the 100 ms chunk budget). A batch: receive 10 + claims 5 (one round of 10 at 16 in
  // flight) + extensions 10 + 10 × (start 5 + ack 5 + delete 10) + 10 × 1,000 ms = 10,225 ms, and the run record's
  // 5 ms in the batches that read it — at most one a minute: B / 60 s of them, so B = 10,225 / (1 − 5 / 60,000) ms.
  const p = plan({ items: 1_000_000, rate: 100 });
  const batchMs = 10_225 / (1 - 5 / 60_000);

  const h = heldWrites({
    batch: 10,
    chunk: 1,
    itemSeconds: 1,
    dynamodbSeconds: 0.005,
    sqsSeconds: 0.01,
    concurrency: 16,
    heartbeatSeconds: 5,
    visibilitySeconds: 30,
  }).heartbeats;

  it('times a worker: ≈ 1.0226 s an item, held 5.5 × that + 0.01 ≈ 5.634 s, about 0.68 heartbeat writes at 5 s', () => {
    expect(p.timing.chunk).toBe(1);
    expect(batchMs).toBeCloseTo(10_225.852, 3);
    expect(p.timing.workerSecondsPerItem).toBeCloseTo(batchMs / 10_000, 9);
    expect(p.timing.heldSeconds).toBeCloseTo((5.5 * batchMs) / 10_000 + 0.01, 9);
    expect(p.timing.heartbeatsPerItem).toBe(h);
    expect(h).toBeCloseTo(0.6816, 3);
  });

  it('counts the units an item costs: 5 writes + the heartbeats on its partition, 4 PENDING, 2 RUNNING', () => {
    expect(p.perItem.itemWcu).toBeCloseTo(5 + h + 1 / 10_000, 9); // + the run record, once per 10,000-item API request
    expect(p.perItem.pendingWcu).toBe(4);
    expect(p.perItem.runningWcu).toBe(2);
    expect(p.perItem.itemWcu + p.perItem.pendingWcu + p.perItem.runningWcu).toBeLessThanOrEqual(12);
    // The run record: 103 workers (100 × 1.0226 s), each reading it at most once a minute — not once per batch of 10.
    const scan = p.paths.find((r) => r.path === 'scan')!.rcu / (100 * 60);
    expect(p.workers.needed).toBe(103);
    expect(p.perItem.rcu).toBeCloseTo(103 / 60 / 100 + scan, 9);
    expect(p.paths.find((r) => r.path === 'claim')!.rcu).toBeLessThan(0.1 / 5);
  });

  it('reads the run record at most once a minute per worker, on one key: workers / 60 s (10,226 workers: 170 RCU/s, not 1,000)', () => {
    const big = plan({ items: 1e7, rate: 10_000 });
    const c = big.shards.perKey.find((k) => k.what === 'run record RUN#<run> (reads)')!;
    expect(RUN_RECORD_TTL_MS).toBe(60_000);
    expect(big.workers.deployed).toBe(10_226);
    expect(c.value).toBeCloseTo(10_226 / 60, 9);
    expect(c.limit).toBe(0.5 * PARTITION_RCU);
    expect(c.ok).toBe(true);
    const claim = big.paths.find((r) => r.path === 'claim')!;
    expect(claim.rcu).toBeCloseTo(10_226 / 60 / 10_000, 9);
    expect(claim.dynamodbRequests).toBeCloseTo(1 + 10_226 / 60 / 10_000, 9);
    expect(claim.keys).not.toContain('(consistent) per batch');
    expect(claim.keys).toContain('at most once per 60 s');
    // Steady reads: the run record and the scan's every minute.
    const scan = big.paths.find((r) => r.path === 'scan')!.rcu;
    expect(big.table[2]!.value).toBeCloseTo(10_226 / 60 + scan / 60, 6);
    // Twice the workers, twice the reads; a worker whose batch outlasts the minute reads once per batch.
    expect(plan({ items: 1e7, rate: 10_000, workers: 20_452 }).shards.perKey[3]!.value).toBeCloseTo(20_452 / 60, 9);
    const slow = plan({ items: 1e6, rate: 100, itemSeconds: 10 });
    expect(slow.timing.workerSecondsPerItem * 10).toBeGreaterThan(60);
    expect(slow.shards.perKey[3]!.value).toBeCloseTo(100 / 10, 9);
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
    expect(ok.sqs.inFlight).toBeCloseTo(10_000 * ((5.5 * batchMs) / 10_000 + 0.02), 6); // held + the delete's round trip
    expect(ok.sqs.check.ok).toBe(true);
    expect(ok.warnings.some((w) => w.includes('SQS in flight'))).toBe(false);
    const over = plan({ items: 1e7, rate: 30_000 });
    expect(over.sqs.inFlight).toBeGreaterThan(AWS_LIMITS.sqsInFlight.value);
    expect(over.warnings.some((w) => w.startsWith('SQS in flight'))).toBe(true);
  });

  it('prices an item at its units: 11.68 WRU × US$ 0.625 per million, and the rest', () => {
    const writes = p.cost.lines.find((l) => l.what === 'DynamoDB writes')!;
    expect(writes.perMillionUsd).toBeCloseTo((5 + h + 1e-4 + 4 + 2) * 1e6 * PRICES.dynamoWrite.usd, 6);
    expect(p.cost.perMillionUsd).toBeCloseTo(
      p.cost.lines.reduce((s, l) => s + l.perMillionUsd, 0),
      9,
    );
    expect(p.cost.runUsd).toBeCloseTo(p.cost.perItemUsd * 1_000_000, 6);
  });

  it('checks the table against the on-demand quota: 10,000 items/s is over 40,000 WRU/s', () => {
    const big = plan({ items: 1e7, rate: 10_000 });
    expect(big.table[0]!.ok).toBe(false);
    expect(big.beforeRun.some((s) => s.includes('Pre-warm'))).toBe(true);
    expect(
      plan({ items: 1e5, rate: 100 })
        .table.slice(0, 3)
        .every((c) => c.ok),
    ).toBe(true);
  });
});

describe('the idle fleet: steal hints, shard fences, no lease write per ask', () => {
  // 10,000 items/s: 10,226 workers asking 3 times in their first idle minute (511.3 asks/s), 114 shards.
  const p = plan({ items: 1e7, rate: 10_000 });
  const asks = p.lambda.tail.invocationsPerSecond;
  const shards = p.shards.needed;
  const fresh = STEAL_HINT_FRESH_MS / 1000;
  const perKeyRead = p.idle.runningSetRcu / shards;
  const checkOf = (what: string) => p.idle.checks.find((c) => c.what === what)!;

  it('sizes the hint item: ½ RRU and 1 WCU empty, 1½ RRU and 9 WCU with 4 victims of 32 ids (≈ 8.4 KB)', () => {
    expect(hintReadRru(stealHintBytes([]))).toBe(0.5);
    expect(hintWriteWcu(stealHintBytes([]))).toBe(1);
    const full = stealHintBytes(Array.from({ length: STEAL_HINT_VICTIMS }, () => MAX_STEAL_BATCH));
    expect(full / 1024).toBeGreaterThan(8);
    expect(full / 1024).toBeLessThan(8.6);
    expect(hintReadRru(full)).toBe(1.5);
    expect(hintWriteWcu(full)).toBe(9);
    // At this shape a victim's entry is the back half of a batch's line: 5 ids.
    expect(p.idle.hint.bytes).toBe(stealHintBytes([5, 5, 5, 5]));
  });

  it('reads each RUNNING key only for the hint’s rebuilds: its entries once per 2 s, whatever the fleet', () => {
    expect(asks).toBeCloseTo((10_226 * 3) / 60, 9);
    expect(p.idle.hint.rebuildsPerSecond).toBe(1 / fresh);
    expect(p.idle.perKeyRcuPerSecond).toBeCloseTo(perKeyRead / fresh, 9);
    expect(p.idle.perKeyRcuPerSecond).toBeCloseTo(18.75, 9);
    // Four times the fleet: the same reads per key.
    expect(plan({ items: 1e7, rate: 10_000, workers: 40_000 }).idle.perKeyRcuPerSecond).toBe(p.idle.perKeyRcuPerSecond);
    // A fleet asking less than once per fresh period rebuilds at each ask.
    const few = plan({ items: 1e7, rate: 10_000, workers: 6 });
    expect(few.lambda.tail.invocationsPerSecond).toBeLessThan(1 / fresh);
    expect(few.idle.perKeyRcuPerSecond).toBeCloseTo((few.lambda.tail.invocationsPerSecond * few.idle.runningSetRcu) / few.shards.needed, 9);
    const c = checkOf('idle fleet: reads per RUNNING key (RCU/s)');
    expect(c.value).toBe(p.idle.perKeyRcuPerSecond);
    expect(c.limit).toBe(0.3 * PARTITION_RCU);
    expect(c.ok).toBe(true);
  });

  it('reads the table: every ask the hint, a rebuild every 2 s (entries and ≤ 1,000 candidates’ items), each moved item once', () => {
    // The running set (≈ 56,000 items) is over the read budget: 1,000 candidates' items, 1 RCU each (1 KB, consistent).
    const rebuildRcu = p.idle.runningSetRcu + STEAL_READ_ITEMS;
    expect(p.idle.hint.rebuildRcu).toBe(rebuildRcu);
    expect(p.idle.tableRcuPerSecond).toBeCloseTo(asks * hintReadRru(p.idle.hint.bytes) + rebuildRcu / fresh + p.idle.hint.itemsStolenPerSecond, 6);
    const c = checkOf('idle fleet: table reads (RCU/s)');
    expect(c.limit).toBe(AWS_LIMITS.tableOnDemandRcu.value);
    expect(c.ok).toBe(true);
  });

  it('reads with every set empty: asks × ½ RRU, and a rebuild’s ½ RRU per RUNNING key every 2 s', () => {
    expect(p.idle.emptyTableRcuPerSecond).toBeCloseTo(asks * 0.5 + (shards * 0.5) / fresh, 9);
    expect(p.idle.emptyTableRcuPerSecond).toBeCloseTo(255.65 + 28.5, 6);
    const settled = p.workers.deployed / 225;
    expect(p.idle.emptySettledTableRcuPerSecond).toBeCloseTo(settled * 0.5 + (shards * 0.5) / fresh, 9);
    const c = checkOf('idle fleet, every set empty (RRU/s)');
    expect(c.value).toBe(p.idle.emptyTableRcuPerSecond);
    expect(c.limit).toBe(1_000);
    expect(c.ok).toBe(true);
  });

  it('takes busiest first: a herd of H thieves that read the same hint makes H + (H − 1) + … attempts, each paying the hint’s size', () => {
    // Four entries of 5 ids: 1,560 B (2 WCU) full, then 1,195 (2), 830 (1), 465 (1), 100 (1) as they go.
    expect([4, 3, 2, 1, 0].map((n) => hintWriteWcu(stealHintBytes(Array.from({ length: n }, () => 5))))).toEqual([2, 2, 1, 1, 1]);
    // Three thieves: round 1 all three try the busiest (one wins at 2 WCU, two lose after it went, at 2); round 2 the
    // two losers try the next (1 wins at 2, 1 loses at 1); round 3 the last one wins (1).
    expect(busiestFirstTakes(3, [5, 5, 5, 5])).toEqual({ attempts: 6, wcu: 2 + 2 * 2 + 2 + 1 + 1, won: 3, rounds: 3 });
    // More thieves than entries: every loser has tried all four.
    expect(busiestFirstTakes(10, [5, 5, 5, 5]).attempts).toBe(10 + 9 + 8 + 7);
    expect(busiestFirstTakes(10, [5, 5, 5, 5]).won).toBe(4);
    // Busiest first whatever the listed order: the 32-id entry goes in round 1 (9 WCU with the rest in, 1 without).
    expect(busiestFirstTakes(1, [1, 32]).wcu).toBe(hintWriteWcu(stealHintBytes([32, 1])));
    expect(busiestFirstTakes(2, [1, 32]).wcu).toBe(hintWriteWcu(stealHintBytes([32, 1])) + hintWriteWcu(stealHintBytes([1])) * 2);
  });

  it('names the steal path’s hottest item — the hint, from claims, busiest-first takes and puts — and keeps it under half a partition', () => {
    const herd = asks * (PLAN_ASSUMPTIONS.hintHerdMs / 1000);
    expect(herd).toBeCloseTo(25.565, 9);
    // The herd that read the fresh hint all try its busiest entry first: H + (H − 1) + (H − 2) + (H − 3) attempts, not 4 + H.
    const takes = 4 * herd - 6;
    // Winners at the hint's size with their entry in, losers after it went: (2 + 2(H−1)) + (2 + (H−2)) + (1 + (H−3)) + (1 + (H−4)).
    const takeWcu = 5 * herd - 5;
    expect(p.idle.hint.herd).toBeCloseTo(herd, 9);
    expect(p.idle.hint.claimsPerRebuild).toBeCloseTo(herd, 9);
    expect(p.idle.hint.takesPerRebuild).toBeCloseTo(takes, 9);
    expect(p.idle.hint.takeWcuPerRebuild).toBeCloseTo(takeWcu, 9);
    expect(p.idle.hint.takesWonPerRebuild).toBe(STEAL_HINT_VICTIMS);
    // Claims land on the hint the takes emptied (1 WCU); the put writes it full (2 WCU).
    expect(p.idle.hint.wcuPerSecond).toBeCloseTo((herd * 1 + 2 + takeWcu) / fresh, 9);
    expect(p.idle.hint.wcuPerSecond).toBeCloseTo(75.195, 3);
    // Each moved item's ConditionCheck (2) lands on its shard's fence.
    expect(p.idle.fenceWcuPerSecond).toBeCloseTo((p.idle.hint.itemsStolenPerSecond * 2) / shards, 9);
    expect(p.idle.hottestStealItem.key).toBe('STEAL#<run>/HINT');
    expect(p.idle.hottestStealItem.wcuPerSecond).toBe(Math.max(p.idle.hint.wcuPerSecond, p.idle.fenceWcuPerSecond, p.idle.leaseWcuPerSecond));
    const c = checkOf("steal path's hottest item (WCU/s)");
    expect(c.value).toBe(p.idle.hottestStealItem.wcuPerSecond);
    expect(c.limit).toBe(0.5 * PARTITION_WCU);
    expect(c.ok).toBe(true);
    // Every entry MAX_STEAL_BATCH ids (9, 7, 5, 3, 1 WCU as it empties): 9 + 7(H−1) + 7 + 5(H−2) + 5 + 3(H−3) + 3 + (H−4) = 16H − 6.
    expect([4, 3, 2, 1, 0].map((n) => hintWriteWcu(stealHintBytes(Array.from({ length: n }, () => MAX_STEAL_BATCH))))).toEqual([9, 7, 5, 3, 1]);
    expect(p.idle.hint.wcuPerSecondAtLargest).toBeCloseTo((herd + 9 + 16 * herd - 6) / fresh, 9);
    expect(p.idle.hint.wcuPerSecondAtLargest).toBeCloseTo(218.803, 3);
    expect(p.idle.hottestStealItemAtLargest).toEqual({ key: 'STEAL#<run>/HINT', wcuPerSecond: p.idle.hint.wcuPerSecondAtLargest });
    expect(p.warnings.some((w) => w.startsWith("steal path's hottest item were every hint entry"))).toBe(false);
  });

  it('says plainly when the hint at its largest would pass half a partition: 40,000 idle workers (a herd of 100)', () => {
    const big = plan({ items: 1e7, rate: 10_000, workers: 40_000 });
    const herd = big.idle.hint.herd;
    expect(herd).toBeCloseTo(100, 9);
    // At this shape still under: 6H − 3 a rebuild.
    expect(big.idle.hint.wcuPerSecond).toBeCloseTo((6 * herd - 3) / fresh, 9);
    expect(big.idle.checks.find((c) => c.what === "steal path's hottest item (WCU/s)")!.ok).toBe(true);
    // Every entry 32 ids: 17H + 3 a rebuild, over 500.
    expect(big.idle.hottestStealItemAtLargest.wcuPerSecond).toBeCloseTo((17 * herd + 3) / fresh, 9);
    expect(big.idle.hottestStealItemAtLargest.wcuPerSecond).toBeGreaterThan(500);
    expect(big.warnings.some((w) => w.startsWith("steal path's hottest item were every hint entry 32 ids") && w.includes('> 500'))).toBe(true);
  });

  it('lets a fleet asking less than once per 50 ms take one entry an ask, one attempt each', () => {
    const few = plan({ items: 1e7, rate: 10_000, workers: 6 });
    expect(few.idle.hint.herd).toBe(1);
    expect(few.idle.hint.takesPerRebuild).toBe(1);
    expect(few.idle.hint.takesWonPerRebuild).toBe(1);
  });

  it('writes the lease only to renew it (≤ 2 per sandbox per half TTL), and bounds fruitful steals at 4 per rebuild', () => {
    expect(p.idle.leaseWcuPerSecond).toBeCloseTo((2 * p.lambda.tail.concurrency) / (COORDINATOR_LEASE_TTL_MS / 2000), 9);
    expect(p.idle.leaseWcuPerSecond).toBeLessThan(asks / 100);
    expect(p.idle.hint.fruitfulStealsPerSecond).toBe(STEAL_HINT_VICTIMS / fresh);
    expect(p.idle.hint.itemsStolenPerSecond).toBe((STEAL_HINT_VICTIMS / fresh) * 5);
    expect(p.limits.some((l) => l.startsWith('steals:') && l.includes('2.0 a second'))).toBe(true);
    expect(p.limits.some((l) => l.includes('FENCE#<run>#<s>') && l.includes('in parallel'))).toBe(true);
  });

  it('warns of nothing on the idle fleet at 10,000 items/s, so gives no advice on starting the workers', () => {
    expect(p.idle.checks.every((c) => c.ok)).toBe(true);
    expect(p.warnings.some((w) => w.startsWith('idle fleet') || w.startsWith('steal path'))).toBe(false);
    expect(p.beforeRun.some((s) => s.startsWith('Start the'))).toBe(false);
  });
});

// The model's `seconds` are its own simulated clock (seeded, deterministic: the same input gives the same run),
// never this machine's: bounds on them are facts of the modelled run, not timings.
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
    // The run record: each worker's first batch reads it (the run lasts under a minute), not each of the 20 batches.
    expect(r.seconds).toBeLessThan(RUN_RECORD_TTL_MS / 1000);
    expect(r.runRecordReads).toBe(4);
    // Reads: those 4 and nothing else; per batch it would be 20. The workers are new to the registry: no reconcile at start.
    expect(r.units.rcu).toBe(4);
  });

  it('reads the run record again only once a worker’s last read is a minute old', () => {
    // 600 items at 5 a second in requests of 10: about two minutes of small batches for 2 workers.
    const r = simulate(
      deploymentModelInput({
        items: 600,
        rate: 5,
        workers: 2,
        shards: 1,
        itemKb: 1,
        itemSeconds: 0.1,
        heartbeatSeconds: 5,
        tableQuota: null,
        latencyMs: { dynamodb: 5, sqs: 10, lambda: 30 },
        apiRequestItems: 10,
        lambdaMemoryMb: 512,
        lambdaConcurrencyLimit: 1_000,
        sqsInFlightLimit: 120_000,
        weight: 1,
        seed: 3,
        stopAfterSeconds: 3_600,
      }),
    );
    expect(r.unfinished).toEqual({});
    expect(r.seconds).toBeGreaterThan(110);
    expect(r.runRecordReads).toBeGreaterThanOrEqual(2 * Math.floor(r.seconds / 60));
    expect(r.runRecordReads).toBeLessThanOrEqual(2 * (Math.floor(r.seconds / 60) + 1));
  });

  it('orders a hint’s entries busiest first, and charges a simulated take its k thieves’ busiest-first attempts', () => {
    expect(
      takeOrder(
        new Map([
          [1, [0]],
          [2, [0, 1, 2]],
          [3, [0, 1]],
          [4, [5, 6, 7]],
        ]),
      ).map((e) => e.victim),
    ).toEqual([2, 4, 3, 1]);
    // Weight 1: one attempt, at the hint's size with the entry in (won) or as it stands (lost).
    expect(simulatedTake(1, 5, [5], true)).toEqual({ attempts: 1, wcu: hintWriteWcu(stealHintBytes([5, 5])), won: 1, rounds: 1 });
    expect(simulatedTake(1, 5, [5], false)).toEqual({ attempts: 1, wcu: hintWriteWcu(stealHintBytes([5])) });
    // Weight 50: the entry stands for 4 real ones; its 50 thieves make 50 + 49 + 48 + 47 attempts (2+98, 2+48, 1+47, 1+46 WCU).
    expect(simulatedTake(50, 5, [], true)).toMatchObject({ attempts: 194, wcu: 245 });
    // Gone: each of the 50 loses all four.
    expect(simulatedTake(50, 5, [], false)).toEqual({ attempts: 200, wcu: 200 });
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

  describe('under throttling (PartialBatchError, Worker.pull, slowDown / speedUp, a refused enqueue)', () => {
    const deployed = (o: Partial<Parameters<typeof deploymentModelInput>[0]> = {}) =>
      deploymentModelInput({
        items: 2_000,
        rate: 200,
        workers: 40,
        shards: 2,
        itemKb: 1,
        itemSeconds: 0.2,
        heartbeatSeconds: 5,
        tableQuota: null,
        latencyMs: { dynamodb: 5, sqs: 10, lambda: 30 },
        apiRequestItems: 100,
        lambdaMemoryMb: 512,
        lambdaConcurrencyLimit: 1_000,
        sqsInFlightLimit: 120_000,
        weight: 1,
        seed: 1,
        stopAfterSeconds: 3_600,
        ...o,
      });
    const traced = (o: ModelInput) => {
      const events: ModelTrace[] = [];
      return { r: simulate({ ...o, trace: (e) => events.push(e) }), events };
    };
    // A table quota of 120 units a second against 200 items a second (several units each): claims, starts, acks and
    // puts outlast their retries now and then. 20 ms items: five to a chunk.
    const { r, events } = traced(deployed({ itemSeconds: 0.02, tableQuota: { wcu: 120, rcu: 120, gsiWcu: 120, gsiRcu: 120 } }));
    const claims = events.filter((e) => e.kind === 'claims');
    type Pace = Extract<ModelTrace, { kind: 'pace' }>;
    /** The worker's pace before event `at` (the code's start: an unbounded batch, no pause), and the change that follows it. */
    const paceBefore = (at: number, worker: number) =>
      events.slice(0, at).findLast((e): e is Pace => e.kind === 'pace' && e.worker === worker) ?? { batch: PLAN_ASSUMPTIONS.receiveBatch, pauseMs: 0 };
    const paceAfter = (at: number, worker: number) => events.slice(at + 1).find((e): e is Pace => e.kind === 'pace' && e.worker === worker);

    it('keeps the claims that landed in a round refused in part, halves the receive batch and pauses', () => {
      const partial = claims.filter((e) => e.landed.length > 0 && e.unanswered.length > 0);
      expect(partial.length).toBeGreaterThan(0);
      for (const round of partial) {
        const at = events.indexOf(round);
        const before = paceBefore(at, round.worker);
        expect(paceAfter(at, round.worker)).toMatchObject({
          throttled: true,
          batch: Math.max(1, Math.floor(before.batch / 2)),
          pauseMs: Math.min(2_000, Math.max(100, before.pauseMs * 2)),
        });
        // Held and acked by this worker: never claimed again. The unanswered ones land later, once their messages come back.
        const later = claims.slice(claims.indexOf(round) + 1);
        for (const i of round.landed) expect(later.some((e) => e.landed.includes(i))).toBe(false);
        for (const i of round.unanswered) expect(later.find((e) => e.landed.includes(i))?.receivedAt).toBeGreaterThanOrEqual(round.receivedAt + 60_000);
      }
      expect(r.throttledRounds).toBeGreaterThanOrEqual(partial.length);
    });

    it('receives no more than its batch, and a round answered in full adds one back (up to 10) and ends the pause', () => {
      const whole = claims.filter((e) => e.unanswered.length === 0);
      expect(whole.length).toBeGreaterThan(0);
      for (const round of claims) expect(round.received).toBeLessThanOrEqual(Math.min(10, paceBefore(events.indexOf(round), round.worker).batch));
      for (const round of whole) {
        const at = events.indexOf(round);
        expect(paceAfter(at, round.worker)).toMatchObject({ throttled: false, batch: Math.min(10, paceBefore(at, round.worker).batch + 1), pauseMs: 0 });
      }
    });

    it('records the acks answered in a round refused in part, and sends only the rest again', () => {
      const acks = events.filter((e) => e.kind === 'acks');
      const partial = acks.filter((e) => e.unanswered.length > 0 && e.unanswered.length < e.sent.length);
      expect(partial.length).toBeGreaterThan(0);
      for (const round of acks.filter((e) => e.unanswered.length > 0)) {
        const next = acks.slice(acks.indexOf(round) + 1).find((e) => e.worker === round.worker)!;
        expect(next.sent).toEqual(expect.arrayContaining([...round.unanswered]));
        for (const i of round.sent) if (!round.unanswered.includes(i)) expect(next.sent).not.toContain(i);
      }
    });

    it('leaves no item Running without a holder, and reads the running set after no refusal: a refusal applied nothing', () => {
      expect(r.exhaustedByFamily['RUN#*#*']).toBeGreaterThan(0);
      expect(r.failedSteps).toBeGreaterThan(0);
      expect(r.unfinished).toEqual({});
      // Nothing forgotten Running for the failure scan to find.
      expect(r.repended).toBe(0);
      // A worker reads the running set only after an ask of its own failed other than by a 429 (its answer may be lost):
      // not at start, nor after a refused claim, ack or heartbeat.
      const reconciles = events.filter((e) => e.kind === 'reconcile');
      for (const rec of reconciles) {
        const at = events.indexOf(rec);
        const cause = events.slice(0, at).findLast((e) => (e.kind === 'ask' || e.kind === 'reconcile') && e.worker === rec.worker);
        expect(cause).toMatchObject({ kind: 'ask', stolen: -1, refused: false });
      }
    });

    it('paces the producer as enqueueRun does: a refused enqueue is sent again whole, and no request starts within a second (its Retry-After) of a refusal', () => {
      const attempts = events.filter((e) => e.kind === 'enqueue');
      const refused = attempts.filter((e) => !e.accepted);
      expect(refused.length).toBeGreaterThan(0);
      expect(r.enqueueRetries).toBe(refused.length);
      // A refused request stored what the table took.
      expect(refused.some((e) => e.stored > 0)).toBe(true);
      for (const e of refused) {
        const next = attempts.slice(attempts.indexOf(e) + 1).find((a) => a.request === e.request)!;
        expect(next.sent - e.at).toBeGreaterThanOrEqual(1_000 - 1e-6);
        expect(next.items).toBe(e.items);
        expect(attempts.filter((a) => a.sent > e.at && a.sent < e.at + 1_000 - 1e-6)).toEqual([]);
      }
      // Each item stored once over its request's attempts; no request before its items came (100 at 200 a second: every 500 ms).
      const stored = new Map<number, number>();
      for (const e of attempts) stored.set(e.request, (stored.get(e.request) ?? 0) + e.stored);
      expect([...stored.values()]).toEqual(Array.from({ length: 20 }, () => 100));
      for (const [request] of stored)
        expect(Math.min(...attempts.filter((e) => e.request === request).map((e) => e.sent))).toBeGreaterThanOrEqual((request / 100) * 500 - 1e-6);
      // The window: never more in flight than it allows (16 at most).
      const inFlight = (t: number) => attempts.filter((a) => a.sent <= t && a.at > t).length;
      expect(Math.max(...attempts.map((a) => inFlight(a.sent)))).toBeLessThanOrEqual(PRODUCER_PACE.maxInFlight);
    });

    it('reads the running set after no ask that Lambda refused (429: the ask never ran)', () => {
      const t = traced(deployed({ items: 3_000, rate: 100, workers: 40, shards: 4, itemSeconds: 1, apiRequestItems: 1_000, lambdaConcurrencyLimit: 1 }));
      expect(t.r.unfinished).toEqual({});
      expect(t.r.lambda.throttled).toBeGreaterThan(0);
      const asks = t.events.filter((e) => e.kind === 'ask');
      expect(asks.filter((e) => e.refused).length).toBeGreaterThan(0);
      expect(t.events.filter((e) => e.kind === 'reconcile')).toHaveLength(asks.filter((e) => e.stolen < 0 && !e.refused).length);
    });
  });

  describe('with the coordinator Lambda (a deployment, weight 1)', () => {
    const deployed = (seed = 1) =>
      deploymentModelInput({
        items: 3_000,
        rate: 100,
        workers: 40,
        shards: 4,
        itemKb: 1,
        itemSeconds: 1,
        heartbeatSeconds: 5,
        tableQuota: null,
        latencyMs: { dynamodb: 5, sqs: 10, lambda: 30 },
        apiRequestItems: 1_000,
        lambdaMemoryMb: 512,
        lambdaConcurrencyLimit: 1_000,
        sqsInFlightLimit: 120_000,
        weight: 1,
        seed,
        stopAfterSeconds: 3_600,
      });
    const r = simulate(deployed());
    const l = r.lambda;

    it('is deterministic, and finishes', () => {
      expect(simulate(deployed())).toEqual(r);
      expect(r.unfinished).toEqual({});
    });

    it('rebuilds the hint at most once per 2 s, and steals at most 4 victims per rebuild', () => {
      expect(l.hintRebuilds).toBeGreaterThan(0);
      expect(l.hintRebuilds).toBeLessThanOrEqual(r.seconds / (STEAL_HINT_FRESH_MS / 1000) + 1);
      expect(l.fruitfulSteals).toBeGreaterThan(0);
      expect(l.fruitfulSteals).toBeLessThanOrEqual(STEAL_HINT_VICTIMS * l.hintRebuilds);
      expect(l.hintTakes).toBeGreaterThanOrEqual(l.fruitfulSteals);
      expect(l.itemsStolen).toBeLessThanOrEqual(MAX_STEAL_BATCH * l.fruitfulSteals);
      expect(r.peakPerKey.hint).toMatchObject({ key: 'STEAL#*' });
    });

    it('writes the lease only when a sandbox is cold or past half its TTL, not per ask', () => {
      expect(l.steals).toBeGreaterThan(0);
      expect(l.leaseWrites).toBeLessThan(2 * l.steals);
      expect(l.leaseWrites).toBeLessThanOrEqual(2 * l.concurrencyPeak * (r.seconds / (COORDINATOR_LEASE_TTL_MS / 2000) + 1));
      expect(l.leaseRenewals).toBeLessThanOrEqual(l.leaseWrites);
    });

    it('counts busiest-first takes: a simulated thief of weight 4 pays 4 + 3 + 2 + 1 attempts for an entry it wins', () => {
      const w = simulate({ ...deployed(), weight: 4 });
      expect(w.unfinished).toEqual({});
      expect(w.lambda.fruitfulSteals).toBeGreaterThan(0);
      expect(w.lambda.hintTakes).toBeGreaterThanOrEqual((w.lambda.fruitfulSteals / 4) * (4 + 3 + 2 + 1));
    });

    it('checks each steal on its item’s shard fence, not on the lease', () => {
      expect(r.peakPerKey.fence.key).toBe('FENCE#*#*');
      expect(r.peakPerKey.fence.wcu).toBeGreaterThan(0);
      // A steal's transaction: item ×2, RUNNING ×2, fence 2 — nothing on the lease. Its units are its own writes (1 each)
      // and the fence raises' checks of it: 2 units a transaction, 2 transactions (4 fences, the marker) at most once a sandbox.
      expect(r.peakPerKey.lease.wcu).toBeLessThanOrEqual(l.leaseWrites + 2 * 2 * l.concurrencyPeak);
      expect(l.steals).toBeGreaterThan(l.leaseWrites + 2 * 2 * l.concurrencyPeak);
      expect(l.fenceConflicts).toBeGreaterThanOrEqual(0);
    });
  });

  describe('the bench’s steal comparison (a mixed fleet, an in-process coordinator)', () => {
    const bench = {
      items: 100,
      workers: 2,
      shards: 4,
      limited: false,
      wcu: 40,
      rcu: 120,
      windowMs: 1_000,
      machineRequestsPerSecond: 1_500,
      seed: 5,
      itemMs: 10,
    } as const;

    it('keeps the main comparison’s input as it was: instant items, one kind of worker, no coordinator', () => {
      const i = input();
      expect(i.itemMs).toBe(0);
      expect(i.worker.coordinator).toBe(false);
      expect(i.slowWorkers).toBeUndefined();
      expect(i.coordinatorProcess).toBeUndefined();
    });

    it('runs the slow workers’ items at their pace, and steals their backlog once the fast ones run dry', () => {
      // 10 batches of 10: the fast worker takes a batch in 0.1 s, the slow one (the last worker) 10 s. The slow worker's
      // first batch is the run's tail unless the fast one, dry once the queue is, takes the back half of its line.
      const uniform = simulate(benchModelInput(bench));
      const mixed = simulate(benchModelInput({ ...bench, slowWorkers: { count: 1, itemMs: 1_000 } }));
      const stealing = simulate(benchModelInput({ ...bench, slowWorkers: { count: 1, itemMs: 1_000 }, steals: true }));
      for (const r of [uniform, mixed, stealing]) expect(r.unfinished).toEqual({});
      // Simulated seconds of the modelled run (deterministic), not this machine's time.
      expect(uniform.seconds).toBeLessThan(2);
      expect(mixed.seconds).toBeGreaterThanOrEqual(10);
      expect(mixed.lambda.steals).toBe(0);
      expect(stealing.lambda.fruitfulSteals).toBeGreaterThanOrEqual(1);
      expect(stealing.lambda.itemsStolen).toBeGreaterThanOrEqual(3);
      expect(stealing.lambda.itemsStolen).toBeLessThanOrEqual(5); // ceil(9 / 2): the back half of an unstarted batch
      // Each stolen item saves the slow worker about 1 simulated second of its tail.
      expect(stealing.seconds).toBeLessThan(mixed.seconds - stealing.lambda.itemsStolen * 0.9);
    });

    it('answers every ask on its one coordinator: no invocation, no lease write per ask (its elector renews), fences raised once', () => {
      const p = benchModelInput({
        items: 400,
        workers: 8,
        shards: 4,
        limited: true,
        wcu: 40,
        rcu: 120,
        windowMs: 1_000,
        machineRequestsPerSecond: 1_500,
        seed: 3,
        itemMs: 100,
        slowWorkers: { count: 2, itemMs: 2_000 },
        steals: true,
      });
      expect(p.coordinatorProcess).toEqual({ renewEveryMs: BENCH_COORDINATOR_LEASE.renewIntervalMs });
      expect(p.scanEverySeconds).toBeNull();
      const r = simulate(p);
      expect(r.unfinished).toEqual({});
      expect(r.lambda.steals).toBeGreaterThan(4);
      expect(r.lambda.fruitfulSteals).toBeGreaterThan(1);
      expect(r.lambda.itemsStolen).toBeGreaterThan(r.lambda.fruitfulSteals);
      expect(r.lambda.invocations).toBe(0);
      expect(r.lambda.gbSeconds).toBe(0);
      // The renewals every 10 s until the run ends, and nothing else: a steal does not touch the lease.
      expect(r.lambda.leaseWrites).toBe(Math.floor((r.seconds * 1000) / BENCH_COORDINATOR_LEASE.renewIntervalMs));
      expect(r.lambda.leaseWrites).toBeGreaterThan(0);
      // The fence marker read once (1 unit), before the first steal; the same run as Lambda invocations is invoked per ask.
      expect(r.peakPerKey.fence.rcu).toBe(1);
      const { coordinatorProcess: _, ...lambda } = p;
      const l = simulate(lambda);
      expect(l.lambda.invocations).toBe(l.lambda.steals);
    });
  });
});
