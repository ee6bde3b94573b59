import { LambdaClient } from '@aws-sdk/client-lambda';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { ComputeHint } from '../../drain/compute-hint.js';
import { SimulatedComputeHint } from '../../drain/compute-hint.js';
import { Ec2MetadataHint, GcpMetadataHint } from '../../adapters/metadata/hints.js';
import { WorkerAgent, type AgentExit } from '../../ledger/agent.js';
import { BackendError, type ExecutionBackend } from '../../ledger/backends.js';
import { HttpCoordinatorClient } from '../../adapters/http/coordinator-client.js';
import { LambdaCoordinatorClient } from '../../adapters/lambda/coordinator-client.js';
import { openStores } from '../../compose/stores.js';
import { Worker, type CoordinatorClient } from '../../ledger/worker/index.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { LedgerWorkQueue } from '../../adapters/postgres/ledger-queue.js';
import { PgNotifyWake } from '../../adapters/postgres/wake.js';
import type { WorkQueue } from '../../queue/port.js';
import { sqsClient } from '../../adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../adapters/sqs/queue.js';
import { WorkerRegistry, type AgentRegistry } from '../../registry/registry.js';
import { NodeWork } from '../../client/node-work.js';
import type { Target } from '../../client/transport.js';
import type { WorkerLedger } from '../../ledger/worker/options.js';
import { parseWorkerOptions, type WorkerOptions, type WorkerOptionsInput } from './config.js';
import { WorkerMetrics } from './metrics.js';

/**
 * The worker SDK (`rollout-control-plane/worker`): your code runs the items
 * of one or more runs, in your process, as `rollout worker` runs them.
 *
 *   const worker = createWorker({
 *     runs: ['nightly-reindex'],
 *     store: 'postgres', databaseUrl: process.env.DATABASE_URL,
 *     handler: async (item, { signal, heartbeat }) => reindex(item.payload, signal),
 *   });
 *   const summary = await worker.run();   // until stopped, drained, or (exitWhenDone) the runs are done
 *
 * What the handler returns (JSON) is the item's result; what it throws
 * fails this attempt, with the error's message as the reason (an item that
 * fails MAX_ATTEMPTS (5) times is failed for good, with every reason kept). An item runs as long as
 * it takes: the worker heartbeats it while the handler runs. `itemTimeoutMs`
 * caps one attempt, and `stallMs` fails an attempt whose handler has not
 * called `heartbeat()` or `progress()` for that long. `signal` aborts when
 * the attempt no longer counts (the item was taken over, the worker drains,
 * the timeout passed): stop then; whatever is returned afterwards is dropped.
 * Each attempt runs in an OpenTelemetry `run.item` span (a no-op unless the
 * process registers an SDK), so spans the handler makes are its children.
 * A spot notice (instance metadata on `provider: 'aws' | 'gcp'`, a drain
 * requested through the registry, or `drain()`) hands held items back and
 * ends `run()`.
 */

/** The item a handler runs. */
export interface WorkItemInput {
  readonly runId: string;
  /** The item's id: the sha256 of its payload, so the same payload is the same item. */
  readonly id: string;
  readonly payload: unknown;
}

export interface WorkContext {
  readonly runId: string;
  /** How many times the item's message has been delivered, 1 the first time; null when it was taken over from another worker. */
  readonly attempt: number | null;
  /** Aborted when this attempt no longer counts: stop. */
  readonly signal: AbortSignal;
  /** Says the handler is alive (see stallMs); safe to pass around unbound. */
  readonly heartbeat: () => void;
  /** A heartbeat with a note of how far it got, logged at debug. */
  readonly progress: (note: string) => void;
}

export type WorkHandler = (item: WorkItemInput, context: WorkContext) => unknown;

export interface CreateWorkerOptions extends Omit<WorkerOptionsInput, 'store'> {
  readonly handler: WorkHandler;
  /** Default: node with a url, postgres with a databaseUrl, else dynamodb. */
  readonly store?: 'postgres' | 'dynamodb' | 'node';
  readonly logger?: Logger;
}

