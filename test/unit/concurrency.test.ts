import { expect, it } from 'vitest';
import { mapLimit } from '../../shared/concurrency.js';

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
