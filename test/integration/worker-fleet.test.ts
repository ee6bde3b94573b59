/**
 * The worker fleet around the ledger: the registry (every store), the
 * spot-drain Lambda on EventBridge-shaped events, the instance-metadata
 * sources (served over HTTP by a local stand-in for IMDSv2 / GCP metadata),
 * a worker agent draining on a registry request, and the coordinator Lambda
 * reached through the Lambda Invoke API.
 */
import { LambdaClient } from '@aws-sdk/client-lambda';
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { LeaseStore } from '../../shared/lease/store.js';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coordinatorHandler } from '../../functions/coordinator.js';
import { lazy, runtimeFrom } from '../../functions/runtime.js';
import { spotDrainHandler } from '../../functions/spot-drain.js';
import { PROVIDER_DEADLINES, type PreemptionNotice } from '../../shared/drain/compute-hint.js';
import { Ec2MetadataHint, GcpMetadataHint } from '../../shared/adapters/metadata/hints.js';
import { InvalidNoticeError, REBALANCE_RECOMMENDATION, SPOT_INTERRUPTION } from '../../shared/drain/sources.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { WorkerAgent } from '../../shared/ledger/agent.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { LambdaCoordinatorClient } from '../../shared/adapters/lambda/coordinator-client.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { WorkerRegistry, type RegistryStore } from '../../shared/registry/registry.js';
import { DynamoRegistryStore } from '../../shared/adapters/dynamodb/registry-store.js';
import { PostgresRegistryStore } from '../../shared/adapters/postgres/registry-store.js';
import { BACKENDS, dynamoTable, openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { until } from '../support/gate.js';

const silentMetrics = { addMetric: () => undefined, hasStoredMetrics: () => false, publishStoredMetrics: () => undefined } as never;
const silentLog = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;

/** An EC2 instance id (`i-` and 17 hex digits): the drain Lambda refuses anything else. */
const ec2InstanceId = () => `i-${randomBytes(9).toString('hex').slice(0, 17)}`;

function spotEvent(detailType: string, instanceId: string, time = new Date().toISOString()) {
  return {
    version: '0',
    id: uniqueName('evt'),
    'detail-type': detailType,
    source: 'aws.ec2',
    account: '123456789012',
    time,
    region: 'us-east-1',
    resources: [`arn:aws:ec2:us-east-1:123456789012:instance/${instanceId}`],
    detail: { 'instance-id': instanceId, 'instance-action': 'terminate' },
  };
}

async function serve(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void | Promise<void>): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => void handler(req, body, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe.each(BACKENDS)('worker registry on %s', (backendName) => {
  let backend: LeaseBackend;
  let registry: WorkerRegistry;
  let store: RegistryStore;
  let tableClose: (() => Promise<void>) | null = null;
  beforeAll(async () => {
    backend = await openBackend(backendName);
    if (backend.sql) store = new PostgresRegistryStore(backend.sql);
    else {
      const t = await dynamoTable();
      tableClose = () => t.close();
      store = new DynamoRegistryStore(t.doc, t.table);
    }
    registry = new WorkerRegistry(store, { staleAfterMs: 10_000 });
  });
  afterAll(async () => {
    await tableClose?.();
    await backend?.close();
  });

  it('drain requests: requested once, then duplicate; unknown instance; late after the workers left', async () => {
    const now = 1_000_000;
    const instance = uniqueName('i');
    await registry.register({ workerId: 'w1', instanceId: instance, provider: 'aws', runId: 'r' }, now);
    await registry.register({ workerId: 'w2', instanceId: instance, provider: 'aws', runId: 'r' }, now);
    expect((await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'w1' }, now + 1_000))!.heartbeatAt).toBe(now + 1_000);
    const notice = { instanceId: instance, kind: 'interruption' as const, provider: 'aws' as const, noticeAt: now + 1_500 };
    expect(await registry.requestDrain(notice, now + 2_000)).toEqual({ outcome: 'requested', workers: ['w1', 'w2'] });
    const seen = await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'w1' }, now + 2_500);
    expect(seen).toMatchObject({ state: 'draining', drain: { kind: 'interruption', provider: 'aws', noticeAt: now + 1_500 } });
    expect((await registry.requestDrain({ ...notice, kind: 'rebalance' }, now + 3_000)).outcome).toBe('duplicate');
    expect(await registry.requestDrain({ ...notice, instanceId: uniqueName('i-unknown') }, now)).toEqual({ outcome: 'unknown', workers: [] });
    await registry.deregister({ instanceId: instance, runId: 'r', workerId: 'w1' }, now + 4_000);
    await registry.deregister({ instanceId: instance, runId: 'r', workerId: 'w2' }, now + 4_000);
    expect((await registry.requestDrain(notice, now + 5_000)).outcome).toBe('gone');
    expect(await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'w1' }, now + 6_000)).toMatchObject({ state: 'gone', goneAt: now + 4_000 });
    await expect(registry.register({ workerId: ' ', instanceId: instance, provider: 'aws', runId: 'r' }, now)).rejects.toThrow(/workerId: must not be empty/);
    await expect(registry.register({ workerId: 'w', instanceId: instance, provider: 'aws', runId: '' }, now)).rejects.toThrow(/runId: must not be empty/);
  });

  it('a worker that stopped heartbeating (crashed, never deregistered): the notice is reported late, and the worker is asked all the same', async () => {
    const silent = uniqueName('i');
    const key = { workerId: 'w', instanceId: silent, runId: 'r' };
    await registry.register({ ...key, provider: 'gcp' }, Date.now());
    const strict = new WorkerRegistry(store, { staleAfterMs: 1, clockSkewMs: 0 });
    // Silence is measured on the store's clock (PostgreSQL, PGlite) or on ours (DynamoDB): real time must pass.
    await until('the worker has been silent for a while', async () => {
      const [w] = await store.byInstance(silent);
      return (w!.silentForMs ?? Date.now() - w!.heartbeatAt) > 5;
    });
    expect(await strict.requestDrain({ instanceId: silent, kind: 'interruption', provider: 'gcp', noticeAt: Date.now() }, Date.now())).toEqual({
      outcome: 'gone',
      workers: ['w'],
    });
    expect(await registry.heartbeat(key, Date.now())).toMatchObject({ state: 'draining', provider: 'gcp' });
  });

  it('a drain request wins against a worker heartbeating as fast as it can: requested, never misreported as a duplicate', async () => {
    const instance = uniqueName('i');
    let t = 2_000_000;
    await registry.register({ workerId: 'busy', instanceId: instance, provider: 'aws', runId: 'r' }, t);
    let beating = true;
    const heartbeats = (async () => {
      let n = 0;
      while (beating) {
        await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'busy' }, ++t);
        n++;
        await new Promise((r) => setImmediate(r)); // PGlite settles on microtasks: let timers run
      }
      return n;
    })();
    await expect.poll(async () => (await registry.list()).find((w) => w.instanceId === instance)!.heartbeatAt, { interval: 5 }).toBeGreaterThan(2_000_000);
    const out = await registry.requestDrain({ instanceId: instance, kind: 'interruption', provider: 'aws', noticeAt: t }, t);
    beating = false;
    expect(await heartbeats).toBeGreaterThan(0);
    expect(out).toEqual({ outcome: 'requested', workers: ['busy'] });
    expect((await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'busy' }, t + 1))!.state).toBe('draining');
  });

  it('one record per worker per run: the same worker id in two runs is two workers; leaving one leaves the other working', async () => {
    const now = Date.now();
    const instance = uniqueName('i');
    await registry.register({ workerId: 'w1', instanceId: instance, provider: 'local', runId: 'run-a' }, now);
    await registry.register({ workerId: 'w1', instanceId: instance, provider: 'local', runId: 'run-b' }, now);
    const mine = (await registry.list()).filter((w) => w.instanceId === instance);
    expect(mine.map((w) => `${w.runId}/${w.workerId}`).sort()).toEqual(['run-a/w1', 'run-b/w1']);
    await registry.deregister({ instanceId: instance, runId: 'run-a', workerId: 'w1' }, now + 1);
    expect(
      (await registry.list())
        .filter((w) => w.instanceId === instance)
        .map((w) => `${w.runId}/${w.state}`)
        .sort(),
    ).toEqual(['run-a/gone', 'run-b/active']);
  });

  it('registration never erases a drain request: a worker re-registering while asked to drain is told so', async () => {
    const now = Date.now();
    const instance = uniqueName('i');
    const reg = { workerId: 'w1', instanceId: instance, provider: 'aws' as const, runId: 'r' };
    await registry.register(reg, now);
    expect((await registry.requestDrain({ instanceId: instance, kind: 'interruption', provider: 'aws', noticeAt: now }, now + 1)).outcome).toBe('requested');
    // The worker restarts (same identity) after the request and before it saw it.
    const again = await registry.register(reg, now + 2);
    expect(again).toMatchObject({ state: 'draining', drain: { kind: 'interruption', noticeAt: now } });
    expect(await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'w1' }, now + 3)).toMatchObject({
      state: 'draining',
      drain: { kind: 'interruption', noticeAt: now },
    });
  });

  it('registration tells whether this worker of this run was on this instance before: new, then known (active, gone or draining alike)', async () => {
    const now = Date.now();
    const instance = uniqueName('i');
    const reg = { workerId: 'w1', instanceId: instance, provider: 'aws' as const, runId: 'r' };
    expect(await registry.register(reg, now)).toMatchObject({ state: 'active', known: false });
    expect(await registry.register(reg, now + 1)).toMatchObject({ state: 'active', known: true });
    // Another run, or another instance, is another key: new there.
    expect((await registry.register({ ...reg, runId: 'r2' }, now + 2)).known).toBe(false);
    expect((await registry.register({ ...reg, instanceId: uniqueName('i') }, now + 2)).known).toBe(false);
    await registry.deregister(reg, now + 3);
    expect(await registry.register(reg, now + 4)).toMatchObject({ state: 'active', known: true });
    await registry.requestDrain({ instanceId: instance, kind: 'interruption', provider: 'aws', noticeAt: now + 5 }, now + 5);
    expect(await registry.register(reg, now + 6)).toMatchObject({ state: 'draining', known: true });
  });

  it("a worker whose clock is behind is still asked to drain (its heartbeat stamp is not judged by the drain handler's clock alone)", async () => {
    const now = Date.now();
    const behind = now - 10 * 60_000; // ten minutes behind: sixty times the registry's staleness bound
    const instance = uniqueName('i');
    await registry.register({ workerId: 'slow-clock', instanceId: instance, provider: 'aws', runId: 'r' }, behind);
    await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'slow-clock' }, behind + 1);
    const out = await registry.requestDrain({ instanceId: instance, kind: 'interruption', provider: 'aws', noticeAt: now }, now);
    expect(out.workers).toEqual(['slow-clock']);
    // PostgreSQL and PGlite judge the heartbeat on the store's own clock: it is fresh.
    if (backendName !== 'dynamodb') expect(out.outcome).toBe('requested');
    expect(await registry.heartbeat({ instanceId: instance, runId: 'r', workerId: 'slow-clock' }, behind + 2)).toMatchObject({ state: 'draining' });
  });

  it('a worker agent that starts while its record is draining drains at once instead of working on a doomed instance', async () => {
    const sqs = sqsClient();
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    try {
      const runId = uniqueName('run');
      const instanceId = uniqueName('i');
      const queue = new SqsWorkQueue(sqs, url);
      await backend.ledger.createRun(runId, {}, Date.now());
      const { ids } = await backend.ledger.enqueue(runId, [{ runId, i: 0 }], Date.now());
      await queue.send(runId, ids);
      const registration = { workerId: 'w1', instanceId, provider: 'aws' as const, runId };
      // Its previous life registered, then the instance got its notice; the process restarts before it saw it.
      await registry.register(registration, Date.now());
      expect((await registry.requestDrain({ instanceId, kind: 'interruption', provider: 'aws', noticeAt: Date.now() }, Date.now())).outcome).toBe('requested');
      const worker = new Worker({ runId, workerId: 'w1', ledger: backend.ledger, queue, backend: mockBackend(), waitSeconds: 0 });
      const agent = new WorkerAgent({ worker, registry, ledger: backend.ledger, registration, registryHeartbeatMs: 50, exitWhenDone: true });
      const exit = await agent.run(new AbortController().signal);
      expect(exit.reason).toBe('drained');
      expect(worker.stats.done).toBe(0);
      expect(await backend.ledger.counts(runId)).toEqual({ pending: 1, running: 0, done: 0, failed: 0 });
    } finally {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      sqs.destroy();
    }
  });

  it('a worker new to the registry does not read the running set at start; one that was registered before adopts what its previous life claimed', async () => {
    const sqs = sqsClient();
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    try {
      const runId = uniqueName('run');
      const queue = new SqsWorkQueue(sqs, url);
      await backend.ledger.createRun(runId, {}, Date.now());
      // Reads of the running set, through the real store.
      let runningReads = 0;
      const ledger = new Proxy(backend.ledger, {
        get(target, prop, receiver) {
          const v: unknown = Reflect.get(target, prop, receiver);
          if ((prop === 'holders' || prop === 'running') && typeof v === 'function')
            return (...a: unknown[]) => (runningReads++, (v as (...x: unknown[]) => unknown).apply(target, a));
          return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
        },
      });
      const start = async (registration: { workerId: string; instanceId: string; provider: 'aws'; runId: string }) => {
        const worker = new Worker({ runId, workerId: registration.workerId, ledger, queue, backend: mockBackend(), waitSeconds: 0 });
        const exit = await new WorkerAgent({ worker, registry, ledger, registration, registryHeartbeatMs: 50, exitWhenDone: true }).run(
          new AbortController().signal,
        );
        return { exit, worker };
      };

      const first = { workerId: uniqueName('w'), instanceId: uniqueName('i'), provider: 'aws' as const, runId };
      const {
        ids: [a],
      } = await backend.ledger.enqueue(runId, [{ runId, i: 0 }], Date.now());
      await queue.send(runId, [a!]);
      const fresh = await start(first);
      expect(fresh.exit.reason).toBe('done');
      expect(fresh.worker.stats.done).toBe(1);
      expect(runningReads).toBe(0);

      // A previous life of `first` claims an item and dies holding it (its message stays invisible).
      const {
        ids: [b],
      } = await backend.ledger.enqueue(runId, [{ runId, i: 1 }], Date.now());
      await queue.send(runId, [b!]);
      const previous = new Worker({
        runId,
        workerId: first.workerId,
        ledger: backend.ledger,
        queue,
        backend: mockBackend(),
        waitSeconds: 0,
        visibilitySeconds: 600,
      });
      expect(await previous.step()).toBe('received');
      expect(previous.held).toEqual([b]);
      const again = await start(first);
      expect(again.exit.reason).toBe('done');
      expect(runningReads).toBeGreaterThan(0);
      expect(again.worker.stats.done).toBe(1);
      expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 2, failed: 0 });
    } finally {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      sqs.destroy();
    }
  });
});