/** What a worker did, per run and in all. */
export interface WorkerSummary {
  /** drained if any run drained; done if every run is done; stopped otherwise. */
  readonly exit: AgentExit['reason'];
  readonly workerId: string;
  readonly instanceId: string;
  /** Items whose result this worker recorded. */
  readonly done: number;
  /** Items it held or ran whose claim it lost (stolen, or re-pended as silent): another worker records them. */
  readonly lost: number;
  /** Items it stole from another worker (the coordinator moved them to it). */
  readonly stolen: number;
  /** Attempts whose handler threw (or timed out, or stalled): each is given back and tried again, up to 5 times in all. */
  readonly failedAttempts: number;
  /** Items handed back by a drain, unrun. */
  readonly nacked: number;
  /** How long the drain took, null when it did not drain. */
  readonly drainMs: number | null;
  /** Whether every drain ended before its provider's deadline; null when it did not drain. */
  readonly withinDeadline: boolean | null;
  readonly runs: readonly RunSummary[];
}

/** What a worker did in one run (the same fields). */
export interface RunSummary {
  readonly runId: string;
  readonly exit: AgentExit['reason'];
  readonly done: number;
  readonly lost: number;
  readonly stolen: number;
  readonly failedAttempts: number;
  readonly nacked: number;
}

export interface RolloutWorker {
  /** Works until `signal` aborts, a drain, or (exitWhenDone) every run is done. */
  run(signal?: AbortSignal): Promise<WorkerSummary>;
  /** Drain now, as on a spot notice: held items go back, run() resolves. */
  drain(): void;
}

export function createWorker(options: CreateWorkerOptions): RolloutWorker {
  const { handler, logger = silentLogger, store, ...rest } = options;
  if (typeof handler !== 'function') throw new TypeError('createWorker: handler must be a function (item, context) => result');
  const o = parseWorkerOptions({ ...rest, store: store ?? (rest.url ? 'node' : rest.databaseUrl ? 'postgres' : 'dynamodb') });
  return workerOf(o, handlerBackend(handler, o, logger), logger);
}

/** A worker of `o.runs` whose items run on `backend`: what createWorker and `rollout worker` build. */
export function workerOf(o: WorkerOptions, backend: ExecutionBackend, logger: Logger): RolloutWorker {
  const manual = new SimulatedComputeHint();
  // A drain asked for before the workers listen (a SIGTERM while the stores connect) is kept: they then start nothing.
  const asked = { drain: false };
  return {
    drain: () => {
      asked.drain = true;
      manual.preempt({ provider: o.provider === 'gcp' ? 'gcp' : 'aws', instanceId: o.instanceId, kind: 'interruption', receivedAt: Date.now() });
    },
    run: (signal) => runWorkers(o, backend, logger, manual, signal ?? new AbortController().signal, asked),
  };
}

/** Where a worker's ledger, queue and registry are: a store of its own, or a node's API. */
interface WorkerPorts {
  readonly ledger: WorkerLedger;
  readonly registry: AgentRegistry;
  queue(runId: string): WorkQueue;
  /** For messages: "in the postgres store", "on the node at …". */
  readonly where: string;
  close(): Promise<void>;
}

async function openPorts(o: WorkerOptions, logger: Logger): Promise<WorkerPorts> {
  const staleAfterMs = Math.max(60_000, 6 * o.heartbeatMs);
  if (o.store === 'node') {
    const remote = new NodeWork(nodeTarget(o), o.workerId);
    return { ledger: remote.ledger, registry: remote.registry, queue: (runId) => remote.queue(runId), where: `on the node at ${o.url}`, close: async () => {} };
  }
  const stores = await openStores(
    o.store === 'postgres'
      ? { kind: 'postgres', connection: { connectionString: o.databaseUrl!, max: 2 + 2 * o.runs.length } }
      : { kind: 'dynamodb', table: o.table!, retainRunDays: o.retainRunDays },
  );
  let wake: PgNotifyWake | null = null;
  try {
    if (o.queue === 'ledger' && stores.sql) wake = await PgNotifyWake.open({ connectionString: o.databaseUrl! }, logger);
  } catch (err) {
    await stores.close().catch(() => undefined);
    throw err;
  }
  return {
    ledger: stores.ledger,
    registry: new WorkerRegistry(stores.registry, { staleAfterMs }),
    queue: (runId) => (wake ? new LedgerWorkQueue(stores.sql!, wake, runId, o.workerId) : new SqsWorkQueue(sqsClient(), o.queue, { logger })),
    where: `in the ${o.store} store`,
    close: async () => {
      await wake?.close().catch(() => undefined);
      await stores.close();
    },
  };
}

