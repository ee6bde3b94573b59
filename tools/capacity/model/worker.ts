/**
 * The workers, as shared/ledger/worker/ runs them (Worker.step): receive,
 * claim, start a chunk, run it, ack; heartbeat rounds on their own timer;
 * when idle, reconcile if due, ask the coordinator for work, long-poll. A
 * worker's memory is state.ts WorkerState.
 */
import { HEARTBEAT_ROUNDS, RUN_RECORD_TTL_MS, backoffMs, extensionDue, heartbeatDue, stealBackoffMs } from '../../../shared/ledger/worker/index.js';
import { dispatch } from './dispatch.js';
import { lambdaFull } from './lambda.js';
import { failedWrite, itemMove, itemWrite, moveCounts, readItems, readRunning, setOwner, single } from './ledger-store.js';
import { spawn } from './processes.js';
import { dropMessage, extendRequests, invisibleFor, queued, take } from './queue.js';
import { type Proc, sqs } from './requests.js';
import { SDK_RETRY } from './sdk.js';
import type { SimState, WorkerState } from './state.js';
import { askForWork } from './steal.js';

export function startWorkers(sim: SimState): void {
  sim.workStartedAt = sim.now;
  for (let id = 0; id < sim.simWorkers; id++) {
    const wk: WorkerState = {
      id,
      client: sim.o.worker.clients === 'shared' ? sim.sharedClient : { quota: SDK_RETRY.quota },
      backlog: [],
      executing: [],
      outcomes: [],
      owned: new Set(),
      itemMs: null,
      beating: false,
      stopped: false,
      reconcileDue: false,
      fruitless: 0,
      nextAskAt: sim.now + stealBackoffMs(1, sim.rand),
      epochReadAt: Number.NEGATIVE_INFINITY,
      batch: sim.o.worker.receiveBatch,
      pauseMs: 0,
    };
    sim.workers.push(wk);
    sim.running++;
    // Heartbeat rounds tick from the worker's start, whatever it is doing.
    const period = sim.o.worker.heartbeatMs / HEARTBEAT_ROUNDS;
    const beat = () => {
      if (wk.stopped || sim.finished) return;
      if (!wk.beating) spawn(sim, heartbeat(sim, wk));
      sim.ev.push(sim.now + period, beat);
    };
    const phase = sim.o.worker.heartbeatPhase === 'spread' ? sim.rand() : 1;
    sim.ev.push(sim.now + phase * period, beat);
    spawn(sim, worker(sim, wk), () => {
      wk.stopped = true;
      if (--sim.running === 0 && sim.endAt === null) sim.endAt = sim.now;
    });
  }
}

/**
 * Worker.run: steps; a failed step (a request past its retries) backs off 250 ms doubling, and the loop goes on.
 * Every step that fails here failed on a refusal (StoreThrottledError: nothing applied): no reconcile, a slowDown.
 */
export function* worker(sim: SimState, wk: WorkerState): Proc {
  let failures = 0;
  while (!sim.finished) {
    const did = yield* step(sim, wk);
    if (did === 'failed') {
      slowDown(sim, wk);
      failures++;
      sim.failedSteps += sim.k;
      yield { op: 'sleep', ms: backoffMs(failures, sim.rand) };
      continue;
    }
    failures = 0;
    // Idle: the benchmark's `finished` check (every result is in the ledger) stops everyone.
    if (did === 'idle' && sim.doneItems >= sim.simItems) sim.finished = true;
  }
}

