/**
 * The 3-node smoke: 1 coordinator + 3 workers (mock backend) drive one run
 * to the end with at least one real steal.
 *   local  the embedded store (PGlite), the ledger as the queue, in-process wake-ups
 *   sqs    DynamoDB Local for the ledger, SQS (fauxqs) for the queue
 * `npm run smoke:3node [-- local|sqs]` runs it standalone (the harness starts
 * the services); test/integration/smoke.test.ts runs both in `npm test`.
 */
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { coordinatorLease, type LedgerStore } from '../../shared/ledger/store.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { InProcessWake } from '../../shared/adapters/postgres/wake.js';
import type { WorkQueue } from '../../shared/queue/port.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { openBackend, uniqueName } from '../support/backends.js';

export interface SmokeSummary {
  readonly mode: 'local' | 'sqs';
  readonly seconds: number;
  readonly items: number;
  readonly steals: number;
  /** Results recorded beyond one per item: must be 0. */
  readonly duplicates: number;
  readonly done: number;
}

export function summaryLine(s: SmokeSummary): string {
  return `[${s.mode}] run done in ${s.seconds.toFixed(1)} s, items ${s.items}, steals ${s.steals}, duplicates ${s.duplicates}`;
}

const ITEMS = 240;
const ITEM_MS = 15;

export async function smoke(mode: 'local' | 'sqs'): Promise<SmokeSummary> {
  const backend = await openBackend(mode === 'local' ? 'pglite' : 'dynamodb');
  const sqs = mode === 'sqs' ? sqsClient() : null;
  let queueUrl: string | null = null;
  const stop = new AbortController();
  try {
    const ledger: LedgerStore = backend.ledger;
    const runId = uniqueName('smoke');
    let queueFor: (worker: string | null) => WorkQueue;
    if (sqs) {
      queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('smoke'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
      const q = new SqsWorkQueue(sqs, queueUrl);
      queueFor = () => q;
    } else {
      const q = new LedgerWorkQueue(backend.sql!, new InProcessWake(), runId, null);
      queueFor = (w) => (w ? q.forWorker(w) : q);
    }
    const began = performance.now();
    await ledger.createRun(runId, { smoke: mode }, Date.now());
    const { ids } = await ledger.enqueue(
      runId,
      Array.from({ length: ITEMS }, (_, i) => ({ smoke: mode, i })),
      Date.now(),
    );
    await queueFor(null).send(runId, ids);

    // The coordinator: wins coordinator:<run>, serves steal requests, scans for stale heartbeats.
    const elector = new LeaseElector(backend.runLeases(runId), {
      name: coordinatorLease(runId),
      holderId: 'coordinator-1',
      ttlMs: 10_000,
      renewIntervalMs: 3_000,
      retryIntervalMs: 1_000,
      clockSkewMs: 500,
    });
    if (!(await elector.campaign()).leader) throw new Error('the coordinator did not win its lease');
    elector.start(); // renews: a run on a loaded machine may outlast one TTL
    const coordinator = new Coordinator({ runId, ledger, elector, bus: new InProcessBus(), failureTimeoutMs: 10_000, queue: queueFor(null) });
    const client = { requestWork: (w: string) => coordinator.stealFor(w) };
    const scan = setInterval(() => void coordinator.scan().catch(() => undefined), 1_000);

    const workers = ['worker-1', 'worker-2', 'worker-3'].map(
      (id) =>
        new Worker({
          runId,
          workerId: id,
          ledger,
          queue: queueFor(id),
          backend: mockBackend({ durationMs: ITEM_MS }),
          coordinator: client,
          askAtStart: true,
          waitSeconds: 1,
          receiveBatch: mode === 'sqs' ? 10 : 40,
          heartbeatMs: 1_000,
        }),
    );
    // Worker 1 comes up first and takes the whole run; the others join late and have nothing to take but
    // what they steal from it (however slow the machine, it cannot start all it holds before they ask: askAtStart).
    const first = workers[0]!;
    while (first.held.length < ITEMS) if ((await first.pull(undefined, 1)) === 0) break;
    const recorded = () => workers.reduce((n, w) => n + w.stats.done, 0);
    const loops = workers.map(async (w) => {
      while (!stop.signal.aborted) {
        await w.step(stop.signal);
        if (recorded() >= ITEMS) stop.abort();
      }
    });
    // A guard against a run that never finishes, not a judgement of speed (the time is printed).
    const timeout = setTimeout(() => stop.abort(), 300_000);
    await Promise.all(loops);
    clearTimeout(timeout);
    clearInterval(scan);
    const seconds = (performance.now() - began) / 1000;
    const counts = await ledger.counts(runId);
    if (counts.done !== ITEMS) throw new Error(`smoke ${mode}: run not done after ${seconds.toFixed(1)} s: ${JSON.stringify(counts)}`);
    await elector.stop();
    return { mode, seconds, items: ITEMS, steals: workers.reduce((n, w) => n + w.stats.stolen, 0), duplicates: recorded() - ITEMS, done: counts.done };
  } finally {
    stop.abort();
    if (sqs && queueUrl) await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
    await backend.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const modes = (process.argv[2] ? [process.argv[2]] : ['local', 'sqs']) as ('local' | 'sqs')[];
  let failed = false;
  for (const mode of modes) {
    if (mode !== 'local' && mode !== 'sqs') {
      console.error(`usage: npm run smoke:3node [-- local|sqs]  (got ${String(mode)})`);
      process.exit(2);
    }
    const s = await smoke(mode);
    console.log(summaryLine(s));
    if (s.steals < 1 || s.duplicates !== 0) {
      console.error(`[${mode}] FAILED: needs at least one steal and no duplicates`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}
