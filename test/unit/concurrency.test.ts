import { expect, it } from 'vitest';
import { Batcher, mapLimit } from '../../shared/concurrency.js';

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

it('keeps the input order with at most `limit` calls in flight', async () => {
  let inFlight = 0;
  let most = 0;
  const out = await mapLimit([5, 4, 3, 2, 1], 2, async (n) => {
    most = Math.max(most, ++inFlight);
    await Promise.resolve();
    inFlight--;
    return n * 10;
  });
  expect(out).toEqual([50, 40, 30, 20, 10]);
  expect(most).toBe(2);
});

it('after a failure starts nothing more, and rejects only once the calls already started have settled', async () => {
  const slow = deferred<string>();
  const fail = deferred<string>();
  const started: number[] = [];
  const settled: number[] = [];
  const run = mapLimit([0, 1, 2, 3], 2, async (i) => {
    started.push(i);
    const v = await (i === 0 ? slow.promise : i === 1 ? fail.promise : Promise.resolve(String(i)));
    settled.push(i);
    return v;
  });
  let rejected: unknown = null;
  const outcome = run.catch((err: unknown) => (rejected = err));
  fail.reject(new Error('refused'));
  await new Promise((r) => setImmediate(r));
  expect(rejected).toBeNull(); // item 0 is still in flight
  slow.resolve('landed');
  await outcome;
  expect((rejected as Error).message).toBe('refused');
  expect(started).toEqual([0, 1]);
  expect(settled).toEqual([0]);
});

/** Every promise callback already due has run. */
const settled = () => new Promise((r) => setImmediate(r));

it('Batcher: a lone item goes at once; items added while a batch is in flight go together in the next, each settling with its own result', async () => {
  const sends: { items: number[]; done: ReturnType<typeof deferred<void>> }[] = [];
  const b = new Batcher<number, number>(async (items) => {
    const done = deferred();
    sends.push({ items: [...items], done });
    await done.promise;
    return items.map((n) => n * 10);
  });
  const first = b.add(1);
  expect(sends.map((s) => s.items)).toEqual([[1]]);
  const rest = [b.add(2), b.add(3), b.add(4)];
  expect(sends).toHaveLength(1); // waiting for the batch in flight
  sends[0]!.done.resolve();
  expect(await first).toBe(10);
  await settled();
  expect(sends.map((s) => s.items)).toEqual([[1], [2, 3, 4]]);
  sends[1]!.done.resolve();
  expect(await Promise.all(rest)).toEqual([20, 30, 40]);
});

it('Batcher: at most maxBatch items a batch, maxInFlight batches at once; a failed send rejects its own batch only', async () => {
  const sends: { items: string[]; done: ReturnType<typeof deferred<void>> }[] = [];
  const b = new Batcher<string, string>(
    async (items) => {
      const done = deferred();
      sends.push({ items: [...items], done });
      await done.promise;
      return items.map((s) => s.toUpperCase());
    },
    { maxInFlight: 2, maxBatch: 2 },
  );
  const added = ['a', 'b', 'c', 'd', 'e'].map((s) => b.add(s));
  for (const p of added) void p.catch(() => undefined);
  expect(sends.map((s) => s.items)).toEqual([['a'], ['b']]);
  sends[0]!.done.reject(new Error('store down'));
  await expect(added[0]).rejects.toThrow('store down');
  await settled();
  expect(sends.map((s) => s.items)).toEqual([['a'], ['b'], ['c', 'd']]);
  sends[1]!.done.resolve();
  sends[2]!.done.resolve();
  expect(await Promise.all(added.slice(1, 4))).toEqual(['B', 'C', 'D']);
  await settled();
  expect(sends.at(-1)!.items).toEqual(['e']);
  sends.at(-1)!.done.resolve();
  expect(await added[4]).toBe('E');
});
