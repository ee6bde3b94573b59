/**
 * A request as the model sends it, and how it is retried when refused: the
 * AWS SDK's standard mode, then the ledger's own loops (throttles.ts,
 * conflicts.ts), as shared/adapters/dynamodb/ does. Every request goes
 * through one FIFO server (the machine) and a fixed latency.
 */
import { CONFLICT_RETRY } from '../../../shared/adapters/dynamodb/conflicts.js';
import { THROTTLE_RETRY } from '../../../shared/adapters/dynamodb/throttles.js';
import { backoffMs } from '../../../shared/ledger/worker/index.js';
import { type Client, SDK_RETRY } from './sdk.js';
import type { Sandbox, SimState } from './state.js';
import { type Charge, familyName, hotKeys, reserve, settle } from './table.js';

/** How a refused request is retried: SDK then retryingThrottles ('app'), SDK only ('sdk'), or conflicts.ts's loop ('conflict'). */
export type Policy = 'app' | 'sdk' | 'conflict';

export interface Req extends Charge {
  readonly svc: 'ddb' | 'sqs';
  /** Its charge (table.ts Charge), growable: a fenced write adds its fences' ConditionChecks. */
  readonly keys: number[];
  readonly kinds: number[];
  readonly units: number[];
  readonly policy: Policy;
  readonly client: Client;
  /** Real requests it stands for: the weight, or 1 for what happens once a run (a hint rebuild). */
  count: number;
  /** A fenced transaction's ConditionCheck keys (the fences, or the lease while raising them), and the sandbox that sends it. */
  fences?: number[];
  box?: Sandbox;
  sdkAttempt: number;
  sdkRetried: boolean;
  appAttempt: number;
  stepFailures: number;
  done: () => void;
  /** What the request changes once applied (a claim lands, an ack records the result). */
  onOk?: () => void;
  /** Called when every retry is spent: the caller's request fails (StoreThrottledError). Unset: retried after the step backoff. */
  exhausted?: () => void;
  /** Past every retry in a round that settles every request (casMany): unanswered, nothing applied. */
  failed?: boolean;
}

/** What a simulated process waits for. */
export type Op =
  | { readonly op: 'sleep'; readonly ms: number }
  /** `settle`: every request settles before the answer, a failed one marked `failed` (casMany); else mapLimit's first failure answers. */
  | { readonly op: 'all'; readonly reqs: readonly Req[]; readonly limit: number; readonly settle?: boolean }
  | { readonly op: 'poll'; readonly ms: number }
  /** Resumes when the process's own callback, handed to `register`, is called. */
  | { readonly op: 'wait'; readonly register: (resume: () => void) => void };

/** A simulated process: `yield` an op, get back whether it succeeded (an 'all' whose request outlasted its retries: false). */
export type Proc<R = void> = Generator<Op, R, boolean>;

export function send(sim: SimState, r: Req, done: () => void): void {
  const box = r.box;
  const fences = r.fences;
  if (!box || !fences) {
    r.done = done;
    attempt(sim, r);
    return;
  }
  // A sandbox's own fenced writes on one fence go in turn (conflicts.ts inTurn): they never conflict with each other.
  const go = () => {
    for (const f of fences) box.turns.add(f);
    const release = () => {
      for (const f of fences) box.turns.delete(f);
      nextTurn(sim, box);
    };
    r.done = () => {
      release();
      done();
    };
    const exhausted = r.exhausted;
    if (exhausted)
      r.exhausted = () => {
        release();
        exhausted();
      };
    attempt(sim, r);
  };
  if (fences.some((f) => box.turns.has(f))) box.waiting.push({ fences, go });
  else go();
}

export function nextTurn(sim: SimState, box: Sandbox): void {
  for (let i = 0; i < box.waiting.length;) {
    const w = box.waiting[i]!;
    if (w.fences.some((f) => box.turns.has(f))) i++;
    else {
      box.waiting.splice(i, 1);
      w.go();
    }
  }
}

/** When a request the store takes now is answered: the FIFO server, then the fixed latency. */
export function served(sim: SimState, latency: number): number {
  const start = Math.max(sim.now, sim.serverFree);
  sim.serverFree = start + sim.serviceMs;
  return sim.serverFree + latency;
}