export function* step(sim: SimState, wk: WorkerState): Proc<'ran' | 'idle' | 'failed'> {
  const b = sim.o.worker;
  if (wk.outcomes.length) return (yield* flush(sim, wk)) ? 'ran' : 'failed';
  if (wk.backlog.length) return (yield* executeChunk(sim, wk)) ? 'ran' : 'failed';
  // As Worker.step: reconcile only when due; ask at once on running dry, then by stealBackoffMs while nothing comes.
  const came = (): 'ran' => {
    wk.fruitless = 0;
    wk.nextAskAt = 0;
    return 'ran';
  };
  const got = yield* pull(sim, wk, 0);
  if (got !== 0) return got < 0 ? 'failed' : came();
  if (wk.reconcileDue) {
    const adopted = yield* reconcile(sim, wk);
    if (adopted < 0) return 'failed';
    wk.reconcileDue = false;
    if (adopted > 0) return came();
  }
  if (b.coordinator && sim.now >= wk.nextAskAt) {
    // Known before the ask as lambdaStart will find it: a 429 (the account's concurrency spent) means the ask never ran.
    const refused = lambdaFull(sim);
    const stolen = yield* askForWork(sim, wk);
    sim.o.trace?.({ kind: 'ask', at: sim.now, worker: wk.id, stolen, refused });
    if (stolen > 0) return came();
    wk.nextAskAt = sim.now + stealBackoffMs(++wk.fruitless, sim.rand);
    // Worker.stealFailed: the step goes on to the long poll. The answer may be lost with items moved to us: the
    // ledger is read at the next idle step — not after a 429, which moved nothing.
    if (stolen < 0 && !refused) wk.reconcileDue = true;
  }
  if (b.waitSeconds > 0) {
    // As Worker.step: the poll ends by the next ask's time.
    const untilAsk = b.coordinator ? Math.max(1, Math.ceil((wk.nextAskAt - sim.now) / 1000)) : b.waitSeconds;
    const more = yield* pull(sim, wk, Math.min(b.waitSeconds, untilAsk));
    if (more !== 0) return more < 0 ? 'failed' : came();
  }
  return 'idle';
}

export function hold(sim: SimState, wk: WorkerState, i: number): void {
  sim.heldBy[i] = wk.id;
}

/** Out of the worker's memory (no longer its), with its message's receipt. */
export function orphan(sim: SimState, wk: WorkerState, i: number): void {
  if (sim.heldBy[i] === wk.id) sim.heldBy[i] = -1;
  sim.msgRef[i] = 0;
}

/**
 * Worker.pull: after the pause a throttled round left (slowDown), receive up to the batch, read the run record (at
 * most once a minute), claim (casMany: every claim settles; those that landed are held, those refused by their
 * condition dropped or kept as the code does, those unanswered left to come back), extend. -1: the step failed.
 */
export function* pull(sim: SimState, wk: WorkerState, waitSeconds: number): Proc<number> {
  const b = sim.o.worker;
  if (wk.pauseMs > 0) yield { op: 'sleep', ms: wk.pauseMs };
  if (waitSeconds > 0) yield { op: 'poll', ms: waitSeconds * 1000 };
  yield { op: 'all', reqs: [sqs(sim, wk.client)], limit: 1 };
  const room = Math.floor((sim.o.sqsInFlightLimit - sim.inFlight) / sim.k);
  if (room <= 0 && queued(sim) > 0) sim.sqsOverLimit += sim.k;
  const got = take(sim, Math.min(b.receiveBatch, wk.batch, Math.max(0, room)));
  if (!got.length) return 0;
  const receivedAt = sim.now;
  for (const i of got) {
    sim.msgInFlight[i] = 1;
    sim.knownVisible[i] = Number.NEGATIVE_INFINITY;
    invisibleFor(sim, i, sim.o.queueVisibilitySeconds * 1000);
  }
  sim.inFlight += got.length * sim.k;
  sim.inFlightPeak = Math.max(sim.inFlightPeak, sim.inFlight);
  if (sim.now - wk.epochReadAt >= RUN_RECORD_TTL_MS) {
    const at = sim.now;
    const read = single(sim, sim.kRunRecord, 1, 1, 'sdk', wk.client);
    read.onOk = () => (wk.epochReadAt = at);
    sim.runRecordReads += sim.k;
    if (!(yield { op: 'all', reqs: [read], limit: 1 })) return -1;
  }
  const mine: number[] = [];
  const sent = sim.now;
  const claims = got.map((i) => {
    if (sim.state[i] !== 1) return failedWrite(sim, i, wk.client);
    const r = itemWrite(sim, i, 'claim', wk.client);
    r.onOk = () => {
      if (sim.state[i] !== 1) return;
      sim.state[i] = 2;
      setOwner(sim, i, wk.id);
      sim.started[i] = 0;
      sim.lastBeat[i] = sim.now;
      sim.wrote[i] = sent;
      moveCounts(sim, i, sim.pendingCnt, sim.runningCnt);
      mine.push(i);
    };
    return r;
  });
  const whole = yield { op: 'all', reqs: claims, limit: b.concurrency, settle: true };
  // None answered: the first error is thrown as it came; nothing landed, the messages come back.
  if (!whole && claims.every((r) => r.failed)) return -1;
  sim.o.trace?.({
    kind: 'claims',
    receivedAt,
    at: sim.now,
    worker: wk.id,
    received: got.length,
    landed: mine.slice(),
    unanswered: got.filter((_, j) => claims[j]!.failed),
  });
  const extend: number[] = [];
  const drop: number[] = [];
  got.forEach((i, j) => {
    // Not answered (refused past its retries): its message is left as it is and comes back after its visibility timeout.
    if (claims[j]!.failed) return;
    if (mine.includes(i)) {
      hold(sim, wk, i);
      sim.msgRef[i] = 1;
      wk.backlog.push(i);
      extend.push(i);
    } else if (sim.state[i] === 2 && sim.owner[i] === wk.id && sim.heldBy[i] !== wk.id) {
      hold(sim, wk, i); // ours already (a redelivery to us): when last written is not known
      sim.msgRef[i] = 1;
      sim.wrote[i] = Number.NEGATIVE_INFINITY;
      wk.backlog.push(i);
    } else if (sim.state[i] !== 1) drop.push(i); // Running elsewhere, Done: the queue rule
  });
  yield {
    op: 'all',
    reqs: [...extendRequests(sim, extend, wk.client), ...drop.map((i) => Object.assign(sqs(sim, wk.client), { onOk: () => dropMessage(sim, i) }))],
    limit: Infinity,
  };
  // Refused in part (a refusal applied nothing: no claim's fate unknown): slow down, the step goes on.
  if (whole) speedUp(sim, wk);
  else slowDown(sim, wk);
  return got.length;
}

