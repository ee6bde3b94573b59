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
  DEFAULT_KEY_SHARE,
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
import { extensionDue, heartbeatDue, HEARTBEAT_ROUNDS, RUN_RECORD_TTL_MS, stealBackoffMs } from '../../shared/ledger/worker.js';
import { FUNCTIONS } from '../../shared/topology.js';
import { PRICE_REGION, PRICES, PRICES_READ_ON } from '../cost.js';

// ---------------------------------------------------------------------------
// AWS limits (read 2026-11-24 through the docs search; each with its page)
// ---------------------------------------------------------------------------

export const LIMITS_READ_ON = '2026-11-24';

export interface Limit {
  readonly value: number;
  readonly unit: string;
  readonly adjustable: boolean | 'unknown';
  readonly source: string;
}

export const AWS_LIMITS = {
  partitionWcu: {
    value: PARTITION_WCU,
    unit: 'write units/s per partition (a key cannot spread over partitions; a GSI key throttles the table writes that write it)',
    adjustable: false,
    source:
      'docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html ("each individual partition is limited to 1,000 write units per second and 3,000 read units per second")',
  },
  partitionRcu: { value: PARTITION_RCU, unit: 'read units/s per partition', adjustable: false, source: 'same page' },
  tableOnDemandWcu: {
    value: 40_000,
    unit: 'write request units/s per on-demand table (the table-level quota; this plan applies it to the table and to its GSI each — the excerpts read do not say how an on-demand GSI counts)',
    adjustable: true,
    source:
      'docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html ("bounded by 40,000 table-level read and write throughput AWS service quota ... you can request an increase"); Limits.html (per table, on-demand: 40,000 RRU and 40,000 WRU); throttling-account-limit-exceeded-mitigation.html (AccountLimitExceeded throttling reason)',
  },
  tableOnDemandRcu: { value: 40_000, unit: 'read request units/s per on-demand table', adjustable: true, source: 'same pages' },
  warmNewTableWcu: {
    value: 4_000,
    unit: 'writes/s a new on-demand table sustains at once (warm throughput); it scales past that on its own only up to twice its previous peak within 30 minutes',
    adjustable: true,
    source:
      'docs.aws.amazon.com/amazondynamodb/latest/developerguide/pre-warming-on-demand-capacity-mode.html; warm-throughput.html (raise it with CreateTable/UpdateTable WarmThroughput, table and each GSI; pre-warming is billed)',
  },
  warmNewTableRcu: { value: 12_000, unit: 'reads/s a new on-demand table sustains at once', adjustable: true, source: 'same pages' },
  itemBytes: {
    value: 400 * 1024,
    unit: 'bytes per DynamoDB item (payload, result and bookkeeping together)',
    adjustable: false,
    source: 'Limits.html; shared/ledger/model.ts MAX_RESULT_BYTES says the same',
  },
  transactionActions: {
    value: 100,
    unit: 'actions per TransactWriteItems (aggregate at most 4 MB)',
    adjustable: false,
    source: 'docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html',
  },
  sqsInFlight: {
    value: 120_000,
    unit: 'in-flight messages per standard queue (received, not yet deleted); past it short polls get OverLimit, long polls return nothing',
    adjustable: true,
    source: 'docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html (increase by support request)',
  },
  sqsBatch: {
    value: 10,
    unit: 'messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch',
    adjustable: false,
    source: 'SQS API reference; shared/adapters/sqs/queue.ts batches by 10',
  },
  lambdaConcurrency: {
    value: 1_000,
    unit: 'concurrent executions per account and Region (every function together)',
    adjustable: true,
    source: 'serverlessland.com AWS Lambda Operator Guide, scaling-concurrency ("default concurrent limit of 1000 per Region ... a soft limit")',
  },
  lambdaScaling: {
    value: 1_000,
    unit: 'new execution environments per function every 10 s',
    adjustable: false,
    source: 'docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html',
  },
} as const satisfies Record<string, Limit>;

// ---------------------------------------------------------------------------
// Assumptions: what the code does not fix
// ---------------------------------------------------------------------------