describe('spot drain on DynamoDB + SQS', () => {
  let t: Awaited<ReturnType<typeof dynamoTable>>;
  let backend: LeaseBackend;
  const sqs = sqsClient();
  beforeAll(async () => {
    backend = await openBackend('dynamodb');
    t = await dynamoTable();
  });
  afterAll(async () => {
    await t?.close();
    await backend?.close();
  });
  const runtime = () => lazy(() => runtimeFrom({ ...process.env, ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: t.table, ROLLOUT_NODE_ID: 'stack-a' }));

  it('the drain Lambda reaches a running worker through the registry: it drains inside the AWS deadline, gives everything back, and a later notice is acknowledged as late', async () => {
    const rt = runtime();
    const {
      stores: { ledger },
      registry,
    } = await rt();
    const runId = uniqueName('run');
    const instanceId = ec2InstanceId();
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
    try {
      const queue = new SqsWorkQueue(sqs, url);
      await ledger.createRun(runId, {}, Date.now());
      const { ids } = await ledger.enqueue(
        runId,
        Array.from({ length: 12 }, (_, i) => ({ runId, i })),
        Date.now(),
      );
      await queue.send(runId, ids);
      const worker = new Worker({ runId, workerId: 'w1', ledger, queue, backend: mockBackend({ durationMs: 60_000 }), waitSeconds: 0 });
      const agent = new WorkerAgent({
        worker,
        registry,
        ledger,
        registration: { workerId: 'w1', instanceId, provider: 'aws', runId },
        registryHeartbeatMs: 50,
      });
      const exit = agent.run(new AbortController().signal);
      // The worker holds items and runs one (a minute long) when the notice comes.
      await expect.poll(async () => (await ledger.running(runId)).some((i) => i.started), { interval: 20, timeout: 10_000 }).toBe(true);
      const handler = spotDrainHandler(rt, silentLog, silentMetrics);
      const noticeTime = new Date();
      expect(await handler(spotEvent(SPOT_INTERRUPTION, instanceId, noticeTime.toISOString()))).toMatchObject({
        outcome: 'requested',
        workers: ['w1'],
        kind: 'interruption',
      });
      const result = await exit;
      expect(result.reason).toBe('drained');
      if (result.reason !== 'drained') return;
      expect(result.report.withinDeadline).toBe(true);
      expect(result.report.deadlineMs).toBe(PROVIDER_DEADLINES.aws.drainDeadlineMs);
      expect(result.report.notice.receivedAt).toBe(noticeTime.getTime()); // the deadline counts from the cloud's notice time
      expect(result.report.steps).toEqual(['stop_pulling_and_nack', 'deregister', 'exit']);
      expect(result.report.nacked.length).toBeGreaterThan(0);
      const counts = await ledger.counts(runId);
      expect(counts).toEqual({ pending: 12, running: 0, done: 0, failed: 0 }); // nothing lost, nothing left held
      // The duplicate (a rebalance after the interruption, or a retried event) and unknown instances are answered, not thrown.
      expect((await handler(spotEvent(REBALANCE_RECOMMENDATION, instanceId))).outcome).toBe('gone');
      expect((await handler(spotEvent(SPOT_INTERRUPTION, ec2InstanceId()))).outcome).toBe('unknown');
      await expect(handler({ source: 'aws.ec2', 'detail-type': SPOT_INTERRUPTION, time: 'yesterday', detail: {} })).rejects.toThrow(InvalidNoticeError);
      await expect(handler({ source: 'aws.ec2', 'detail-type': SPOT_INTERRUPTION, time: 'yesterday', detail: {} })).rejects.toThrow(
        /time: .*detail.instance-id/s,
      );
    } finally {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    }
  });

  it('the coordinator Lambda over the Invoke API: one stack coordinates (steals for an idle worker), another is told it is not the coordinator', async () => {
    const rtA = runtime();
    const rtB = lazy(() => runtimeFrom({ ...process.env, ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: t.table, ROLLOUT_NODE_ID: 'stack-b' }));
    const { ledger } = (await rtA()).stores;
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    const queue = new SqsWorkQueue(sqs, url);
    const options = { bus: new InProcessBus(), queue: () => queue, onFenced: () => undefined };
    const handlers: Record<string, (e: unknown) => Promise<unknown>> = {
      'coordinator-a': coordinatorHandler(rtA, options, silentLog, silentMetrics),
      'coordinator-b': coordinatorHandler(rtB, options, silentLog, silentMetrics),
    };
    // The Lambda Invoke API (REST-JSON), served by calling the handler in-process.
    const { url: endpoint, server } = await serve(async (req, body, res) => {
      const name = decodeURIComponent(/\/functions\/([^/]+)\/invocations/.exec(req.url ?? '')?.[1] ?? '');
      const fn = handlers[name];
      if (!fn) {
        res
          .writeHead(404, { 'content-type': 'application/json', 'x-amzn-errortype': 'ResourceNotFoundException' })
          .end(JSON.stringify({ message: `Function not found: ${name}` }));
        return;
      }
      try {
        const reply = JSON.stringify(await fn(JSON.parse(body)));
        res.writeHead(200, { 'content-type': 'application/json' }).end(reply);
      } catch (err) {
        res
          .writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' })
          .end(JSON.stringify({ errorMessage: (err as Error).message }));
      }
    });
    const lambda = new LambdaClient({ endpoint });
    try {
      const runId = uniqueName('run');
      await ledger.createRun(runId, {}, Date.now());
      const { ids } = await ledger.enqueue(
        runId,
        Array.from({ length: 8 }, (_, i) => ({ runId, i })),
        Date.now(),
      );
      await queue.send(runId, ids);
      const victim = new Worker({ runId, workerId: 'victim', ledger, queue, backend: mockBackend(), waitSeconds: 0 });
      while (victim.held.length < 8) expect(await victim.pull()).toBeGreaterThan(0);
      await expect.poll(async () => (await ledger.running(runId)).length, { interval: 20, timeout: 5_000 }).toBe(8);
      const thief = new Worker({
        runId,
        workerId: 'thief',
        ledger,
        queue,
        backend: mockBackend(),
        waitSeconds: 0,
        coordinator: new LambdaCoordinatorClient(lambda, 'coordinator-a', runId),
        askAtStart: true,
      });
      expect(await thief.step()).toBe('stole');
      expect(thief.held).toHaveLength(4);
      expect(thief.guard.current).toBe(0);
      // The other stack does not hold coordinator:<run>: it says so instead of acting.
      expect(await handlers['coordinator-b']!({ action: 'steal', runId, workerId: 'thief' })).toEqual({ leader: false, holder: 'stack-a' });
      await expect(new LambdaCoordinatorClient(lambda, 'coordinator-a', runId).requestWork('')).rejects.toThrow(/workerId/);
      await expect(handlers['coordinator-a']!({ action: 'rebalance', runId })).rejects.toThrow(/invalid coordinator request: action/);
      expect(await handlers['coordinator-a']!({ action: 'scan', runId })).toMatchObject({ leader: true, scanned: { repended: [] } });
      // A warm sandbox goes on with the coordinator it opened while its lease is fresh: its requests neither read nor write the lease.
      const stores = (await rtA()).stores as { runLeases: (id: string) => LeaseStore };
      const open = stores.runLeases;
      let leaseRequests = 0;
      stores.runLeases = (id) => {
        const store = open(id);
        return { read: (name) => (leaseRequests++, store.read(name)), compareAndSwap: (e, n) => (leaseRequests++, store.compareAndSwap(e, n)) };
      };
      for (let i = 0; i < 3; i++) expect(await handlers['coordinator-a']!({ action: 'steal', runId, workerId: `idle-${i}` })).toMatchObject({ leader: true });
      expect(await handlers['coordinator-a']!({ action: 'scan', runId })).toMatchObject({ leader: true });
      expect(leaseRequests).toBe(0);
      stores.runLeases = open;
      // The schedule's request visits every open run; this run is open (its items are Running).
      await expect.poll(async () => (await ledger.openRuns()).includes(runId), { interval: 20, timeout: 5_000 }).toBe(true);
      expect(await handlers['coordinator-a']!({ action: 'scan-all' })).toMatchObject({ leader: true, scanned: { repended: [] } });
    } finally {
      lambda.destroy();
      server.close();
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    }
  });
});

