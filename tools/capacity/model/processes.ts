/**
 * How the simulated processes run on the clock: a process is a generator
 * that yields what it waits for (requests.ts Op) — time, a round of
 * requests, a long poll, a callback — and is resumed by an event on the
 * queue when that comes.
 */
import { queued } from './queue.js';
import { type Proc, type Req, send } from './requests.js';
import type { SimState } from './state.js';

/** Start a process now; `onEnd` when it returns. */
export function spawn(sim: SimState, p: Proc<unknown>, onEnd?: () => void): void {
  resume(sim, p, true, onEnd);
}

/** Run the process to what it waits for next, given whether the last thing it waited for succeeded. */
function resume(sim: SimState, p: Proc<unknown>, value: boolean, onEnd?: () => void): void {
  const r = p.next(value);
  if (r.done) {
    onEnd?.();
    return;
  }
  const op = r.value;
  const again = () => resume(sim, p, true, onEnd);
  switch (op.op) {
    case 'sleep':
      sim.ev.push(sim.now + op.ms, again);
      return;
    case 'all':
      all(sim, op.reqs, op.limit, (ok) => resume(sim, p, ok, onEnd), op.settle);
      return;
    case 'poll': {
      if (queued(sim) > 0 || op.ms <= 0) {
        sim.ev.push(sim.now, again);
        return;
      }
      let woken = false;
      const wake = () => {
        if (woken) return;
        woken = true;
        again();
      };
      sim.pollers.push(wake);
      sim.ev.push(sim.now + op.ms, () => {
        // Timed out: no longer among the pollers a message wakes.
        const at = sim.pollers.indexOf(wake);
        if (at >= 0) sim.pollers.splice(at, 1);
        wake();
      });
      return;
    }
    case 'wait':
      op.register(() => sim.ev.push(sim.now, again));
      return;
  }
}

/** `fn` every `ms` from now, until the run is finished. */
export function every(sim: SimState, ms: number, fn: () => void): void {
  const tick = () => {
    if (sim.finished) return;
    fn();
    sim.ev.push(sim.now + ms, tick);
  };
  sim.ev.push(sim.now + ms, tick);
}

/**
 * mapLimit: at most `limit` in flight; `done(true)` once all have succeeded,
 * `done(false)` at the first that outlasted its retries — as mapLimit
 * rejects — while the other lanes go on in the background (their requests
 * still land: `onOk`). `settle` (DynamoDB casMany): a request past its
 * retries is marked `failed` and its lane goes on; `done(false)` once every
 * request has settled, if any failed.
 */
function all(sim: SimState, reqs: readonly Req[], limit: number, done: (ok: boolean) => void, settle = false): void {
  const n = reqs.length;
  if (n === 0) {
    sim.ev.push(sim.now, () => done(true));
    return;
  }
  let next = 0;
  let lanes = Math.min(limit, n);
  let settled = false;
  let failed = false;
  const lane = () => {
    if (next >= n) {
      if (--lanes === 0 && !settled) {
        settled = true;
        done(!failed);
      }
      return;
    }
    const r = reqs[next++]!;
    r.exhausted ??= settle
      ? () => {
          r.failed = true;
          failed = true;
          lane();
        }
      : () => {
          lanes--;
          if (settled) return;
          settled = true;
          done(false);
        };
    send(sim, r, lane);
  };
  for (let i = 0, l = lanes; i < l; i++) lane();
}
