/** The account's Lambda concurrency: an invocation past it is refused (429). */
import type { SimState } from './state.js';

/** Whether an invocation now would be refused (429): the account's concurrency is used up. */
export function lambdaFull(sim: SimState, n = sim.k): boolean {
  return sim.lambdaConcurrency + n > sim.o.lambdaConcurrencyLimit;
}

/** An invocation, or null when the account's concurrency is used up (the caller gets a 429). */
export function lambdaStart(sim: SimState, n = sim.k): number | null {
  if (lambdaFull(sim, n)) {
    sim.lambdaThrottled += n;
    return null;
  }
  sim.lambdaInvocations += n;
  sim.lambdaConcurrency += n;
  sim.lambdaConcurrencyPeak = Math.max(sim.lambdaConcurrencyPeak, sim.lambdaConcurrency);
  return sim.now;
}

export function lambdaEnd(sim: SimState, began: number, n = sim.k): void {
  sim.lambdaConcurrency -= n;
  sim.lambdaGbSeconds += (n * (sim.now - began + sim.o.latencyMs.lambda) * sim.o.lambdaMemoryMb) / 1024 / 1000;
}
