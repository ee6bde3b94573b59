/**
 * The simulation composed: the state (state.ts) laid out from the input,
 * the producer started, the workers (at once when they stream, else once
 * everything is sent), the coordinator's scheduled scan and its lease's
 * renewals, the timeline's samples; then the clock runs until the run ends
 * or the stop time passes. The parts sit beside the names of what they
 * imitate: producer.ts, dispatch.ts, worker.ts, coordinator.ts (the
 * sandbox), steal.ts, scan.ts; the services they call in table.ts,
 * requests.ts, ledger-store.ts, queue.ts, lambda.ts; how a process waits
 * in processes.ts.
 */
import { renewLease } from './coordinator.js';
import { every, spawn } from './processes.js';
import { producer } from './producer.js';
import { result } from './result.js';
import { scan } from './scan.js';
import { SimState } from './state.js';
import type { ModelInput, ModelResult } from './types.js';
import { startWorkers } from './worker.js';

export function simulate(input: ModelInput): ModelResult {
  const sim = new SimState(input);
  const o = sim.o;
  spawn(sim, producer(sim));
  if (o.producer.kind === 'streaming') startWorkers(sim);
  if (o.scanEverySeconds !== null && o.worker.coordinator) every(sim, o.scanEverySeconds * 1000, () => spawn(sim, scan(sim)));
  if (o.coordinatorProcess && o.worker.coordinator) every(sim, o.coordinatorProcess.renewEveryMs, () => spawn(sim, renewLease(sim)));
  every(sim, 10_000, () => sim.timeline.push({ t: sim.now / 1000, done: sim.doneItems * sim.k, throttled: sim.refusedRequests, dynamodb: sim.ddbRequests }));
  // A run that does not finish (no worker, a limit of 0, items nobody will pick up) stops at stopAfterSeconds.
  while (sim.ev.size > 0 && sim.endAt === null) {
    const [t, fn] = sim.ev.pop();
    if (t > sim.stopAtMs) break;
    sim.now = t;
    fn();
  }
  const end = sim.endAt ?? sim.now;
  return result(sim, end);
}
