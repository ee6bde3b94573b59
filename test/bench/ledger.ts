/**
 * npm run bench -- ledger [--items N] [--dynamo-items N] [--workers 4] [--batch 500] [--reps 3]
 *
 * End-to-end work-run throughput: enqueue → claim → run (mock backend, zero
 * duration) → ack, with 4 workers, until every item is recorded Done.
 *   postgres      our ledger with its own queue (claim batches with SKIP LOCKED,
 *                 LISTEN/NOTIFY wake-up), workers starting and acking in chunks
 *   postgres_sdk  the same, through the public worker SDK (createWorker per worker)
 *   pgboss        the same workload through pg-boss (the peer) on the same PostgreSQL
 *   dynamodb_sqs  our ledger on DynamoDB Local, the queue on SQS (fauxqs)
 * Last line: one JSON object.
 */
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { parseArgs } from 'node:util';
import { PgBoss } from 'pg-boss';
import pg from 'pg';
import { mockBackend } from '../../shared/ledger/backends.js';
import { createWorker } from '../../shared/runtimes/worker/sdk.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { PgNotifyWake } from '../../shared/adapters/postgres/wake.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import type { WorkQueue } from '../../shared/queue/port.js';
import type { LedgerStore } from '../../shared/ledger/store.js';
import type { Sql } from '../../shared/adapters/postgres/sql.js';
import { openBackend, uniqueName } from '../support/backends.js';
import { round3 } from './raw.js';

const { values: args } = parseArgs({
  options: {
    items: { type: 'string', default: '20000' },
    'dynamo-items': { type: 'string', default: '1000' },
    workers: { type: 'string', default: '4' },
    batch: { type: 'string', default: '500' },
    reps: { type: 'string', default: '3' },
  },
});
const ITEMS = Number(args.items);
const DYNAMO_ITEMS = Number(args['dynamo-items']);
const WORKERS = Number(args.workers);
const BATCH = Number(args.batch);
const REPS = Number(args.reps);
const backendFn = mockBackend({ durationMs: 0 });
const phases: string[] = [];

/**
 * The same run through the public worker SDK, as an adopter writes it: one
 * `createWorker` per worker, each with its own pool and wake-up, the handler
 * the same mock. Timed as pg-boss is, once its workers are up (registered):
 * from the first enqueue until every result is recorded.
 */