export function attempt(sim: SimState, r: Req): void {
  if (r.svc === 'sqs') {
    sim.sqsRequests += sim.k;
    sim.ev.push(served(sim, sim.o.latencyMs.sqs), () => {
      r.onOk?.();
      r.done();
    });
    return;
  }
  sim.ddbRequests += r.count;
  const at = served(sim, sim.o.latencyMs.dynamodb);
  const hot = hotKeys(sim, r);
  if (hot !== null) {
    sim.refusedRequests += r.count;
    if (hot.length === 0) sim.tableRefused += r.count;
    for (const code of hot) {
      const key = code >> 1;
      sim.keyRefused[key]! += r.count;
      const f = `${familyName(sim, key)}${code & 1 ? ' (reads)' : ''}`;
      sim.refusedByFamily.set(f, (sim.refusedByFamily.get(f) ?? 0) + r.count);
    }
    sim.ev.push(at, () => refused(sim, r));
    return;
  }
  // Another transaction on one of its fences in flight: cancelled (TransactionConflict), nothing applied.
  const fences = r.fences;
  if (fences?.some((f) => sim.fenceBusy[f]! > 0)) {
    sim.fenceConflicts += r.count;
    sim.ev.push(at, () => refused(sim, r));
    return;
  }
  const window = reserve(sim, r);
  if (fences) for (const f of fences) sim.fenceBusy[f]!++;
  sim.ev.push(at, () => {
    if (fences) for (const f of fences) sim.fenceBusy[f]!--;
    settle(sim, r, window);
    if (r.policy !== 'conflict') r.client.quota = Math.min(SDK_RETRY.quota, r.client.quota + (r.sdkRetried ? SDK_RETRY.retryCost : SDK_RETRY.successRefund));
    r.onOk?.();
    r.done();
  });
}

export function refused(sim: SimState, r: Req): void {
  r.sdkAttempt++;
  if (r.policy !== 'conflict' && r.sdkAttempt < SDK_RETRY.maxAttempts && r.client.quota >= SDK_RETRY.retryCost) {
    r.client.quota -= SDK_RETRY.retryCost;
    r.sdkRetried = true;
    const d = sim.rand() * Math.min(SDK_RETRY.capMs, SDK_RETRY.throttlingBaseMs * 2 ** (r.sdkAttempt - 1));
    sim.ev.push(sim.now + d, () => attempt(sim, r));
    return;
  }
  // The SDK gave up (or never retries): the caller's loop, if it has one.
  r.sdkAttempt = 0;
  r.sdkRetried = false;
  r.appAttempt++;
  const loop = r.policy === 'app' ? THROTTLE_RETRY : r.policy === 'conflict' ? CONFLICT_RETRY : null;
  if (loop && r.appAttempt < loop.maxAttempts) {
    const d = sim.rand() * Math.min(loop.maxDelayMs, loop.baseDelayMs * 2 ** (r.appAttempt - 1));
    sim.ev.push(sim.now + d, () => attempt(sim, r));
    return;
  }
  // Past every retry: the caller's request fails, or the step does and the worker does it again after its backoff.
  sim.exhaustedRequests += r.count;
  const what = r.keys.length ? `${familyName(sim, r.keys[0]!)}${r.kinds[0] ? ' (read)' : ''}` : 'sqs';
  sim.exhaustedBy.set(what, (sim.exhaustedBy.get(what) ?? 0) + r.count);
  if (r.exhausted) {
    r.exhausted();
    return;
  }
  r.appAttempt = 0;
  r.stepFailures++;
  sim.ev.push(sim.now + backoffMs(r.stepFailures, sim.rand), () => attempt(sim, r));
}

export function req(
  sim: SimState,
  svc: 'ddb' | 'sqs',
  policy: Policy,
  client: Client,
  keys: number[] = [],
  kinds: number[] = [],
  units: number[] = [],
  count = sim.k,
): Req {
  return { svc, keys, kinds, units, policy, client, count, sdkAttempt: 0, sdkRetried: false, appAttempt: 0, stepFailures: 0, done: () => undefined };
}

export function sqs(sim: SimState, client: Client): Req {
  return req(sim, 'sqs', 'sdk', client);
}
