/**
 * The producer. The benchmark's enqueues everything, then sends every
 * message; a deployment's is RolloutClient.enqueueRun (shared/client/producer.ts):
 * API requests paced by its window, each its own Lambda invocation running
 * ledger.enqueue and dispatch.
 */
import { dispatch } from './dispatch.js';
import { lambdaEnd, lambdaStart } from './lambda.js';
import { failedWrite, itemWrite, moveCounts, single } from './ledger-store.js';
import { pushMessages } from './queue.js';
import { spawn } from './processes.js';
import { type Proc, sqs } from './requests.js';
import { type Client, SDK_RETRY } from './sdk.js';
import type { SimState } from './state.js';
import { startWorkers } from './worker.js';

/** How often a producer waiting for its window looks again (simulated ms). */
const PRODUCER_POLL_MS = 50;

export function* producer(sim: SimState): Proc {
  const p = sim.o.producer;
  if (p.kind === 'phased') {
    const client = sim.o.worker.clients === 'shared' ? sim.sharedClient : { quota: SDK_RETRY.quota };
    const all = Array.from({ length: sim.simItems }, (_, i) => i);
    // The benchmark's untilAccepted: a refused enqueue sent again whole after U(0, 1 s).
    for (let attempt = 1; !(yield* enqueue(sim, all, p.concurrency, client)); attempt++) {
      if (attempt >= 50) throw new Error('model: the enqueue never got through (50 attempts)');
      yield { op: 'sleep', ms: 1000 * sim.rand() };
    }
    for (let i = 0; i < all.length; i += 10) {
      yield { op: 'all', reqs: [sqs(sim, client)], limit: 1 };
      pushMessages(sim, all.slice(i, i + 10));
    }
    startWorkers(sim);
    return;
  }
  // Streaming: the items come at the target rate; RolloutClient.enqueueRun sends them in API requests (each its own
  // Lambda invocation), as many in flight as its window allows and none during a refusal's Retry-After.
  const per = Math.max(1, Math.round(p.requestItems / sim.k));
  const gapMs = (per * sim.k * 1000) / p.itemsPerSecond;
  const start = sim.now;
  let n = 0;
  for (let first = 0; first < sim.simItems; first += per, n++) {
    const readyAt = start + n * gapMs;
    if (readyAt > sim.now) yield { op: 'sleep', ms: readyAt - sim.now };
    yield* producerSlot(sim);
    const items = Array.from({ length: Math.min(per, sim.simItems - first) }, (_, j) => first + j);
    spawn(sim, apiRequest(sim, items, p.concurrency));
  }
}

/** Waits for the producer window (producer.ts): a request in flight fewer than it allows, and no Retry-After pending. */
export function* producerSlot(sim: SimState): Proc {
  while (sim.producerInFlight >= sim.producerWindow.allowed || sim.now < sim.producerWindow.pauseUntil) {
    yield { op: 'sleep', ms: Math.max(PRODUCER_POLL_MS, sim.producerWindow.pauseUntil - sim.now) };
  }
  sim.producerInFlight++;
}

/**
 * `ledger.enqueue`: every put tried, a bounded number in flight, though one
 * was refused (a throttled request stores what the table takes); then, if
 * it stored any, the run record's counter. False: a put or the counter
 * outlasted its retries (StoreThrottledError). Sent again, the items stored
 * already cost their partition a refused conditional put each.
 */
export function* enqueue(sim: SimState, items: readonly number[], concurrency: number, client: Client): Proc<boolean> {
  const sent = sim.now;
  let added = 0;
  const puts = items.map((i) => {
    if (sim.state[i] !== 0 || sim.stored[i]) return failedWrite(sim, i, client);
    const r = itemWrite(sim, i, 'enqueue', client);
    r.onOk = () => {
      if (sim.stored[i]) return;
      sim.stored[i] = 1;
      added++;
      moveCounts(sim, i, null, sim.pendingCnt);
      moveCounts(sim, i, null, sim.unsentCnt);
    };
    return r;
  });
  const all = yield { op: 'all', reqs: puts, limit: concurrency, settle: true };
  // The counter, once per request that stored items, also when some were refused (a retry would not count them).
  const accepted = (added === 0 || (yield { op: 'all', reqs: [single(sim, sim.kRunRecord, 0, 1, 'app', client)], limit: 1 })) && all;
  sim.o.trace?.({ kind: 'enqueue', request: items[0]!, sent, at: sim.now, items: items.length, stored: added, accepted });
  return accepted;
}

/**
 * One API request (POST /runs) of RolloutClient.enqueueRun, each attempt
 * its own invocation. Refused (StoreThrottledError: 503, Retry-After: 1;
 * or Lambda's concurrency spent), it halves the producer's window and
 * holds every new request back for that second, then is sent again whole
 * when the window has room — until accepted.
 */
export function* apiRequest(sim: SimState, items: readonly number[], concurrency: number): Proc {
  const first = sim.now;
  for (;;) {
    const send = sim.producerWindow.sent();
    // One real request: the rate's arithmetic above makes each simulated request one API request of requestItems.
    const began = lambdaStart(sim, 1);
    let accepted = false;
    const client: Client = { quota: SDK_RETRY.quota };
    // Lambda's concurrency spent: the API refuses the request (429 or 5xx), and the producer paces as for a throttled store.
    if (began !== null) {
      accepted = yield* enqueue(sim, items, concurrency, client);
      if (accepted) yield* dispatch(sim, items, client, concurrency);
      lambdaEnd(sim, began, 1);
    }
    sim.producerInFlight--;
    if (accepted) {
      sim.producerWindow.accepted();
      sim.enqueueLongestMs = Math.max(sim.enqueueLongestMs, sim.now - first);
      return;
    }
    sim.producerWindow.refused(send, sim.now, 1_000); // the API's Retry-After: 1
    sim.enqueueRetries++;
    yield* producerSlot(sim);
  }
}
