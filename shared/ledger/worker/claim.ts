import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueMessage } from '../../queue/port.js';
import { PartialBatchError, type ItemCasOutcome } from '../store.js';
import { claim } from '../transitions.js';
import type { Chunks } from './chunk.js';
import type { Held, WorkerContext } from './context.js';
import type { Heartbeats } from './heartbeat.js';

/** How long a worker goes on with the run record it read (the coordinator epoch it stamps on claims). */
export const RUN_RECORD_TTL_MS = 60_000;

/**
 * Receives messages and claims their items in the ledger, into the backlog.
 * Paced by the store: a round it throttles halves the receive batch and
 * pauses the next receive (slowDown), a round answered in full speeds back up.
 */
export class Claims {
  private readonly receiveBatch: number;
  /** Receive batch and pause, adapted to throttling (slowDown, speedUp). */
  private readonly pace: { batch: number; pauseMs: number };
  /** The run's coordinator epoch as last read, and when (monotonic clock). */
  private epochRead: { readonly epoch: number; readonly at: number } | null = null;

  constructor(
    private readonly w: WorkerContext,
    private readonly beats: Heartbeats,
    private readonly chunks: Chunks,
  ) {
    this.receiveBatch = w.o.receiveBatch ?? 10;
    this.pace = { batch: this.receiveBatch, pauseMs: 0 };
  }

  /** Receive a batch and claim what can be claimed; returns how many messages arrived. */
  async pull(signal: AbortSignal | undefined, waitSeconds: number): Promise<number> {
    const w = this.w;
    const { ledger, queue } = w.o;
    const backlog = w.held.backlog;
    // Throttled lately: fewer messages a receive, after a pause (see slowDown).
    if (this.pace.pauseMs > 0) await sleep(this.pace.pauseMs, undefined, signal ? { signal } : undefined).catch(() => undefined);
    const batch = Math.min(this.receiveBatch, this.pace.batch);
    // Items known to be fast and a whole batch fits in one chunk: ask the queue to start them as it claims them.
    const startNow = this.chunks.measured && this.chunks.size() >= batch;
    let messages: QueueMessage[];
    // A queue that claims as it delivers wrote the items during the receive: no earlier than this.
    const asked = w.monotonic.now();
    try {
      messages = await queue.receive(batch, waitSeconds, signal, { start: startNow });
    } catch (err) {
      if (signal?.aborted) return 0; // stopping: an aborted long poll is not an error
      throw err;
    }
    if (!messages.length) return 0;
    const held = new Set(w.held.waiting());
    // The same item twice in one batch (SQS delivers at least once): claim it once, drop the copy.
    const seen = new Set<string>();
    const copies: QueueMessage[] = [];
    const unclaimed: QueueMessage[] = [];
    for (const m of messages) {
      if (m.claimed) continue;
      if (seen.has(m.itemId)) copies.push(m);
      else {
        seen.add(m.itemId);
        unclaimed.push(m);
      }
    }
    // Claimed by the queue itself (the ledger-backed queue claims as it delivers).
    for (const m of messages) {
      if (!m.claimed || held.has(m.itemId)) continue;
      backlog.push({ itemId: m.itemId, message: m, ...(m.started ? { started: { payload: m.payload } } : {}) });
      this.beats.wrote(m.itemId, asked);
    }
    if (!unclaimed.length) return messages.length;
    const epoch = await this.runEpoch();
    const now = w.clock.now();
    const sent = w.monotonic.now();
    let outs: readonly (ItemCasOutcome | undefined)[];
    let partial: PartialBatchError<ItemCasOutcome> | null = null;
    try {
      outs = await ledger.casMany(
        unclaimed.map((m) => claim(m.runId, m.itemId, w.id, epoch, now)),
        now,
      );
    } catch (err) {
      if (!(err instanceof PartialBatchError)) throw err;
      // Some claims landed, some were refused: keep those that landed (forgotten, they would be Running with no holder).
      partial = err as PartialBatchError<ItemCasOutcome>;
      outs = partial.outcomes;
    }
    const extend: Held[] = [];
    const drop: QueueMessage[] = [...copies];
    unclaimed.forEach((m, i) => {
      const out = outs[i];
      // Not answered: its message is left as it is and comes back after its visibility timeout.
      if (out === undefined) return;
      if (out.ok) {
        const h = { itemId: m.itemId, message: m };
        backlog.push(h);
        this.beats.wrote(m.itemId, sent);
        extend.push(h);
      } else if (out.current?.worker === w.id && out.current.state === 'running' && !held.has(m.itemId)) {
        backlog.push({ itemId: m.itemId, message: m }); // ours already (a redelivery to us); when last written is not known
      } else if (out.current === null || out.current.state !== 'pending') {
        drop.push(m); // see the queue rule
      }
    });
    await Promise.all([this.beats.extendAll(extend), ...drop.map((m) => queue.delete(m))]);
    if (partial) {
      // A refusal applied nothing: every claim's fate is known, nothing to reconcile; slow down instead.
      if (!partial.refusedOnly) throw partial;
      this.slowDown();
    } else this.speedUp();
    return messages.length;
  }

  /**
   * The store refused (throttled) part of what this worker asked: receive
   * fewer messages at a time, after a pause — half the batch, down to one;
   * 100 ms doubling to 2 s — so a fleet settles at what the table accepts
   * instead of failing steps and stranding claims. A round answered in full
   * adds one message back and ends the pause.
   */
  slowDown(): void {
    this.pace.batch = Math.max(1, Math.floor(this.pace.batch / 2));
    this.pace.pauseMs = Math.min(2_000, Math.max(100, this.pace.pauseMs * 2));
    this.w.stats.throttledRounds++;
  }

  private speedUp(): void {
    this.pace.batch = Math.min(this.receiveBatch, this.pace.batch + 1);
    this.pace.pauseMs = 0;
  }

  /**
   * The run's coordinator epoch, stamped on claims. Informational (no decision
   * reads it back), so read at most once per RUN_RECORD_TTL_MS: a fleet
   * reading the run's one record per received batch made it a hot key.
   */
  private async runEpoch(): Promise<number> {
    const now = this.w.monotonic.now();
    if (this.epochRead && now - this.epochRead.at < RUN_RECORD_TTL_MS) return this.epochRead.epoch;
    const epoch = Math.max((await this.w.o.ledger.getRun(this.w.o.runId))?.coordinatorEpoch ?? 0, 0);
    this.epochRead = { epoch, at: now };
    return epoch;
  }
}
