import { setTimeout as sleep } from 'node:timers/promises';
import type { Span } from '@opentelemetry/api';
import { systemClock, type Clock } from '../clock.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import type { QueueMessage, WorkQueue } from '../queue/port.js';
import type { ExecutionBackend } from './backends.js';
import type { StealNotice } from './coordinator.js';
import { dispatch } from './dispatch.js';
import { EpochGuard } from './epoch-guard.js';
import { canonicalJson, MAX_RESULT_BYTES, type WorkItem } from './model.js';
import { heldBy, runningEntries } from './running.js';
import { PartialBatchError, refused, type ItemCasOutcome, type LedgerStore } from './store.js';
import { ack, claim, heartbeat, nack, reject, start, type ItemCas } from './transitions.js';
import { activeIn, failSpan, SPAN, startSpan } from '../tracing.js';

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
  /** Stamps what the worker writes (claimedAt, heartbeatAt). */
  clock?: Clock;
  /** What heartbeat rounds measure intervals on: a monotonic clock (performance.now) unless given. */
  monotonic?: Clock;
  logger?: Logger;
  /**
   * The longest a held item goes without a ledger write (a claim, a start or a
   * heartbeat): the coordinator's failure timeout must be longer. Messages
   * are extended to `visibilitySeconds` once fewer than two of these remain.
   */
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
  /**
   * Ask the coordinator for work as soon as the first look finds none. By
   * default a worker's first ask waits stealBackoffMs(1) (10–20 s, jittered)
   * from its start, long-polling meanwhile: a fleet started together would
   * otherwise ask in the same second, each ask a Lambda invocation, cold ones
   * reading the run's lease and racing to rebuild its steal hint. Once it has
   * worked, a worker that runs dry asks at once either way.
   */
  askAtStart?: boolean;
}

interface Held {
  readonly itemId: string;
  readonly message: QueueMessage | null;
  /** Started already (by the queue as it claimed, or before a store error interrupted its chunk): run it, no start CAS. */
  readonly started?: { readonly payload: unknown };
}

/** What became of an executed item, until the ledger has it. */
type Outcome =
  { readonly h: Held; readonly kind: 'result'; readonly result: unknown } | { readonly h: Held; readonly kind: 'failure'; readonly reason: string };

export interface WorkerStats {
  done: number;
  /** Items whose claim was lost while held or running (stolen, re-pended): someone else records the result. */
  lost: number;
  stolen: number;
  failedRuns: number;
  /** Items that ran but whose result could not be recorded (too large, not JSON): Failed with the reason. */
  rejected: number;
  staleNotices: number;
  /** Steps that failed on a store or queue error and were retried after a backoff. */
  errors: number;
  /** Steal requests the coordinator did not answer (refused, unreachable): the worker long-polled instead. */
  stealErrors: number;
  /** Rounds the store throttled (in part or whole): each halves the receive batch and pauses (slowDown). */
  throttledRounds: number;
}

/**
 * Ends a `run.item` span with what became of the item's run (README,
 * "Operating": traces). Only a backend's own failure is the span's error: a
 * run stopped because the claim was lost or the worker drained did nothing wrong.
 */
function endItem(span: Span, outcome: 'ok' | 'failed' | 'lost' | 'drained', err?: unknown): void {
  span.setAttribute('run.item.outcome', outcome);
  if (outcome === 'failed') failSpan(span, err);
  span.end();
}

/**
 * Heartbeat rounds per heartbeat interval. Each writes the held items whose
 * last write is at least an interval less one round old: by the next round
 * they would be past the interval. More rounds, fewer writes (an item's writes
 * come closer to one per interval) but more wake-ups.
 */
export const HEARTBEAT_ROUNDS = 4;

/** How long a worker goes on with the run record it read (the coordinator epoch it stamps on claims). */
export const RUN_RECORD_TTL_MS = 60_000;

/** Whether a held item is due a heartbeat write `now`, last written at `wrote` (ms, one clock). */
export function heartbeatDue(now: number, wrote: number, heartbeatMs: number): boolean {
  return now - wrote >= heartbeatMs - heartbeatMs / HEARTBEAT_ROUNDS;
}

/**
 * Whether a held message's visibility is extended `now`: fewer than two
 * heartbeat intervals of it remain, and it was not extended within the last
 * interval less one round (a visibility shorter than two intervals is then
 * extended about once an interval, not every round).
 */