export const PLAN_ASSUMPTIONS = {
  /** Messages a worker receives at once (worker `--batch`, default 10). */
  receiveBatch: 10,
  /** A chunk of started items lasts about this long (worker `--chunk-budget-ms`). */
  chunkBudgetMs: 100,
  /** Worker maxChunk default (worker.ts). */
  maxChunk: 64,
  /** Requests in flight per ledger call (DynamoLedgerStore default). */
  ledgerConcurrency: 16,
  /** Visibility a worker sets on a held message (worker `--visibility-seconds`, default 30). */
  visibilitySeconds: 30,
  /** DynamoDB answers in "single-digit milliseconds" (on-demand-capacity-mode.html); 5 ms a request is assumed. */
  dynamodbMs: 5,
  /** An SQS request from EC2 in the same Region (assumed; not measured here). */
  sqsMs: 10,
  /** A warm Lambda Invoke's round trip besides the handler's own requests (assumed). */
  lambdaMs: 30,
  /** Items per enqueue request: the API's maximum (MAX_RUN_ITEMS in shared/api/handler.ts). */
  apiRequestItems: 10_000,
  /** The coordinator's scan-all schedule (shared/topology.ts: every minute). */
  scanEverySeconds: 60,
  /** One worker per instance: the fleet runs `rollout worker` as one systemd service (infra/worker-fleet.ts, c7g.large Spot). */
  workersPerInstance: 1,
  /** Asks that read the steal hint this long before a rebuild claim or a take lands read the same hint: a herd (each pays its writes; one wins each). */
  hintHerdMs: 50,
} as const;

// ---------------------------------------------------------------------------
// The coordinator's steal path (shared/ledger/steal-hint.ts, coordinator.ts)
// ---------------------------------------------------------------------------

/** The coordinator lease's TTL (functions/runtime.ts ROLLOUT_LEASE_TTL_MS): a warm sandbox renews it only past half of it. */
export const COORDINATOR_LEASE_TTL_MS = 30_000;
/** Items a steal (now: a hint rebuild) reads at most to learn which are started (coordinator.ts STEAL_READ_BUDGET). */
export const STEAL_READ_ITEMS = 1_000;
/**
 * The steal hint item STEAL#<run>/HINT as DynamoDB sizes it: keys, builtAt and
 * the rebuild claim; per victim its worker id and list; per id 64 hex
 * characters and a list element's byte. Empty ≈ 0.1 KB, full (4 × 32 ids) ≈ 8.4 KB.
 */
export const STEAL_HINT_BYTES = { base: 100, perVictim: 40, perId: 65 } as const;
export const stealHintBytes = (idsPerVictim: readonly number[]): number =>
  STEAL_HINT_BYTES.base + idsPerVictim.reduce((s, ids) => s + STEAL_HINT_BYTES.perVictim + ids * STEAL_HINT_BYTES.perId, 0);
/** An eventually consistent GetItem: ½ unit per started 4 KB. */
export const hintReadRru = (bytes: number): number => 0.5 * Math.max(1, Math.ceil(bytes / 4096));
/** A write of the hint item (put, or a conditional update: claim, take, won or lost): a unit per started KB. */
export const hintWriteWcu = (bytes: number): number => Math.max(1, Math.ceil(bytes / 1024));

/**
 * A herd of `thieves` asks that read the same hint listing `ids` (ids per
 * entry, busiest first) take as coordinator.ts stealFor does: each tries the
 * busiest entry first and, lost, the next, so in round r one wins the
 * busiest entry left and the rest lose it. A take, won or lost, costs the
 * hint's size as it lands (`rest`: other entries still in it): the winner's
 * with its entry still in, the losers' after it went. A fractional herd's
 * last thief counts for its fraction.
 */
export function busiestFirstTakes(
  thieves: number,
  ids: readonly number[],
  rest: readonly number[] = [],
): { attempts: number; wcu: number; won: number; rounds: number } {
  const order = [...ids].sort((a, b) => b - a);
  let attempts = 0;
  let wcu = 0;
  let won = 0;
  let r = 0;
  for (let left = thieves; left > 0 && r < order.length; left--, r++) {
    const winner = Math.min(1, left);
    const losers = Math.max(0, left - 1);
    attempts += left;
    won += winner;
    wcu += winner * hintWriteWcu(stealHintBytes([...order.slice(r), ...rest])) + losers * hintWriteWcu(stealHintBytes([...order.slice(r + 1), ...rest]));
  }
  return { attempts, wcu, won, rounds: r };
}
/** Ceilings of the idle fleet: its reads leave most of a RUNNING key to the scan and reconciles; the hint or a fence stays under half a partition. */
export const IDLE_CEILINGS = { runningKeyReadShare: 0.3, emptyFleetRru: 1_000, stealItemWriteShare: 0.5 } as const;

