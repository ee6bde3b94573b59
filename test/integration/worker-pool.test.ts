/**
 * The in-process worker pool of `npm start` on a node (PGlite, and a real
 * PostgreSQL for cluster mode): concurrent runs keep their workers apart in
 * the worker registry, and a worker that dies is replaced, so every run
 * finishes.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { LocalWorkerPool, type PoolOptions } from '../../shared/runtimes/node/worker-pool.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import type { Logger } from '../../shared/log.js';
import { uniqueName } from '../support/backends.js';
import { databaseForFile } from '../support/database.js';
import { until } from '../support/gate.js';

const database = databaseForFile('pool');

/** A logger that keeps what was said, for assertions on why a worker was replaced. */
interface Line {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}
function recording(): Logger & { lines: Line[] } {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      void lines.push({ level, msg, fields });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** A worker with a bug: its run rejects at once. */
class DyingWorker extends Worker {
  override run(): Promise<void> {
    return Promise.reject(new Error('injected crash'));
  }
}

describe.each(['pglite', 'postgres'] as const)('in-process worker pool on %s', (kind) => {
  let node: ControlPlaneNode;
  const pools: LocalWorkerPool[] = [];
  beforeAll(async () => {
    node = await ControlPlaneNode.open({
      nodeId: uniqueName('pool-node'),
      store: kind === 'pglite' ? { kind, dataDir: null } : { kind, databaseUrl: database.url },
      elector: 'static',
      scanIntervalSeconds: 0.5,
    });
    await node.start();
  });
  afterEach(async () => {
    for (const p of pools.splice(0)) await p.close();
  });
  afterAll(async () => {
    await node?.stop();
  });

  function pool(o: PoolOptions) {
    const p = new LocalWorkerPool(node, o);
    pools.push(p);
    p.start();
    return p;
  }

  async function run(items: number): Promise<string> {
    const runId = uniqueName('run');
    await node.plane.stores.ledger.createRun(runId, {}, Date.now());
    await node.plane.stores.ledger.enqueue(
      runId,
      Array.from({ length: items }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    await node.wake.notify(runId);
    return runId;
  }

  const finished = (runId: string, items: number) =>
    until(`run ${runId}: all ${items} items Done`, async () => (await node.plane.stores.ledger.counts(runId)).done === items, 45_000, 50);

  it("two runs on one node: interrupting run A's worker drains only that worker; run B's workers keep working and both runs finish", async () => {
    const a = await run(60);
    const b = await run(60);
    const p = pool({ size: 3, itemMs: 40, staggerMs: 0 });
    // Both runs have working workers holding items before the interruption.
    await until(
      'both runs are being worked on',
      async () => (await node.plane.stores.ledger.counts(a)).done > 0 && (await node.plane.stores.ledger.counts(b)).done > 0,
      30_000,
      20,
    );
    let victim: string | null = null;
    await until('a worker of run A holding items is interrupted', async () => (victim = await p.interrupt(a)) !== null, 30_000, 20);
    await until('the victim drained', () => p.drained(a) === 1, 30_000, 20);
    await Promise.all([finished(a, 60), finished(b, 60)]);
    expect(p.drained(a)).toBe(1);
    expect(p.drained(b)).toBe(0);
    const records = await node.plane.registry.list();
    // Run B's workers were never asked to drain; of run A's, only the victim was.
    expect(records.filter((w) => w.runId === b && w.drain !== null)).toEqual([]);
    expect(records.filter((w) => w.runId === a && w.drain !== null).map((w) => w.workerId)).toEqual([victim]);
    expect(await node.plane.stores.ledger.counts(a)).toEqual({ pending: 0, running: 0, done: 60, failed: 0 });
    expect(await node.plane.stores.ledger.counts(b)).toEqual({ pending: 0, running: 0, done: 60, failed: 0 });
  });

  it('a store error that kills workers does not stall the run: every item ends Done', async () => {
    const runId = await run(30);
    // A real store fault: the first three attempts to start an item of this run fail inside PostgreSQL.
    // A sequence, not a counter row: nextval is not undone when the statement fails.
    const seq = `fault_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    await node.sql.query(`CREATE SEQUENCE ${seq}`);
    await node.sql.query(`
      CREATE FUNCTION ${seq}_fn() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        IF NEW.run_id = '${runId}' AND NEW.started AND NOT OLD.started AND nextval('${seq}') <= 3 THEN
          RAISE EXCEPTION 'injected store fault';
        END IF;
        RETURN NEW;
      END $f$`);
    await node.sql.query(`CREATE TRIGGER ${seq}_t BEFORE UPDATE ON work_items FOR EACH ROW EXECUTE FUNCTION ${seq}_fn()`);
    try {
      pool({ size: 2, itemMs: 5, staggerMs: 0, restartBackoffMs: { initial: 20, max: 1_000 } });
      await finished(runId, 30);
      expect(await node.plane.stores.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 30, failed: 0 });
      // Every fault was hit (the sequence counts each start attempt, failed ones included).
      expect(Number((await node.sql.query<{ n: unknown }>(`SELECT last_value AS n FROM ${seq}`)).rows[0]!.n)).toBeGreaterThan(3);
    } finally {
      await node.sql.query(`DROP TRIGGER ${seq}_t ON work_items`);
    }
  });

  it('a worker whose run rejects is replaced with a growing delay and a log line saying why; the run finishes', async () => {
    const runId = await run(20);
    const logger = recording();
    let made = 0;
    pool({
      size: 1,
      itemMs: 1,
      restartBackoffMs: { initial: 20, max: 1_000 },
      logger,
      // The first four workers die at once, as a worker with a bug would: the pool must not spin, and must not give up.
      makeWorker: (o) => (++made <= 4 ? new DyingWorker(o) : new Worker(o)),
    });
    await finished(runId, 20);
    const replaced = logger.lines.filter((l) => l.msg === 'worker exited unexpectedly: replacing it');
    expect(replaced.map((l) => l.fields.restartInMs)).toEqual([20, 40, 80, 160]);
    expect(replaced[0]!.fields).toMatchObject({ runId, error: 'injected crash' });
    expect(made).toBe(5);
  });

  it('a drained worker is replaced by a fresh worker on a fresh simulated instance: a one-worker run still finishes', async () => {
    const runId = await run(40);
    const p = pool({ size: 1, itemMs: 20 });
    let victim: string | null = null;
    await until('the only worker, holding items, is interrupted', async () => (victim = await p.interrupt(runId)) !== null, 30_000, 20);
    await finished(runId, 40);
    expect(p.drained(runId)).toBe(1);
    const records = (await node.plane.registry.list()).filter((w) => w.runId === runId);
    expect(records.length).toBeGreaterThanOrEqual(2);
    const drained = records.find((w) => w.workerId === victim)!;
    expect(records.filter((w) => w.workerId !== victim).every((w) => w.instanceId !== drained.instanceId && w.drain === null)).toBe(true);
  });
});
