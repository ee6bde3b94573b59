import { LambdaClient } from '@aws-sdk/client-lambda';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { ComputeHint, SimulatedComputeHint } from '../../drain/compute-hint.js';
import { Ec2MetadataHint, GcpMetadataHint } from '../../adapters/metadata/hints.js';
import { WorkerAgent, type AgentExit } from '../../ledger/agent.js';
import { httpBackend, mockBackend, type ExecutionBackend } from '../../ledger/backends.js';
import { HttpCoordinatorClient } from '../../adapters/http/coordinator-client.js';
import { LambdaCoordinatorClient } from '../../adapters/lambda/coordinator-client.js';
import { openStores } from '../../compose/stores.js';
import { Worker, type CoordinatorClient } from '../../ledger/worker.js';
import type { Logger } from '../../log.js';
import { LedgerWorkQueue } from '../../adapters/postgres/ledger-queue.js';
import { PgNotifyWake } from '../../adapters/postgres/wake.js';
import type { WorkQueue } from '../../queue/port.js';
import { sqsClient } from '../../adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../adapters/sqs/queue.js';
import { WorkerRegistry } from '../../registry/registry.js';
import { parseWorkerOptions, type WorkerCommandOptions, type WorkerOptions } from './config.js';

export type { WorkerCommandOptions } from './config.js';

/**
 * `rollout worker`: one long-running worker process of one run (EC2 / ECS
 * spot capacity, or a local machine), composed from its options (config.ts):
 * the stores, the queue, the coordinator client, the execution backend and
 * the interruption hints.
 */

/** What the worker reports when it exits. */
export interface WorkerSummary {
  readonly exit: AgentExit['reason'];
  readonly workerId: string;
  readonly instanceId: string;
  readonly done: number;
  readonly lost: number;
  readonly stolen: number;
  readonly failedRuns: number;
  readonly nacked: number;
  readonly drainMs: number | null;
  readonly withinDeadline: boolean | null;
}

async function instanceIdFor(o: WorkerOptions): Promise<string> {
  if (o.instanceId !== 'auto') return o.instanceId;
  const endpoint = o.metadataEndpoint ? { endpoint: o.metadataEndpoint } : {};
  if (o.provider === 'aws') return Ec2MetadataHint.instanceId(endpoint);
  if (o.provider === 'gcp') return GcpMetadataHint.instanceId(endpoint);
  return hostname();
}

/** Runs the worker until the run is done (with exitWhenDone), `signal` aborts, or a drain; returns its summary. */
export async function runWorkerCommand(input: WorkerCommandOptions, signal: AbortSignal, logger: Logger, preempt?: SimulatedComputeHint): Promise<WorkerSummary> {
  const o = parseWorkerOptions(input);
  const closers: (() => Promise<void>)[] = [];
  try {
    const stores = await openStores(o.store === 'postgres' ? { kind: 'postgres', connection: { connectionString: o.databaseUrl!, max: 4 } } : { kind: 'dynamodb', table: o.table! });
    closers.push(() => stores.close());
    const { ledger, registry: registryStore } = stores;
    let queue: WorkQueue;
    if (o.queue === 'ledger' && stores.sql) {
      const wake = await PgNotifyWake.open({ connectionString: o.databaseUrl! }, logger);
      closers.unshift(() => wake.close());
      queue = new LedgerWorkQueue(stores.sql, wake, o.run, o.workerId, { maxReceiveCount: o.maxReceiveCount });
    } else queue = new SqsWorkQueue(sqsClient(), o.queue, { logger });
    if (!(await ledger.getRun(o.run))) throw new Error(`run ${o.run} does not exist in the ${o.store} store`);
    let coordinator: CoordinatorClient | undefined;
    if (o.coordinator.startsWith('lambda:')) coordinator = new LambdaCoordinatorClient(new LambdaClient({}), o.coordinator.slice('lambda:'.length), o.run);
    else if (o.coordinator !== 'none') coordinator = new HttpCoordinatorClient(o.coordinator, o.run, { ...(o.token ? { token: o.token } : {}), ...(o.caFile ? { ca: readFileSync(o.caFile) } : {}) });
    const backend: ExecutionBackend = o.backend === 'http' ? httpBackend({ url: o.backendUrl!, timeoutMs: o.backendTimeoutMs }) : mockBackend({ durationMs: o.mockDurationMs, failureRate: o.mockFailureRate });
    const instanceId = await instanceIdFor(o);
    const hints: ComputeHint[] = preempt ? [preempt] : [];
    const metadata = o.metadataEndpoint ? { endpoint: o.metadataEndpoint, logger } : { logger };
    if (o.provider === 'aws') hints.push(new Ec2MetadataHint(instanceId, metadata).start());
    if (o.provider === 'gcp') hints.push(new GcpMetadataHint(instanceId, metadata).start());
    closers.push(() => {
      for (const h of hints) if (h instanceof Ec2MetadataHint || h instanceof GcpMetadataHint) h.stop();
      return Promise.resolve();
    });
    const worker = new Worker({
      runId: o.run,
      workerId: o.workerId,
      ledger,
      queue,
      backend,
      ...(coordinator ? { coordinator } : {}),
      logger,
      heartbeatMs: o.heartbeatMs,
      visibilitySeconds: o.visibilitySeconds,
      waitSeconds: o.waitSeconds,
      receiveBatch: o.batch,
      chunkBudgetMs: o.chunkBudgetMs,
    });
    const agent = new WorkerAgent({
      worker,
      registry: new WorkerRegistry(registryStore, { staleAfterMs: Math.max(60_000, 6 * o.heartbeatMs) }),
      registration: { workerId: o.workerId, instanceId, provider: o.provider, runId: o.run },
      ledger,
      hints,
      registryHeartbeatMs: o.heartbeatMs,
      exitWhenDone: o.exitWhenDone,
      logger,
    });
    logger.info('worker started', { run: o.run, worker: o.workerId, instance: instanceId, store: o.store, queue: o.queue === 'ledger' ? 'ledger' : 'sqs', coordinator: o.coordinator });
    const exit = await agent.run(signal);
    const report = exit.reason === 'drained' ? exit.report : null;
    return {
      exit: exit.reason,
      workerId: o.workerId,
      instanceId,
      ...worker.stats,
      nacked: report?.nacked.length ?? 0,
      drainMs: report?.elapsedMs ?? null,
      withinDeadline: report?.withinDeadline ?? null,
    };
  } finally {
    for (const close of closers) await close().catch(() => undefined);
  }
}
