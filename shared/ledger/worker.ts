import type { Clock } from '../clock.js';
import { systemClock } from '../clock.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import type { QueueMessage, WorkQueue } from '../queue/port.js';
import type { ExecutionBackend } from './backends.js';
import type { StealNotice } from './coordinator.js';
import { EpochGuard } from './epoch-guard.js';
import type { LedgerStore } from './store.js';
import { ack, claim, heartbeat, nack, start } from './transitions.js';

/**
 * A worker of one run: pulls item ids from the queue, claims each in the
 * ledger, marks it started, runs it on a backend, submits the result, then
 * deletes the message. When idle it first reconciles with the ledger (adopts
 * any Running(itself) item it does not hold — e.g. a steal whose notice never
 * arrived), then asks the coordinator for work.
 *
 * Queue rule: a message matters only while its item is Pending; whoever puts
 * an item back to Pending makes sure it has a message (a nack releases ours,
 * the coordinator's failure scan re-sends). So a message whose item is
 * Running elsewhere, Done or Failed is deleted.
 */

export interface CoordinatorClient {
  /** An idle worker asks for work; the answer carries the coordinator epoch for the EpochGuard. */
  requestWork(workerId: string): Promise<StealNotice>;
}

export interface WorkerOptions {
  runId: string;
  workerId: string;
  ledger: LedgerStore;
  queue: WorkQueue;
  backend: ExecutionBackend;
  coordinator?: CoordinatorClient;
  clock?: Clock;
  logger?: Logger;
  /** Ledger heartbeat and message visibility extension while an item runs. */
  heartbeatMs?: number;
  visibilitySeconds?: number;
  /** Long-poll wait (SQS: up to 20 s). */
  waitSeconds?: number;
  receiveBatch?: number;
  /**
   * How long a chunk of started items may take. Items are started (made
   * unstealable) a chunk at a time, sized from the measured item duration so a
   * chunk lasts about this long: one item at a time when items are slow (a
   * thief can still take the rest), many per round trip when they are fast.
   */
  chunkBudgetMs?: number;
  maxChunk?: number;
}

interface Held {
  readonly itemId: string;
  readonly message: QueueMessage | null;
  /** Claimed and started by the queue in one step: run it now, no start CAS. */
  readonly started?: { readonly payload: unknown };
}

export interface WorkerStats {
  done: number;
  /** Items whose claim was lost while held or running (stolen, re-pended): someone else records the result. */
  lost: number;
  stolen: number;
  failedRuns: number;
  staleNotices: number;
}

export class Worker {
  readonly guard = new EpochGuard();
  readonly stats: WorkerStats = { done: 0, lost: 0, stolen: 0, failedRuns: 0, staleNotices: 0 };
  private readonly backlog: Held[] = [];
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly heartbeatMs: number;
  private readonly visibilitySeconds: number;
  private readonly chunkBudgetMs: number;
  private readonly maxChunk: number;
  /** Moving average of one item's execution time; null until measured. */
  private itemMs: number | null = null;
  private stopping = false;
  /** The chunk being executed: a drain aborts its current item and waits for what it gave back. */
  private current: { readonly abort: (reason: Error) => void; readonly done: Promise<string[]> } | null = null;

  constructor(private readonly o: WorkerOptions) {
    if (!o.workerId.trim()) throw new Error('invalid worker config: workerId: must not be empty');
    this.clock = o.clock ?? systemClock;
    this.logger = o.logger ?? silentLogger;
    this.heartbeatMs = o.heartbeatMs ?? 5_000;
    this.visibilitySeconds = o.visibilitySeconds ?? 30;
    this.chunkBudgetMs = o.chunkBudgetMs ?? 100;
    this.maxChunk = o.maxChunk ?? 64;
  }

  get id(): string {
    return this.o.workerId;
  }

  /** Items claimed and not yet started, in order. */
  get held(): readonly string[] {
    return this.backlog.map((h) => h.itemId);
  }

