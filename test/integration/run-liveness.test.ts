/**
 * Liveness of work runs under faults: every run finishes. Each case is a way
 * a run used to stall — a message never sent, a backlog aged into re-pends,
 * a clock that disagrees, a poison item in cluster mode, a store outage, a
 * result too large to store — on every backend and queue where it applies:
 * the ledger-backed queue (PostgreSQL, PGlite) and SQS (fauxqs) with
 * PostgreSQL or DynamoDB Local. Faults are real: a TCP proxy that refuses
 * connections stands between a process and its store or queue.
 */
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiHandler } from '../../shared/api/handler.js';
import type { Clock } from '../../shared/clock.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { mockBackend, type ExecutionBackend } from '../../shared/ledger/backends.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { contentId, MAX_ATTEMPTS, MAX_RESULT_BYTES } from '../../shared/ledger/model.js';
import { StoreContendedError } from '../../shared/errors.js';
import { coordinatorLease, type LedgerStore } from '../../shared/ledger/store.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import type { Logger } from '../../shared/log.js';
import type { WorkQueue } from '../../shared/queue/port.js';
import { LedgerDeadLetters, LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { InProcessWake, PgNotifyWake, type WakeSource } from '../../shared/adapters/postgres/wake.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { connectPostgres } from '../../shared/adapters/postgres/connect.js';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';
import { openBackend, uniqueName, type BackendName, type LeaseBackend } from '../support/backends.js';
import { gate, settled, until } from '../support/gate.js';
import { FaultyProxy } from '../support/tcp-proxy.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

type Setup = { readonly backend: BackendName; readonly queue: 'sqs' | 'ledger' };
const ALL: readonly Setup[] = [
  { backend: 'postgres', queue: 'ledger' },
  { backend: 'pglite', queue: 'ledger' },
  { backend: 'postgres', queue: 'sqs' },
  { backend: 'dynamodb', queue: 'sqs' },
];
const SQS_ONLY = ALL.filter((s) => s.queue === 'sqs');
const labelled = (list: readonly Setup[]) => list.map((s) => ({ ...s, label: `${s.backend} + ${s.queue === 'sqs' ? 'SQS' : 'the ledger-backed queue'}` }));

/** A clock `offsetMs` away from this machine's. */
const offsetClock = (offsetMs: number): Clock => ({ now: () => Date.now() + offsetMs });

function harness(setup: Setup) {
  let backend: LeaseBackend;
  const sqs = sqsClient();
  const cleanups: (() => Promise<unknown>)[] = [];
  let wake: WakeSource | undefined;

  const h = {
    get backend() {
      return backend;
    },
    async open() {
      backend = await openBackend(setup.backend);
      if (setup.queue === 'ledger') wake = setup.backend === 'postgres' ? await PgNotifyWake.open({ connectionString: backend.url! }) : new InProcessWake();
    },
    async close() {
      for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
      await wake?.close();
      await backend?.close();
    },
    /**
     * A run of `n` items, each put on the queue and recorded as sent. Poison: on SQS a DLQ takes a
     * message after `maxAttempts` receives; the ledger-backed queue stops offering the item.
     */
    async run(n: number, payload: (i: number) => unknown = (i) => ({ i }), maxAttempts = 5) {
      const runId = uniqueName('run');
      let dlq: WorkQueue;
      let queueUrl: string | null = null;
      let queue: WorkQueue;
      if (setup.queue === 'sqs') {
        const dlqUrl = await h.sqsQueue();
        const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }));
        queueUrl = await h.sqsQueue({ RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes!.QueueArn, maxReceiveCount: maxAttempts }) });
        queue = new SqsWorkQueue(sqs, queueUrl);
        dlq = new SqsWorkQueue(sqs, dlqUrl);
      } else {
        queue = new LedgerWorkQueue(backend.sql!, wake!, runId, null, { maxReceiveCount: maxAttempts });
        dlq = new LedgerDeadLetters(backend.sql!, runId, maxAttempts);
      }
      await backend.ledger.createRun(runId, {}, Date.now());
      const { ids } = await backend.ledger.enqueue(
        runId,
        Array.from({ length: n }, (_, i) => payload(i)),
        Date.now(),
      );
      await queue.send(runId, ids);
      if (!queue.deliversFromLedger)
        await backend.ledger.markSent(
          runId,
          ids.map((id) => ({ id, version: 0 })),
          Date.now(),
        );
      const forWorker = (id: string): WorkQueue => (queue instanceof LedgerWorkQueue ? queue.forWorker(id) : queue);
      return { runId, ids, queue, queueUrl, forWorker, dlq };
    },
    async sqsQueue(attributes: Record<string, string> = {}): Promise<string> {
      const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '30', ...attributes } }))).QueueUrl!;
      cleanups.push(() => sqs.send(new DeleteQueueCommand({ QueueUrl: url })));
      return url;
    },
    /** The same queue reached through a proxy the test can cut. */
    async sqsThroughProxy(queueUrl: string): Promise<{ queue: SqsWorkQueue; proxy: FaultyProxy }> {
      const real = new URL(process.env.AWS_ENDPOINT_URL_SQS!);
      const proxy = await new FaultyProxy(real.hostname, Number(real.port)).start();
      cleanups.push(() => proxy.stop());
      const endpoint = `http://127.0.0.1:${proxy.port}`;
      const client = sqsClient({ endpoint, maxAttempts: 1 });
      cleanups.push(() => Promise.resolve(client.destroy()));
      // The client keeps to its endpoint (useQueueUrlAsEndpoint off): the queue URL stays as it is.
      return { queue: new SqsWorkQueue(client, queueUrl), proxy };
    },
    /** The run's coordinator; `dlq` is where its scan finds dead letters (in AWS the DLQ's own consumer does that). */
    async coordinator(runId: string, queue: WorkQueue, o: { timeoutMs?: number; clock?: Clock; maxAttempts?: number; dlq?: WorkQueue } = {}) {
      const elector = new LeaseElector(backend.runLeases(runId), {
        name: coordinatorLease(runId),
        holderId: 'c1',
        ...LEASE,
        ...(o.clock ? { clock: o.clock } : {}),
      });
      expect((await elector.campaign()).leader).toBe(true);
      return new Coordinator({
        runId,
        ledger: backend.ledger,
        elector,
        bus: new InProcessBus(),
        failureTimeoutMs: o.timeoutMs ?? LEASE.ttlMs,
        queue,
        ...(o.dlq ? { deadLetters: o.dlq } : {}),
        ...(o.clock ? { clock: o.clock } : {}),
        ...(o.maxAttempts ? { maxAttempts: o.maxAttempts } : {}),
      });
    },
    worker(
      runId: string,
      id: string,
      queue: WorkQueue,
      o: {
        backend?: ExecutionBackend;
        clock?: Clock;
        heartbeatMs?: number;
        receiveBatch?: number;
        ledger?: LedgerStore;
        coordinator?: Coordinator;
        logger?: Logger;
      } = {},
    ) {
      return new Worker({
        runId,
        workerId: id,
        ledger: o.ledger ?? backend.ledger,
        queue,
        backend: o.backend ?? mockBackend(),
        waitSeconds: 0,
        ...(o.clock ? { clock: o.clock } : {}),
        ...(o.heartbeatMs ? { heartbeatMs: o.heartbeatMs } : {}),
        ...(o.receiveBatch ? { receiveBatch: o.receiveBatch } : {}),
        ...(o.logger ? { logger: o.logger } : {}),
        // A worker that finds nothing asks at once: these runs are a few items on a few workers.
        ...(o.coordinator ? { coordinator: { requestWork: (w: string) => o.coordinator!.stealFor(w) }, askAtStart: true } : {}),
      });
    },
    async counts(runId: string) {
      return backend.ledger.counts(runId);
    },
  };
  return h;
}

