/** The simulated work queue (SqsWorkQueue, shared/adapters/sqs/queue.ts): messages, their visibility, long polls. */
import { type Req, sqs } from './requests.js';
import type { Client } from './sdk.js';
import type { SimState } from './state.js';

export function queued(sim: SimState): number {
  return sim.queue.length - sim.queueHead;
}

/** New messages (a send): on the queue at once; long polls wake, one per batch's worth. */
export function pushMessages(sim: SimState, items: readonly number[]): void {
  for (const i of items) {
    if (sim.msgInFlight[i]) dropMessage(sim, i); // a fresh message replaces one still held somewhere
    sim.queue.push(i);
    sim.hasMsg[i] = 1;
    if (sim.state[i] === 0) sim.state[i] = 1;
  }
  let wake = Math.ceil(items.length / sim.o.worker.receiveBatch);
  while (wake-- > 0 && sim.pollers.length) sim.pollers.shift()!();
}

export function take(sim: SimState, max: number): number[] {
  const out: number[] = [];
  while (out.length < max && sim.queueHead < sim.queue.length) {
    const i = sim.queue[sim.queueHead++]!;
    if (!sim.hasMsg[i] || sim.msgInFlight[i]) continue; // deleted, or delivered already
    out.push(i);
  }
  if (sim.queueHead > 4096 && sim.queueHead * 2 > sim.queue.length) {
    sim.queue.splice(0, sim.queueHead);
    sim.queueHead = 0;
  }
  return out;
}

/**
 * Extend the messages' visibility as Worker.extendAll does: 10 to a
 * ChangeMessageVisibilityBatch; each holder knows its message invisible
 * from when the request was sent.
 */
export function extendRequests(sim: SimState, items: readonly number[], client: Client): Req[] {
  const reqs: Req[] = [];
  const vis = sim.o.worker.visibilitySeconds * 1000;
  for (let j = 0; j < items.length; j += 10) {
    const part = items.slice(j, j + 10);
    const sent = sim.now;
    reqs.push(
      Object.assign(sqs(sim, client), {
        onOk: () =>
          part.forEach((i) => {
            sim.knownVisible[i] = sent + vis;
            if (sim.msgInFlight[i]) invisibleFor(sim, i, vis);
          }),
      }),
    );
  }
  return reqs;
}

/** A message received or extended stays invisible until `ms` from now; then, unless deleted or extended again, it is delivered again. */
export function invisibleFor(sim: SimState, i: number, ms: number): void {
  const due = sim.now + ms;
  sim.msgDue[i] = due;
  sim.ev.push(due, () => {
    if (!sim.msgInFlight[i] || sim.msgDue[i] !== due) return;
    sim.msgInFlight[i] = 0;
    sim.inFlight -= sim.k;
    sim.queue.push(i);
    if (sim.pollers.length) sim.pollers.shift()!();
  });
}

export function dropMessage(sim: SimState, i: number): void {
  if (sim.msgInFlight[i]) sim.inFlight -= sim.k;
  sim.msgInFlight[i] = 0;
  sim.hasMsg[i] = 0;
  sim.msgRef[i] = 0;
}
