/** The capacity plan printed: the text report, then the one JSON object the CLI ends with. */
import { PARTITION_RCU, PARTITION_WCU, unitsPerWrite } from '../../shared/ledger/capacity.js';
import { MAX_STEAL_BATCH } from '../../shared/ledger/coordinator.js';
import { STEAL_HINT_VICTIMS } from '../../shared/ledger/steal-hint.js';
import { PRICE_REGION, PRICES, PRICES_READ_ON } from '../cost/prices.js';
import { AWS_LIMITS, LIMITS_READ_ON, PLAN_ASSUMPTIONS, type Limit } from './limits.js';
import type { CapacityPlan, Check } from './plan-types.js';

export function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Math.abs(x) >= 100) return Math.round(x).toLocaleString('en-US');
  if (Math.abs(x) >= 1) return x.toFixed(1);
  return x.toPrecision(2);
}

const usd = (x: number) => `US$ ${x < 1 ? x.toFixed(4) : x.toFixed(2)}`;
const mark = (c: Check) => (c.ok ? 'ok  ' : 'OVER');

export function formatPlan(plan: CapacityPlan): string {
  const i = plan.input;
  const t = plan.timing;
  const out: string[] = [];
  out.push(
    `# Capacity plan: ${fmt(i.items)} items at ${fmt(i.rate)} items/s (${i.itemKb} KB items, ${i.itemSeconds} s each, heartbeat ${i.heartbeatSeconds} s, key share ${i.share})`,
  );
  out.push(`limits read ${LIMITS_READ_ON}; prices ${PRICE_REGION} list, read ${PRICES_READ_ON} (tools/cost/prices.ts)`);
  out.push('');
  out.push(
    `## Per item and per path  (w = ${unitsPerWrite(i.itemKb)} unit a write; held ${t.heldSeconds.toFixed(2)} s claim→ack → ${t.heartbeatsPerItem.toFixed(2)} heartbeats an item; chunk ${t.chunk})`,
  );
  out.push('path                          per                          DDB req   WCU    idxWCU   RCU      SQS req  Lambda   keys');
  for (const r of plan.paths) {
    out.push(
      `${r.path.padEnd(30)}${r.per.padEnd(29)}${fmt(r.dynamodbRequests).padStart(7)}${fmt(r.wcu).padStart(7)}${fmt(r.indexWcu).padStart(9)}${fmt(r.rcu).padStart(9)}${fmt(r.sqsRequests).padStart(9)}${fmt(r.lambdaInvocations).padStart(9)}   ${r.keys}`,
    );
  }
  const pi = plan.perItem;
  out.push(
    `per item, steady: ${pi.itemWcu.toFixed(2)} WCU on its partition + ${pi.pendingWcu.toFixed(2)} PENDING + ${pi.runningWcu.toFixed(2)} RUNNING index WCU, ${pi.rcu.toFixed(3)} RCU, ${pi.sqsRequests.toFixed(2)} SQS requests, ${(pi.lambdaInvocations * 1e6).toFixed(1)} Lambda invocations a million`,
  );
  out.push('');
  out.push(
    `## Shards: ${plan.shards.needed}${plan.shards.fits ? '' : ` (over the ${plan.shards.max} a run takes)`}  — no key above ${i.share * 100}% of its partition (${PARTITION_WCU} WCU / ${PARTITION_RCU} RCU); the API's itemsPerSecond would pick ${plan.shards.apiDefault}`,
  );
  for (const c of plan.shards.perKey) out.push(`  ${mark(c)} ${c.what.padEnd(34)} ${fmt(c.value).padStart(8)} / ${fmt(c.limit)}  ${c.note}`);
  out.push('');
  out.push('## Table level (steady state)');
  for (const c of plan.table) out.push(`  ${mark(c)} ${c.what.padEnd(48)} ${fmt(c.value).padStart(9)} / ${fmt(c.limit)}  ${c.note}`);
  out.push('');
  out.push('## SQS, Lambda, workers');
  out.push(
    `  SQS: ${fmt(plan.sqs.requestsPerSecond)} requests/s (sends, receives, deletes and visibility extensions 10 a call; a message extended only when under two heartbeat intervals of its visibility remain)`,
  );
  out.push(`  ${mark(plan.sqs.check)} ${plan.sqs.check.what}: ≈ ${fmt(plan.sqs.inFlight)} / ${fmt(plan.sqs.check.limit)} — ${plan.sqs.check.note}`);
  out.push(
    `  Lambda steady: ${fmt(plan.lambda.steady.invocationsPerSecond)} invocations/s, concurrency ≈ ${fmt(plan.lambda.steady.concurrency)}; tail: ${fmt(plan.lambda.tail.invocationsPerSecond)} steal invocations/s, concurrency ≈ ${fmt(plan.lambda.tail.concurrency)}`,
  );
  for (const c of plan.lambda.checks) out.push(`  ${mark(c)} ${c.what}: ${fmt(c.value)} / ${fmt(c.limit)} — ${c.note}`);
  out.push(
    `  workers: ${fmt(plan.workers.needed)} needed (${t.workerSecondsPerItem.toFixed(3)} s of a worker per item: one item at a time); ${fmt(plan.workers.deployed)} deployed → ${fmt(plan.workers.achievableRate)} items/s; ${fmt(plan.workers.instances)} instances; run ≈ ${(plan.runSeconds / 60).toFixed(1)} min`,
  );
  const h = plan.idle.hint;
  out.push(
    `  idle fleet / tail: asks read the steal hint STEAL#<run>/HINT (${(h.bytes / 1024).toFixed(1)} KB with every victim listed at this shape: ${fmt(h.readRru)} RRU) ${fmt(plan.lambda.tail.invocationsPerSecond)} times/s in the first idle minute; a rebuild from the running set (${fmt(plan.idle.runningSetRcu)} RCU of entries, ${fmt(h.rebuildRcu)} with the candidates' items) ${fmt(h.rebuildsPerSecond)} times/s a run whatever the fleet: ${fmt(plan.idle.tableRcuPerSecond)} RCU/s, ${fmt(plan.idle.settledTableRcuPerSecond)} once settled`,
  );
  out.push(
    `  idle fleet, every set empty: an ask reads the empty hint (0.5 RRU), a rebuild queries all ${fmt(plan.shards.needed)} RUNNING keys (0.5 RRU each): ${fmt(plan.idle.emptyTableRcuPerSecond)} RRU/s in the first idle minute, ${fmt(plan.idle.emptySettledTableRcuPerSecond)} once settled`,
  );
  out.push(
    `  steal path's writes: hint ${fmt(h.wcuPerSecond)} WCU/s (per rebuild ${fmt(h.claimsPerRebuild)} claims, a put of ${h.writeWcu} WCU, and ${fmt(h.takesPerRebuild)} take attempts busiest first by a herd of ${fmt(h.herd)} — ${fmt(h.takeWcuPerRebuild)} WCU, each the hint's size as it shrinks; ${fmt(h.wcuPerSecondAtLargest)} WCU/s were every entry ${MAX_STEAL_BATCH} ids), a shard fence ${fmt(plan.idle.fenceWcuPerSecond)} WCU/s, the lease ${fmt(plan.idle.leaseWcuPerSecond)} WCU/s (no write per ask: a sandbox renews past half its TTL); hottest ${plan.idle.hottestStealItem.key}`,
  );
  out.push(
    `  steals: ≤ ${fmt(h.fruitfulStealsPerSecond)} fruitful a second a run (${STEAL_HINT_VICTIMS} victims per rebuild), ${fmt(h.itemsStolenPerSecond)} items a second`,
  );
  for (const c of plan.idle.checks) out.push(`  ${mark(c)} ${c.what}: ${fmt(c.value)} / ${fmt(c.limit)} — ${c.note}`);
  out.push('');
  out.push(`## Cost (on-demand list prices, ${PRICE_REGION}, read ${PRICES_READ_ON}; no free tier)`);
  for (const l of plan.cost.lines) out.push(`  ${l.what.padEnd(28)} ${usd(l.perMillionUsd).padStart(12)} per million items  (${l.basis})`);
  out.push(
    `  per million items ${usd(plan.cost.perMillionUsd)} · per hour at ${fmt(plan.workers.achievableRate)} items/s ${usd(plan.cost.perHourUsd)} · this run ${usd(plan.cost.runUsd)} · storage ${usd(plan.cost.storageUsdMonth)} a month while kept (table + PITR)`,
  );
  for (const u of plan.cost.unpriced) out.push(`  not priced: ${u}`);
  out.push('');
  out.push('## Limits');
  for (const l of plan.limits) out.push(`  - ${l}`);
  out.push('');
  out.push(plan.warnings.length ? '## Warnings' : '## Warnings: none');
  for (const w of plan.warnings) out.push(`  ! ${w}`);
  out.push('');
  out.push('## Before the run');
  for (const s of plan.beforeRun) out.push(`  - ${s}`);
  out.push('');
  out.push('## Sources');
  for (const [k, l] of Object.entries(AWS_LIMITS) as [string, Limit][])
    out.push(`  - ${k}: ${fmt(l.value)} ${l.unit} (adjustable: ${String(l.adjustable)}) — ${l.source}`);
  for (const k of ['dynamoWrite', 'dynamoRead', 'sqsRequest', 'lambdaRequest', 'lambdaArmGbSecond', 'dynamoStorage', 'dynamoPitr'] as const)
    out.push(
      `  - price ${k}: US$ ${+(PRICES[k].usd * (PRICES[k].usd < 0.001 ? 1e6 : 1)).toPrecision(6)}${PRICES[k].usd < 0.001 ? ' per million' : ''} (${PRICES[k].unit}) — ${PRICES[k].source}`,
    );
  for (const [k, v] of Object.entries(PLAN_ASSUMPTIONS)) out.push(`  - assumption ${k}: ${v}`);
  return out.join('\n');
}