/** The coordinator's scan every 100 ms of real time, as its schedule runs it, until stopped; what it re-pended. */
function scanning(coordinator: Coordinator): { readonly repended: string[]; stop(): Promise<void> } {
  const halt = new AbortController();
  const repended: string[] = [];
  const loop = (async () => {
    while (!halt.signal.aborted) {
      repended.push(...(await coordinator.scan()).repended);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    repended,
    stop: async () => {
      halt.abort();
      await loop;
    },
  };
}

/** Step workers, scanning now and then, until the run has nothing Pending or Running (bounded by rounds, not time). */
async function finish(h: ReturnType<typeof harness>, runId: string, workers: Worker[], scan?: Coordinator, rounds = 300) {
  for (let round = 0; round < rounds; round++) {
    await Promise.all(workers.map((w) => w.step()));
    if (scan && round % 5 === 4) await scan.scan();
    const c = await h.counts(runId);
    if (c.pending + c.running === 0) return c;
  }
  throw new Error(`run ${runId} did not finish: ${JSON.stringify(await h.counts(runId))}`);
}

describe.each(labelled(SQS_ONLY))('a crash between storing and sending never strands an item: $label', (setup) => {
  const h = harness(setup);
  beforeAll(() => h.open());
  afterAll(() => h.close());

  it('pending_without_message_after_scan: the failure scan re-pends, its send is refused; the next scan sends it and the run finishes', async () => {
    const { runId, ids, queueUrl, forWorker } = await h.run(3);
    const cut = await h.sqsThroughProxy(queueUrl!);
    const dying = h.worker(runId, 'dying', forWorker('dying'), { receiveBatch: 10 });
    while (dying.held.length < 3) await dying.pull();
    // The worker dies holding everything. Its coordinator judges them stale, re-pends them, and then
    // the send fails (its connection to SQS is down): three Pending items with no message.
    const coordinator = await h.coordinator(runId, cut.queue, { timeoutMs: 1 });
    cut.proxy.refuse(true);
    await until('the items are re-pended', async () => {
      await coordinator.failureScan().catch(() => undefined);
      return (await h.counts(runId)).pending === 3;
    });
    cut.proxy.refuse(false);
    const scanned = await coordinator.scan();
    expect(scanned.resent.sort()).toEqual([...ids].sort());
    const w = h.worker(runId, 'w', forWorker('w'));
    expect(await finish(h, runId, [w])).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
  });

  it('pending_without_message_after_nack: a worker nacks an item it holds without a message and cannot send; the scan sends it', async () => {
    const { runId, forWorker, queueUrl } = await h.run(2);
    const victim = h.worker(runId, 'victim', forWorker('victim'), { receiveBatch: 10 });
    while (victim.held.length < 2) await victim.pull();
    const coordinator = await h.coordinator(runId, forWorker('c'));
    await until('the running set is visible', async () => (await h.backend.ledger.running(runId)).length === 2);
    // The thief gets one item by a steal (no message of its own), its backend fails once, and its nack's send is refused.
    const cut = await h.sqsThroughProxy(queueUrl!);
    let failures = 0;
    const thief = h.worker(runId, 'thief', cut.queue, {
      coordinator,
      backend: () => {
        if (failures++ > 0) return Promise.resolve('ok');
        cut.proxy.refuse(true);
        return Promise.reject(new Error('backend unavailable'));
      },
    });
    expect(await thief.step()).toBe('stole');
    await expect(thief.step()).rejects.toThrow();
    expect(await h.counts(runId)).toMatchObject({ pending: 1, running: 1 });
    cut.proxy.refuse(false);
    expect((await coordinator.scan()).resent).toHaveLength(1);
    const rescuer = h.worker(runId, 'rescuer', forWorker('rescuer'));
    expect(await finish(h, runId, [victim, rescuer])).toEqual({ pending: 0, running: 0, done: 2, failed: 0 });
  });

  it('exhausted_without_message: an item tried maxAttempts times whose message is gone is failed by the scan with its last error, never sent again', async () => {
    const { runId, ids, forWorker } = await h.run(1);
    const coordinator = await h.coordinator(runId, forWorker('c'), { maxAttempts: 2 });
    const failing = h.worker(runId, 'failing', forWorker('failing'), { backend: () => Promise.reject(new Error('backend says no')) });
    await until('the item is tried twice', async () => {
      await failing.step().catch(() => undefined);
      const item = await h.backend.ledger.get(runId, ids[0]!);
      return item!.state === 'pending' && item!.attempts >= 2;
    });
    // Its message is gone (kept past the queue's retention, or a send was refused): the scan would send it again.
    await h.backend.ledger.markUnsent(runId, 10);
    const scanned = await coordinator.scan();
    expect(scanned).toMatchObject({ resent: [], failed: ids, failedBy: { attempts: 1, cancelled: 0, dead_letter: 0 } });
    expect(await h.backend.ledger.get(runId, ids[0]!)).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/^poison: tried 2 times without a result; last error: .*backend says no/) as unknown,
    });
    expect(await coordinator.scan()).toMatchObject({ resent: [], failed: [] });
  });

  it('copy_after_the_last_attempt: a copy of an old message, received after the item was tried MAX_ATTEMPTS times, does not run it again; the scan fails it', async () => {
    const { runId, ids, forWorker } = await h.run(1);
    const coordinator = await h.coordinator(runId, forWorker('c'));
    let calls = 0;
    const failing = h.worker(runId, 'failing', forWorker('failing'), {
      backend: () => {
        calls++;
        return Promise.reject(new Error('backend says no'));
      },
    });
    await until(`the item is tried ${MAX_ATTEMPTS} times`, async () => {
      await failing.step().catch(() => undefined);
      return (await h.backend.ledger.get(runId, ids[0]!))!.attempts >= MAX_ATTEMPTS;
    });
    // A copy of its message was still in flight: a re-pend sends a new one while the old one goes round.
    await forWorker('copy').send(runId, ids);
    const other = h.worker(runId, 'other', forWorker('other'), {
      backend: () => {
        calls++;
        return Promise.resolve('ran');
      },
    });
    const before = (await h.backend.ledger.get(runId, ids[0]!))!.version;
    await until('the copy is received, the item claimed and left', async () => {
      await other.step();
      const item = (await h.backend.ledger.get(runId, ids[0]!))!;
      return item.version > before && item.state !== 'running';
    });
    expect(calls).toBe(MAX_ATTEMPTS);
    expect(await h.backend.ledger.get(runId, ids[0]!)).toMatchObject({
      state: 'pending',
      attempts: MAX_ATTEMPTS,
      error: expect.stringMatching(/backend says no/) as unknown,
    });
    expect(await coordinator.scan()).toMatchObject({ resent: [], failed: ids, failedBy: { attempts: 1, cancelled: 0, dead_letter: 0 } });
    expect(await h.backend.ledger.get(runId, ids[0]!)).toMatchObject({
      state: 'failed',
      attempts: MAX_ATTEMPTS,
      error: expect.stringMatching(new RegExp(`^poison: tried ${MAX_ATTEMPTS} times without a result; last error: .*backend says no`)) as unknown,
    });
  });

  it('pending_without_message_after_post_runs: POST /runs stores its items, the send is refused (500); nobody retries, the scan sends them', async () => {
    const queueUrl = await h.sqsQueue();
    const cut = await h.sqsThroughProxy(queueUrl);
    const elector = new LeaseElector(h.backend.store, { name: 'promotion_leader', holderId: 'n1', ...LEASE });
    const api = apiHandler({
      nodeId: 'n1',
      engine: new RolloutEngine({ store: h.backend.rollouts, bus: new InProcessBus() }),
      leadership: campaignEachTime(elector),
      leases: h.backend.store,
      ledger: h.backend.ledger,
      workQueue: () => cut.queue,
      outbound: OutboundPolicy.none(),
    });
    const runId = uniqueName('run');
    cut.proxy.refuse(true);
    // The request fails (the runtime answers 500): nothing was sent.
    await expect(
      api({ method: 'POST', path: '/runs', body: JSON.stringify({ id: runId, spec: {}, items: [{ a: 1 }, { a: 2 }] }), actor: 'test' }),
    ).rejects.toThrow();
    cut.proxy.refuse(false);
    expect(await h.counts(runId)).toMatchObject({ pending: 2 });
    const coordinator = await h.coordinator(runId, new SqsWorkQueue(sqsClient(), queueUrl));
    expect((await coordinator.scan()).resent).toHaveLength(2);
    const w = h.worker(runId, 'w', new SqsWorkQueue(sqsClient(), queueUrl));
    expect(await finish(h, runId, [w])).toEqual({ pending: 0, running: 0, done: 2, failed: 0 });
  });
});

