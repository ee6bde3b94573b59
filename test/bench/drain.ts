/**
 * npm run bench -- drain [--reps N] [--backends postgres,dynamodb]
 *
 * Time to drain a worker holding 32 in-flight items (31 claimed and one
 * running on a slow backend) after a spot notice: stop pulling, abort the
 * running item, nack all 32 back to Pending and onto the queue (SQS on the
 * test endpoint), deregister. Compared with the AWS drain deadline (60 s).
 * Last line: one JSON object.
 */
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { parseArgs } from 'node:util';
import { PROVIDER_DEADLINES } from '../../shared/drain/compute-hint.js';
import { drain } from '../../shared/drain/drain.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { openBackend, uniqueName, type BackendName } from '../support/backends.js';
import { percentile, round3 } from './raw.js';

const { values: args } = parseArgs({ options: { reps: { type: 'string', default: '10' }, backends: { type: 'string', default: 'postgres,dynamodb' } } });
const INFLIGHT = 32;
const sqs = sqsClient();

async function once(backend: Awaited<ReturnType<typeof openBackend>>): Promise<number> {
  const runId = uniqueName('run');
  const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '120' } }))).QueueUrl!;
  try {
    const queue = new SqsWorkQueue(sqs, url);
    await backend.ledger.createRun(runId, {}, Date.now());
    const { ids } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: INFLIGHT }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    await queue.send(runId, ids);
    const worker = new Worker({ runId, workerId: 'doomed', ledger: backend.ledger, queue, backend: mockBackend({ durationMs: 120_000 }), waitSeconds: 0 });
    while (worker.held.length < INFLIGHT) if ((await worker.pull()) === 0) throw new Error(`queue ran dry at ${worker.held.length}`);
    const running = worker.step();
    for (let i = 0; i < 500 && !(await backend.ledger.running(runId)).some((x) => x.started); i++) await new Promise((r) => setTimeout(r, 10));
    const report = await drain(
      { stopAndNack: () => worker.drain(), deregister: () => Promise.resolve() },
      { provider: 'aws', instanceId: 'i-bench', kind: 'interruption', receivedAt: Date.now() },
    );
    await running;
    if (report.nacked.length !== INFLIGHT) throw new Error(`drain gave back ${report.nacked.length} of ${INFLIGHT}`);
    return report.elapsedMs;
  } finally {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
  }
}

const out: Record<string, { drain_p50_ms: number; drain_p99_ms: number; reps: number }> = {};
for (const name of args.backends.split(',') as BackendName[]) {
  const backend = await openBackend(name);
  try {
    const samples: number[] = [];
    for (let i = 0; i < Number(args.reps); i++) samples.push(await once(backend));
    out[name] = { drain_p50_ms: round3(percentile(samples, 50)), drain_p99_ms: round3(percentile(samples, 99)), reps: samples.length };
    console.log(
      `${name.padEnd(9)} drain of ${INFLIGHT} in-flight items: p50 ${out[name].drain_p50_ms} ms, max ${out[name].drain_p99_ms} ms (deadline ${PROVIDER_DEADLINES.aws.drainDeadlineMs} ms)`,
    );
  } finally {
    await backend.close();
  }
}
const worst = Math.max(...Object.values(out).map((r) => r.drain_p99_ms));
console.log(JSON.stringify({ bench: 'drain', inflight: INFLIGHT, drain_ms: worst, deadline_ms: PROVIDER_DEADLINES.aws.drainDeadlineMs, backends: out }));
process.exit(0);