  /** One unit of work: run the next chunk of held items, else receive, else reconcile and ask for work. */
  async step(signal?: AbortSignal): Promise<'ran' | 'received' | 'stole' | 'idle'> {
    if (this.stopping) return 'idle';
    if (this.backlog.length) {
      await this.executeChunk();
      return 'ran';
    }
    // Just ran dry: look without waiting, then adopt or steal, and only then long-poll —
    // an idle worker must not sit out a 20 s poll while others hold a backlog.
    const wait = this.o.waitSeconds ?? 20;
    if ((await this.pull(signal, 0)) > 0) return 'received';
    if (signal?.aborted) return 'idle';
    if (await this.reconcile()) return 'stole';
    if (this.o.coordinator && (await this.askForWork())) return 'stole';
    if (wait > 0 && (await this.pull(signal, wait)) > 0) return 'received';
    return 'idle';
  }

  /**
   * Step until `signal` aborts or the worker drains. `idle` is called when a
   * step found nothing to do (after the long poll), e.g. to stop once the
   * run is finished.
   */
  async run(signal: AbortSignal, idle?: () => Promise<boolean>): Promise<void> {
    while (!signal.aborted && !this.stopping) {
      const did = await this.step(signal);
      if (did === 'idle' && idle && (await idle())) return;
    }
  }