describe.each(labelled(ALL))('liveness of a run on $label', (setup) => {
  const h = harness(setup);
  beforeAll(() => h.open());
  afterAll(() => h.close());

  it('held_backlog_is_heartbeated: long items, a large batch, a short failure timeout — nothing held is re-pended, no attempt is added', async () => {
    // Real time: the worker's heartbeat timer and the scans run while the items do. Ten items of
    // 600 ms each are claimed at once; the failure timeout (3 s) is half the backlog.
    const { runId, ids, forWorker } = await h.run(10);
    const coordinator = await h.coordinator(runId, forWorker('c'), { timeoutMs: 3_000, clock: offsetClock(0) });
    const w = h.worker(runId, 'long', forWorker('long'), { backend: mockBackend({ durationMs: 600 }), heartbeatMs: 100, receiveBatch: 10 });
    while (w.held.length < 10) await w.pull();
    const scans = scanning(coordinator);
    await w.run(new AbortController().signal, async () => {
      const c = await h.counts(runId);
      return c.pending + c.running === 0;
    });
    await scans.stop();
    expect(scans.repended).toEqual([]);
    expect(w.stats).toMatchObject({ done: 10, lost: 0 });
    for (const id of ids) expect(await h.backend.ledger.get(runId, id)).toMatchObject({ state: 'done', worker: 'long', attempts: 0 });
  });

  it('clock_offset: a worker 30 s behind is never judged dead; a dead worker 10 min ahead is recovered after the timeout', async () => {
    const { runId, forWorker } = await h.run(6);
    const coordinator = await h.coordinator(runId, forWorker('c'), { timeoutMs: 3_000, clock: offsetClock(0) });
    const scans = scanning(coordinator);
    try {
      // Behind: its heartbeats look 30 s old to the coordinator's clock, every time.
      const behind = h.worker(runId, 'behind', forWorker('behind'), {
        backend: mockBackend({ durationMs: 300 }),
        heartbeatMs: 100,
        clock: offsetClock(-30_000),
        receiveBatch: 3,
      });
      const done = new AbortController();
      await behind.run(done.signal, async () => (await h.counts(runId)).pending === 0);
      expect(scans.repended).toEqual([]);
      expect(behind.stats.lost).toBe(0);
      // Ahead: it claims what is left and dies at once; its stamps lie 10 minutes in the future.
      const { runId: run2, forWorker: for2 } = await h.run(2, (i) => ({ ahead: i }));
      const c2 = await h.coordinator(run2, for2('c'), { timeoutMs: 3_000, clock: offsetClock(0) });
      const ahead = h.worker(run2, 'ahead', for2('ahead'), { clock: offsetClock(600_000), receiveBatch: 10 });
      while (ahead.held.length < 2) await ahead.pull();
      await until(
        'the dead worker’s items are re-pended',
        async () => (await c2.scan()).repended.length > 0 || (await h.counts(run2)).pending === 2,
        20_000,
        100,
      );
      const rescuer = h.worker(run2, 'rescuer', for2('rescuer'));
      expect(await finish(h, run2, [rescuer], c2)).toEqual({ pending: 0, running: 0, done: 2, failed: 0 });
    } finally {
      await scans.stop();
    }
  });

  it('poison_bounded: an item that fails its backend every time ends Failed with the reason; drains do not count toward it', async () => {
    const { runId, ids, forWorker, dlq } = await h.run(2, (i) => ({ poison: i === 0 }), 3);
    const coordinator = await h.coordinator(runId, forWorker('c'), { maxAttempts: 3, dlq });
    const backend: ExecutionBackend = (payload) =>
      (payload as { poison: boolean }).poison ? Promise.reject(new Error('always fails')) : Promise.resolve('ok');
    // Drained three times first: given back each time, never counted.
    for (let i = 0; i < 3; i++) {
      const d = h.worker(runId, `drained-${i}`, forWorker(`drained-${i}`), { receiveBatch: 10 });
      for (let tries = 0; tries < 20 && d.held.length === 0; tries++) await d.pull();
      await d.drain();
    }
    for (const id of ids) expect(await h.backend.ledger.get(runId, id)).toMatchObject({ attempts: 0 });
    const w = h.worker(runId, 'w', forWorker('w'), { backend });
    const counts = await finish(h, runId, [w], coordinator);
    expect(counts).toEqual({ pending: 0, running: 0, done: 1, failed: 1 });
    const poisoned = (await h.backend.ledger.get(runId, ids[0]!))!;
    expect(poisoned.state).toBe('failed');
    expect(poisoned.error).toMatch(/poison/);
    expect(poisoned.error).toMatch(/always fails/);
  });

  it('oversize_result_fails_the_item: a result over the limit ends its item Failed with the reason; the others are recorded', async () => {
    const { runId, ids, forWorker } = await h.run(3);
    // Over DynamoDB's 400 KB item limit too: there it used to fail the whole ack batch, again and again.
    const big = 'x'.repeat(450_000);
    const w = h.worker(runId, 'w', forWorker('w'), {
      backend: (payload) => Promise.resolve((payload as { i: number }).i === 1 ? big : 'small'),
      receiveBatch: 10,
    });
    expect(await finish(h, runId, [w])).toEqual({ pending: 0, running: 0, done: 2, failed: 1 });
    const failed = (await Promise.all(ids.map((id) => h.backend.ledger.get(runId, id)))).find((i) => i!.state === 'failed')!;
    expect(failed.error).toMatch(new RegExp(`result of 450002 bytes exceeds the limit of ${MAX_RESULT_BYTES} bytes`));
    expect(w.stats).toMatchObject({ done: 2, rejected: 1 });
  });

  it('started_item_that_kills_its_worker: re-pended with an attempt each time, and Failed as poison at the limit', async () => {
    const { runId, ids, forWorker } = await h.run(1);
    const coordinator = await h.coordinator(runId, forWorker('c'), { timeoutMs: 1, maxAttempts: 2 });
    for (let life = 0; life < 2; life++) {
      const started = gate();
      const w = h.worker(runId, `w${life}`, forWorker(`w${life}`), { backend: () => (started.open(), new Promise(() => undefined)) });
      for (let tries = 0; tries < 50 && w.held.length === 0; tries++) await w.pull();
      void w.step(); // runs forever: the worker "dies" inside the item
      await started.wait;
      await until('the scan acts on the silent worker', async () => {
        const r = await coordinator.scan();
        return r.repended.length + r.failed.length > 0;
      });
    }
    expect(await h.backend.ledger.get(runId, ids[0]!)).toMatchObject({ state: 'failed', attempts: 2 });
    expect((await h.backend.ledger.get(runId, ids[0]!))!.error).toMatch(/^poison: started 2 times without a result/);
  });
});

