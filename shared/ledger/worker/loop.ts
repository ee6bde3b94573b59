import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../../log.js';
import type { EpochGuard } from '../epoch-guard.js';
import { refused } from '../store.js';
import { Chunks } from './chunk.js';
import { Claims } from './claim.js';
import { WorkerContext } from './context.js';
import { Flusher } from './flush.js';
import { giveBack } from './give-back.js';
import { Heartbeats } from './heartbeat.js';
import type { WorkerOptions, WorkerStats } from './options.js';
import { Steals } from './steal.js';

/**
 * A worker of one run: pulls item ids from the queue, claims each in the
 * ledger, marks it started, runs it on a backend, submits the result, then
 * deletes the message. When idle it asks the coordinator for work (first
 * 10–20 s after its start, then at once each time it runs dry after working),
 * less and less often while none comes (stealBackoffMs), and reconciles with
 * the ledger (adopts any Running(itself) item it does not hold) only when that
 * may find something: at start unless its registration is new (firstLife),
 * after an ask whose answer was lost, and after a failed step that was not a
 * refusal (a claim whose answer was lost).
 *
 * Queue rule: a message matters only while its item is Pending; whoever puts
 * an item back to Pending makes sure it has a message (a nack releases ours or
 * sends a new one, the coordinator's failure scan re-sends, and its scan sends
 * whatever was stored but never sent). So a message whose item is Running
 * elsewhere, Done or Failed is deleted.
 *
 * Liveness: everything the worker holds — claimed and waiting, executing,
 * executed but not yet recorded — is written to the ledger at least once every
 * `heartbeatMs` while the worker runs, so a deep backlog never ages into a
 * re-pend. A claim and a start are writes too: a heartbeat round (four per
 * interval) writes only the items that would otherwise go longer than the
 * interval without one, so an item that is claimed, started and acked within
 * an interval costs no heartbeat at all. A held item's message is kept
 * invisible the same way: extended (in batches: the SQS queue sends the
 * extensions of one round ten to a request) only once fewer than two
 * intervals of its visibility remain. A store or queue error does not end
 * the worker: `run` logs it, backs off (jittered, capped) and goes on, and
 * what it held is kept (results are recorded later, unrun items run later).
 *
 * The parts, each with its own state: claims (claim.ts) fill the backlog,
 * chunks (chunk.ts) run it, the flusher (flush.ts) records outcomes,
 * heartbeats (heartbeat.ts) keep it all alive, steals (steal.ts) find work
 * when idle; what they share is the context's holdings (context.ts).
 */

/** How often an idle worker with an idle check (exitWhenDone) runs it: a second after its run's last item at most. */
export const IDLE_CHECK_SECONDS = 1;

/** Backoff after consecutive failed steps: 250 ms doubling to 30 s, each drawn from [½, 1] of that (jitter). */
export function backoffMs(failures: number, random: () => number = Math.random): number {
  const cap = Math.min(30_000, 250 * 2 ** Math.min(Math.max(failures, 1) - 1, 10));
  return Math.round(cap * (0.5 + random() / 2));
}

export class Worker {
  readonly guard: EpochGuard;
  /** Heartbeat rounds over everything held, by result (rollout_worker_heartbeats_total). */
  readonly beats: { ok: number; failed: number };
  readonly stats: WorkerStats;
  private readonly w: WorkerContext;
  private readonly heartbeats: Heartbeats;
  private readonly flusher: Flusher;
  private readonly chunks: Chunks;
  private readonly claims: Claims;
  private readonly steals: Steals;
  /**
   * With an `idle` check (run's), the longest an idle worker waits between
   * checks: a run finished by another worker's last ack wakes no one's poll,
   * so a worker that exits when its run is done finds out within this long.
   */
  private idleCheckSeconds: number | null = null;

  constructor(private readonly o: WorkerOptions) {
    this.w = new WorkerContext(o);
    this.heartbeats = new Heartbeats(this.w);
    this.flusher = new Flusher(this.w);
    this.chunks = new Chunks(this.w, this.heartbeats, this.flusher);
    this.claims = new Claims(this.w, this.heartbeats, this.chunks);
    this.steals = new Steals(this.w);
    this.guard = this.steals.guard;
    this.beats = this.heartbeats.rounds;
    this.stats = this.w.stats;
  }

  get id(): string {
    return this.o.workerId;
  }

  /**
   * This worker id never registered for this run before (Registered.known
   * false): nothing in the ledger can be Running(it) yet, so the start needs
   * no reconcile. A fleet starting together would otherwise read the whole
   * running set once per worker. Items a previous life held under the same id
   * on another instance are not adopted; the failure scan re-pends them once
   * their heartbeats stop.
   */
  firstLife(): void {
    this.steals.reconcileDue = false;
  }

