import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { StepLoop, WAKE_RETRY_MS, WakeBackoff } from '../../shared/lease/step-loop.js';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

it('steps never overlap, even when a step asks for another while it runs; stop waits for the step in flight and none starts after', async () => {
  let active = 0;
  let maxActive = 0;
  let steps = 0;
  let release!: () => void;
  const loop: StepLoop = new StepLoop(async () => {
    active++;
    maxActive = Math.max(maxActive, active);
    steps++;
    loop.now(); // a notice arriving mid-step: the next step follows this one, never beside it
    if (steps === 4) await new Promise<void>((r) => (release = r));
    active--;
    return 1_000;
  });
  loop.start();
  await vi.advanceTimersByTimeAsync(50);
  expect(steps).toBe(4); // the first three each asked for the next at once; the fourth is held
  loop.now(); // during the held step: no second step beside it
  await vi.advanceTimersByTimeAsync(50);
  expect(steps).toBe(4);

  let stopped = false;
  const stopping = loop.stop().then(() => (stopped = true));
  await vi.advanceTimersByTimeAsync(50);
  expect(stopped).toBe(false); // waits for the step in flight
  release();
  await stopping;
  await vi.advanceTimersByTimeAsync(10_000);
  expect(steps).toBe(4);
  expect(maxActive).toBe(1);
  expect(loop.active).toBe(false);
});

it('a step runs after the delay the last one returned; after() moves it', async () => {
  const at: number[] = [];
  const loop = new StepLoop(() => {
    at.push(Date.now());
    return Promise.resolve(1_000);
  });
  const start = Date.now();
  loop.start();
  await vi.advanceTimersByTimeAsync(2_500);
  expect(at.map((t) => t - start)).toEqual([0, 1_000, 2_000]);
  loop.after(100);
  await vi.advanceTimersByTimeAsync(150);
  expect(at.map((t) => t - start)).toEqual([0, 1_000, 2_000, 2_600]);
  await loop.stop();
});

it('after a wake-up, failed steps retry from WAKE_RETRY_MS, doubling up to the usual wait, until a step gets an answer', () => {
  const w = new WakeBackoff();
  // 100, 200, … 3,200 ms, then capped at the usual wait.
  expect(w.afterFailure(5_000)).toBe(5_000); // no wake-up pending: the usual wait
  w.woken();
  w.stepBegins();
  expect([0, 1, 2, 3, 4, 5, 6].map(() => w.afterFailure(5_000))).toEqual([1, 2, 4, 8, 16, 32].map((k) => k * WAKE_RETRY_MS).concat(5_000));
  w.stepBegins();
  w.answered();
  expect(w.afterFailure(5_000)).toBe(5_000);

  // An answer from a step that began before the wake-up predates the news: the backoff stays.
  w.stepBegins();
  w.woken();
  w.answered();
  expect(w.afterFailure(5_000)).toBe(WAKE_RETRY_MS);
});