async function sdk(url: string, ledger: LedgerStore, sql: Sql, producer: (runId: string) => WorkQueue, n: number): Promise<number> {
  const runId = uniqueName('run');
  await ledger.createRun(runId, {}, Date.now());
  const stop = new AbortController();
  let handled = 0;
  let allHandled!: () => void;
  const handledAll = new Promise<void>((r) => (allHandled = r));
  const handler = async (item: { payload: unknown }, c: { signal: AbortSignal }) => {
    const out = await backendFn(item.payload, c.signal);
    if (++handled >= n) allHandled();
    return out;
  };
  const running = Array.from({ length: WORKERS }, (_, i) =>
    createWorker({ runs: [runId], databaseUrl: url, workerId: `sdk${i}`, instanceId: 'bench', batch: BATCH, waitSeconds: 1, handler }).run(stop.signal),
  );
  for (;;) {
    const { rows } = await sql.query<{ n: string }>(`SELECT count(*) AS n FROM workers WHERE run_id = $1 AND state = 'active'`, [runId]);
    if (Number(rows[0]!.n) >= WORKERS) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const payloads = Array.from({ length: n }, (_, i) => ({ runId, i }));
  const began = performance.now();
  // As POST /runs does: stored, then sent (on the ledger queue, a wake-up).
  const { ids } = await ledger.enqueue(runId, payloads, Date.now());
  await producer(runId).send(runId, ids);
  // As for pg-boss: every item handled, then done means recorded.
  await handledAll;
  while ((await ledger.counts(runId)).done < n) await new Promise((r) => setTimeout(r, 5));
  const seconds = (performance.now() - began) / 1000;
  stop.abort();
  const summaries = await Promise.all(running);
  const done = summaries.reduce((s, w) => s + w.done, 0);
  if (done !== n) throw new Error(`the SDK's workers recorded ${done} results for ${n} items`);
  return n / seconds;
}

/** Our workers until the run is finished; returns items per second from the first enqueue. */
async function ours(
  ledger: LedgerStore,
  n: number,
  queueFor: (runId: string, workerId: string) => WorkQueue,
  batch: number,
  waitSeconds: number,
): Promise<number> {
  const runId = uniqueName('run');
  await ledger.createRun(runId, {}, Date.now());
  const payloads = Array.from({ length: n }, (_, i) => ({ runId, i }));
  const began = performance.now();
  const { ids } = await ledger.enqueue(runId, payloads, Date.now());
  await queueFor(runId, 'producer').send(runId, ids);
  phases.push(`enqueue ${Math.round(performance.now() - began)} ms`);
  const workers = Array.from(
    { length: WORKERS },
    (_, i) =>
      new Worker({ runId, workerId: `w${i}`, ledger, queue: queueFor(runId, `w${i}`), backend: backendFn, receiveBatch: batch, maxChunk: batch, waitSeconds }),
  );
  // Stop the moment the last result is recorded (an idle worker would otherwise sit out its long poll).
  const stop = new AbortController();
  const recorded = () => workers.reduce((s, w) => s + w.stats.done, 0);
  await Promise.all(
    workers.map(async (w) => {
      while (!stop.signal.aborted) {
        await w.step(stop.signal);
        if (recorded() >= n) stop.abort();
      }
    }),
  );
  const seconds = (performance.now() - began) / 1000;
  const done = workers.reduce((s, w) => s + w.stats.done, 0);
  if (done !== n) throw new Error(`recorded ${done} results for ${n} items`);
  return n / seconds;
}

async function pgboss(url: string, n: number): Promise<number> {
  const schema = `pgboss_${uniqueName('b').replace('-', '_')}`;
  const boss = new PgBoss({ connectionString: url, schema, supervise: false, schedule: false });
  boss.on('error', () => undefined);
  await boss.start();
  const queue = uniqueName('q');
  await boss.createQueue(queue);
  let handled = 0;
  let allHandled!: () => void;
  const handledAll = new Promise<void>((r) => (allHandled = r));
  const began = performance.now();
  for (let i = 0; i < n; i += 1000)
    await boss.insert(
      queue,
      Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ data: { i: i + j } })),
    );
  phases.push(`pg-boss insert ${Math.round(performance.now() - began)} ms`);
  await boss.work(queue, { batchSize: 500, localConcurrency: WORKERS, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true }, async (jobs) => {
    const signal = new AbortController().signal;
    for (const job of jobs) await backendFn(job.data, signal);
    handled += jobs.length;
    if (handled >= n) allHandled();
  });
  await handledAll;
  // Done means recorded: wait for pg-boss to have written the completions.
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  for (;;) {
    const { rows } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.job WHERE name = $1 AND state = 'completed'`, [queue]);
    if (Number(rows[0]!.n) >= n) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  const seconds = (performance.now() - began) / 1000;
  await client.end();
  await boss.stop({ graceful: false });
  await client2Drop(url, schema);
  return n / seconds;
}

async function client2Drop(url: string, schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => undefined);
  await c.end();
}

const best = (xs: number[]) => round3(Math.max(...xs));
const med = (xs: number[]) => round3([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
const result: Record<string, { items_per_s: number; median_items_per_s: number; items: number; reps: number }> = {};
const record = (name: string, n: number, xs: number[]) => {
  result[name] = { items_per_s: best(xs), median_items_per_s: med(xs), items: n, reps: xs.length };
  console.log(`${name.padEnd(13)} ${n} items, ${WORKERS} workers: best ${best(xs)} items/s, median ${med(xs)} (${xs.map((x) => Math.round(x)).join(', ')})`);
};

{
  const pgBackend = await openBackend('postgres');
  const wake = await PgNotifyWake.open({ connectionString: pgBackend.url! });
  const oursRuns: number[] = [];
  const sdkRuns: number[] = [];
  const bossRuns: number[] = [];
  const schemaUrl = `${pgBackend.url!}${pgBackend.url!.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${pgBackend.schema!}`)}`;
  try {
    // Interleaved, so all see the same machine noise.
    for (let r = 0; r < REPS; r++) {
      oursRuns.push(await ours(pgBackend.ledger, ITEMS, (runId, w) => new LedgerWorkQueue(pgBackend.sql!, wake, runId, w), BATCH, 1));
      sdkRuns.push(await sdk(schemaUrl, pgBackend.ledger, pgBackend.sql!, (runId) => new LedgerWorkQueue(pgBackend.sql!, wake, runId, 'producer'), ITEMS));
      bossRuns.push(await pgboss(process.env.DATABASE_URL!, ITEMS));
    }
  } finally {
    await wake.close();
    await pgBackend.close();
  }
  console.log(phases.join(', '));
  record('postgres', ITEMS, oursRuns);
  record('postgres_sdk', ITEMS, sdkRuns);
  record('pgboss', ITEMS, bossRuns);
}
if (DYNAMO_ITEMS > 0) {
  const dyn = await openBackend('dynamodb');
  const sqs = sqsClient();
  const runs: number[] = [];
  try {
    for (let r = 0; r < REPS; r++) {
      const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
      try {
        const q = new SqsWorkQueue(sqs, url);
        runs.push(await ours(dyn.ledger, DYNAMO_ITEMS, () => q, 10, 0));
      } finally {
        await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      }
    }
  } finally {
    await dyn.close();
  }
  record('dynamodb_sqs', DYNAMO_ITEMS, runs);
}
const ratio = round3(result.postgres!.median_items_per_s / result.pgboss!.median_items_per_s);
const sdkRatio = round3(result.postgres_sdk!.median_items_per_s / result.pgboss!.median_items_per_s);
console.log(`postgres / pg-boss (medians, same PostgreSQL, same run): ${ratio}×; through the worker SDK: ${sdkRatio}×`);
console.log(JSON.stringify({ bench: 'ledger', workers: WORKERS, ...result, postgres_vs_pgboss: ratio, postgres_sdk_vs_pgboss: sdkRatio }));
process.exit(0);