export function extensionDue(now: number, visibleUntil: number, visibilityMs: number, heartbeatMs: number): boolean {
  return visibleUntil - now < 2 * heartbeatMs && heartbeatDue(now, visibleUntil - visibilityMs, heartbeatMs);
}

/** Backoff after consecutive failed steps: 250 ms doubling to 30 s, each drawn from [½, 1] of that (jitter). */
export function backoffMs(failures: number, random: () => number = Math.random): number {
  const cap = Math.min(30_000, 250 * 2 ** Math.min(Math.max(failures, 1) - 1, 10));
  return Math.round(cap * (0.5 + random() / 2));
}

/**
 * How long an idle worker waits before asking the coordinator again after an
 * ask that found nothing: 20 s doubling to 5 min, each drawn from [½, 1] of
 * that (jitter, so a fleet that ran dry together does not ask together). New
 * work reaches an idle worker through the queue it long-polls, not through
 * asking harder; a worker that runs dry after working asks at once.
 */
export function stealBackoffMs(fruitless: number, random: () => number = Math.random): number {
  const cap = Math.min(300_000, 20_000 * 2 ** Math.min(Math.max(fruitless, 1) - 1, 10));
  return Math.round(cap * (0.5 + random() / 2));
}

export class Worker {
  readonly guard = new EpochGuard();
  /** Heartbeat rounds over everything held, by result (rollout_worker_heartbeats_total). */
  readonly beats = { ok: 0, failed: 0 };
  readonly stats: WorkerStats = { done: 0, lost: 0, stolen: 0, failedRuns: 0, rejected: 0, staleNotices: 0, errors: 0, stealErrors: 0, throttledRounds: 0 };
  /** Receive batch and pause, adapted to throttling (slowDown, speedUp). */
  private readonly pace: { batch: number; pauseMs: number };
  /** When a failed steal request was last logged: at most one warning a minute. */
  private stealErrorLoggedAt = Number.NEGATIVE_INFINITY;
  /** Asks that found nothing since work last came, and when the next ask is due (stealBackoffMs). */
  private fruitlessAsks = 0;
  private nextAskAt = 0;
  /**
   * Whether the ledger may hold Running(me) items this worker does not know
   * of: at start (a previous life's), after an ask whose answer was lost or
   * refused (a steal committed for us but never delivered), and after a
   * failed step. Only then is the running set read, not on every idle step.
   */
  private reconcileDue = true;
  private readonly backlog: Held[] = [];
  /** Started items of the chunk being run that have no outcome yet. */
  private readonly executing = new Map<string, Held>();
  /** Executed items whose outcome is not in the ledger yet (recorded in batches; kept across a store error). */
  private readonly outcomes: Outcome[] = [];
  /** Items found lost by a heartbeat while executing: skipped, or aborted if running now. */
  private readonly lostIds = new Set<string>();
  /**
   * Per held item: when this worker last wrote it (before the write was sent:
   * a lower bound) and until when its message is invisible, on the monotonic
   * clock. No entry, or -Infinity: not known, so due at the next round.
   */
  private readonly marks = new Map<string, { wrote: number; visibleUntil: number }>();
  /** The items the last round saw held: a mark is forgotten once two rounds in a row have not (a chunk being started is in neither list for a moment). */
  private heldAtLastRound = new Set<string>();
  private readonly clock: Clock;
  private readonly monotonic: Clock;
  private readonly logger: Logger;
  private readonly heartbeatMs: number;
  private readonly visibilitySeconds: number;
  private readonly chunkBudgetMs: number;
  private readonly maxChunk: number;
  /** Moving average of one item's execution time; null until measured. */
  private itemMs: number | null = null;
  private stopping = false;
  /** The run's coordinator epoch as last read, and when (monotonic clock). */
  private epochRead: { readonly epoch: number; readonly at: number } | null = null;
  /** The chunk being executed: a drain aborts its current item and waits for what it gave back. */
  private current: { readonly abort: (reason: Error) => void; readonly done: Promise<string[]>; itemId: string | null } | null = null;
  /** Heartbeats run while the worker is active (its run loop, or a chunk being executed). */
  private active = 0;
  private beat: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly o: WorkerOptions) {
    if (!o.workerId.trim()) throw new Error('invalid worker config: workerId: must not be empty');
    this.clock = o.clock ?? systemClock;
    this.monotonic = o.monotonic ?? { now: () => performance.now() };
    this.logger = o.logger ?? silentLogger;
    this.heartbeatMs = o.heartbeatMs ?? 5_000;
    this.visibilitySeconds = o.visibilitySeconds ?? 30;
    this.chunkBudgetMs = o.chunkBudgetMs ?? 100;
    this.maxChunk = o.maxChunk ?? 64;
    this.pace = { batch: o.receiveBatch ?? 10, pauseMs: 0 };
    if (!o.askAtStart) this.nextAskAt = this.clock.now() + stealBackoffMs(1);
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
    this.reconcileDue = false;
  }

  /** Items claimed and not yet started, in order. */
  get held(): readonly string[] {
    return this.backlog.map((h) => h.itemId);
  }

  /** One unit of work: record what is unrecorded, run the next chunk of held items, else receive, else reconcile and ask for work. */
  async step(signal?: AbortSignal): Promise<'ran' | 'received' | 'stole' | 'idle'> {
    if (this.stopping) return 'idle';
    if (this.outcomes.length) {
      await this.flush();
      return 'ran';
    }
    if (this.backlog.length) {
      await this.executeChunk();
      return 'ran';
    }
    // Just ran dry: look without waiting, then adopt or steal, and only then long-poll —
    // an idle worker must not sit out a 20 s poll while others hold a backlog.
    const wait = this.o.waitSeconds ?? 20;
    if ((await this.pull(signal, 0)) > 0) return this.workCame('received');
    if (signal?.aborted) return 'idle';
    if (this.reconcileDue) {
      // Cleared once it has read the ledger: a reconcile that failed is tried again at the next idle step.
      const adopted = await this.reconcile();
      this.reconcileDue = false;
      if (adopted) return this.workCame('stole');
    }
    // A steal is a shortcut, not a need: a coordinator that cannot answer (refused, unreachable) leaves the long poll, and the
    // check that the run is done, to go on as usual.
    if (this.o.coordinator && this.clock.now() >= this.nextAskAt) {
      if (await this.askForWork().catch((err: unknown) => this.stealFailed(err))) return this.workCame('stole');
      this.nextAskAt = this.clock.now() + stealBackoffMs(++this.fruitlessAsks);
    }
    // The poll ends by the next ask's time, so asks keep their jitter instead of falling on poll boundaries (a fleet
    // started together would otherwise ask together, one poll after its start).
    const untilAsk = this.o.coordinator ? Math.max(1, Math.ceil((this.nextAskAt - this.clock.now()) / 1000)) : wait;
    if (wait > 0 && (await this.pull(signal, Math.min(wait, untilAsk))) > 0) return this.workCame('received');
    return 'idle';
  }

  /**
   * Step until `signal` aborts or the worker drains. `idle` is called when a
   * step found nothing to do (after the long poll), e.g. to stop once the
   * run is finished. A failed step (a store or queue error, a malformed
   * answer) is logged and retried after a jittered backoff; it never ends the
   * loop.
   */
  async run(signal: AbortSignal, idle?: () => Promise<boolean>): Promise<void> {
    this.activate();
    let failures = 0;
    try {
      while (!signal.aborted && !this.stopping) {
        try {
          const did = await this.step(signal);
          failures = 0;
          if (did === 'idle' && idle && (await idle())) return;
        } catch (err) {
          if (signal.aborted || this.stopping) return;
          if (refused(err)) this.slowDown();
          // A write whose answer was lost may have made an item ours (a claim): the next idle step reads the ledger.
          // A refusal (throttling, contention) applied nothing: no such item, and no read of the running set.
          else this.reconcileDue = true;
          failures++;
          this.stats.errors++;
          const waitMs = backoffMs(failures);
          const detail = { workerId: this.id, error: errorMessage(err), failures, waitMs };
          if (failures >= 5) this.logger.error('worker step failed again; retrying', detail);
          else this.logger.warn('worker step failed; retrying', detail);
          await sleep(waitMs, undefined, { signal }).catch(() => undefined);
        }
      }
    } finally {
      this.deactivate();
    }
  }

  /** Receive a batch and claim what can be claimed; returns how many messages arrived. */
  async pull(signal?: AbortSignal, waitSeconds = this.o.waitSeconds ?? 20): Promise<number> {
    // Throttled lately: fewer messages a receive, after a pause (see slowDown).
    if (this.pace.pauseMs > 0) await sleep(this.pace.pauseMs, undefined, signal ? { signal } : undefined).catch(() => undefined);
    const batch = Math.min(this.o.receiveBatch ?? 10, this.pace.batch);
    // Items known to be fast and a whole batch fits in one chunk: ask the queue to start them as it claims them.
    const startNow = this.itemMs !== null && this.chunkSize() >= batch;
    let messages: QueueMessage[];
    // A queue that claims as it delivers wrote the items during the receive: no earlier than this.
    const asked = this.monotonic.now();
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
      if (!m.claimed || held.has(m.itemId)) continue;
      this.backlog.push({ itemId: m.itemId, message: m, ...(m.started ? { started: { payload: m.payload } } : {}) });
      this.wrote(m.itemId, asked);
    }
    if (!unclaimed.length) return messages.length;
    const epoch = await this.runEpoch();
    const now = this.clock.now();
    const sent = this.monotonic.now();
    let outs: readonly (ItemCasOutcome | undefined)[];
    let partial: PartialBatchError<ItemCasOutcome> | null = null;
    try {
      outs = await this.o.ledger.casMany(
        unclaimed.map((m) => claim(m.runId, m.itemId, this.id, epoch, now)),
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
        this.backlog.push(h);
        this.wrote(m.itemId, sent);
        extend.push(h);
      } else if (out.current?.worker === this.id && out.current.state === 'running' && !held.has(m.itemId)) {
        this.backlog.push({ itemId: m.itemId, message: m }); // ours already (a redelivery to us); when last written is not known
      } else if (out.current === null || out.current.state !== 'pending') {
        drop.push(m); // see the queue rule
      }
    });
    await Promise.all([this.extendAll(extend), ...drop.map((m) => this.o.queue.delete(m))]);
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
  private slowDown(): void {
    this.pace.batch = Math.max(1, Math.floor(this.pace.batch / 2));
    this.pace.pauseMs = Math.min(2_000, Math.max(100, this.pace.pauseMs * 2));
    this.stats.throttledRounds++;
  }

  private speedUp(): void {
    this.pace.batch = Math.min(this.o.receiveBatch ?? 10, this.pace.batch + 1);
    this.pace.pauseMs = 0;
  }

  /**
   * A heartbeat round over everything held — waiting, executing and
   * executed-but-unrecorded: the items due (heartbeatDue) written in one round
   * trip, the messages due (extensionDue) extended. An item whose heartbeat
   * is refused was taken from us (stolen, re-pended): dropped if it waits,
   * aborted if it runs.
   */
  heartbeat(): Promise<void> {
    this.beating ??= this.beatOnce()
      .then(
        (wrote) => void (wrote && this.beats.ok++),
        (err: unknown) => {
          this.beats.failed++;
          throw err;
        },
      )
      .finally(() => (this.beating = null));
    return this.beating;
  }

  /** One round; whether it wrote anything. */
  private async beatOnce(): Promise<boolean> {
    const byId = new Map<string, Held>();
    for (const h of [...this.backlog, ...this.executing.values(), ...this.outcomes.map((o) => o.h)]) byId.set(h.itemId, h);
    for (const id of this.marks.keys()) if (!byId.has(id) && !this.heldAtLastRound.has(id)) this.marks.delete(id);
    this.heldAtLastRound = new Set(byId.keys());
    const held = [...byId.values()];
    if (!held.length) return false;
    const sent = this.monotonic.now();
    const due = held.filter((h) => heartbeatDue(sent, this.marks.get(h.itemId)?.wrote ?? Number.NEGATIVE_INFINITY, this.heartbeatMs));
    const at = this.clock.now();
    const outs = due.length
      ? await this.o.ledger.applyMany(
          due.map((h) => heartbeat(this.o.runId, h.itemId, this.id, at)),
          at,
        )
      : [];
    const gone: QueueMessage[] = [];
    const lost = new Set<string>();
    due.forEach((h, i) => {
      if (outs[i]) {
        this.wrote(h.itemId, sent);
        return;
      }
      lost.add(h.itemId);
      // Refused: no longer Running(us) — unless it finished meanwhile, which is not a loss.
      const waiting = this.backlog.findIndex((b) => b.itemId === h.itemId);
      if (waiting >= 0) {
        this.backlog.splice(waiting, 1);
        this.stats.lost++;
        if (h.message) gone.push(h.message);
      } else if (this.executing.has(h.itemId)) {
        this.lostIds.add(h.itemId);
        if (this.current?.itemId === h.itemId) this.current.abort(new Error(`claim on ${h.itemId} lost`));
      }
    });
    const now = this.monotonic.now();
    const extend = held.filter(
      (h) =>
        h.message &&
        !lost.has(h.itemId) &&
        extensionDue(now, this.marks.get(h.itemId)?.visibleUntil ?? Number.NEGATIVE_INFINITY, this.visibilitySeconds * 1000, this.heartbeatMs),
    );
    await Promise.all([this.extendAll(extend), ...(gone.length ? [this.o.queue.deleteMany(gone)] : [])]);
    return due.length > 0;
  }

  /**
   * The run's coordinator epoch, stamped on claims. Informational (no decision
   * reads it back), so read at most once per RUN_RECORD_TTL_MS: a fleet
   * reading the run's one record per received batch made it a hot key.
   */
  private async runEpoch(): Promise<number> {
    const now = this.monotonic.now();
    if (this.epochRead && now - this.epochRead.at < RUN_RECORD_TTL_MS) return this.epochRead.epoch;
    const epoch = Math.max((await this.o.ledger.getRun(this.o.runId))?.coordinatorEpoch ?? 0, 0);
    this.epochRead = { epoch, at: now };
    return epoch;
  }

  /** This worker wrote the item (a claim, a start, a heartbeat), the write sent at `at` (the monotonic clock). */
  private wrote(itemId: string, at: number): void {
    const m = this.marks.get(itemId);
    if (m) m.wrote = Math.max(m.wrote, at);
    else this.marks.set(itemId, { wrote: at, visibleUntil: Number.NEGATIVE_INFINITY });
  }

  /** Keep the held items' messages invisible for `visibilitySeconds` more; each one's mark moves as its extension lands. */
  private async extendAll(held: readonly Held[]): Promise<void> {
    if (this.o.queue.deliversFromLedger) return; // its rows are the messages: nothing to keep invisible
    const at = this.monotonic.now();
    await Promise.all(
      held.map(async (h) => {
        if (!h.message) return;
        await this.o.queue.extend(h.message, this.visibilitySeconds);
        const m = this.marks.get(h.itemId);
        if (m) m.visibleUntil = at + this.visibilitySeconds * 1000;
        else this.marks.set(h.itemId, { wrote: Number.NEGATIVE_INFINITY, visibleUntil: at + this.visibilitySeconds * 1000 });
      }),
    );
  }

  private activate(): void {
    if (this.active++ === 0) {
      this.beat = setInterval(() => {
        void this.heartbeat().catch((err: unknown) => this.logger.warn('heartbeat failed', { workerId: this.id, error: errorMessage(err) }));
      }, this.heartbeatMs / HEARTBEAT_ROUNDS);
      this.beat.unref?.();
    }
  }

  private deactivate(): void {
    if (--this.active === 0 && this.beat) {
      clearInterval(this.beat);
      this.beat = null;
    }
  }

  private chunkSize(): number {
    if (this.itemMs === null) return 1;
    return Math.max(1, Math.min(this.maxChunk, Math.floor(this.chunkBudgetMs / Math.max(this.itemMs, 0.01))));
  }

  private executeChunk(): Promise<void> {
    // Items started already are run now, whatever the chunk size.
    const preStarted = this.backlog.findIndex((h) => !h.started);
    const chunk = this.backlog.splice(0, preStarted === 0 ? this.chunkSize() : preStarted === -1 ? this.backlog.length : preStarted);
    // One controller for the item being run; replaced only after it fired (a lost claim), so a
    // chunk of fast items does not allocate a signal per item.
    const ctl = { c: new AbortController() };
    this.activate();
    const done = this.runChunk(chunk, ctl);
    this.current = { abort: (reason) => ctl.c.abort(reason), done, itemId: null };
    return done.then(
      () => {
        this.current = null;
        this.deactivate();
      },
      (err: unknown) => {
        this.current = null;
        this.deactivate();
        throw err;
      },
    );
  }

  /**
   * The chunk's start CASes. When the round fails part way (a store refusing
   * on a hot key past its retries, an outage), some starts may have landed:
   * the chunk goes back to the backlog as the ledger has it — started by us
   * (run it, no second start), still unstarted (start it again), or no longer
   * ours — and the step fails and backs off. Left to reconcile, a started item
   * would be given back as if it had died running (an attempt counted toward
   * poison) though nothing ran it.
   */
  private async startRound(chunk: readonly Held[], toStart: readonly Held[], now: number): Promise<ItemCasOutcome[]> {
    const { runId } = this.o;
    try {
      return await this.o.ledger.casMany(
        toStart.map((h) => start(runId, h.itemId, this.id, now)),
        now,
      );
    } catch (err) {
      const back: Held[] = [];
      for (const h of chunk) {
        if (h.started) {
          back.push(h);
          continue;
        }
        const item = await this.o.ledger.get(runId, h.itemId).catch(() => undefined);
        // Unknown (the store is down): keep it unstarted; a start CAS that finds it started by us then loses it to the scan, counted.
        if (item === undefined) back.push(h);
        else if (item?.state === 'running' && item.worker === this.id) back.push(item.started ? { ...h, started: { payload: item.payload } } : h);
        else this.stats.lost++;
      }
      this.backlog.unshift(...back);
      throw err;
    }
  }

  /** Start the chunk in one round trip, run its items one by one, record outcomes in batches. Returns the ids given back by a drain. */
  private async runChunk(chunk: Held[], ctl: { c: AbortController }): Promise<string[]> {
    const { runId } = this.o;
    const now = this.clock.now();
    const toStart = chunk.filter((h) => !h.started);
    const sent = this.monotonic.now();
    const startOuts = toStart.length ? await this.startRound(chunk, toStart, now) : [];
    const todo: { h: Held; payload: unknown }[] = chunk.flatMap((h) => (h.started ? [{ h, payload: h.started.payload }] : []));
    const gone: QueueMessage[] = [];
    toStart.forEach((h, i) => {
      const out = startOuts[i]!;
      if (out.ok) {
        todo.push({ h, payload: out.item.payload });
        this.wrote(h.itemId, sent);
      } else {
        // Stolen before we started it (the thief runs it), or no longer ours.
        this.stats.lost++;
        if (h.message) gone.push(h.message);
      }
    });
    this.lostIds.clear();
    for (const t of todo) this.executing.set(t.h.itemId, { ...t.h, started: { payload: t.payload } });
    const given: string[] = [];
    let lastFlush = performance.now();
    try {
      await this.deleteAll(gone);
      for (const [n, t] of todo.entries()) {
        const id = t.h.itemId;
        if (this.stopping) {
          // Drained: the rest of the chunk was started but never run; give it all back now.
          given.push(...(await this.giveBack(todo.slice(n).map((x) => x.h))));
          for (const x of todo.slice(n)) this.executing.delete(x.h.itemId);
          break;
        }
        if (this.lostIds.has(id)) {
          this.stats.lost++;
          this.executing.delete(id);
          continue;
        }
        if (this.outcomes.length && performance.now() - lastFlush >= this.chunkBudgetMs) {
          await this.flush();
          lastFlush = performance.now();
        }
        if (ctl.c.signal.aborted && !this.stopping) ctl.c = new AbortController();
        if (this.current) this.current.itemId = id;
        const signal = ctl.c.signal;
        const began = performance.now();
        const payload = t.payload ?? (await this.o.ledger.get(runId, id))?.payload;
        const item = { runId: t.h.message?.runId ?? runId, itemId: id, attempt: t.h.message?.receiveCount ?? null };
        const span = startSpan(SPAN.item, { 'run.id': item.runId, 'run.item.id': id, 'run.item.attempt': item.attempt ?? undefined, 'worker.id': this.id });
        try {
          const result = await activeIn(span, () => this.o.backend(payload, signal, item));
          endItem(span, 'ok');
          this.executing.delete(id);
          this.outcomes.push({ h: t.h, kind: 'result', result });
          const took = performance.now() - began;
          this.itemMs = this.itemMs === null ? took : this.itemMs * 0.8 + took * 0.2;
        } catch (err) {
          endItem(span, signal.aborted ? (this.stopping ? 'drained' : 'lost') : 'failed', err);
          if (signal.aborted && this.stopping) {
            // Drained mid-run: hand it back so another worker runs it now, not after the failure timeout.
            given.push(...(await this.giveBack(todo.slice(n).map((x) => x.h))));
            for (const x of todo.slice(n)) this.executing.delete(x.h.itemId);
            break;
          }
          this.executing.delete(id);
          if (signal.aborted) {
            this.stats.lost++;
            continue;
          }
          // The backend failed: give the item back now (it counts toward poison).
          this.stats.failedRuns++;
          this.itemMs = this.itemMs ?? performance.now() - began;
          this.outcomes.push({ h: t.h, kind: 'failure', reason: errorMessage(err) });
          await this.flush();
        }
      }
      await this.flush();
    } catch (err) {
      // A store or queue error: the chunk's unrun items go back to the front of the line, still
      // started and heartbeated, and are run at the next step; outcomes wait to be recorded.
      const unrun = todo.filter((t) => this.executing.has(t.h.itemId)).map((t) => this.executing.get(t.h.itemId)!);
      this.backlog.unshift(...unrun);
      throw err;
    } finally {
      this.executing.clear();
    }
    return given;
  }

  /**
   * Record executed items: results as acks (or, when a result cannot be
   * stored, as a rejection that fails the item with the reason), backend
   * failures as nacks that count toward poison. An outcome leaves the list
   * only once the ledger has answered for it.
   */
  private flush(): Promise<void> {
    // One at a time: a drain records outcomes while the loop may be recording them too.
    const next = this.flushing.then(() => this.flushOnce());
    this.flushing = next.catch(() => undefined);
    return next;
  }

  private async flushOnce(): Promise<void> {
    if (!this.outcomes.length) return;
    const { runId } = this.o;
    const batch = this.outcomes.slice();
    const results = batch.filter((o): o is Extract<Outcome, { kind: 'result' }> => o.kind === 'result');
    const failures = batch.filter((o): o is Extract<Outcome, { kind: 'failure' }> => o.kind === 'failure');
    const now = this.clock.now();
    if (results.length) {
      const changes = results.map((r) => this.recordable(r));
      let outs: readonly (boolean | undefined)[];
      let partial: PartialBatchError<boolean> | null = null;
      try {
        outs = await this.o.ledger.applyMany(changes, now);
      } catch (err) {
        if (!(err instanceof PartialBatchError)) throw err;
        partial = err as PartialBatchError<boolean>;
        outs = partial.outcomes;
      }
      // Those answered leave the list; the others are recorded at a later flush.
      const answered = results.filter((_, i) => outs[i] !== undefined);
      this.forget(answered);
      // Lost: re-pended meanwhile; whoever holds it now records the result.
      outs.forEach((ok, i) =>
        ok === undefined ? undefined : ok ? (changes[i]!.transition === 'reject' ? this.stats.rejected++ : this.stats.done++) : this.stats.lost++,
      );
      await this.deleteAll(answered.flatMap((r) => (r.h.message ? [r.h.message] : [])));
      if (partial) throw partial;
    }
    if (failures.length) {
      const outs = await this.o.ledger.casMany(
        failures.map((f) => nack(runId, f.h.itemId, this.id, f.reason, { counts: true })),
        now,
      );
      this.forget(failures);
      // Our message comes back (its receives count toward the DLQ); without one, or when it can no
      // longer be released (another worker deleted the copy it got), a new one is sent.
      const released: WorkItem[] = [];
      const resend: WorkItem[] = [];
      await Promise.all(
        failures.map(async (f, i) => {
          const out = outs[i]!;
          if (!out.ok) return f.h.message ? this.o.queue.delete(f.h.message) : undefined;
          if (!f.h.message) return resend.push(out.item);
          try {
            await this.o.queue.release(f.h.message);
            released.push(out.item);
          } catch (err) {
            this.logger.warn('releasing a message failed: sending a new one', { itemId: f.h.itemId, error: errorMessage(err) });
            resend.push(out.item);
          }
          return undefined;
        }),
      );
      if (released.length && !this.o.queue.deliversFromLedger) await this.o.ledger.markSent(runId, released, this.clock.now());
      await dispatch(this.o.ledger, this.o.queue, runId, resend, this.clock.now());
    }
  }

  /** An ack, unless the result cannot be stored: then a rejection naming why. */
  private recordable(r: { h: Held; result: unknown }): ItemCas {
    let canonical: string;
    try {
      canonical = canonicalJson(r.result);
    } catch (err) {
      return reject(this.o.runId, r.h.itemId, this.id, `result is not storable as JSON: ${errorMessage(err)}`);
    }
    const bytes = Buffer.byteLength(canonical);
    if (bytes > MAX_RESULT_BYTES) {
      return reject(
        this.o.runId,
        r.h.itemId,
        this.id,
        `result of ${bytes} bytes exceeds the limit of ${MAX_RESULT_BYTES} bytes: store it elsewhere (e.g. S3) and return a reference`,
      );
    }
    return ack(this.o.runId, r.h.itemId, this.id, r.result, canonical);
  }

  private forget(done: readonly Outcome[]): void {
    const set = new Set(done);
    for (let i = this.outcomes.length - 1; i >= 0; i--) if (set.has(this.outcomes[i]!)) this.outcomes.splice(i, 1);
  }

  private async deleteAll(messages: readonly QueueMessage[]): Promise<void> {
    if (messages.length) await this.o.queue.deleteMany(messages);
  }

  /**
   * Nack held items without counting an attempt (we chose to stop, the item
   * did nothing wrong) and make sure each has a message: on SQS a new one
   * (releasing ours would count a receive toward the DLQ), then ours is
   * deleted. Returns the ids given back.
   */
  private async giveBack(items: readonly Held[]): Promise<string[]> {
    if (!items.length) return [];
    const { runId } = this.o;
    const fromLedger = this.o.queue.deliversFromLedger === true;
    const now = this.clock.now();
    const outs = await this.o.ledger.casMany(
      items.map((h) => nack(runId, h.itemId, this.id, 'drained', { counts: false })),
      now,
    );
    const given = outs.flatMap((o) => (o.ok ? [o.item] : []));
    if (fromLedger) {
      if (given.length)
        await this.o.queue.send(
          runId,
          given.map((i) => i.id),
        ); // a wake-up
    } else {
      await dispatch(this.o.ledger, this.o.queue, runId, given, this.clock.now());
      await this.deleteAll(items.flatMap((h) => (h.message ? [h.message] : [])));
    }
    return given.map((i) => i.id);
  }

  /** Adopt Running(me) items the worker does not hold: a steal whose notice was lost or rejected. */
  async reconcile(): Promise<boolean> {
    const held = new Set([...this.held, ...this.outcomes.map((o) => o.h.itemId)]);
    const entries = (await runningEntries(this.o.ledger, this.o.runId)).filter((i) => i.worker === this.id && !held.has(i.id));
    const mine = await heldBy(this.o.ledger, this.o.runId, this.id, entries);
    const restarted = mine.filter((i) => i.started);
    if (restarted.length) {
      // We started these in a previous life and no longer run them: give them back. It may be what
      // killed us, so it counts toward poison.
      const now = this.clock.now();
      const outs = await this.o.ledger.casMany(
        restarted.map((i) => nack(this.o.runId, i.id, this.id, 'worker restarted while running it', { counts: true })),
        now,
      );
      await dispatch(
        this.o.ledger,
        this.o.queue,
        this.o.runId,
        outs.flatMap((o) => (o.ok ? [o.item] : [])),
        this.clock.now(),
      );
    }
    for (const item of mine) if (!item.started) this.backlog.push({ itemId: item.id, message: null });
    return this.backlog.length > 0;
  }

  /** Work came: once this worker runs dry again, it asks at once. */
  private workCame<T>(did: T): T {
    this.fruitlessAsks = 0;
    this.nextAskAt = 0;
    return did;
  }

  private stealFailed(err: unknown): false {
    // The ask may have been answered and the answer lost: what it moved to us is found by reading the ledger.
    // Not when Lambda refused the invocation (its concurrency spent): it never ran, and a fleet whose asks are
    // refused would otherwise all read the running set at once.
    if ((err as { name?: string }).name !== 'TooManyRequestsException') this.reconcileDue = true;
    this.stats.stealErrors++;
    const now = this.clock.now();
    if (now - this.stealErrorLoggedAt >= 60_000) {
      this.stealErrorLoggedAt = now;
      this.logger.warn('asking the coordinator for work failed; long-polling instead', { failures: this.stats.stealErrors, error: errorMessage(err) });
    }
    return false;
  }

  private async askForWork(): Promise<boolean> {
    const notice = await this.o.coordinator!.requestWork(this.id);
    if (!this.guard.accept(notice.epoch)) {
      // A deposed coordinator's late answer: ignore it. Items it moved to us are adopted by reconcile.
      this.stats.staleNotices++;
      this.reconcileDue = true;
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
    // Executed items keep their results: record them rather than run them again elsewhere.
    await this.flush().catch((err: unknown) => this.logger.warn('recording results before the drain failed', { error: errorMessage(err) }));
    given.push(...(await this.giveBack(this.backlog.splice(0))));
    return given;
  }
}
