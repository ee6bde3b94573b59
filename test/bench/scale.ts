/**
 * npm run bench -- scale [--items N] [--workers N] [--wcu N] [--rcu N] [--shards 1,4,16,64]
 *
 * The same work run — enqueue, SQS (fauxqs), `Worker`s claiming, starting
 * and acking on the mock backend — on DynamoDB Local behind the throttling
 * simulator (test/support/dynamodb-throttle.ts), whose per-key limits are
 * scaled down so this machine can reach them: with the first (unsharded)
 * layout and with 1, 4, 16 and 64 shards, then with no limit at all (the
 * machine's own ceiling, through the same proxy). Per layout: items/s from
 * the first enqueue to the last result, requests refused for throttling and
 * on which key families, the hottest key's units in its busiest window, and
 * the p50/p99 of a claim (the ledger call, the SDK's own retries included).
 *
 * What it shows: with every item under one key, the key's limit is the run's
 * ceiling (its refusals name that key); shards raise the ceiling until the
 * machine, not a key, is what limits. Last line: one JSON object.
 */
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { parseArgs } from 'node:util';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { ensureTable } from '../../shared/adapters/dynamodb/table.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import type { LedgerStore } from '../../shared/ledger/store.js';
import { Worker } from '../../shared/ledger/worker.js';
import { StoreContendedError } from '../../shared/errors.js';
import { uniqueName } from '../support/backends.js';
import { ThrottleProxy, type ThrottleStats } from '../support/dynamodb-throttle.js';
import { percentile, round3 } from './raw.js';

const { values: args } = parseArgs({
  options: {
    items: { type: 'string', default: '400' },
    workers: { type: 'string', default: '4' },
    wcu: { type: 'string', default: '40' },
    rcu: { type: 'string', default: '120' },
    shards: { type: 'string', default: '1,4,16,64' },
  },
});
const ITEMS = Number(args.items);
const WORKERS = Number(args.workers);
const LIMITS = { partitionWcu: Number(args.wcu), partitionRcu: Number(args.rcu), windowMs: 1_000 };

interface Layout {
  readonly name: string;
  /** null: the first layout (a run created before sharding). */
  readonly shards: number | null;
  /** false: the proxy meters but never refuses (the machine's ceiling). */
  readonly limited: boolean;
}

/** The ledger, with every claim timed (what a worker waits for before it can run anything). */
function timingClaims(ledger: LedgerStore, claims: number[]): LedgerStore {
  return new Proxy(ledger, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (prop !== 'casMany' || typeof v !== 'function') return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      return async (changes: Parameters<LedgerStore['casMany']>[0], now: number) => {
        const t = performance.now();
        try {
          return await target.casMany(changes, now);
        } finally {
          if (changes[0]?.transition === 'claim') claims.push(performance.now() - t);
        }
      };
    },
  });
}

interface Row {
  readonly shards: number | null;
  readonly limited: boolean;
  readonly items_per_s: number;
  readonly seconds: number;
  readonly requests: number;
  readonly throttled_requests: number;
  readonly throttled_by_key_family: Record<string, number>;
  readonly hottest_key_family: string | null;
  readonly hottest_key_peak_wcu_per_window: number;
  readonly keys_written: number;
  readonly claim_p50_ms: number;
  readonly claim_p99_ms: number;
  readonly worker_steps_failed: number;
}

