/**
 * The capacity plan of a work run on AWS: for a run of N items at a target
 * rate, what every path of the ledger asks of DynamoDB (units, on which
 * keys), of SQS and of Lambda; the shards it needs; the table-level totals
 * against the account's quotas; the workers; the cost at list prices; and
 * the limits a user runs into. Pure arithmetic over the code's own requests
 * (shared/ledger/capacity.ts `ITEM_WRITES`, worker.ts, coordinator.ts,
 * ledger-store.ts, sqs/queue.ts) — `npm run capacity` prints it (cli.ts).
 *
 * Arithmetic, not a measurement: the per-item counts follow from the code;
 * the timings (latencies, how long an item runs) are named assumptions; the
 * AWS limits and prices are dated and sourced below. The discrete-event model
 * (model.ts) checks the steady state and shows the transients (start, tail).
 */
import {
  PARTITION_RCU,
  PARTITION_WCU,
  INDEX_ENTRY_KB,
  ITEM_WRITES,
  MAX_RUN_SHARDS,
  perItem,
  shardsFor,
  unitsPerWrite,
  type ItemWrite,
} from '../../shared/ledger/capacity.js';
import { MAX_STEAL_BATCH } from '../../shared/ledger/coordinator.js';
import { MAX_RESULT_BYTES } from '../../shared/ledger/model.js';
import { STEAL_HINT_FRESH_MS, STEAL_HINT_VICTIMS } from '../../shared/ledger/steal-hint.js';
import { HEARTBEAT_ROUNDS, RUN_RECORD_TTL_MS, stealBackoffMs } from '../../shared/ledger/worker/index.js';
import { FUNCTIONS } from '../../shared/topology.js';
import { PRICES } from '../cost/prices.js';
import { heldWrites } from './held-writes.js';
import { AWS_LIMITS, PLAN_ASSUMPTIONS } from './limits.js';
import { fmt } from './plan-report.js';
import { check, type CapacityPlan, type PathRow, type PlanInput } from './plan-types.js';
import { busiestFirstTakes, COORDINATOR_LEASE_TTL_MS, hintReadRru, hintWriteWcu, IDLE_CEILINGS, stealHintBytes, STEAL_READ_ITEMS } from './steal-hint.js';

/** An idle worker's asks for work (stealBackoffMs, at its mean draw): how many in its first idle minute, and how far apart once at the cap. */
const meanAskGap = (n: number) => stealBackoffMs(n, () => 0.5);
const IDLE_ASKS_FIRST_MINUTE = (() => {
  let at = 0;
  let n = 1;
  while (at + meanAskGap(n) < 60_000) at += meanAskGap(n++);
  return n;
})();
const SETTLED_ASK_SECONDS = meanAskGap(Number.MAX_SAFE_INTEGER) / 1000;

