/**
 * Work-run witnesses with real services: workers pull from SQS (fauxqs),
 * claim in the ledger (PostgreSQL or DynamoDB Local), run on the mock
 * backend; the coordinator steals, restarts, and is deposed. Workers are
 * stepped by the test, so each interleaving is chosen, not hoped for.
 */
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { gate } from '../support/gate.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

describe.each(['postgres', 'dynamodb'] as const)('work runs on %s with SQS', (backendName) => {
  let backend: LeaseBackend;
  const sqs = sqsClient();
  const queues: string[] = [];
  const clock = new ManualClock(Date.now());
  beforeAll(async () => {
    backend = await openBackend(backendName);
  });
  afterAll(async () => {
    for (const q of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
    await backend?.close();
  });

  async function run(n: number) {
    executions = new Map();
    const runId = uniqueName('run');
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
    queues.push(url);
    const queue = new SqsWorkQueue(sqs, url);
    await backend.ledger.createRun(runId, {}, clock.now());
    const { ids } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: n }, (_, i) => ({ runId, i })),
      clock.now(),
    );
    await queue.send(runId, ids);
    return { runId, ids, queue };
  }
  async function coordinator(runId: string, holderId: string, queue: SqsWorkQueue) {
    const elector = new LeaseElector(backend.runLeases(runId), { name: coordinatorLease(runId), holderId, clock, ...LEASE });
    await elector.campaign();
    const bus = new InProcessBus();
    const c = new Coordinator({ runId, ledger: backend.ledger, elector, bus, failureTimeoutMs: LEASE.ttlMs, clock, queue });
    return { elector, bus, c };
  }
  /** Workers reach "the coordinator" — whichever instance serves now. */
  const endpoint = (c: Coordinator) => {
    const client = { current: c, requestWork: (w: string) => client.current.stealFor(w) };
    return client;
  };
  /** Executions per payload, across all workers of a test. */
  let executions = new Map<string, number>();
  const counting = mockBackend();
  const worker = (runId: string, id: string, queue: SqsWorkQueue, c?: Coordinator | ReturnType<typeof endpoint>) =>
    new Worker({
      runId,
      workerId: id,
      ledger: backend.ledger,
      queue,
      backend: (payload, signal) => {
        const key = JSON.stringify(payload);
        executions.set(key, (executions.get(key) ?? 0) + 1);
        return counting(payload, signal);
      },
      clock,
      waitSeconds: 0,
      ...(c ? { coordinator: c instanceof Coordinator ? endpoint(c) : c, askAtStart: true } : {}),
    });
  /** Step every worker until the run is finished (bounded). */
  async function finish(runId: string, workers: Worker[], total: number) {
    for (let round = 0; round < 400; round++) {
      await Promise.all(workers.map((w) => w.step()));
      const counts = await backend.ledger.counts(runId);
      if (counts.done + counts.failed === total) return counts;
    }
    throw new Error(`run ${runId} did not finish: ${JSON.stringify(await backend.ledger.counts(runId))}`);
  }
  async function assertExactlyOnce(runId: string, ids: readonly string[], workers: Worker[]) {
    const items = await Promise.all(ids.map((id) => backend.ledger.get(runId, id)));
    expect(items.every((i) => i!.state === 'done' && i!.resultHash !== null)).toBe(true);
    // One recorded result per item: the workers' successful acks add up to the item count exactly.
    expect(workers.reduce((n, w) => n + w.stats.done, 0)).toBe(ids.length);
  }

  it('concurrent_ack_and_steal_no_double_execute: a thief steals from a busy victim; every item gets one result', async () => {
    const { runId, ids, queue } = await run(40);
    const { c } = await coordinator(runId, 'c1', queue);
    const victim = worker(runId, 'victim', queue, c);
    const thief = worker(runId, 'thief', queue, c);
    while (victim.held.length < 40) expect(await victim.pull()).toBeGreaterThan(0);
    // Let the running set settle (DynamoDB's index is eventually consistent), then the idle thief asks.
    await expect.poll(async () => (await backend.ledger.running(runId)).length, { interval: 20, timeout: 5_000 }).toBe(40);
    expect(await thief.step()).toBe('stole');
    expect(thief.stats.stolen).toBe(20);
    const counts = await finish(runId, [victim, thief], 40);
    expect(counts).toEqual({ pending: 0, running: 0, done: 40, failed: 0 });
    await assertExactlyOnce(runId, ids, [victim, thief]);
    // Steals go both ways as each runs dry, but a stolen item is never started by its victim: with no crash,
    // every item ran exactly once, and was recorded once.
    expect(thief.stats.stolen).toBeGreaterThanOrEqual(20);
    expect(executions.size).toBe(40);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
  });

  it('idle_worker_backs_off: asks at once when it runs dry, then less often while nothing comes; reads the running set only at start and after a lost answer; a worker that starts into an empty queue asks 10–20 s later', async () => {
    const { runId, queue } = await run(2);
    const { c, elector } = await coordinator(runId, 'c1', queue);
    // The test's clock jumps minutes: the coordinator keeps its lease through each jump, so every ask is answered.
    const advance = async (ms: number) => {
      clock.advance(ms);
      await elector.campaign();
    };
    let asks = 0;
    let loseNext = false;
    const coord = {
      requestWork: async (w: string) => {
        asks++;
        const answer = await c.stealFor(w);
        if (loseNext) {
          loseNext = false;
          throw new Error('the answer was lost');
        }
        return answer;
      },
    };
    // The real ledger, its running-set reads counted.
    let runningReads = 0;
    const ledger = new Proxy(backend.ledger, {
      get(target, key) {
        const v = Reflect.get(target, key) as unknown;
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if (key === 'running' || key === 'holders') runningReads++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const w = new Worker({ runId, workerId: 'idle', ledger, queue, backend: mockBackend(), clock, waitSeconds: 0, coordinator: coord });
    const stepUntilIdle = async () => {
      for (let i = 0; i < 50; i++) if ((await w.step()) === 'idle') return;
      throw new Error('the worker never went idle');
    };
    await stepUntilIdle(); // its two items, then dry: one reconcile (its first), one ask
    expect([w.stats.done, asks, runningReads]).toEqual([2, 1, 1]);
    for (let i = 0; i < 3; i++) expect(await w.step()).toBe('idle');
    expect([asks, runningReads]).toEqual([1, 1]); // the next ask is not due yet; no reconcile without cause
    for (const waitMs of [20_000, 40_000, 80_000, 160_000, 300_000, 300_000]) {
      await advance(waitMs);
      await w.step();
    }
    expect([asks, runningReads]).toEqual([7, 1]); // one ask per backoff step, capped at 5 minutes
    loseNext = true;
    await advance(300_000);
    await w.step(); // the ask is answered, the answer lost: the next idle step reads the ledger
    await w.step();
    expect([asks, runningReads]).toEqual([8, 2]);
    // New work: once the worker runs dry again, it asks at once.
    const { ids } = await backend.ledger.enqueue(runId, [{ runId, i: 100 }], clock.now());
    await queue.send(runId, ids);
    await stepUntilIdle();
    expect([w.stats.done, asks]).toEqual([3, 9]);

    // A worker that starts into an empty queue long-polls first: its first ask comes 10–20 s after its start, not at once.
    const late = new Worker({ runId, workerId: 'late', ledger, queue, backend: mockBackend(), clock, waitSeconds: 0, coordinator: coord });
    for (let i = 0; i < 3; i++) expect(await late.step()).toBe('idle');
    expect(asks).toBe(9);
    await advance(9_999);
    await late.step();
    expect(asks).toBe(9);
    await advance(10_001);
    await late.step();
    expect(asks).toBe(10);

    // Its long poll ends by its first ask: a fleet started together keeps the ask's jitter, not the poll's 20 s beat.
    const waits: number[] = [];
    const recording = new Proxy(queue, {
      get(target, key) {
        const v = Reflect.get(target, key) as unknown;
        if (key !== 'receive' || typeof v !== 'function') return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        // Recorded, then answered at once: the test's clock, not the queue's, says how long it waited.
        return (max: number, waitSeconds: number, ...rest: unknown[]) => (
          waits.push(waitSeconds),
          (v as (...a: unknown[]) => unknown).call(target, max, 0, ...rest)
        );
      },
    });
    const random = vi.spyOn(Math, 'random').mockReturnValue(1); // its first ask 20 s after its start
    const polling = new Worker({ runId, workerId: 'polling', ledger, queue: recording, backend: mockBackend(), clock, coordinator: coord });
    random.mockRestore();
    await advance(15_000);
    expect(await polling.step()).toBe('idle');
    expect(waits).toEqual([0, 5]);
  });

  it('orphaned_steal_is_recovered: a steal whose notice is lost, or rejected by the EpochGuard, still completes', async () => {
    const { runId, ids, queue } = await run(12);
    const { c } = await coordinator(runId, 'c1', queue);
    const victim = worker(runId, 'victim', queue);
    const thief = worker(runId, 'thief', queue); // no coordinator link: the notice never reaches it
    while (victim.held.length < 12) expect(await victim.pull()).toBeGreaterThan(0);
    await expect.poll(async () => (await backend.ledger.running(runId)).length, { interval: 20, timeout: 5_000 }).toBe(12);
    const lost = await c.stealFor('thief'); // committed, but the reply is dropped
    expect(lost.items).toHaveLength(6);
    // An EpochGuard that has seen a newer coordinator rejects an old notice: the items are still adopted.
    thief.guard.accept(lost.epoch + 1);
    await finish(runId, [victim, thief], 12);
    await assertExactlyOnce(runId, ids, [victim, thief]);
    expect(thief.stats.done).toBe(6);
  });

  it('coord_restart_no_duplicates: the coordinator crashes mid-run; its successor replays and the run completes once', async () => {
    const { runId, ids, queue } = await run(60);
    const first = await coordinator(runId, 'c-first', queue);
    const coord = endpoint(first.c);
    const workers = ['w1', 'w2', 'w3'].map((w) => worker(runId, w, queue, coord));
    for (let i = 0; i < 3; i++) await Promise.all(workers.map((w) => w.step()));
    await first.elector.stop({ resign: false }); // crash: no resign, no state handed over
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    const second = await coordinator(runId, 'c-second', queue);
    expect(second.elector.token()!.epoch).toBe(1);
    const inflight = await second.c.replay();
    const before = await backend.ledger.counts(runId);
    expect(before.running).toBe([...inflight.running.values()].reduce((n, l) => n + l.length, 0)); // Running stays in flight
    // The workers keep going, now answered by the successor; the restart requeued nothing.
    coord.current = second.c;
    await finish(runId, workers, 60);
    await assertExactlyOnce(runId, ids, workers);
  });

  it('long_item_is_not_repended: an item running 3 × the failure timeout with a live heartbeat stays with its worker', async () => {
    const { runId, ids, queue } = await run(1);
    const timeoutMs = 300;
    const real = await coordinator(runId, 'c1', queue);
    // Real time here: the worker's heartbeat timer and the scans run concurrently with the item.
    const c = new Coordinator({ runId, ledger: backend.ledger, elector: real.elector, bus: real.bus, failureTimeoutMs: timeoutMs, queue });
    // The item runs until the test lets it finish: after the scans that matter, however slow the machine.
    const finish = gate();
    let startedAt = 0;
    const slow = async () => {
      startedAt = Date.now();
      await finish.wait;
      return { output: 'slow' };
    };
    const w = new Worker({ runId, workerId: 'slow', ledger: backend.ledger, queue, backend: slow, waitSeconds: 0, heartbeatMs: timeoutMs / 6 });
    await w.pull();
    const running = w.step();
    const repended: string[] = [];
    // Scans while the item has run longer than the timeout, until it has run three times the timeout, and at least three such scans.
    let late = 0;
    for (;;) {
      const ranMs = startedAt ? Date.now() - startedAt : 0;
      repended.push(...(await c.failureScan()).repended);
      if (ranMs > timeoutMs) late++;
      if (late >= 3 && ranMs > 3 * timeoutMs) break;
      await new Promise((r) => setTimeout(r, timeoutMs / 6)); // the scan cadence, not a wait for anything
    }
    finish.open();
    await running;
    expect(repended).toEqual([]);
    expect(await backend.ledger.get(runId, ids[0]!)).toMatchObject({ state: 'done', worker: 'slow', attempts: 0 });
  });

  it('an item whose message arrives twice (at-least-once delivery, a re-send) is claimed once and recorded once', async () => {
    const { runId, ids, queue } = await run(3);
    await queue.send(runId, ids); // every item now has two messages
    const w = worker(runId, 'w', queue);
    for (let i = 0; i < 10 && w.held.length < 3; i++) await w.pull();
    expect([...w.held].sort()).toEqual([...ids].sort());
    await finish(runId, [w], 3);
    await assertExactlyOnce(runId, ids, [w]);
    // The copies were deleted, not left to come back.
    expect(await w.pull()).toBe(0);
  });

  it('a poison item goes to the DLQ after maxReceiveCount and is marked Failed with the reason', async () => {
    const runId = uniqueName('run');
    const dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('dlq') }))).QueueUrl!;
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }));
    const url = (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: uniqueName('q'),
          Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes!.QueueArn, maxReceiveCount: 3 }) },
        }),
      )
    ).QueueUrl!;
    queues.push(url, dlqUrl);
    const queue = new SqsWorkQueue(sqs, url);
    const dlq = new SqsWorkQueue(sqs, dlqUrl);
    await backend.ledger.createRun(runId, {}, clock.now());
    const { ids } = await backend.ledger.enqueue(runId, [{ poison: true }], clock.now());
    await queue.send(runId, ids);
    const { c } = await coordinator(runId, 'c1', queue);
    const w = new Worker({ runId, workerId: 'w', ledger: backend.ledger, queue, backend: mockBackend({ failureRate: 1 }), clock, waitSeconds: 0 });
    for (let i = 0; i < 20 && w.stats.failedAttempts < 3; i++) await w.step();
    expect(w.stats.failedAttempts).toBe(3);
    expect(await w.pull()).toBe(0); // redriven: the main queue no longer offers it
    const swept = await c.failDeadLetters(dlq);
    expect(swept).toEqual({ failed: ids, dropped: [] });
    const item = (await backend.ledger.get(runId, ids[0]!))!;
    expect(item.state).toBe('failed');
    expect(item.error).toMatch(/^poison: delivered \d+ times without a result; last error: mock failure/);
    // A duplicate dead letter for the same (now Failed) item is acknowledged, not retried forever.
    await dlq.send(runId, ids);
    expect(await c.failDeadLetters(dlq)).toEqual({ failed: [], dropped: ids });
    expect(await dlq.receive(10, 0)).toEqual([]);
    // The DLQ is shared by every run: another run's dead letter is left for its own coordinator.
    await dlq.send('another-run', ids);
    expect(await c.failDeadLetters(dlq)).toEqual({ failed: [], dropped: [] });
    const left = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    expect(Number(left.Attributes!.ApproximateNumberOfMessages) + Number(left.Attributes!.ApproximateNumberOfMessagesNotVisible)).toBe(1);
  });
});