export interface PlanInput {
  readonly items: number;
  /** Target items/s. */
  readonly rate: number;
  /** Workers deployed; default: as many as the rate needs. */
  readonly workers?: number;
  /** Size of an item as stored (payload, result, bookkeeping), KB. */
  readonly itemKb: number;
  /** How long the backend takes per item, s. */
  readonly itemSeconds: number;
  /** Worker heartbeat interval, s (worker `--heartbeat-ms`, default 5 s). */
  readonly heartbeatSeconds: number;
  /** Share of a partition's limit a key may reach. */
  readonly share: number;
}

export const PLAN_DEFAULTS: Omit<PlanInput, 'items' | 'rate'> = { itemKb: 1, itemSeconds: 1, heartbeatSeconds: 5, share: DEFAULT_KEY_SHARE };

// ---------------------------------------------------------------------------
// The plan
// ---------------------------------------------------------------------------

/** One path of the ledger and what one pass of it costs. */
export interface PathRow {
  readonly path: string;
  /** How often: per item, per idle worker poll, per scan… */
  readonly per: string;
  readonly dynamodbRequests: number;
  /** Write units on the item's partition (or the key named), index write units, read units. */
  readonly wcu: number;
  readonly indexWcu: number;
  readonly rcu: number;
  readonly sqsRequests: number;
  readonly lambdaInvocations: number;
  readonly keys: string;
}

export interface Check {
  readonly what: string;
  readonly value: number;
  readonly limit: number;
  readonly ok: boolean;
  readonly note: string;
}

export interface CapacityPlan {
  readonly input: PlanInput;
  /** Derived timings: per item on one worker, held (claim to ack), heartbeats per item. */
  readonly timing: {
    readonly workerSecondsPerItem: number;
    readonly heldSeconds: number;
    readonly heartbeatsPerItem: number;
    readonly chunk: number;
    readonly deletesPerItem: number;
  };
  readonly paths: readonly PathRow[];
  readonly perItem: {
    readonly itemWcu: number;
    readonly pendingWcu: number;
    readonly runningWcu: number;
    readonly rcu: number;
    readonly sqsRequests: number;
    readonly lambdaInvocations: number;
  };
  readonly shards: { readonly needed: number; readonly apiDefault: number; readonly max: number; readonly fits: boolean; readonly perKey: readonly Check[] };
  readonly table: readonly Check[];
  readonly sqs: { readonly requestsPerSecond: number; readonly inFlight: number; readonly check: Check };
  readonly lambda: {
    readonly steady: { readonly invocationsPerSecond: number; readonly concurrency: number };
    readonly tail: { readonly invocationsPerSecond: number; readonly concurrency: number };
    readonly checks: readonly Check[];
  };
  readonly workers: { readonly needed: number; readonly deployed: number; readonly achievableRate: number; readonly instances: number };
  /** The run's duration at the achievable rate. */
  readonly runSeconds: number;
  /** Idle fleet and tail: what idle workers' asks cost (the steal hint, its rebuilds, the lease), first idle minute and settled. */
  readonly idle: IdleFleet;
  readonly cost: {
    readonly perItemUsd: number;
    readonly perMillionUsd: number;
    readonly perHourUsd: number;
    readonly runUsd: number;
    readonly storageUsdMonth: number;
    readonly lines: readonly { readonly what: string; readonly perMillionUsd: number; readonly basis: string }[];
    readonly unpriced: readonly string[];
  };
  readonly limits: readonly string[];
  readonly warnings: readonly string[];
  readonly beforeRun: readonly string[];
}

export interface IdleFleet {
  /** What reading the running set's entries costs (a hint rebuild, a reconcile). */
  readonly runningSetRcu: number;
  /** Reads on each RUNNING key: the hint's rebuilds only. */
  readonly perKeyRcuPerSecond: number;
  readonly tableRcuPerSecond: number;
  readonly settledTableRcuPerSecond: number;
  /** The lease item's writes: renewals only (none per ask), at most two per sandbox per half TTL. */
  readonly leaseWcuPerSecond: number;
  readonly emptyTableRcuPerSecond: number;
  readonly emptySettledTableRcuPerSecond: number;
  readonly hint: {
    readonly bytes: number;
    readonly readRru: number;
    readonly writeWcu: number;
    readonly rebuildsPerSecond: number;
    /** The running set's entries and the candidates' items a rebuild reads. */
    readonly rebuildRcu: number;
    readonly claimsPerRebuild: number;
    /** Asks that read the same fresh hint, all trying its busiest entry first. */
    readonly herd: number;
    /** Take attempts (won or lost) and the WCU they cost, per rebuild; entries won. */
    readonly takesPerRebuild: number;
    readonly takeWcuPerRebuild: number;
    readonly takesWonPerRebuild: number;
    readonly wcuPerSecond: number;
    /** The same were every entry MAX_STEAL_BATCH ids long (≈ 8.4 KB full, whatever the shape). */
    readonly wcuPerSecondAtLargest: number;
    /** At most STEAL_HINT_VICTIMS per rebuild. */
    readonly fruitfulStealsPerSecond: number;
    readonly itemsStolenPerSecond: number;
  };
  /** A shard fence's ConditionChecks from the steal path (its shard's share of the items moved). */
  readonly fenceWcuPerSecond: number;
  readonly hottestStealItem: { readonly key: string; readonly wcuPerSecond: number };
  /** The same were every entry MAX_STEAL_BATCH ids long. */
  readonly hottestStealItemAtLargest: { readonly key: string; readonly wcuPerSecond: number };
  readonly checks: readonly Check[];
}