export function planCapacity(input: PlanInput): CapacityPlan {
  const a = PLAN_ASSUMPTIONS;
  const { rate, itemKb, itemSeconds, heartbeatSeconds, share } = input;
  if (!(input.items > 0 && rate > 0 && itemKb > 0 && itemSeconds >= 0 && heartbeatSeconds > 0 && share > 0 && share <= 1)) {
    throw new Error('invalid plan input: items, rate, item size and heartbeat must be positive, item seconds ≥ 0, share in (0, 1]');
  }
  const w = unitsPerWrite(itemKb);
  const b = a.receiveBatch;
  const ld = a.dynamodbMs / 1000;
  const ls = a.sqsMs / 1000;
  const rounds = (n: number) => Math.ceil(n / a.ledgerConcurrency);

  // How a worker goes through a batch (worker.ts): receive, the claims, the extensions; then chunks — one item
  // when items are slower than the chunk budget, else as many as fit in it — each started in one round, run one
  // by one, acked in one round and its messages deleted in one call. Before the claims, the run record is read
  // when the one last read is a minute old (runEpoch): in at most B / 60 s of the batches, B their length.
  const chunkCap = itemSeconds * 1000 >= a.chunkBudgetMs ? 1 : Math.min(a.maxChunk, Math.floor(a.chunkBudgetMs / Math.max(itemSeconds * 1000, 0.01)));
  const chunk = Math.max(1, Math.min(chunkCap, b));
  const chunks = Math.ceil(b / chunk);
  const ttl = RUN_RECORD_TTL_MS / 1000;
  const unread = ls + rounds(b) * ld + ls + chunks * (2 * rounds(chunk) * ld + ls) + b * itemSeconds;
  const batchSeconds = unread + ld >= ttl ? unread + ld : unread / (1 - ld / ttl);
  const workerSecondsPerItem = batchSeconds / b;
  // Items wait in the worker's backlog for those before them: held (claim to ack) ≈ half a batch on average.
  const heldSeconds = ((b + 1) / 2) * workerSecondsPerItem + ls;
  // Written while held only when an interval would otherwise pass without a write (a claim and a start count).
  const held = heldWrites({
    batch: b,
    chunk,
    itemSeconds,
    dynamodbSeconds: ld,
    sqsSeconds: ls,
    concurrency: a.ledgerConcurrency,
    heartbeatSeconds,
    visibilitySeconds: a.visibilitySeconds,
  });
  const heartbeats = held.heartbeats;
  const deletesPerItem = chunks / b;
  // The claims' extensions: one ChangeMessageVisibilityBatch per ten messages received.
  const claimExtensionCalls = Math.ceil(b / 10) / b;

  const shape = { itemKb, heartbeats };
  const p = perItem(shape);
  const e = unitsPerWrite(INDEX_ENTRY_KB);
  const itemRead = Math.max(1, Math.ceil(itemKb / 4)); // a consistent read of one item
  const unit = (write: ItemWrite, times = 1) => {
    const c = ITEM_WRITES[write];
    return { wcu: c.item * w * times, indexWcu: (c.pending + c.running) * e * times };
  };
  const shardKeys = 'RUN#<run>#<s> (item) · gsi1 PENDING#<run>#<s> · gsi1 RUNNING#<run>#<s>';

  // Shards: the code's own rule at this shape, and what the API's `itemsPerSecond` would pick (1 KB, 1 heartbeat).
  const needed = shardsFor(rate, shape, share);
  const shards = Math.min(needed, MAX_RUN_SHARDS);
  const perKey = (u: number) => (rate * u) / shards;
  const keyLimitW = share * PARTITION_WCU;
  const keyLimitR = share * PARTITION_RCU;

  // Workers.
  const needWorkers = Math.ceil(rate * workerSecondsPerItem);
  const workers = input.workers ?? needWorkers;
  const achievable = Math.min(rate, workers / workerSecondsPerItem);
  const runSeconds = input.items / achievable;

  // The run record: a consistent GetItem (≤ 4 KB: 1 unit) by each worker at most once a minute, and only on a
  // received batch — an upper bound (the next read waits for the first batch past the minute), on one key.
  const runRecordRcu = Math.min(workers / ttl, achievable / b);
  const perKeyChecks = [
    check('item partition RUN#<run>#<s>', perKey(p.itemWcu), keyLimitW, 'write units/s per key'),
    check('gsi1 PENDING#<run>#<s>', perKey(p.pendingWcu), keyLimitW, 'index write units/s per key'),
    check('gsi1 RUNNING#<run>#<s>', perKey(p.runningWcu), keyLimitW, 'index write units/s per key'),
    check(
      'run record RUN#<run> (reads)',
      runRecordRcu,
      keyLimitR,
      `consistent reads/s: each worker's at most once per ${ttl} s (${fmt(workers)} workers / ${ttl} s), on one key whatever the shards`,
    ),
  ];

  // The running set, and what reading it costs: reconcile and a hint rebuild read every RUNNING key's entries (small:
  // the index projects no payload), then the items of the workers a decision turns on; the failure scan reads every item.
  const runningSet = achievable * heldSeconds;
  const perKeyRead = 0.5 * Math.max(1, Math.ceil(((runningSet / shards) * INDEX_ENTRY_KB) / 4));
  const runningSetRcu = shards * perKeyRead;
  const runningItemsRcu = runningSet * itemRead;
  const stolen = Math.min(MAX_STEAL_BATCH, Math.ceil((b - 1) / 2));

  // Idle fleet (before the first message, and the tail): a worker that runs dry asks for work at once, then less
  // often (stealBackoffMs); it reads the running set itself only at start and after a lost answer. An ask reads the
  // run's steal hint and answers from it; one asker per run and fresh period rebuilds it from the running set, so
  // what the running set costs no longer grows with the fleet. Checked in the first idle minute, when a fleet that ran
  // dry together asks most; settled, each asks once per backoff cap.
  const idleAsks = (workers * IDLE_ASKS_FIRST_MINUTE) / 60;
  const settledAsks = workers / SETTLED_ASK_SECONDS;
  const freshSeconds = STEAL_HINT_FRESH_MS / 1000;
  const herdSeconds = a.hintHerdMs / 1000;
  const halfTtlSeconds = COORDINATOR_LEASE_TTL_MS / 2 / 1000;
  // A victim's entry is the back half of its line, as a steal takes it; sized full (every victim listed).
  const entries = Array.from({ length: STEAL_HINT_VICTIMS }, () => stolen);
  const largestEntries = Array.from({ length: STEAL_HINT_VICTIMS }, () => MAX_STEAL_BATCH);
  const hintBytes = stealHintBytes(entries);
  const emptyHintBytes = stealHintBytes([]);
  const rebuildItems = Math.min(STEAL_READ_ITEMS, runningSet);
  // The candidates' items: one BatchGetItem per worker (about a batch each), one after another, most held first.
  const rebuildItemReads = Math.ceil(rebuildItems / b);
  const rebuildRcu = runningSetRcu + rebuildItems * itemRead;
  const stealPath = (asks: number, empty: boolean, ids: readonly number[] = entries) => {
    // The first ask after the hint lapses claims the rebuild: at most one per fresh period, whatever the asks.
    const rebuilds = Math.min(asks, 1 / freshSeconds);
    const perRebuild = rebuilds > 0 ? asks / rebuilds : 0;
    // Asks that read the same hint before the writes they race land: the claim's herd, and each take's.
    const herd = Math.min(perRebuild, Math.max(1, asks * herdSeconds));
    const claims = herd;
    // Takes, busiest first: a herd tries the entries in the same order (each loser goes on to the next), so every
    // one of its thieves pays for each entry taken before its own win; what a herd leaves, the next herd takes.
    let takes = 0;
    let takeWcu = 0;
    let won = 0;
    for (let left = empty ? [] : ids, asksLeft = perRebuild; left.length > 0 && asksLeft > 0; asksLeft -= herd) {
      const t = busiestFirstTakes(Math.min(herd, asksLeft), left);
      takes += t.attempts;
      takeWcu += t.wcu;
      won += t.won;
      left = [...left].sort((x, y) => y - x).slice(t.rounds);
    }
    const fruitful = rebuilds * won;
    const moved = ids.length ? (fruitful * ids.reduce((x, y) => x + y, 0)) / ids.length : 0;
    // A claim lands on the hint as the takes left it; the put replaces that with the full hint (the larger is paid).
    const leftBytes = stealHintBytes(empty ? [] : [...ids].sort((x, y) => y - x).slice(Math.round(won)));
    const fullBytes = stealHintBytes(empty ? [] : ids);
    const hintWcu = rebuilds * (claims * hintWriteWcu(leftBytes) + hintWriteWcu(Math.max(leftBytes, fullBytes)) + takeWcu);
    // Busy seconds a second (Lambda concurrency): each ask's round trip and hint read, the rebuild, the takes and moves.
    const concurrency =
      asks * (a.lambdaMs / 1000 + ld) + rebuilds * ((claims + 1 + takes) * ld + (rounds(shards) + (empty ? 0 : rebuildItemReads)) * ld) + moved * 2 * ld;
    // No lease write per ask: a sandbox renews only past half its TTL (coordinatorOf), a second write when another
    // sandbox renewed first (its CAS is refused and hands back the row); about one sandbox per unit of concurrency.
    const lease = (2 * concurrency) / halfTtlSeconds;
    const rebuildReads = empty ? shards * 0.5 : rebuildRcu;
    return {
      rebuilds,
      herd,
      claims,
      takes,
      takeWcu,
      won,
      fruitful,
      moved,
      concurrency,
      lease,
      requests: asks + rebuilds * (claims + shards + (empty ? 0 : rebuildItemReads) + 1 + takes) + moved * 2 + lease,
      rcu: asks * hintReadRru(empty ? emptyHintBytes : hintBytes) + rebuilds * rebuildReads + moved * itemRead,
      hintWcu,
      // A move's ConditionCheck lands on its item's shard fence: the shard's share.
      fenceWcu: (moved * 2) / shards,
    };
  };
  const tailPath = stealPath(idleAsks, false);
  const settledPath = stealPath(settledAsks, false);
  const emptyPath = stealPath(idleAsks, true);
  const largestPath = stealPath(idleAsks, false, largestEntries);
  const stealSeconds = tailPath.concurrency / idleAsks;
  const hottestOf = (path: typeof tailPath) =>
    [
      { key: 'STEAL#<run>/HINT', wcuPerSecond: path.hintWcu },
      { key: 'FENCE#<run>#<s>/FENCE', wcuPerSecond: path.fenceWcu },
      { key: 'LEASE#coordinator:<run>', wcuPerSecond: path.lease },
    ].reduce((m, x) => (x.wcuPerSecond > m.wcuPerSecond ? x : m));
  const hottestStealItem = hottestOf(tailPath);
  const hottestStealItemAtLargest = hottestOf(largestPath);
  const idle = {
    runningSetRcu,
    perKeyRcuPerSecond: tailPath.rebuilds * perKeyRead,
    tableRcuPerSecond: tailPath.rcu,
    settledTableRcuPerSecond: settledPath.rcu,
    leaseWcuPerSecond: tailPath.lease,
    // With every set empty (before the first message, after the last): an ask reads the empty hint, and a rebuild
    // queries each RUNNING key at DynamoDB's minimum, 0.5 RRU; no victim is read.
    emptyTableRcuPerSecond: emptyPath.rcu,
    emptySettledTableRcuPerSecond: stealPath(settledAsks, true).rcu,
    hint: {
      bytes: hintBytes,
      readRru: hintReadRru(hintBytes),
      writeWcu: hintWriteWcu(hintBytes),
      rebuildsPerSecond: tailPath.rebuilds,
      rebuildRcu,
      claimsPerRebuild: tailPath.claims,
      herd: tailPath.herd,
      takesPerRebuild: tailPath.takes,
      takeWcuPerRebuild: tailPath.takeWcu,
      takesWonPerRebuild: tailPath.won,
      wcuPerSecond: tailPath.hintWcu,
      wcuPerSecondAtLargest: largestPath.hintWcu,
      fruitfulStealsPerSecond: tailPath.fruitful,
      itemsStolenPerSecond: tailPath.moved,
    },
    fenceWcuPerSecond: tailPath.fenceWcu,
    hottestStealItem,
    hottestStealItemAtLargest,
  };

  const apiSeconds = rounds(a.apiRequestItems) * ld + (a.apiRequestItems / 10) * ls + rounds(a.apiRequestItems) * ld;
  const apiPerSecond = achievable / a.apiRequestItems;

  const paths: PathRow[] = [
    {
      path: 'enqueue',
      per: 'item',
      dynamodbRequests: 1 + 1 / a.apiRequestItems,
      ...unit('enqueue'),
      wcu: unit('enqueue').wcu + 1 / a.apiRequestItems,
      rcu: 0,
      sqsRequests: 0,
      lambdaInvocations: 1 / a.apiRequestItems,
      keys: `PutItem on ${shardKeys.split(' · ').slice(0, 2).join(' · ')} (PENDING put); + the run record RUN#<run> once per API request of ≤ ${a.apiRequestItems.toLocaleString('en-US')} items`,
    },
    {
      path: 'send',
      per: 'item',
      dynamodbRequests: 1,
      ...unit('markSent'),
      rcu: 0,
      sqsRequests: 1 / 10,
      lambdaInvocations: 0,
      keys: 'SendMessageBatch (10 a call); markSent UpdateItem: item partition, PENDING sort key moves (delete + put)',
    },
    {
      path: 'claim',
      per: 'item',
      dynamodbRequests: 1 + runRecordRcu / achievable,
      ...unit('claim'),
      rcu: runRecordRcu / achievable,
      sqsRequests: 1 / b + claimExtensionCalls,
      lambdaInvocations: 0,
      keys: `ReceiveMessage (10 a call); GetItem RUN#<run> run record (consistent) by each worker at most once per ${ttl} s, on a received batch; UpdateItem: item partition, PENDING delete, RUNNING put (by id, where it stays); ChangeMessageVisibilityBatch per batch`,
    },
    {
      path: 'start',
      per: 'item',
      dynamodbRequests: 1,
      ...unit('start'),
      rcu: 0,
      sqsRequests: 0,
      lambdaInvocations: 0,
      keys: 'UpdateItem: item partition only (its RUNNING entry does not change)',
    },
    {
      path: 'heartbeat',
      per: `item (${heartbeats.toFixed(2)} writes)`,
      dynamodbRequests: heartbeats,
      ...unit('heartbeat', heartbeats),
      rcu: 0,
      sqsRequests: held.extensionCalls,
      lambdaInvocations: 0,
      keys: `UpdateItem: item partition only, for a held item not written for ${HEARTBEAT_ROUNDS - 1}/${HEARTBEAT_ROUNDS} of an interval; ChangeMessageVisibilityBatch (≤ 10 a call) for messages with under two intervals of visibility left (${held.extensions.toFixed(3)} extensions an item)`,
    },
    {
      path: 'ack',
      per: 'item',
      dynamodbRequests: 1,
      ...unit('ack'),
      rcu: 0,
      sqsRequests: deletesPerItem,
      lambdaInvocations: 0,
      keys: `UpdateItem (with the result): item partition, RUNNING delete; DeleteMessageBatch per chunk (${chunk === 1 ? 'one item a chunk: a call per item' : `${chunk} items a chunk`})`,
    },
    {
      path: 'steal',
      per: 'idle ask (Lambda), mean',
      dynamodbRequests: tailPath.requests / idleAsks,
      wcu: (tailPath.hintWcu + tailPath.moved * (2 * w + 2) + tailPath.lease) / idleAsks,
      indexWcu: (tailPath.moved * 2 * e) / idleAsks,
      rcu: tailPath.rcu / idleAsks,
      sqsRequests: 0,
      lambdaInvocations: 1,
      keys: `STEAL#<run>/HINT read (eventually consistent: ${fmt(hintReadRru(hintBytes))} RRU at ${(hintBytes / 1024).toFixed(1)} KB, ${fmt(hintReadRru(emptyHintBytes))} empty); fresh (< ${freshSeconds} s): its entries tried busiest first, each take a conditional update costing the hint's size won or lost (${hintWriteWcu(hintBytes)} WCU full), a lost one → the next entry — the ${fmt(tailPath.herd)} asks that read the same hint make ${fmt(tailPath.takes)} attempts for its ${STEAL_HINT_VICTIMS} entries — then the entry won's ≤ ${stolen} items moved by fenced 2-action transactions, one at a time (item ×2, its RUNNING entry rewritten in place ×2, FENCE#<run>#<s> ConditionCheck 2) and a consistent GetItem each; stale: the rebuild claim (the hint as the takes left it; ${fmt(tailPath.claims)} asks try it a rebuild), whose winner reads every RUNNING key's entries and ≤ ${fmt(STEAL_READ_ITEMS)} candidates' items (${fmt(rebuildRcu)} RCU) and puts the hint (${hintWriteWcu(hintBytes)} WCU) — at most once per ${freshSeconds} s a run; LEASE#coordinator:<run> written only by a sandbox past half its ${COORDINATOR_LEASE_TTL_MS / 1000} s TTL (a renewal; again when another renewed first), read by a cold one (adopted without a write while fresh); the FENCE#<run>/RAISED marker read once per sandbox and epoch, before its first fenced write. Averaged over the first idle minute's ${fmt(idleAsks)} asks/s`,
    },
    {
      path: 'reconcile (restart, lost ask)',
      per: 'known restart, lost answer',
      dynamodbRequests: shards,
      wcu: 0,
      indexWcu: 0,
      rcu: runningSetRcu,
      sqsRequests: 0,
      lambdaInvocations: 0,
      keys: "every RUNNING key's entries read (to adopt what a previous life held, or a steal whose answer was lost); its own items, if any, read to see which started. A worker new to the registry (its registration says so) reads nothing at start",
    },
    {
      path: 'scan',
      per: `run, every ${a.scanEverySeconds} s (Lambda)`,
      dynamodbRequests: 1 + 2 * shards + 2 + shards + Math.ceil(runningSet / 100) + shards + 1,
      wcu: 2,
      indexWcu: 0,
      rcu: 0.5 + shards + runningSetRcu + runningItemsRcu + 0.5 * shards + 1,
      sqsRequests: 0,
      lambdaInvocations: 1,
      keys: `gsi1 RUNS query; one probe of every PENDING and RUNNING key (Limit 1); lease campaign; every RUNNING key's entries, then every running item read (BatchGetItem, 100 a call: ${fmt(runningItemsRcu)} RCU, their heartbeats); unsent PENDING entries (≤ 1,000 a key); run record`,
    },
    {
      path: 'failure scan: re-pend',
      per: 'silent worker’s item',
      dynamodbRequests: 2,
      wcu: 2 * w + 2 + w,
      indexWcu: 4 * e + 2 * e,
      rcu: 1,
      sqsRequests: 1 / 10,
      lambdaInvocations: 0,
      keys: 'fenced transaction (item ×2, RUNNING delete ×2, PENDING put ×2, its shard fence FENCE#<run>#<s> ConditionCheck 2); then dispatch: SendMessageBatch + markSent',
    },
    {
      path: 'replay (node coordinator)',
      per: 'pending item (on takeover)',
      dynamodbRequests: (INDEX_ENTRY_KB * 1024) / (1024 * 1024),
      wcu: 0,
      indexWcu: 0,
      rcu: (0.5 * INDEX_ENTRY_KB) / 4,
      sqsRequests: 0,
      lambdaInvocations: 0,
      keys: 'every PENDING key read in pages (1 MB a page), plus the running set',
    },
  ];

  // Per item in steady state (the scan amortised over the items of a minute).
  const scanRcu = paths.find((r) => r.path === 'scan')!.rcu;
  const itemsPerScan = achievable * a.scanEverySeconds;
  const sqsPerItem = 1 / 10 + 1 / b + claimExtensionCalls + held.extensionCalls + deletesPerItem;
  const rcuPerItem = runRecordRcu / achievable + scanRcu / itemsPerScan;
  const lambdaPerItem = 1 / a.apiRequestItems + 1 / itemsPerScan;
  const perItemTotals = {
    itemWcu: p.itemWcu + 1 / a.apiRequestItems,
    pendingWcu: p.pendingWcu,
    runningWcu: p.runningWcu,
    rcu: rcuPerItem,
    sqsRequests: sqsPerItem,
    lambdaInvocations: lambdaPerItem,
  };

  // Table-level, steady state.
  const registryWcu = workers / heartbeatSeconds; // the worker registry's heartbeat, INSTANCE#<id>
  const tableWcu = rate * perItemTotals.itemWcu + registryWcu;
  const indexWcu = rate * (p.pendingWcu + p.runningWcu);
  const tableRcu = rate * rcuPerItem;
  const quotaW = AWS_LIMITS.tableOnDemandWcu.value;
  const quotaR = AWS_LIMITS.tableOnDemandRcu.value;
  const table = [
    check(
      'table writes (WCU/s)',
      tableWcu,
      quotaW,
      `per-table on-demand quota; a new table is warm for ${AWS_LIMITS.warmNewTableWcu.value.toLocaleString('en-US')} writes/s`,
    ),
    check('gsi1 writes (index WCU/s)', indexWcu, quotaW, 'the same quota applied to the index (see AWS_LIMITS.tableOnDemandWcu)'),
    check('reads (RCU/s, steady)', tableRcu, quotaR, `a new table is warm for ${AWS_LIMITS.warmNewTableRcu.value.toLocaleString('en-US')} reads/s`),
    check('table writes vs warm throughput of a new table', tableWcu, AWS_LIMITS.warmNewTableWcu.value, 'pre-warm the table (WarmThroughput) before the run'),
    check('gsi1 writes vs warm throughput of a new index', indexWcu, AWS_LIMITS.warmNewTableWcu.value, 'pre-warm gsi1 too'),
  ];

  // SQS: requests and the in-flight messages (received, not yet deleted: held plus the delete round trip).
  const sqsPerSecond = rate * sqsPerItem;
  const inFlight = achievable * (heldSeconds + ls);
  const sqsCheck = check(
    'SQS in-flight messages',
    inFlight,
    AWS_LIMITS.sqsInFlight.value,
    'rate × how long an item is held (claim to ack): fewer items per receive, or shorter items, lower it',
  );

  // Lambda: the API (enqueue), the scan, and every idle worker's steal at the tail.
  const steady = { invocationsPerSecond: apiPerSecond + 1 / a.scanEverySeconds, concurrency: apiPerSecond * apiSeconds + 1 };
  const tail = { invocationsPerSecond: idleAsks, concurrency: tailPath.concurrency };
  const lambdaChecks = [
    check(
      'Lambda concurrency, steady (API enqueue + scan)',
      steady.concurrency,
      AWS_LIMITS.lambdaConcurrency.value,
      `${apiSeconds.toFixed(1)} s per ${a.apiRequestItems.toLocaleString('en-US')}-item enqueue request (the API Lambda times out at ${FUNCTIONS.api.timeoutSeconds} s)`,
    ),
    check(
      'Lambda concurrency, tail (idle workers asking for work in their first idle minute)',
      tail.concurrency,
      AWS_LIMITS.lambdaConcurrency.value,
      `${workers.toLocaleString('en-US')} idle workers × ${IDLE_ASKS_FIRST_MINUTE} asks / 60 s × ${stealSeconds.toFixed(3)} s an ask on average (most read the hint and answer; one a run per ${freshSeconds} s rebuilds it, a few take and move items)`,
    ),
    check(
      'coordinator invocations per 10 s at the tail (new environments)',
      Math.min(tail.concurrency, idleAsks * 10),
      AWS_LIMITS.lambdaScaling.value,
      'Lambda adds at most 1,000 environments to a function every 10 s',
    ),
  ];
  const stealItemLimit = IDLE_CEILINGS.stealItemWriteShare * PARTITION_WCU;
  const idleChecks = [
    check(
      'idle fleet: reads per RUNNING key (RCU/s)',
      idle.perKeyRcuPerSecond,
      IDLE_CEILINGS.runningKeyReadShare * PARTITION_RCU,
      `only the steal hint's rebuilds read the running set: ${fmt(perKeyRead)} RCU a key, at most once per ${freshSeconds} s a run, however many of the ${fmt(workers)} idle workers ask (${IDLE_ASKS_FIRST_MINUTE} times in the first idle minute: at once, then 20 s doubling to 5 min apart; once per ${SETTLED_ASK_SECONDS} s after)`,
    ),
    check(
      'idle fleet: table reads (RCU/s)',
      idle.tableRcuPerSecond,
      quotaR,
      `every ask reads the hint (${fmt(hintReadRru(hintBytes))} RRU), a rebuild ${fmt(rebuildRcu)} RCU every ${freshSeconds} s, moved items a consistent read each`,
    ),
    check(
      'idle fleet, every set empty (RRU/s)',
      idle.emptyTableRcuPerSecond,
      IDLE_CEILINGS.emptyFleetRru,
      `an ask reads the empty hint (${fmt(hintReadRru(emptyHintBytes))} RRU); a rebuild every ${freshSeconds} s queries the ${fmt(shards)} RUNNING keys at 0.5 RRU each`,
    ),
    check(
      "steal path's hottest item (WCU/s)",
      hottestStealItem.wcuPerSecond,
      stealItemLimit,
      `${hottestStealItem.key}: per rebuild the hint takes ${fmt(tailPath.claims)} rebuild claims (${hintWriteWcu(stealHintBytes([]))} WCU each on the hint the takes emptied), a put (${hintWriteWcu(hintBytes)} WCU) and ${fmt(tailPath.takes)} take attempts (${fmt(tailPath.takeWcu)} WCU: the ${fmt(tailPath.herd)} asks that read the fresh hint all try its busiest entry first, a loser the next, each paying the hint's size as it shrinks); ${fmt(largestPath.hintWcu)} WCU/s were every entry ${MAX_STEAL_BATCH} ids; a shard fence ${fmt(tailPath.fenceWcu)} WCU/s; the lease ${fmt(tailPath.lease)} (renewals only, none per ask)`,
    ),
  ];

  // Cost at list prices (tools/cost/prices.ts PRICES).
  const writeUnits = perItemTotals.itemWcu + p.pendingWcu + p.runningWcu;
  const apiGbS = (apiSeconds * FUNCTIONS.api.memoryMb) / 1024 / a.apiRequestItems;
  const scanSeconds = a.lambdaMs / 1000 + 4 * ld + 2 * rounds(2 * shards) * ld;
  const scanGbSPerItem = (scanSeconds * FUNCTIONS.coordinator.memoryMb) / 1024 / itemsPerScan;
  const lines = [
    {
      what: 'DynamoDB writes',
      perMillionUsd: 1e6 * writeUnits * PRICES.dynamoWrite.usd,
      basis: `${writeUnits.toFixed(2)} WRU an item (${perItemTotals.itemWcu.toFixed(2)} table + ${(p.pendingWcu + p.runningWcu).toFixed(2)} gsi1) × US$ ${(PRICES.dynamoWrite.usd * 1e6).toFixed(3)}/M`,
    },
    {
      what: 'DynamoDB reads',
      perMillionUsd: 1e6 * rcuPerItem * PRICES.dynamoRead.usd,
      basis: `${rcuPerItem.toFixed(3)} RRU an item (the run record once a minute per worker, the scan's reads of the running set) × US$ ${(PRICES.dynamoRead.usd * 1e6).toFixed(3)}/M`,
    },
    {
      what: 'SQS requests',
      perMillionUsd: 1e6 * sqsPerItem * PRICES.sqsRequest.usd,
      basis: `${sqsPerItem.toFixed(2)} requests an item × US$ ${(PRICES.sqsRequest.usd * 1e6).toFixed(2)}/M`,
    },
    {
      what: 'Lambda (API enqueue, scan)',
      perMillionUsd: 1e6 * (lambdaPerItem * PRICES.lambdaRequest.usd + (apiGbS + scanGbSPerItem) * PRICES.lambdaArmGbSecond.usd),
      basis: `${(lambdaPerItem * 1e6).toFixed(1)} invocations a million items, ${((apiGbS + scanGbSPerItem) * 1e6).toFixed(0)} GB-s`,
    },
  ];
  const perMillion = lines.reduce((s, l) => s + l.perMillionUsd, 0);
  const perItemUsd = perMillion / 1e6;
  const gb = (input.items * itemKb) / (1024 * 1024);
  const storageUsdMonth = gb * (PRICES.dynamoStorage.usd + PRICES.dynamoPitr.usd);

  const warnings: string[] = [];
  if (needed > MAX_RUN_SHARDS)
    warnings.push(
      `${rate} items/s needs ${needed} shards at this shape; a run takes at most ${MAX_RUN_SHARDS}: split it into ${Math.ceil(needed / MAX_RUN_SHARDS)} runs`,
    );
  for (const c of perKeyChecks) if (!c.ok) warnings.push(`${c.what}: ${fmt(c.value)} > ${fmt(c.limit)} (${share * 100}% of the partition's limit) — ${c.note}`);
  if (!sqsCheck.ok)
    warnings.push(
      `SQS in flight ≈ ${fmt(inFlight)} > ${fmt(AWS_LIMITS.sqsInFlight.value)}: receives stop returning messages; use a smaller --batch, more queues, or ask AWS for more`,
    );
  else if (inFlight > 0.8 * AWS_LIMITS.sqsInFlight.value) warnings.push(`SQS in flight ≈ ${fmt(inFlight)}, over 80 % of ${fmt(AWS_LIMITS.sqsInFlight.value)}`);
  for (const c of table.slice(0, 3))
    if (!c.ok) warnings.push(`${c.what}: ${fmt(c.value)} > the ${fmt(c.limit)} default quota: request an increase (Service Quotas) before the run`);
  for (const c of lambdaChecks) if (!c.ok) warnings.push(`${c.what}: ${fmt(c.value)} > ${fmt(c.limit)}`);
  for (const c of idleChecks) if (!c.ok) warnings.push(`${c.what}: ${fmt(c.value)} > ${fmt(c.limit)} — ${c.note}`);
  // The check is at this shape; entries of MAX_STEAL_BATCH ids (long items, deep backlogs) make every take dearer.
  if (hottestStealItemAtLargest.wcuPerSecond > stealItemLimit) {
    warnings.push(
      `steal path's hottest item were every hint entry ${MAX_STEAL_BATCH} ids: ${hottestStealItemAtLargest.key} at ${fmt(hottestStealItemAtLargest.wcuPerSecond)} WCU/s > ${fmt(stealItemLimit)} (half a partition) — ${fmt(tailPath.herd)} asks read each fresh hint and all try its busiest entry first, each take paying the hint's size (${hintWriteWcu(stealHintBytes(largestEntries))} WCU full): its writes would be throttled (asks slowed or failed, then asked again; no item lost). Fewer idle workers asking at once keep it under: start them as items arrive, stop them as the queue drains (--exit-when-done).`,
    );
  }
  if (workers < needWorkers) warnings.push(`${workers} workers reach ${fmt(achievable)} items/s, not ${fmt(rate)}: ${needWorkers} needed`);
  if (apiSeconds > FUNCTIONS.api.timeoutSeconds * 0.75)
    warnings.push(
      `an enqueue request of ${a.apiRequestItems} items takes ~${apiSeconds.toFixed(0)} s, near the API's ${FUNCTIONS.api.timeoutSeconds} s timeout: send smaller requests`,
    );

  const beforeRun = [
    `Create the run with shards: ${shards} (its itemsPerSecond would pick ${shardsFor(rate)}, which assumes 1 KB items and one heartbeat each).`,
    ...(tableWcu > quotaW || indexWcu > quotaW || tableRcu > quotaR
      ? [
          `Ask for the DynamoDB table-level throughput quota (Service Quotas, adjustable) above ${fmt(Math.max(tableWcu, indexWcu))} WRU/s — the default is ${fmt(quotaW)} per table.`,
        ]
      : []),
    ...(tableWcu > AWS_LIMITS.warmNewTableWcu.value || indexWcu > AWS_LIMITS.warmNewTableWcu.value
      ? [
          `Pre-warm the table to ≥ ${fmt(tableWcu)} writes/s and gsi1 to ≥ ${fmt(indexWcu)} writes/s (UpdateTable WarmThroughput; billed; give it time), or ramp the rate up no faster than doubling each 30 minutes — a new on-demand table is warm for ${fmt(AWS_LIMITS.warmNewTableWcu.value)} writes/s.`,
        ]
      : []),
    ...(!sqsCheck.ok ? ['Lower the in-flight messages (smaller --batch or shorter items) or ask AWS for a higher SQS in-flight quota.'] : []),
    ...(lambdaChecks.some((c) => !c.ok)
      ? [`Raise the account's Lambda concurrency above ${fmt(Math.max(steady.concurrency, tail.concurrency))}, or reserve concurrency for the coordinator.`]
      : []),
    ...(idleChecks.some((c) => !c.ok)
      ? [
          `Start the ${fmt(workers)} workers after the first items are enqueued and stop them as the queue drains (--exit-when-done): the idle fleet's asks are over a limit above (each reads and may write the run's steal hint).`,
        ]
      : []),
    `Keep results under ${MAX_RESULT_BYTES / 1024} KiB (larger ones fail their item: store them in S3 and return a reference).`,
  ];

  const limits = [
    `item: ${AWS_LIMITS.itemBytes.value / 1024} KB per DynamoDB item. The ledger refuses a result over ${MAX_RESULT_BYTES / 1024} KiB (MAX_RESULT_BYTES): the worker records a reject — the item ends Failed with "store it elsewhere (e.g. S3) and return a reference". Nothing is offloaded to S3 for you; a payload over the limit fails its enqueue.`,
    `transaction: ${AWS_LIMITS.transactionActions.value} actions / 4 MB. Every fenced write is its own 2-action transaction (its shard fence's ConditionCheck + the item), so the ledger never comes near it; a run's fenced writes go through their shard's fence FENCE#<run>#<s> (one shard's one at a time; different shards' in parallel), raised once per coordinator epoch (${Math.ceil(shards / 99)} transaction(s) of ≤ 99 fences and the lease's check, then the FENCE#<run>/RAISED marker).`,
    `steals: a run's fruitful steals are bounded by its steal hint — at most ${STEAL_HINT_VICTIMS} victims per rebuild, one rebuild per ${freshSeconds} s: ${fmt(STEAL_HINT_VICTIMS / freshSeconds)} a second, ≤ ${fmt((STEAL_HINT_VICTIMS / freshSeconds) * stolen)} items a second at this shape (${stolen} a steal). Plenty where items are long (there steals matter); short items' backlogs drain on their own.`,
    `SQS: ${fmt(AWS_LIMITS.sqsInFlight.value)} in-flight messages per standard queue; here ≈ ${fmt(inFlight)}.`,
    `Lambda: ${fmt(AWS_LIMITS.lambdaConcurrency.value)} concurrent executions per account (adjustable), ${fmt(AWS_LIMITS.lambdaScaling.value)} new environments per function every 10 s.`,
    `DynamoDB: ${PARTITION_WCU} WCU / ${PARTITION_RCU} RCU per partition key (not adjustable: shard), ${fmt(quotaW)} WRU / ${fmt(quotaR)} RRU per on-demand table (adjustable), new tables warm at ${fmt(AWS_LIMITS.warmNewTableWcu.value)} writes / ${fmt(AWS_LIMITS.warmNewTableRcu.value)} reads a second.`,
    `a run: at most ${MAX_RUN_SHARDS} shards; the API takes ${fmt(a.apiRequestItems)} items per request.`,
  ];

  return {
    input,
    timing: { workerSecondsPerItem, heldSeconds, heartbeatsPerItem: heartbeats, chunk, deletesPerItem },
    paths,
    perItem: perItemTotals,
    shards: { needed, apiDefault: shardsFor(rate), max: MAX_RUN_SHARDS, fits: needed <= MAX_RUN_SHARDS, perKey: perKeyChecks },
    table,
    sqs: { requestsPerSecond: sqsPerSecond, inFlight, check: sqsCheck },
    lambda: { steady, tail, checks: lambdaChecks },
    workers: { needed: needWorkers, deployed: workers, achievableRate: achievable, instances: Math.ceil(workers / a.workersPerInstance) },
    runSeconds,
    idle: { ...idle, checks: idleChecks },
    cost: {
      perItemUsd,
      perMillionUsd: perMillion,
      perHourUsd: perItemUsd * achievable * 3600,
      runUsd: perItemUsd * input.items,
      storageUsdMonth,
      lines,
      unpriced: [
        `EC2 workers: ${fmt(Math.ceil(workers / a.workersPerInstance))} instances × ${(runSeconds / 3600).toFixed(2)} h (c7g.large Spot in infra/worker-fleet.ts; tools/cost/prices.ts has no EC2 price — add one there to price them)`,
        'pre-warming (billed by AWS per the warm throughput raised)',
        "the tail's idle reads (see idle) and anything throttled and retried",
      ],
    },
    limits,
    warnings,
    beforeRun,
  };
}