/** The backend's time per item on this worker (`slowWorkers`: the last ones). */
export function itemMsOf(sim: SimState, wk: WorkerState): number {
  const slow = sim.o.slowWorkers;
  return slow && wk.id >= sim.simWorkers - Math.round(slow.count / sim.k) ? slow.itemMs : sim.o.itemMs;
}

/** Worker.slowDown: the store refused part of a round, or a step failed on a refusal: half the batch (down to 1), pause 100 ms doubling to 2 s. */
export function slowDown(sim: SimState, wk: WorkerState): void {
  wk.batch = Math.max(1, Math.floor(wk.batch / 2));
  wk.pauseMs = Math.min(2_000, Math.max(100, wk.pauseMs * 2));
  sim.throttledRounds += sim.k;
  sim.o.trace?.({ kind: 'pace', at: sim.now, worker: wk.id, throttled: true, batch: wk.batch, pauseMs: wk.pauseMs });
}

/** Worker.speedUp: a claim round answered in full adds one to the batch (up to receiveBatch) and ends the pause. */
export function speedUp(sim: SimState, wk: WorkerState): void {
  wk.batch = Math.min(sim.o.worker.receiveBatch, wk.batch + 1);
  wk.pauseMs = 0;
  sim.o.trace?.({ kind: 'pace', at: sim.now, worker: wk.id, throttled: false, batch: wk.batch, pauseMs: wk.pauseMs });
}

export function chunkSize(sim: SimState, wk: WorkerState): number {
  if (wk.itemMs === null) return 1;
  return Math.max(1, Math.min(sim.o.worker.maxChunk, Math.floor(sim.o.worker.chunkBudgetMs / Math.max(wk.itemMs, 0.01))));
}

/** Started as its holder knows it: the ledger's flag, unless it took the item back as unstarted (startUnknown). */
export function knownStarted(sim: SimState, i: number): boolean {
  return sim.started[i] === 1 && sim.startUnknown[i] === 0;
}

