/**
 * The ledger-backed work queue (one machine, cluster mode): workers claim
 * with FOR UPDATE SKIP LOCKED, sleep until a wake-up (LISTEN/NOTIFY on
 * PostgreSQL, in-process on PGlite), poison items become dead letters the
 * coordinator fails. The same Worker loop as on SQS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { LedgerDeadLetters, LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { InProcessWake, PgNotifyWake, type WakeSource } from '../../shared/adapters/postgres/wake.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

describe.each(['postgres', 'pglite'] as const)('ledger-backed queue on %s', (backendName) => {
  let backend: LeaseBackend;
  const wakes: WakeSource[] = [];
  async function wake(): Promise<WakeSource> {
    const w = backendName === 'postgres' ? await PgNotifyWake.open({ connectionString: backend.url! }) : new InProcessWake();
    wakes.push(w);
    return w;
  }
  beforeAll(async () => {
    backend = await openBackend(backendName);
  });
  afterAll(async () => {
    for (const w of wakes) await w.close();
    await backend?.close();
  });

  async function run(n: number) {
    const runId = uniqueName('run');
    await backend.ledger.createRun(runId, {}, Date.now());
    const { ids } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: n }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    return { runId, ids };
  }

  it('four concurrent workers finish a run: every item Done once, no claim contention, each payload executed once', async () => {
    const { runId, ids } = await run(600);
    const w = await wake();
    const queue = new LedgerWorkQueue(backend.sql!, w, runId, null);
    const executions = new Map<string, number>();
    const inner = mockBackend();
    const workers = ['w1', 'w2', 'w3', 'w4'].map(
      (id) =>
        new Worker({
          runId,
          workerId: id,
          ledger: backend.ledger,
          queue: queue.forWorker(id),
          backend: (payload, signal) => {
            const key = JSON.stringify(payload);
            executions.set(key, (executions.get(key) ?? 0) + 1);
            return inner(payload, signal);
          },
          waitSeconds: 1,
          receiveBatch: 50,
        }),
    );
    const stop = new AbortController();
    const finished = async () => {
      const c = await backend.ledger.counts(runId);
      return c.pending + c.running === 0;
    };
    await Promise.all(workers.map((wk) => wk.run(stop.signal, finished)));
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 600, failed: 0 });
    expect(workers.reduce((n, wk) => n + wk.stats.done, 0)).toBe(ids.length);
    expect(workers.reduce((n, wk) => n + wk.stats.lost, 0)).toBe(0);
    expect(executions.size).toBe(600);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    // SKIP LOCKED shares the work out: more than one worker got some.
    expect(workers.filter((wk) => wk.stats.done > 0).length).toBeGreaterThan(1);
  });

  it('a waiting worker is woken by a send (another connection on PostgreSQL), not by its 20 s poll timeout', async () => {
    const runId = uniqueName('run');
    await backend.ledger.createRun(runId, {}, Date.now());
    // The real connection, tapped so the test knows when the receive's first claim has come back empty.
    const sql = backend.sql!;
    let looked!: () => void;
    const firstLook = new Promise<void>((r) => (looked = r));
    const tapped = {
      ...sql,
      query: async <R extends object>(text: string, params?: readonly unknown[]) => {
        const out = await sql.query<R>(text, params);
        looked();
        return out;
      },
    };
    const waiting = new LedgerWorkQueue(tapped, await wake(), runId, 'sleeper');
    const sender = new LedgerWorkQueue(sql, backendName === 'postgres' ? await wake() : (wakes.at(-1) as WakeSource), runId, null);
    const began = performance.now();
    const received = waiting.receive(10, 20);
    await firstLook; // nothing was pending: the receive now waits on its wake-up
    const { ids } = await backend.ledger.enqueue(runId, [{ wake: 1 }], Date.now());
    await sender.send(runId);
    const got = await received;
    expect(got.map((m) => m.itemId)).toEqual(ids);
    expect(got[0]).toMatchObject({ claimed: true, receiveCount: 1 });
    expect(performance.now() - began).toBeLessThan(10_000);
    expect((await backend.ledger.get(runId, ids[0]!))!).toMatchObject({ state: 'running', worker: 'sleeper', started: false });
  });

  it('a receive with nothing pending and no wake-up returns empty after its wait; an abort ends it early', async () => {
    const { runId } = await run(0);
    const q = new LedgerWorkQueue(backend.sql!, await wake(), runId, 'w');
    expect(await q.receive(10, 0)).toEqual([]);
    const stop = new AbortController();
    const pending = q.receive(10, 20, stop.signal);
    stop.abort();
    expect(await pending).toEqual([]);
    await expect(new LedgerWorkQueue(backend.sql!, await wake(), runId, null).receive(1, 0)).rejects.toThrow(/no worker id/);
  });

  it('poison: an item given back maxReceiveCount times is no longer delivered; the coordinator marks it Failed with the reason', async () => {
    const { runId, ids } = await run(1);
    const q = new LedgerWorkQueue(backend.sql!, await wake(), runId, null, { maxReceiveCount: 3 });
    const w = new Worker({ runId, workerId: 'w', ledger: backend.ledger, queue: q.forWorker('w'), backend: mockBackend({ failureRate: 1 }), waitSeconds: 0 });
    for (let i = 0; i < 3; i++) {
      expect(await w.step()).toBe('received');
      expect(await w.step()).toBe('ran');
    }
    expect(w.stats.failedAttempts).toBe(3);
    expect(await w.step()).toBe('idle'); // not delivered a fourth time
    const elector = new LeaseElector(backend.runLeases(runId), { name: coordinatorLease(runId), holderId: 'c', ...LEASE });
    await elector.campaign();
    const c = new Coordinator({ runId, ledger: backend.ledger, elector, bus: new InProcessBus(), failureTimeoutMs: LEASE.ttlMs, queue: q });
    const out = await c.failDeadLetters(new LedgerDeadLetters(backend.sql!, runId, 3));
    expect(out.failed).toEqual(ids);
    const item = (await backend.ledger.get(runId, ids[0]!))!;
    expect(item.state).toBe('failed');
    expect(item.error).toMatch(/poison: delivered 3 times without a result; last error: mock failure/);
    expect((await c.failDeadLetters(new LedgerDeadLetters(backend.sql!, runId, 3))).failed).toEqual([]);
  });
});
