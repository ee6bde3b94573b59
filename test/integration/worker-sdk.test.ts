/**
 * The worker SDK (`createWorker`) on PostgreSQL, the ledger as the queue: a
 * user's handler runs the items of two runs in one process and its results
 * come back; a throw, a timeout and a stall each fail the attempt with their
 * reason; drain() hands held items back.
 */
import { describe, expect, it } from 'vitest';
import { createWorker, type WorkHandler } from '../../shared/runtimes/worker/sdk.js';
import { ConfigError } from '../../shared/errors.js';
import { ledgerSchemaPerSuite, uniqueName } from '../support/backends.js';

describe('createWorker', () => {
  const schema = ledgerSchemaPerSuite();

  async function run(payloads: unknown[]): Promise<string> {
    const runId = uniqueName('run');
    await schema.ledger.createRun(runId, {}, Date.now());
    await schema.ledger.enqueue(runId, payloads, Date.now());
    return runId;
  }

  const base = () => ({ store: 'postgres' as const, databaseUrl: schema.url, waitSeconds: 1, exitWhenDone: true, instanceId: 'test-host' });

  it("runs the user's handler over the items of two runs in one process; every result is the handler's, kept with its item", async () => {
    const a = await run(Array.from({ length: 60 }, (_, i) => ({ n: i })));
    const b = await run(Array.from({ length: 40 }, (_, i) => ({ n: 100 + i })));
    const seen: { runId: string; attempt: number | null }[] = [];
    const handler: WorkHandler = async (item, { runId, attempt, signal, progress }) => {
      expect(signal.aborted).toBe(false);
      progress('halfway');
      seen.push({ runId, attempt });
      await Promise.resolve();
      return { doubled: (item.payload as { n: number }).n * 2, run: item.runId };
    };
    const summary = await createWorker({ ...base(), runs: [a, b], workerId: 'sdk-1', handler }).run();
    expect(summary).toMatchObject({ exit: 'done', workerId: 'sdk-1', instanceId: 'test-host', done: 100, failedAttempts: 0 });
    expect(summary.runs.map((r) => [r.runId, r.exit, r.done])).toEqual([
      [a, 'done', 60],
      [b, 'done', 40],
    ]);
    for (const [runId, offset, count] of [
      [a, 0, 60],
      [b, 100, 40],
    ] as const) {
      const items = await schema.ledger.items(runId, { limit: 1_000 });
      expect(items.items).toHaveLength(count);
      for (const i of items.items)
        expect(i).toMatchObject({ state: 'done', worker: 'sdk-1', result: { doubled: (i.payload as { n: number }).n * 2, run: runId } });
      expect(items.items.map((i) => (i.payload as { n: number }).n).sort((x, y) => x - y)[0]).toBe(offset);
    }
    expect(seen).toHaveLength(100);
    expect(seen.every((s) => s.attempt === 1)).toBe(true);
  });

  it('a throw, a timeout and a stall each fail the attempt, with the reason kept on the item; the item is given back to be tried again', async () => {
    const runId = await run([{ kind: 'throw' }, { kind: 'slow' }, { kind: 'silent' }, { kind: 'ok' }]);
    const handler: WorkHandler = (item, { signal, heartbeat }) => {
      const kind = (item.payload as { kind: string }).kind;
      if (kind === 'throw') throw new Error('bad input: no such document');
      if (kind === 'ok') return undefined;
      // Both wait until told to stop; only one says it is alive meanwhile.
      return new Promise((_, reject) => {
        const beat = kind === 'slow' ? setInterval(heartbeat, 20) : undefined;
        signal.addEventListener('abort', () => {
          clearInterval(beat);
          reject(new Error('stopped'));
        });
      });
    };
    const stop = new AbortController();
    const running = createWorker({ ...base(), exitWhenDone: false, runs: [runId], workerId: 'sdk-2', itemTimeoutMs: 400, stallMs: 150, handler }).run(
      stop.signal,
    );
    const byKind = async (k: string) => (await schema.ledger.items(runId, { limit: 10 })).items.find((i) => (i.payload as { kind: string }).kind === k)!;
    await expect
      .poll(async () => (await Promise.all(['throw', 'slow', 'silent'].map(byKind))).every((i) => i.error !== null && i.attempts >= 1), {
        interval: 50,
        timeout: 30_000,
      })
      .toBe(true);
    stop.abort();
    const summary = await running;
    expect(summary).toMatchObject({ exit: 'stopped', done: 1 });
    expect(summary.failedAttempts).toBeGreaterThanOrEqual(3);
    expect(await byKind('ok')).toMatchObject({ state: 'done', result: null });
    expect((await byKind('throw')).error).toContain('bad input: no such document');
    expect((await byKind('slow')).error).toContain('timed out after 400 ms');
    expect((await byKind('silent')).error).toContain('stalled: no heartbeat from the handler for 150 ms');
  });

  it('drain() hands the held items back and run() resolves as drained', async () => {
    const runId = await run(Array.from({ length: 5 }, (_, i) => ({ i })));
    let started!: () => void;
    const began = new Promise<void>((r) => (started = r));
    const worker = createWorker({
      ...base(),
      exitWhenDone: false,
      runs: [runId],
      workerId: 'sdk-3',
      batch: 5,
      handler: (_item, { signal }) => {
        started();
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('drained'))));
      },
    });
    const running = worker.run();
    await began;
    worker.drain();
    const summary = await running;
    expect(summary).toMatchObject({ exit: 'drained', done: 0 });
    expect(summary.nacked).toBeGreaterThan(0);
    expect(await schema.ledger.counts(runId)).toEqual({ pending: 5, running: 0, done: 0, failed: 0 });
  });

  it('bad options are refused naming them as the SDK spells them (fields, not flags), before anything connects', () => {
    expect(() => createWorker({ runs: [], store: 'postgres', databaseUrl: schema.url, handler: () => 1 })).toThrow(ConfigError);
    expect(() => createWorker({ runs: [], store: 'postgres', databaseUrl: schema.url, handler: () => 1 })).toThrow('runs: at least one run');
    expect(() => createWorker({ runs: ['r'], store: 'postgres', handler: () => 1 })).toThrow('databaseUrl: required with store postgres');
    expect(() => createWorker({ runs: ['r'], databaseUrl: schema.url, itemTimeoutMs: -1, handler: () => 1 })).toThrow('itemTimeoutMs');
    expect(() => createWorker({ runs: ['r'], databaseUrl: schema.url } as never)).toThrow('handler must be a function');
    expect(() =>
      createWorker({ runs: ['a', 'b'], store: 'dynamodb', table: 't', queue: 'https://sqs.eu-west-1.amazonaws.com/1/work', handler: () => 1 }),
    ).toThrow('runs: one run per process with an SQS queue');
    expect(() => createWorker({ runs: ['r'], databaseUrl: schema.url, itemTimeoutMs: 2 ** 31, handler: () => 1 })).toThrow('itemTimeoutMs: at most 24 days');
    // How many times an item is tried is not a worker's to choose: one stopping sooner than the coordinator fails would strand items.
    expect(() => createWorker({ runs: ['r'], databaseUrl: schema.url, maxReceiveCount: 2, handler: () => 1 } as never)).toThrow(
      /maxReceiveCount: an item is tried 5 times by every worker and coordinator alike/,
    );
    // A worker of a node needs its URL, and nothing of a store.
    expect(() => createWorker({ runs: ['r'], store: 'node', handler: () => 1 })).toThrow("url: required with store node: the node's API URL");
    expect(() => createWorker({ runs: ['r'], url: 'http://127.0.0.1:1', databaseUrl: schema.url, handler: () => 1 })).toThrow(
      'databaseUrl: a worker of a node talks to the node only: leave out databaseUrl',
    );
    expect(() => createWorker({ runs: ['r'], store: 'postgres', url: 'http://127.0.0.1:1', databaseUrl: schema.url, handler: () => 1 })).toThrow(
      "url: a node's URL makes a worker of the node (store node), not of postgres",
    );
  });
});