  /** Items claimed and not yet started, in order. */
  get held(): readonly string[] {
    return this.w.held.waiting();
  }

  /** One unit of work: record what is unrecorded, run the next chunk of held items, else receive, else reconcile and ask for work. */
  async step(signal?: AbortSignal): Promise<'ran' | 'received' | 'stole' | 'idle'> {
    if (this.w.stopping) return 'idle';
    if (this.flusher.pending) {
      await this.flusher.flush();
      return 'ran';
    }
    if (this.w.held.backlog.length) {
      await this.chunks.execute();
      return 'ran';
    }
    const steals = this.steals;
    // Just ran dry: look without waiting, then adopt or steal, and only then long-poll —
    // an idle worker must not sit out a 20 s poll while others hold a backlog.
    const wait = this.o.waitSeconds ?? 20;
    if ((await this.pull(signal, 0)) > 0) return steals.workCame('received');
    if (signal?.aborted) return 'idle';
    if (steals.reconcileDue) {
      // Cleared once it has read the ledger: a reconcile that failed is tried again at the next idle step.
      const adopted = await steals.reconcile();
      steals.reconcileDue = false;
      if (adopted) return steals.workCame('stole');
    }
    if (steals.askDue && (await steals.ask())) return steals.workCame('stole');
    const poll = this.idleCheckSeconds === null ? steals.pollSeconds(wait) : Math.min(steals.pollSeconds(wait), this.idleCheckSeconds);
    if (wait > 0 && (await this.pull(signal, poll)) > 0) return steals.workCame('received');
    return 'idle';
  }

  /**
   * Step until `signal` aborts or the worker drains. `idle` is called when a
   * step found nothing to do (after the long poll, then at most
   * IDLE_CHECK_SECONDS long), e.g. to stop once the run is finished. A failed step (a store or queue error, a malformed
   * answer) is logged and retried after a jittered backoff; it never ends the
   * loop.
   */
  async run(signal: AbortSignal, idle?: () => Promise<boolean>): Promise<void> {
    this.heartbeats.activate();
    this.idleCheckSeconds = idle ? IDLE_CHECK_SECONDS : null;
    let failures = 0;
    try {
      while (!signal.aborted && !this.w.stopping) {
        try {
          const did = await this.step(signal);
          failures = 0;
          if (did === 'idle' && idle && (await idle())) return;
        } catch (err) {
          if (signal.aborted || this.w.stopping) return;
          if (refused(err)) this.claims.slowDown();
          // A write whose answer was lost may have made an item ours (a claim): the next idle step reads the ledger.
          // A refusal (throttling, contention) applied nothing: no such item, and no read of the running set.
          else this.steals.reconcileDue = true;
          failures++;
          this.stats.errors++;
          const waitMs = backoffMs(failures);
          const detail = { workerId: this.id, error: errorMessage(err), failures, waitMs };
          if (failures >= 5) this.w.logger.error('worker step failed again; retrying', detail);
          else this.w.logger.warn('worker step failed; retrying', detail);
          await sleep(waitMs, undefined, { signal }).catch(() => undefined);
        }
      }
    } finally {
      this.heartbeats.deactivate();
    }
  }

  /** Receive a batch and claim what can be claimed; returns how many messages arrived. */
  pull(signal?: AbortSignal, waitSeconds = this.o.waitSeconds ?? 20): Promise<number> {
    return this.claims.pull(signal, waitSeconds);
  }

  /** A heartbeat round over everything held (Heartbeats.heartbeat). */
  heartbeat(): Promise<void> {
    return this.heartbeats.heartbeat();
  }

  /** Adopt Running(me) items the worker does not hold: a steal whose notice was lost or rejected. */
  reconcile(): Promise<boolean> {
    return this.steals.reconcile();
  }

  /** Drain: stop pulling, abort the running item and give back everything held or running. Returns the ids given back. */
  async drain(): Promise<string[]> {
    this.w.stopping = true;
    const given: string[] = [];
    const running = this.w.held.current;
    if (running) {
      running.abort(new Error('draining'));
      given.push(...(await running.done.catch(() => [])));
    }
    // Executed items keep their results: record them rather than run them again elsewhere.
    await this.flusher.flush().catch((err: unknown) => this.w.logger.warn('recording results before the drain failed', { error: errorMessage(err) }));
    given.push(...(await giveBack(this.w, this.w.held.backlog.splice(0))));
    return given;
  }
}