describe.each(labelled(ALL))('a start round that fails part way: $label', (setup) => {
  const h = harness(setup);
  beforeAll(() => h.open());
  afterAll(() => h.close());

  it('start_round_failure_is_not_poison: the starts that landed are run, the rest started again; no attempt is counted, nothing runs twice', async () => {
    const { runId, forWorker } = await h.run(6);
    // The store, with one start round cut after its first change has landed (a write refused on a hot key past its retries).
    let cut = false;
    const ledger = new Proxy(h.backend.ledger, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== 'casMany') return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        return async (changes: Parameters<LedgerStore['casMany']>[0], now: number) => {
          if (cut || changes[0]?.transition !== 'start' || changes.length < 2) return target.casMany(changes, now);
          cut = true;
          await target.casMany(changes.slice(0, 1), now);
          throw new StoreContendedError('refused on a hot key; try again');
        };
      },
    });
    const executed: string[] = [];
    const w = h.worker(runId, 'w', forWorker('w'), {
      ledger,
      receiveBatch: 6,
      backend: (payload) => {
        executed.push(JSON.stringify(payload));
        return Promise.resolve('ok');
      },
    });
    const stop = new AbortController();
    await w.run(stop.signal, async () => {
      const c = await h.counts(runId);
      return c.pending + c.running === 0;
    });
    expect(cut).toBe(true);
    expect(await h.counts(runId)).toEqual({ pending: 0, running: 0, done: 6, failed: 0 });
    expect(executed).toHaveLength(6);
    expect(new Set(executed).size).toBe(6);
    const attempts = await Promise.all(Array.from({ length: 6 }, (_, i) => h.backend.ledger.get(runId, contentId({ i }))));
    expect(attempts.map((i) => i!.attempts)).toEqual([0, 0, 0, 0, 0, 0]);
  });
});