/** Worker.executeChunk/runChunk: start the chunk in one round (items started already are run as they are), run, ack. */
export function* executeChunk(sim: SimState, wk: WorkerState): Proc<boolean> {
  const b = sim.o.worker;
  const preStarted = wk.backlog.findIndex((i) => !knownStarted(sim, i));
  const chunk = wk.backlog.splice(0, preStarted === 0 ? chunkSize(sim, wk) : preStarted === -1 ? wk.backlog.length : preStarted);
  const toStart = chunk.filter((i) => !knownStarted(sim, i));
  const ok: number[] = chunk.filter((i) => knownStarted(sim, i) && sim.owner[i] === wk.id && sim.state[i] === 2);
  const gone: number[] = [];
  const starts = toStart.map((i) => {
    if (sim.owner[i] !== wk.id || sim.state[i] !== 2 || sim.started[i]) {
      sim.startUnknown[i] = 0;
      gone.push(i);
      return failedWrite(sim, i, wk.client); // stolen before we started it, or started already (its condition refuses it)
    }
    const r = itemWrite(sim, i, 'start', wk.client);
    const sent = sim.now;
    r.onOk = () => {
      if (sim.owner[i] !== wk.id || sim.state[i] !== 2) return;
      sim.started[i] = 1;
      sim.lastBeat[i] = sim.now;
      sim.wrote[i] = Math.max(sim.wrote[i]!, sent);
    };
    return r;
  });
  if (!(yield { op: 'all', reqs: starts, limit: b.concurrency, settle: true })) {
    // Worker.startRound: the chunk goes back as the ledger has it, each item not known started read (one at a time):
    // started by us (run it), unstarted (start it again), else lost; unreadable, kept as unstarted.
    const back: number[] = [];
    for (const i of chunk) {
      if (!toStart.includes(i)) {
        back.push(i);
        continue;
      }
      const read = readItems(sim, [i], wk.client);
      if (!(yield { op: 'all', reqs: read, limit: 1 })) {
        if (sim.started[i] && sim.owner[i] === wk.id) sim.startUnknown[i] = 1;
        back.push(i);
      } else if (sim.state[i] === 2 && sim.owner[i] === wk.id) back.push(i);
      else orphan(sim, wk, i);
    }
    wk.backlog.unshift(...back);
    return false;
  }
  ok.push(...toStart.filter((i) => !gone.includes(i) && sim.started[i] && sim.owner[i] === wk.id));
  for (const i of gone) sim.heldBy[i] = -1;
  const lostMsgs = gone.filter((i) => sim.msgRef[i]);
  if (lostMsgs.length) yield { op: 'all', reqs: [Object.assign(sqs(sim, wk.client), { onOk: () => lostMsgs.forEach((i) => dropMessage(sim, i)) })], limit: 1 };
  wk.executing.push(...ok);
  let lastFlush = sim.now;
  const itemMs = itemMsOf(sim, wk);
  for (const i of ok) {
    if (itemMs > 0) yield { op: 'sleep', ms: itemMs };
    wk.executing.splice(wk.executing.indexOf(i), 1);
    wk.outcomes.push(i);
    wk.itemMs = wk.itemMs === null ? itemMs : wk.itemMs * 0.8 + itemMs * 0.2;
    if (wk.outcomes.length && sim.now - lastFlush >= b.chunkBudgetMs) {
      if (!(yield* flush(sim, wk))) {
        // The unrun items go back to the front of the line, still started.
        wk.backlog.unshift(...wk.executing.splice(0));
        return false;
      }
      lastFlush = sim.now;
    }
  }
  return yield* flush(sim, wk);
}

/** Worker.flushOnce: ack the outcomes (every ack settles); those answered leave the list, the others wait for a later flush. */
export function* flush(sim: SimState, wk: WorkerState): Proc<boolean> {
  if (!wk.outcomes.length) return true;
  const batch = wk.outcomes.slice();
  const acks = batch.map((i) => {
    if (sim.state[i] !== 2 || sim.owner[i] !== wk.id) return failedWrite(sim, i, wk.client); // acked by an earlier round, or lost
    const r = itemWrite(sim, i, 'ack', wk.client);
    r.onOk = () => {
      if (sim.state[i] !== 2) return;
      sim.state[i] = 3;
      setOwner(sim, i, -1);
      moveCounts(sim, i, sim.runningCnt, null);
      sim.doneItems++;
      sim.lastAck = sim.now;
      if (sim.doneItems >= sim.simItems && sim.o.producer.kind === 'streaming') {
        // A deployment's run ends with its last result; the workers idling after it are not the run.
        sim.finished = true;
        sim.endAt = sim.now;
      }
    };
    return r;
  });
  const whole = yield { op: 'all', reqs: acks, limit: sim.o.worker.concurrency, settle: true };
  const answered = batch.filter((_, j) => !acks[j]!.failed);
  sim.o.trace?.({ kind: 'acks', at: sim.now, worker: wk.id, sent: batch, unanswered: batch.filter((_, j) => acks[j]!.failed) });
  const left = new Set(answered);
  wk.outcomes = wk.outcomes.filter((i) => !left.has(i));
  const withMessage: number[] = [];
  for (const i of answered) {
    if (sim.heldBy[i] === wk.id) sim.heldBy[i] = -1;
    if (sim.msgRef[i]) withMessage.push(i);
  }
  for (let j = 0; j < withMessage.length; j += 10) {
    const part = withMessage.slice(j, j + 10);
    yield { op: 'all', reqs: [Object.assign(sqs(sim, wk.client), { onOk: () => part.forEach((i) => dropMessage(sim, i)) })], limit: 1 };
  }
  return whole;
}