/** The worker's credential for a node (its token) and the CA of the node's certificate. */
function nodeAuth(o: WorkerOptions): { token?: string; ca?: Buffer } {
  return { ...(o.token ? { token: o.token } : {}), ...(o.caFile ? { ca: readFileSync(o.caFile) } : {}) };
}

/** The node (or nginx in front of a cluster) as a client reaches it. */
function nodeTarget(o: WorkerOptions): Target {
  return { url: o.url!, ...nodeAuth(o) };
}

/** Where an idle worker asks for work: `coordinator`, else a worker of a node asks that node. */
function coordinatorOf(o: WorkerOptions, runId: string): CoordinatorClient | undefined {
  if (o.coordinator.startsWith('lambda:')) return new LambdaCoordinatorClient(new LambdaClient({}), o.coordinator.slice('lambda:'.length), runId);
  const url = o.coordinator !== 'none' ? o.coordinator : o.store === 'node' ? new URL('coordinator', o.url!.endsWith('/') ? o.url : `${o.url}/`).href : null;
  return url ? new HttpCoordinatorClient(url, runId, nodeAuth(o)) : undefined;
}

async function instanceIdFor(o: WorkerOptions): Promise<string> {
  if (o.instanceId !== 'auto') return o.instanceId;
  const endpoint = o.metadataEndpoint ? { endpoint: o.metadataEndpoint } : {};
  if (o.provider === 'aws') return Ec2MetadataHint.instanceId(endpoint);
  if (o.provider === 'gcp') return GcpMetadataHint.instanceId(endpoint);
  return hostname();
}

async function runWorkers(
  o: WorkerOptions,
  backend: ExecutionBackend,
  logger: Logger,
  manual: ComputeHint,
  signal: AbortSignal,
  asked: { readonly drain: boolean },
): Promise<WorkerSummary> {
  const closers: (() => Promise<void>)[] = [];
  try {
    const ports = await openPorts(o, logger);
    closers.push(() => ports.close());
    for (const run of o.runs) if (!(await ports.ledger.getRun(run))) throw new Error(`run ${run} does not exist ${ports.where}`);
    const instanceId = await instanceIdFor(o);
    const metadata = o.metadataEndpoint ? { endpoint: o.metadataEndpoint, logger } : { logger };
    const watching =
      o.provider === 'aws'
        ? [new Ec2MetadataHint(instanceId, metadata).start()]
        : o.provider === 'gcp'
          ? [new GcpMetadataHint(instanceId, metadata).start()]
          : [];
    closers.push(() => Promise.resolve(watching.forEach((h) => h.stop())));
    const hints: ComputeHint[] = [manual, ...watching];
    const metrics = o.metricsPort === null ? null : new WorkerMetrics(o.workerId);
    let run = backend;
    if (metrics) {
      const served = await metrics.serve(o.metricsPort!, o.metricsHost);
      closers.unshift(() => served.close());
      logger.info('metrics served', { url: `http://${o.metricsHost}:${served.port}/metrics` });
      run = metrics.timed(backend);
    }
    const stopAll = new AbortController();
    const { ledger, registry } = ports;
    const per = o.runs.map((runId) => {
      const queue = ports.queue(runId);
      const coordinator = coordinatorOf(o, runId);
      const worker = new Worker({
        runId,
        workerId: o.workerId,
        ledger,
        queue,
        backend: run,
        ...(coordinator ? { coordinator } : {}),
        logger,
        heartbeatMs: o.heartbeatMs,
        visibilitySeconds: o.visibilitySeconds,
        waitSeconds: o.waitSeconds,
        receiveBatch: o.batch,
        chunkBudgetMs: o.chunkBudgetMs,
        // Fast items are started and recorded up to a whole batch per round trip.
        maxChunk: Math.max(64, o.batch),
      });
      const agent = new WorkerAgent({
        worker,
        registry,
        registration: { workerId: o.workerId, instanceId, provider: o.provider, runId },
        ledger,
        // Every run's agent hears every notice: a drain empties the whole process.
        hints,
        registryHeartbeatMs: o.heartbeatMs,
        exitWhenDone: o.exitWhenDone,
        logger,
      });
      metrics?.watch(runId, worker);
      return { runId, worker, agent };
    });
    logger.info('worker started', {
      runs: o.runs,
      worker: o.workerId,
      instance: instanceId,
      store: o.store,
      queue: o.queue === 'ledger' ? 'ledger' : 'sqs',
      coordinator: o.coordinator,
    });
    const until = AbortSignal.any([signal, stopAll.signal]);
    if (asked.drain) stopAll.abort();
    const settled = await Promise.allSettled(
      per.map(async (p) => {
        try {
          return await p.agent.run(until);
        } catch (err) {
          // One run failing stops the others: the process reports the failure rather than half-serving.
          stopAll.abort(err);
          throw err;
        }
      }),
    );
    // Every run has stopped (results recorded, registrations left) before the stores close.
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const exits = settled.map((r) => (r as PromiseFulfilledResult<AgentExit>).value);
    const runs: RunSummary[] = per.map((p, i) => {
      const exit = exits[i]!;
      return { runId: p.runId, exit: exit.reason, ...p.worker.stats, nacked: exit.reason === 'drained' ? exit.report.nacked.length : 0 };
    });
    const drained = exits.filter((e): e is Extract<AgentExit, { reason: 'drained' }> => e.reason === 'drained');
    const sum = (k: 'done' | 'lost' | 'stolen' | 'failedAttempts' | 'nacked') => runs.reduce((n, r) => n + r[k], 0);
    return {
      exit: drained.length ? 'drained' : exits.every((e) => e.reason === 'done') ? 'done' : 'stopped',
      workerId: o.workerId,
      instanceId,
      done: sum('done'),
      lost: sum('lost'),
      stolen: sum('stolen'),
      failedAttempts: sum('failedAttempts'),
      nacked: sum('nacked'),
      drainMs: drained.length ? Math.max(...drained.map((d) => d.report.elapsedMs)) : null,
      withinDeadline: drained.length ? drained.every((d) => d.report.withinDeadline) : null,
      runs,
    };
  } finally {
    for (const close of closers) await close().catch(() => undefined);
  }
}

