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
}

interface Held {
  readonly itemId: string;
  readonly message: QueueMessage | null;
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
  private stopping = false;
  /** The item being executed, so a drain can abort it and give it back. */
  private current: { readonly itemId: string; readonly abort: AbortController; done: Promise<string | null> } | null = null;

  constructor(private readonly o: WorkerOptions) {
    if (!o.workerId.trim()) throw new Error('invalid worker config: workerId: must not be empty');
    this.clock = o.clock ?? systemClock;
    this.logger = o.logger ?? silentLogger;
    this.heartbeatMs = o.heartbeatMs ?? 5_000;
    this.visibilitySeconds = o.visibilitySeconds ?? 30;
  }

  get id(): string {
    return this.o.workerId;
  }

  /** Items claimed and not yet started, in order. */
  get held(): readonly string[] {
    return this.backlog.map((h) => h.itemId);
  }

  /** One unit of work: run the next held item, else receive, else reconcile and ask for work. */
  async step(): Promise<'ran' | 'received' | 'stole' | 'idle'> {
    const next = this.stopping ? undefined : this.backlog.shift();
    if (next) {
      await this.execute(next);
      return 'ran';
    }
    if (this.stopping) return 'idle';
    if ((await this.pull()) > 0) return 'received';
    if (await this.reconcile()) return 'stole';
    if (this.o.coordinator && (await this.askForWork())) return 'stole';
    return 'idle';
  }

  /** Receive a batch and claim what can be claimed; returns how many messages arrived. */
  async pull(): Promise<number> {
    const messages = await this.o.queue.receive(this.o.receiveBatch ?? 10, this.o.waitSeconds ?? 20);
    if (!messages.length) return 0;
    // One read per batch: the epoch stamped on claims is informational, it need not be fresher than that.
    const epoch = Math.max((await this.o.ledger.getRun(this.o.runId))?.coordinatorEpoch ?? 0, 0);
    for (const m of messages) await this.take(m, epoch);
    return messages.length;
  }

  /** Claim a received item; a message for an item that is not Pending is deleted (see the queue rule). */
  private async take(m: QueueMessage, epoch: number): Promise<void> {
    const out = await this.o.ledger.cas(claim(m.runId, m.itemId, this.id, epoch, this.clock.now()), this.clock.now());
    if (out.ok) {
      this.backlog.push({ itemId: m.itemId, message: m });
      await this.o.queue.extend(m, this.visibilitySeconds);
    } else if (out.current === null || out.current.state !== 'pending') {
      if (out.current?.worker === this.id && out.current.state === 'running' && !this.held.includes(m.itemId)) {
        this.backlog.push({ itemId: m.itemId, message: m }); // ours already (a redelivery to us)
      } else {
        await this.o.queue.delete(m);
      }
    }
  }

  private async execute(h: Held): Promise<void> {
    const { runId } = this.o;
    const started = await this.o.ledger.cas(start(runId, h.itemId, this.id, this.clock.now()), this.clock.now());
    if (!started.ok) {
      // Stolen before we started it (the thief runs it), or no longer ours.
      this.stats.lost++;
      if (h.message) await this.o.queue.delete(h.message);
      return;
    }
    const item = started.item;
    const abort = new AbortController();
    let settle!: (given: string | null) => void;
    this.current = { itemId: h.itemId, abort, done: new Promise((r) => (settle = r)) };
    let givenBack: string | null = null;
    const beat = setInterval(() => {
      void (async () => {
        const hb = await this.o.ledger.cas(heartbeat(runId, h.itemId, this.id, this.clock.now()), this.clock.now());
        if (!hb.ok) abort.abort(new Error(`claim on ${h.itemId} lost`));
        else if (h.message) await this.o.queue.extend(h.message, this.visibilitySeconds);
      })().catch((err: unknown) => this.logger.warn('heartbeat failed', { item: h.itemId, error: errorMessage(err) }));
    }, this.heartbeatMs);
    try {
      const payload = item.payload ?? (await this.o.ledger.get(runId, h.itemId))?.payload;
      let result: unknown;
      try {
        result = await this.o.backend(payload, abort.signal);
      } catch (err) {
        if (abort.signal.aborted && this.stopping) {
          // Drained mid-run: hand it back so another worker runs it now, not after the failure timeout.
          const back = await this.o.ledger.cas(nack(runId, h.itemId, this.id, 'drained'), this.clock.now());
          if (back.ok) {
            givenBack = h.itemId;
            if (h.message) await this.o.queue.release(h.message);
            else await this.o.queue.send(runId, [h.itemId]);
          }
          return;
        }
        if (abort.signal.aborted) {
          this.stats.lost++;
          return;
        }
        // The backend failed: give the item back; its message returns (and after maxReceiveCount goes to the DLQ).
        this.stats.failedRuns++;
        const back = await this.o.ledger.cas(nack(runId, h.itemId, this.id, errorMessage(err)), this.clock.now());
        if (h.message) await (back.ok ? this.o.queue.release(h.message) : this.o.queue.delete(h.message));
        else if (back.ok) await this.o.queue.send(runId, [h.itemId]);
        return;
      }
      const done = await this.o.ledger.cas(ack(runId, h.itemId, this.id, result), this.clock.now());
      if (done.ok) this.stats.done++;
      else this.stats.lost++; // re-pended meanwhile: whoever holds it now records the result
      if (h.message) await this.o.queue.delete(h.message);
    } finally {
      clearInterval(beat);
      this.current = null;
      settle(givenBack);
    }
  }

  /** Adopt Running(me) items the worker does not hold: a steal whose notice was lost or rejected. */
  async reconcile(): Promise<boolean> {
    const mine = (await this.o.ledger.running(this.o.runId)).filter((i) => i.worker === this.id && !this.held.includes(i.id));
    for (const item of mine) {
      if (item.started) {
        // We started it in a previous life and no longer run it: give it back.
        const back = await this.o.ledger.cas(nack(this.o.runId, item.id, this.id, 'worker restarted'), this.clock.now());
        if (back.ok) await this.o.queue.send(this.o.runId, [item.id]);
      } else if (!this.held.includes(item.id)) {
        this.backlog.push({ itemId: item.id, message: null });
      }
    }
    return this.backlog.length > 0;
  }

  private async askForWork(): Promise<boolean> {
    const notice = await this.o.coordinator!.requestWork(this.id);
    if (!this.guard.accept(notice.epoch)) {
      // A deposed coordinator's late answer: ignore it. Items it moved to us are adopted by reconcile.
      this.stats.staleNotices++;
      return false;
    }
    for (const itemId of notice.items) if (!this.held.includes(itemId)) this.backlog.push({ itemId, message: null });
    this.stats.stolen += notice.items.length;
    return notice.items.length > 0;
  }

  /** Drain: stop pulling, abort the running item and give back everything held or running. Returns the ids given back. */
  async drain(): Promise<string[]> {
    this.stopping = true;
    const given: string[] = [];
    const running = this.current;
    if (running) {
      running.abort.abort(new Error('draining'));
      const back = await running.done;
      if (back) given.push(back);
    }
    for (const h of this.backlog.splice(0)) {
      const back = await this.o.ledger.cas(nack(this.o.runId, h.itemId, this.id, 'drained'), this.clock.now());
      if (!back.ok) continue;
      given.push(h.itemId);
      if (h.message) await this.o.queue.release(h.message);
      else await this.o.queue.send(this.o.runId, [h.itemId]);
    }
    return given;
  }
}