describe.each([
  { backend: 'postgres', queue: 'ledger' },
  { backend: 'postgres', queue: 'sqs' },
] as const)('a store outage does not end a worker: $backend + $queue', (setup) => {
  const h = harness(setup);
  beforeAll(() => h.open());
  afterAll(() => h.close());

  it('worker_survives_store_outage: the worker loses its store mid-run, logs, backs off and finishes the run when it returns', async () => {
    const { runId, forWorker } = await h.run(20);
    // The worker reaches PostgreSQL through a proxy that goes down after a few items.
    const url = new URL(h.backend.url!);
    const proxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
    url.port = String(proxy.port);
    const db = await connectPostgres({
      connectionString: url.toString(),
      options: `-c search_path=${h.backend.schema}`,
      max: 4,
      connectionTimeoutMillis: 500,
      query_timeout: 2_000,
    });
    try {
      const ledger = new PostgresLedgerStore(db.sql);
      // On the ledger-backed queue, receiving is a claim: it goes through the same cut connection.
      const queue = setup.queue === 'ledger' ? new LedgerWorkQueue(db.sql, new InProcessWake(), runId, 'w') : forWorker('w');
      let ran = 0;
      const outage = gate();
      const logged: string[] = [];
      const logger: Logger = {
        debug: () => undefined,
        info: () => undefined,
        warn: (m, e) => logged.push(`${m} ${JSON.stringify(e)}`),
        error: (m, e) => logged.push(`${m} ${JSON.stringify(e)}`),
      };
      const w = h.worker(runId, 'w', queue, {
        ledger,
        logger,
        receiveBatch: 5,
        backend: () => {
          if (++ran === 5) {
            proxy.refuse(true);
            outage.open();
          }
          return Promise.resolve('ok');
        },
      });
      const stop = new AbortController();
      const running = w.run(stop.signal, async () => {
        const c = await h.counts(runId);
        return c.pending + c.running === 0;
      });
      await outage.wait;
      // It logs the failed step and carries on (a worker that ends instead has settled `running`).
      await until('the worker has hit the outage', async () => logged.length > 0 || (await settled(running)), 30_000, 20);
      proxy.refuse(false);
      await running;
      expect(await h.counts(runId)).toEqual({ pending: 0, running: 0, done: 20, failed: 0 });
      expect(logged[0]).toMatch(/^worker step failed; retrying/);
    } finally {
      await db.close();
      await proxy.stop();
    }
  });
});