describe('a worker fleet on DynamoDB: registry under the instance ARN, steals only for its own workers', () => {
  let t: Awaited<ReturnType<typeof dynamoTable>>;
  let backend: LeaseBackend;
  const sqs = sqsClient();
  beforeAll(async () => {
    backend = await openBackend('dynamodb');
    t = await dynamoTable();
  });
  afterAll(async () => {
    await t?.close();
    await backend?.close();
  });
  const runtime = () => lazy(() => runtimeFrom({ ...process.env, ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: t.table, ROLLOUT_NODE_ID: 'stack-a' }));
  const arnOf = (id: string) => `arn:aws:ec2:us-east-1:123456789012:instance/${id}`;

  it('a notice reaches workers registered under the instance ARN its resources carry, and those under its id alike', async () => {
    const rt = runtime();
    const { registry } = await rt();
    const instanceId = ec2InstanceId();
    const now = Date.now();
    await registry.register({ workerId: 'fleet-w', instanceId: arnOf(instanceId), provider: 'aws', runId: 'run-1' }, now);
    await registry.register({ workerId: 'hand-w', instanceId, provider: 'aws', runId: 'run-1' }, now);
    const other = ec2InstanceId();
    await registry.register({ workerId: 'elsewhere', instanceId: arnOf(other), provider: 'aws', runId: 'run-1' }, now);
    const handler = spotDrainHandler(rt, silentLog, silentMetrics);
    expect(await handler(spotEvent(SPOT_INTERRUPTION, instanceId))).toMatchObject({
      outcome: 'requested',
      instanceArn: arnOf(instanceId),
      workers: ['fleet-w', 'hand-w'],
    });
    const states = Object.fromEntries((await registry.list()).filter((w) => w.runId === 'run-1').map((w) => [w.workerId, w.state]));
    expect(states).toMatchObject({ 'fleet-w': 'draining', 'hand-w': 'draining', elsewhere: 'active' });
  });

  it("through its alias a fleet gets work only for a worker of its run on one of its instances: a made-up id, another run's worker, a forged roster entry, a gone or draining worker are refused and nothing moves", async () => {
    const rt = runtime();
    const { stores, registry } = await rt();
    const { ledger } = stores;
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    const queue = new SqsWorkQueue(sqs, url);
    try {
      const runId = uniqueName('run');
      const otherRun = uniqueName('run');
      const handler = coordinatorHandler(
        rt,
        { bus: new InProcessBus(), queue: () => queue, onFenced: () => undefined, deadLetters: null, fleets: { 'fleet-a': [runId], 'fleet-b': [otherRun] } },
        silentLog,
        silentMetrics,
      );
      const through = { invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:coordinator:fleet-a' };
      await ledger.createRun(runId, {}, Date.now());
      const { ids } = await ledger.enqueue(
        runId,
        Array.from({ length: 8 }, (_, i) => ({ runId, i })),
        Date.now(),
      );
      await queue.send(runId, ids);
      const victim = new Worker({ runId, workerId: 'victim', ledger, queue, backend: mockBackend(), waitSeconds: 0 });
      while (victim.held.length < 8) expect(await victim.pull()).toBeGreaterThan(0);
      const holders = async () =>
        Object.entries(
          (await ledger.running(runId)).reduce<Record<string, number>>((n, i) => ({ ...n, [String(i.worker)]: (n[String(i.worker)] ?? 0) + 1 }), {}),
        ).sort();
      await expect.poll(holders, { interval: 20, timeout: 5_000 }).toEqual([['victim', 8]]);

      const now = Date.now();
      const [a1, a2, b1] = [ec2InstanceId(), ec2InstanceId(), ec2InstanceId()];
      await registry.register({ workerId: 'thief', instanceId: arnOf(a1), provider: 'aws', runId }, now);
      await registry.register({ workerId: 'leaver', instanceId: arnOf(a1), provider: 'aws', runId }, now);
      await registry.register({ workerId: 'doomed', instanceId: arnOf(a2), provider: 'aws', runId }, now);
      await registry.register({ workerId: 'b-worker', instanceId: arnOf(b1), provider: 'aws', runId: otherRun }, now);
      await registry.deregister({ workerId: 'leaver', instanceId: arnOf(a1), runId }, now + 1);
      await registry.requestDrain({ instanceId: a2, instanceArn: arnOf(a2), kind: 'interruption', provider: 'aws', noticeAt: now }, now + 1);
      // A roster entry naming an instance that holds no record of the worker: no instance vouches for it.
      await t.doc.send(
        new PutCommand({ TableName: t.table, Item: { pk: `RUN#${runId}#WORKERS`, sk: 'WORKER#forged', runId, workerId: 'forged', instanceId: arnOf(a1) } }),
      );

      const steal = (workerId: string, runOf = runId) => handler({ action: 'steal', runId: runOf, workerId }, through);
      await expect(steal('ghost')).rejects.toThrow(
        `coordinator request refused: worker "ghost" is not registered for run ${runId} by any instance of its fleet`,
      );
      await expect(steal('b-worker')).rejects.toThrow(`worker "b-worker" is not registered for run ${runId}`);
      await expect(steal('forged')).rejects.toThrow(`worker "forged" is not registered for run ${runId}`);
      await expect(steal('leaver')).rejects.toThrow(new RegExp(`worker "leaver" of run ${runId} left ${arnOf(a1)} at `));
      await expect(steal('doomed')).rejects.toThrow(`worker "doomed" of run ${runId} is draining (${arnOf(a2)} is being reclaimed): it takes no more work`);
      // Another fleet's worker in its own run, asked through this fleet's alias: the run check refuses it first.
      await expect(steal('b-worker', otherRun)).rejects.toThrow(`serves runs ${runId}, not ${otherRun}`);
      // Nothing moved: every item is still the victim's.
      expect(await holders()).toEqual([['victim', 8]]);

      // The fleet's own worker of the run is given work.
      expect(await steal('thief')).toMatchObject({ leader: true, notice: { victim: 'victim' } });
      expect(await holders()).toEqual([
        ['thief', 4],
        ['victim', 4],
      ]);
      // Unqualified (the schedule, an operator): not a fleet's request, the worker is not looked up.
      expect(await handler({ action: 'steal', runId, workerId: 'ghost' })).toMatchObject({ leader: true });
    } finally {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    }
  });
});

describe('instance-metadata sources', () => {
  it('AWS IMDSv2: no notice while spot/instance-action is 404; an interruption once it appears (token required)', async () => {
    let action = false;
    const { url, server } = await serve((req, _body, res) => {
      if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.writeHead(200).end('tok-1');
      if (req.headers['x-aws-ec2-metadata-token'] !== 'tok-1') return void res.writeHead(401).end();
      if (req.url === '/latest/meta-data/instance-id') return void res.writeHead(200).end('i-0abc');
      if (req.url === '/latest/meta-data/spot/instance-action' && action)
        return void res.writeHead(200).end(JSON.stringify({ action: 'terminate', time: new Date().toISOString() }));
      res.writeHead(404).end();
    });
    try {
      expect(await Ec2MetadataHint.instanceId({ endpoint: url })).toBe('i-0abc');
      const hint = new Ec2MetadataHint('i-0abc', { endpoint: url, pollMs: 20 });
      const notices: PreemptionNotice[] = [];
      hint.onPreemption((n) => notices.push(n));
      expect(await hint.check()).toBeNull();
      hint.start();
      action = true;
      await expect.poll(() => notices.length, { interval: 10, timeout: 5_000 }).toBe(1);
      hint.stop();
      expect(notices[0]).toMatchObject({ provider: 'aws', instanceId: 'i-0abc', kind: 'interruption' });
    } finally {
      server.close();
    }
  });

  it('GCP: the preempted flag is watched with wait_for_change, and fires once it turns TRUE', async () => {
    let release!: () => void;
    const flipped = new Promise<void>((r) => (release = r));
    const { url, server } = await serve(async (req, _body, res) => {
      if (req.headers['metadata-flavor'] !== 'Google') return void res.writeHead(403).end();
      if (req.url === '/computeMetadata/v1/instance/id') return void res.writeHead(200).end('4242');
      if (req.url === '/computeMetadata/v1/instance/preempted?wait_for_change=true') {
        await flipped;
        return void res.writeHead(200).end('TRUE');
      }
      res.writeHead(404).end();
    });
    try {
      expect(await GcpMetadataHint.instanceId({ endpoint: url })).toBe('4242');
      const hint = new GcpMetadataHint('4242', { endpoint: url });
      const notices: PreemptionNotice[] = [];
      hint.onPreemption((n) => notices.push(n));
      hint.start();
      release();
      await expect.poll(() => notices.length, { interval: 10, timeout: 5_000 }).toBe(1);
      hint.stop();
      expect(notices[0]).toMatchObject({ provider: 'gcp', instanceId: '4242', kind: 'interruption' });
      expect(PROVIDER_DEADLINES.gcp).toEqual({ noticeLeadMs: 30_000, drainDeadlineMs: 15_000 });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