  /** Receive a batch and claim what can be claimed; returns how many messages arrived. */
  async pull(signal?: AbortSignal, waitSeconds = this.o.waitSeconds ?? 20): Promise<number> {
    const batch = this.o.receiveBatch ?? 10;
    // Items known to be fast and a whole batch fits in one chunk: ask the queue to start them as it claims them.
    const startNow = this.itemMs !== null && this.chunkSize() >= batch;
    let messages: QueueMessage[];
    try {
      messages = await this.o.queue.receive(batch, waitSeconds, signal, { start: startNow });
    } catch (err) {
      if (signal?.aborted) return 0; // stopping: an aborted long poll is not an error
      throw err;
    }
    if (!messages.length) return 0;
    const held = new Set(this.held);
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
      if (m.claimed && !held.has(m.itemId)) this.backlog.push({ itemId: m.itemId, message: m, ...(m.started ? { started: { payload: m.payload } } : {}) });
    }
    if (!unclaimed.length) return messages.length;
    // One read per batch: the epoch stamped on claims is informational, it need not be fresher than that.
    const epoch = Math.max((await this.o.ledger.getRun(this.o.runId))?.coordinatorEpoch ?? 0, 0);
    const now = this.clock.now();
    const outs = await this.o.ledger.casMany(unclaimed.map((m) => claim(m.runId, m.itemId, this.id, epoch, now)), now);
    const extend: QueueMessage[] = [];
    const drop: QueueMessage[] = [...copies];
    unclaimed.forEach((m, i) => {
      const out = outs[i]!;
      if (out.ok) {
        this.backlog.push({ itemId: m.itemId, message: m });
        extend.push(m);
      } else if (out.current?.worker === this.id && out.current.state === 'running' && !held.has(m.itemId)) {
        this.backlog.push({ itemId: m.itemId, message: m }); // ours already (a redelivery to us)
      } else if (out.current === null || out.current.state !== 'pending') {
        drop.push(m); // see the queue rule
      }
    });
    await Promise.all([...extend.map((m) => this.o.queue.extend(m, this.visibilitySeconds)), ...drop.map((m) => this.o.queue.delete(m))]);
    return messages.length;
  }

  private chunkSize(): number {
    if (this.itemMs === null) return 1;
    return Math.max(1, Math.min(this.maxChunk, Math.floor(this.chunkBudgetMs / Math.max(this.itemMs, 0.01))));
  }

  private executeChunk(): Promise<void> {
    // Items the queue started already are run now, whatever the chunk size.
    const preStarted = this.backlog.findIndex((h) => !h.started);
    const chunk = this.backlog.splice(0, preStarted === 0 ? this.chunkSize() : preStarted === -1 ? this.backlog.length : preStarted);
    // One controller for the item being run; replaced only after it fired (a lost claim), so a
    // chunk of fast items does not allocate a signal per item.
    const ctl = { c: new AbortController() };
    const done = this.runChunk(chunk, ctl);
    this.current = { abort: (reason) => ctl.c.abort(reason), done };
    return done.then(
      () => {
        this.current = null;
      },
      (err: unknown) => {
        this.current = null;
        throw err;
      },
    );
  }

  /** Start the chunk in one round trip, run its items one by one, record results in batches. Returns the ids given back by a drain. */
  private async runChunk(chunk: Held[], ctl: { c: AbortController }): Promise<string[]> {
    const { runId } = this.o;
    const now = this.clock.now();
    const toStart = chunk.filter((h) => !h.started);
    const startOuts = toStart.length ? await this.o.ledger.casMany(toStart.map((h) => start(runId, h.itemId, this.id, now)), now) : [];
    const todo: { h: Held; payload: unknown }[] = chunk.flatMap((h) => (h.started ? [{ h, payload: h.started.payload }] : []));
    const gone: QueueMessage[] = [];
    toStart.forEach((h, i) => {
      const out = startOuts[i]!;
      if (out.ok) todo.push({ h, payload: out.item.payload });
      else {
        // Stolen before we started it (the thief runs it), or no longer ours.
        this.stats.lost++;
        if (h.message) gone.push(h.message);
      }
    });
    await this.deleteAll(gone);
    const lostIds = new Set<string>();
    let currentId: string | null = null;
    const finished = new Set<string>();
    const beat = setInterval(() => {
      void (async () => {
        const live = todo.filter((t) => !finished.has(t.h.itemId) && !lostIds.has(t.h.itemId));
        const at = this.clock.now();
        const outs = await this.o.ledger.applyMany(live.map((t) => heartbeat(runId, t.h.itemId, this.id, at)), at);
        const extend: QueueMessage[] = [];
        live.forEach((t, i) => {
          if (outs[i]) {
            if (t.h.message) extend.push(t.h.message);
          } else {
            lostIds.add(t.h.itemId);
            if (t.h.itemId === currentId) ctl.c.abort(new Error(`claim on ${t.h.itemId} lost`));
          }
        });
        await Promise.all(extend.map((m) => this.o.queue.extend(m, this.visibilitySeconds)));
      })().catch((err: unknown) => this.logger.warn('heartbeat failed', { items: todo.length, error: errorMessage(err) }));
    }, this.heartbeatMs);
    const results: { h: Held; result: unknown }[] = [];
    const given: string[] = [];
    let lastFlush = performance.now();
    const flush = async () => {
      const batch = results.splice(0);
      if (!batch.length) return;
      const outs = await this.o.ledger.applyMany(batch.map((r) => ack(runId, r.h.itemId, this.id, r.result)), this.clock.now());
      outs.forEach((ok) => (ok ? this.stats.done++ : this.stats.lost++)); // lost: re-pended meanwhile, whoever holds it now records the result
      for (const r of batch) finished.add(r.h.itemId);
      await this.deleteAll(batch.flatMap((r) => (r.h.message ? [r.h.message] : [])));
      lastFlush = performance.now();
    };
    try {
      for (const [n, t] of todo.entries()) {
        if (this.stopping) {
          // Drained: the rest of the chunk was started but never run; give it all back now.
          given.push(...(await this.giveBack(todo.slice(n).map((x) => x.h))));
          break;
        }
        if (lostIds.has(t.h.itemId)) {
          this.stats.lost++;
          continue;
        }
        if (results.length && performance.now() - lastFlush >= this.chunkBudgetMs) await flush();
        if (ctl.c.signal.aborted && !this.stopping) ctl.c = new AbortController();
        currentId = t.h.itemId;
        const signal = ctl.c.signal;
        const began = performance.now();
        try {
          const payload = t.payload ?? (await this.o.ledger.get(runId, t.h.itemId))?.payload;
          results.push({ h: t.h, result: await this.o.backend(payload, signal) });
          const took = performance.now() - began;
          this.itemMs = this.itemMs === null ? took : this.itemMs * 0.8 + took * 0.2;
        } catch (err) {
          if (signal.aborted && this.stopping) {
            // Drained mid-run: hand it back so another worker runs it now, not after the failure timeout.
            given.push(...(await this.giveBack(todo.slice(n).map((x) => x.h))));
            break;
          }
          if (signal.aborted) {
            this.stats.lost++;
            continue;
          }
          // The backend failed: give the item back; its message returns (and after maxReceiveCount goes to the DLQ).
          this.stats.failedRuns++;
          this.itemMs = this.itemMs ?? performance.now() - began;
          const back = await this.o.ledger.cas(nack(runId, t.h.itemId, this.id, errorMessage(err)), this.clock.now());
          finished.add(t.h.itemId);
          if (t.h.message) await (back.ok ? this.o.queue.release(t.h.message) : this.o.queue.delete(t.h.message));
          else if (back.ok) await this.o.queue.send(runId, [t.h.itemId]);
        }
      }
      await flush();
    } finally {
      clearInterval(beat);
    }
    return given;
  }

  private async deleteAll(messages: readonly QueueMessage[]): Promise<void> {
    if (messages.length) await this.o.queue.deleteMany(messages);
  }

  /** Nack held items (back to Pending) and put them back on the queue; returns the ids given back. */
  private async giveBack(items: readonly Held[]): Promise<string[]> {
    if (!items.length) return [];
    const outs = await this.o.ledger.applyMany(items.map((h) => nack(this.o.runId, h.itemId, this.id, 'drained')), this.clock.now());
    const given = items.filter((_, i) => outs[i]);
    const resend = given.filter((h) => !h.message).map((h) => h.itemId);
    await Promise.all(given.flatMap((h) => (h.message ? [this.o.queue.release(h.message)] : [])));
    if (resend.length) await this.o.queue.send(this.o.runId, resend);
    return given.map((h) => h.itemId);
  }

  /** Adopt Running(me) items the worker does not hold: a steal whose notice was lost or rejected. */
  async reconcile(): Promise<boolean> {
    const held = new Set(this.held);
    const mine = (await this.o.ledger.running(this.o.runId)).filter((i) => i.worker === this.id && !held.has(i.id));
    const restarted = mine.filter((i) => i.started);
    if (restarted.length) {
      // We started these in a previous life and no longer run them: give them back.
      const outs = await this.o.ledger.applyMany(restarted.map((i) => nack(this.o.runId, i.id, this.id, 'worker restarted')), this.clock.now());
      const back = restarted.filter((_, n) => outs[n]).map((i) => i.id);
      if (back.length) await this.o.queue.send(this.o.runId, back);
    }
    for (const item of mine) if (!item.started) this.backlog.push({ itemId: item.id, message: null });
    return this.backlog.length > 0;
  }

  private async askForWork(): Promise<boolean> {
    const notice = await this.o.coordinator!.requestWork(this.id);
    if (!this.guard.accept(notice.epoch)) {
      // A deposed coordinator's late answer: ignore it. Items it moved to us are adopted by reconcile.
      this.stats.staleNotices++;
      return false;
    }
    const held = new Set(this.held);
    for (const itemId of notice.items) if (!held.has(itemId)) this.backlog.push({ itemId, message: null });
    this.stats.stolen += notice.items.length;
    return notice.items.length > 0;
  }

  /** Drain: stop pulling, abort the running item and give back everything held or running. Returns the ids given back. */
  async drain(): Promise<string[]> {
    this.stopping = true;
    const given: string[] = [];
    const running = this.current;
    if (running) {
      running.abort(new Error('draining'));
      given.push(...(await running.done.catch(() => [])));
    }
    given.push(...(await this.giveBack(this.backlog.splice(0))));
    return given;
  }
}