/** Three decimals, or four significant digits for what is smaller than that. */
const r3 = (x: number) => (Math.abs(x) >= 1 || x === 0 ? Math.round(x * 1000) / 1000 : +x.toPrecision(4));

/** The one JSON object the CLI ends with. */
export function planJson(plan: CapacityPlan): Record<string, unknown> {
  return {
    capacity: 'plan',
    input: plan.input,
    shards: plan.shards.needed,
    per_item: Object.fromEntries(Object.entries(plan.perItem).map(([k, v]) => [k, r3(v)])),
    heartbeats_per_item: r3(plan.timing.heartbeatsPerItem),
    per_key_units_per_s: Object.fromEntries(plan.shards.perKey.map((c) => [c.what, r3(c.value)])),
    table: Object.fromEntries(plan.table.slice(0, 3).map((c) => [c.what, { value: r3(c.value), quota: c.limit, ok: c.ok }])),
    sqs: { requests_per_s: r3(plan.sqs.requestsPerSecond), in_flight: Math.round(plan.sqs.inFlight), limit: plan.sqs.check.limit, ok: plan.sqs.check.ok },
    lambda: {
      steady: { invocations_per_s: r3(plan.lambda.steady.invocationsPerSecond), concurrency: r3(plan.lambda.steady.concurrency) },
      tail: { invocations_per_s: r3(plan.lambda.tail.invocationsPerSecond), concurrency: r3(plan.lambda.tail.concurrency) },
    },
    idle_fleet: {
      running_set_rcu: r3(plan.idle.runningSetRcu),
      per_running_key_rcu_per_s: r3(plan.idle.perKeyRcuPerSecond),
      table_rcu_per_s: r3(plan.idle.tableRcuPerSecond),
      settled_table_rcu_per_s: r3(plan.idle.settledTableRcuPerSecond),
      lease_wcu_per_s: r3(plan.idle.leaseWcuPerSecond),
      empty_table_rcu_per_s: r3(plan.idle.emptyTableRcuPerSecond),
      empty_settled_table_rcu_per_s: r3(plan.idle.emptySettledTableRcuPerSecond),
      hint: {
        kb: r3(plan.idle.hint.bytes / 1024),
        rebuilds_per_s: r3(plan.idle.hint.rebuildsPerSecond),
        herd: r3(plan.idle.hint.herd),
        take_attempts_per_rebuild: r3(plan.idle.hint.takesPerRebuild),
        wcu_per_s: r3(plan.idle.hint.wcuPerSecond),
        wcu_per_s_every_entry_full: r3(plan.idle.hint.wcuPerSecondAtLargest),
        fruitful_steals_per_s: r3(plan.idle.hint.fruitfulStealsPerSecond),
      },
      fence_wcu_per_s: r3(plan.idle.fenceWcuPerSecond),
      hottest_steal_item: { key: plan.idle.hottestStealItem.key, wcu_per_s: r3(plan.idle.hottestStealItem.wcuPerSecond) },
      hottest_steal_item_every_entry_full: { key: plan.idle.hottestStealItemAtLargest.key, wcu_per_s: r3(plan.idle.hottestStealItemAtLargest.wcuPerSecond) },
    },
    workers: plan.workers,
    run_minutes: r3(plan.runSeconds / 60),
    cost_usd: {
      per_million_items: r3(plan.cost.perMillionUsd),
      per_hour: r3(plan.cost.perHourUsd),
      run: r3(plan.cost.runUsd),
      storage_month: r3(plan.cost.storageUsdMonth),
    },
    prices_read_on: PRICES_READ_ON,
    limits_read_on: LIMITS_READ_ON,
    warnings: plan.warnings,
  };
}