/** Worker.beatOnce: the held items heartbeatDue written, then (if that round got through) the messages extensionDue extended. */
export function* heartbeat(sim: SimState, wk: WorkerState): Proc {
  const held = [...new Set([...wk.backlog, ...wk.executing, ...wk.outcomes])].filter((i) => sim.owner[i] === wk.id && sim.state[i] === 2);
  if (!held.length) return;
  wk.beating = true;
  const hb = sim.o.worker.heartbeatMs;
  const sent = sim.now;
  const due = held.filter((i) => heartbeatDue(sent, sim.wrote[i]!, hb));
  const beats = due.map((i) =>
    Object.assign(itemWrite(sim, i, 'heartbeat', wk.client), {
      onOk: () => {
        if (sim.owner[i] !== wk.id || sim.state[i] !== 2) return;
        sim.lastBeat[i] = sim.now;
        sim.wrote[i] = Math.max(sim.wrote[i]!, sent);
      },
    }),
  );
  const ok = beats.length ? yield { op: 'all', reqs: beats, limit: sim.o.worker.concurrency, settle: true } : true;
  if (ok) {
    const extend = held.filter(
      (i) => sim.msgRef[i] && sim.msgInFlight[i] && extensionDue(sim.now, sim.knownVisible[i]!, sim.o.worker.visibilitySeconds * 1000, hb),
    );
    if (extend.length) yield { op: 'all', reqs: extendRequests(sim, extend, wk.client), limit: Infinity };
  }
  wk.beating = false;
}

/**
 * Worker.reconcile: read the running set; give back what we started in a
 * failed step (nack, counted, and a new message), adopt what we hold
 * unstarted. Returns how many it adopted; -1: the step failed.
 */
export function* reconcile(sim: SimState, wk: WorkerState): Proc<number> {
  sim.o.trace?.({ kind: 'reconcile', at: sim.now, worker: wk.id });
  if (!(yield* readRunning(sim, wk.client, sim.o.worker.concurrency, sim.k))) return -1;
  const mine = [...wk.owned].filter((i) => sim.state[i] === 2 && sim.heldBy[i] !== wk.id);
  // Whether each started: its items read (the entries do not say).
  if (mine.length && !(yield { op: 'all', reqs: readItems(sim, mine, wk.client), limit: sim.o.worker.concurrency })) return -1;
  const restarted = mine.filter((i) => sim.started[i]);
  if (restarted.length) {
    const back: number[] = [];
    const nacks = restarted.map((i) => {
      // nack: the item goes back to Pending — its index entry moves from the RUNNING key to the PENDING key.
      const r = itemMove(sim, i, { item: 1, pending: 1, running: 1 }, wk.client);
      r.onOk = () => {
        if (sim.state[i] !== 2 || sim.owner[i] !== wk.id) return;
        sim.state[i] = 1;
        setOwner(sim, i, -1);
        sim.started[i] = 0;
        sim.sentRecorded[i] = 0;
        moveCounts(sim, i, sim.runningCnt, sim.pendingCnt);
        moveCounts(sim, i, null, sim.unsentCnt);
        back.push(i);
      };
      return r;
    });
    if (!(yield { op: 'all', reqs: nacks, limit: sim.o.worker.concurrency, settle: true })) return -1;
    if (!(yield* dispatch(sim, back, wk.client, sim.o.worker.concurrency))) return -1;
  }
  const unstarted = mine.filter((i) => !sim.started[i]);
  for (const i of unstarted) {
    hold(sim, wk, i);
    sim.wrote[i] = Number.NEGATIVE_INFINITY;
    wk.backlog.push(i);
  }
  return unstarted.length;
}