/**
 * A user's handler as a backend: its result (undefined stored as null), its
 * error's message as the reason, and the attempt's own limits, itemTimeoutMs
 * and stallMs. When the attempt stops counting, the worker stops waiting for
 * it whether or not the handler heeds its signal.
 */
export function handlerBackend(handler: WorkHandler, o: Pick<WorkerOptions, 'itemTimeoutMs' | 'stallMs'>, logger: Logger = silentLogger): ExecutionBackend {
  return (payload, outer, item) =>
    new Promise((resolve, reject) => {
      const runId = item?.runId ?? '';
      const itemId = item?.itemId ?? '';
      // Without limits of its own, the attempt ends only when the worker's signal says so: no controller of ours.
      const limited = o.itemTimeoutMs !== null || o.stallMs !== null;
      const ctl = limited ? new AbortController() : null;
      let timeout: NodeJS.Timeout | undefined;
      let stall: NodeJS.Timeout | undefined;
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timeout);
        clearTimeout(stall);
        outer.removeEventListener('abort', onOuter);
        fn();
      };
      const fail = (err: Error) => {
        ctl?.abort(err);
        settle(() => reject(err));
      };
      const onOuter = () => fail(outer.reason instanceof Error ? outer.reason : new Error('the attempt no longer counts'));
      if (outer.aborted) return onOuter();
      outer.addEventListener('abort', onOuter, { once: true });
      if (o.itemTimeoutMs !== null) timeout = setTimeout(() => fail(new BackendError(`timed out after ${o.itemTimeoutMs} ms`)), o.itemTimeoutMs);
      const alive = () => {
        if (o.stallMs === null || settled) return;
        clearTimeout(stall);
        stall = setTimeout(() => fail(new BackendError(`stalled: no heartbeat from the handler for ${o.stallMs} ms`)), o.stallMs);
      };
      alive();
      const context: WorkContext = {
        runId,
        attempt: item?.attempt ?? null,
        signal: ctl?.signal ?? outer,
        heartbeat: alive,
        progress: (note) => {
          alive();
          logger.debug('item progress', { run: runId, item: itemId, note: String(note).slice(0, 500) });
        },
      };
      Promise.resolve()
        .then(() => handler({ runId, id: itemId, payload }, context))
        .then(
          (result) => settle(() => resolve(result === undefined ? null : result)),
          (err: unknown) => settle(() => reject(err instanceof Error ? err : new BackendError(errorMessage(err)))),
        );
    });
}