async function runOn(layout: Layout, upstream: URL): Promise<Row> {
  const proxy = await new ThrottleProxy(upstream, layout.limited ? LIMITS : { partitionWcu: 1e9, partitionRcu: 1e9 }).start();
  // Every client of this layout goes through the proxy: the workers' ledger and the producer alike.
  const client = new DynamoDBClient({ endpoint: proxy.url });
  const doc = dynamoDocumentClient(client);
  const table = uniqueName('scale');
  const sqs = sqsClient();
  const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('scale'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
  try {
    await ensureTable(new DynamoDBClient({ endpoint: upstream.toString() }), table);
    const ledger = new DynamoLedgerStore(doc, table, { concurrency: 8 });
    const runId = uniqueName('run');
    if (layout.shards === null) {
      // A run as the first layout wrote it: no shard count on its record.
      await doc.send(new PutCommand({ TableName: table, Item: { pk: `RUN#${runId}`, sk: 'RUN', id: runId, spec: {}, coordinatorEpoch: -1, createdAt: Date.now(), enqueues: 0, gsi1pk: 'RUNS', gsi1sk: runId } }));
    } else {
      await ledger.createRun(runId, {}, Date.now(), { shards: layout.shards });
    }
    proxy.resetStats();
    const queue = new SqsWorkQueue(sqs, queueUrl);
    const claims: number[] = [];
    const timed = timingClaims(ledger, claims);
    const began = performance.now();
    // The producer as a client of the API: a request refused for throttling (a 503) is sent again; enqueue is idempotent.
    const { ids } = await untilAccepted(() => ledger.enqueue(runId, Array.from({ length: ITEMS }, (_, i) => ({ runId, i })), Date.now()));
    await queue.send(runId, ids);
    const workers = Array.from({ length: WORKERS }, (_, i) => new Worker({ runId, workerId: `w${i}`, ledger: timed, queue, backend: mockBackend({ durationMs: 0 }), receiveBatch: 10, maxChunk: 10, waitSeconds: 0 }));
    const stop = new AbortController();
    const recorded = () => workers.reduce((s, w) => s + w.stats.done, 0);
    // Workers run as in production: a step that fails (throttled past the SDK's retries) is retried after a jittered backoff.
    const finished = () => Promise.resolve(recorded() >= ITEMS && (stop.abort(), true));
    await Promise.all(workers.map((w) => w.run(stop.signal, finished)));
    const seconds = (performance.now() - began) / 1000;
    if (recorded() !== ITEMS) throw new Error(`${layout.name}: recorded ${recorded()} results of ${ITEMS}`);
    const stats = proxy.stats();
    return row(layout, seconds, claims, stats, workers.reduce((s, w) => s + w.stats.errors, 0));
  } finally {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
    await new DynamoDBClient({ endpoint: upstream.toString() }).send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
    client.destroy();
    await proxy.stop();
  }
}

async function untilAccepted<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await request();
    } catch (err) {
      if (!(err instanceof StoreContendedError) || attempt > 50) throw err;
      await new Promise((r) => setTimeout(r, 1_000 * Math.random()));
    }
  }
}

function row(layout: Layout, seconds: number, claims: number[], stats: ThrottleStats, failedSteps: number): Row {
  const hottest = [...stats.keys].sort((a, b) => b.peakWcu - a.peakWcu)[0];
  const refusedBy = Object.fromEntries(stats.families.filter((f) => f.refused > 0).map((f) => [f.family, f.refused]));
  return {
    shards: layout.shards,
    limited: layout.limited,
    items_per_s: round3(ITEMS / seconds),
    seconds: round3(seconds),
    requests: stats.totals.requests,
    throttled_requests: stats.totals.refused,
    throttled_by_key_family: refusedBy,
    hottest_key_family: hottest?.family ?? null,
    hottest_key_peak_wcu_per_window: hottest ? round3(hottest.peakWcu) : 0,
    keys_written: stats.keys.filter((k) => k.wcu > 0).length,
    claim_p50_ms: round3(percentile(claims, 50)),
    claim_p99_ms: round3(percentile(claims, 99)),
    worker_steps_failed: failedSteps,
  };
}

async function main() {
  const upstream = new URL(process.env.AWS_ENDPOINT_URL_DYNAMODB ?? '');
  if (!upstream.host) throw new Error('AWS_ENDPOINT_URL_DYNAMODB is not set: run through `npm run bench -- scale`, which starts DynamoDB Local');
  const layouts: Layout[] = [
    { name: 'unsharded', shards: null, limited: true },
    ...args.shards.split(',').map((n) => ({ name: `shards_${n.trim()}`, shards: Number(n), limited: true })),
    { name: 'no_limit', shards: Math.max(...args.shards.split(',').map(Number)), limited: false },
  ];
  const out: Record<string, Row> = {};
  for (const layout of layouts) {
    const r = await runOn(layout, upstream);
    out[layout.name] = r;
    const refused = Object.entries(r.throttled_by_key_family).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
    console.log(
      `${layout.name.padEnd(10)} ${String(r.items_per_s).padStart(8)} items/s · throttled ${r.throttled_requests} of ${r.requests} requests (${refused}) · hottest ${r.hottest_key_family ?? '-'} at ${r.hottest_key_peak_wcu_per_window} WCU in a window · ${r.keys_written} keys written · claim p50 ${r.claim_p50_ms} / p99 ${r.claim_p99_ms} ms · ${r.worker_steps_failed} worker steps failed and retried`,
    );
  }
  console.log(JSON.stringify({ bench: 'scale', items: ITEMS, workers: WORKERS, limits_per_key_per_s: { wcu: LIMITS.partitionWcu, rcu: LIMITS.partitionRcu }, layouts: out }));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