const check = (what: string, value: number, limit: number, note: string): Check => ({ what, value, limit, ok: value <= limit, note });

export interface HeldTimes {
  readonly batch: number;
  readonly chunk: number;
  readonly itemSeconds: number;
  readonly dynamodbSeconds: number;
  readonly sqsSeconds: number;
  /** Ledger requests in flight per round (DynamoLedgerStore concurrency). */
  readonly concurrency: number;
  readonly heartbeatSeconds: number;
  readonly visibilitySeconds: number;
}

/**
 * What a worker writes for a received batch's items while it holds them, per
 * item, as worker.ts does it: heartbeat rounds HEARTBEAT_ROUNDS times an
 * interval at a phase of their own, each writing the items `heartbeatDue` and
 * extending the messages `extensionDue` (one ChangeMessageVisibilityBatch of
 * up to ten a round). Times from the claims (sent at 0): the messages are
 * extended once the claims are in, chunk m starts at m chunk-times after
 * that, an item is held until its chunk's acks are in. Averaged over the
 * rounds' phase.
 */
export function heldWrites(t: HeldTimes): { heartbeats: number; extensions: number; extensionCalls: number } {
  const hb = t.heartbeatSeconds * 1000;
  const period = hb / HEARTBEAT_ROUNDS;
  const visibility = t.visibilitySeconds * 1000;
  const ld = t.dynamodbSeconds * 1000;
  const rounds = (n: number) => Math.ceil(n / t.concurrency);
  const extendedAt = rounds(t.batch) * ld;
  const chunkMs = 2 * rounds(t.chunk) * ld + t.sqsSeconds * 1000 + t.chunk * t.itemSeconds * 1000;
  const start = Array.from({ length: t.batch }, (_, k) => extendedAt + t.sqsSeconds * 1000 + Math.floor(k / t.chunk) * chunkMs);
  const end = start.map((s) => s + 2 * rounds(t.chunk) * ld + t.chunk * t.itemSeconds * 1000);
  const last = Math.max(...end);
  const PHASES = 256;
  let beats = 0;
  let extensions = 0;
  let calls = 0;
  for (let p = 0; p < PHASES; p++) {
    const wrote = start.map(() => 0);
    const visibleUntil = start.map(() => extendedAt + visibility);
    for (let r = ((p + 0.5) / PHASES) * period; r < last; r += period) {
      let extended = 0;
      for (let k = 0; k < t.batch; k++) {
        if (r >= end[k]!) continue;
        if (r >= start[k]! && wrote[k]! < start[k]!) wrote[k] = start[k]!;
        if (heartbeatDue(r, wrote[k]!, hb)) {
          beats++;
          wrote[k] = r;
        }
        if (extensionDue(r, visibleUntil[k]!, visibility, hb)) {
          extended++;
          visibleUntil[k] = r + visibility;
        }
      }
      extensions += extended;
      calls += Math.ceil(extended / 10);
    }
  }
  const per = PHASES * t.batch;
  return { heartbeats: beats / per, extensions: extensions / per, extensionCalls: calls / per };
}

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

  // Cost at list prices (infra/cost.ts PRICES).
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
        `EC2 workers: ${fmt(Math.ceil(workers / a.workersPerInstance))} instances × ${(runSeconds / 3600).toFixed(2)} h (c7g.large Spot in infra/worker-fleet.ts; infra/cost.ts has no EC2 price — add one there to price them)`,
        'pre-warming (billed by AWS per the warm throughput raised)',
        "the tail's idle reads (see idle) and anything throttled and retried",
      ],
    },
    limits,
    warnings,
    beforeRun,
  };
}

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

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
  out.push(`limits read ${LIMITS_READ_ON}; prices ${PRICE_REGION} list, read ${PRICES_READ_ON} (infra/cost.ts)`);
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
