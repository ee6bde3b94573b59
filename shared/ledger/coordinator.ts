import { systemClock, type Clock } from '../clock.js';
import type { EventBus } from '../events/bus.js';
import type { LeaderElector } from '../lease/elector.js';
import { FencedError } from '../lease/fencing.js';
import type { LeaseToken } from '../lease/record.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import { dispatch } from './dispatch.js';
import { MAX_ATTEMPTS, type WorkItem } from './model.js';
import type { QueueMessage, WorkQueue } from '../queue/port.js';
import { HeartbeatWatch } from './staleness.js';
import { heldBy, runningEntries } from './running.js';
import type { LedgerStore, PendingEntry, RunningEntry } from './store.js';
import { hintFresh, STEAL_HINT_VICTIMS, type StealHint, type StealHints } from './steal-hint.js';
import { fail, repend, steal, type ItemCas } from './transitions.js';

/**
 * The coordinator of one run: exactly one at a time, by the lease
 * `coordinator:<runId>`. It holds nothing it cannot rebuild from the ledger
 * (in AWS every Lambda invocation is a restart), and every write it makes is
 * fenced by its epoch. Deposed, it emits one `coordinator_fenced` event —
 * observability only, never a shared-store write — and stops.
 */

export const MAX_STEAL_BATCH = 32;
/** Items a steal reads to learn which are started, at most (past it, the best victim found so far). */
const STEAL_READ_BUDGET = 1_000;
/** Items re-pended, failed or re-sent per round trip of a scan: a crash loses at most one batch's messages, which the next scan sends. */
const SCAN_BATCH = 100;
/** SQS keeps a message 14 days at most (the stack's retention): a Pending item sent longer ago than this is sent again. */
export const RESEND_AFTER_MS = 13 * 86_400_000;

export interface StealNotice {
  /** The coordinator epoch the notice was issued under: workers' EpochGuard checks it. */
  readonly epoch: number;
  readonly victim: string | null;
  /** Items now Running(thief), unstarted. */
  readonly items: readonly string[];
}

export interface InFlight {
  /** Running items by the worker holding them: stay in flight (the worker may still hold them). */
  readonly running: ReadonlyMap<string, readonly WorkItem[]>;
  /** Pending items to dispatch again. */
  readonly pending: readonly PendingEntry[];
}

export class NotCoordinatorError extends Error {
  override readonly name = 'NotCoordinatorError';
  constructor(readonly runId: string) {
    super(`not the coordinator of run ${runId}`);
  }
}

export interface CoordinatorOptions {
  runId: string;
  ledger: LedgerStore;
  elector: LeaderElector;
  bus: EventBus;
  /** coordinator_failure_timeout: a Running item whose heartbeat is unchanged this long goes back to Pending. Equals the lease TTL. */
  failureTimeoutMs: number;
  /**
   * Where heartbeats are watched (see staleness.ts). Share one per process so
   * that what one scan saw is remembered by the next, whichever Coordinator
   * object runs it (a Lambda builds one per invocation).
   */
  watch?: HeartbeatWatch;
  /** The largest skew between a worker's clock and ours that a coordinator without memory tolerates. Default 60 s. */
  maxClockSkewMs?: number;
  /** A started item that went back this many times ends Failed (poison). Default MAX_ATTEMPTS (the queue's maxReceiveCount). */
  maxAttempts?: number;
  /** A Pending item whose last message is older than this is sent again. Default RESEND_AFTER_MS. */
  resendAfterMs?: number;
  /** The ledger-backed queue's dead letters (LedgerDeadLetters): the scan fails them. SQS has its own DLQ consumer. */
  deadLetters?: WorkQueue;
  clock?: Clock;
  logger?: Logger;
  /** Called once when deposed: a process exits (within 5 s), a Lambda invocation throws. */
  onFenced?: (err: FencedError) => void;
  /** Where re-pended items are dispatched again: a Pending item always has a message. */
  queue?: WorkQueue;
  /** Page size when replay reads the Pending set. */
  replayPageSize?: number;
}

/** Unstarted Running items per worker: what a steal may take. Started items are never counted. */
export function backlogs(running: readonly WorkItem[]): Map<string, WorkItem[]> {
  const out = new Map<string, WorkItem[]>();
  for (const item of running) {
    if (item.state !== 'running' || item.started || item.worker === null) continue;
    const list = out.get(item.worker) ?? [];
    list.push(item);
    out.set(item.worker, list);
  }
  return out;
}

/** Why the coordinator failed an item (rollout_run_failures_total{reason}). */
export type FailureCause = 'attempts' | 'cancelled' | 'dead_letter';

export interface ScanReport {
  /** Running items whose worker went silent, back to Pending (and on the queue). */
  readonly repended: string[];
  /** Poison: started maxAttempts times without a result, or dead letters of the ledger-backed queue. */
  readonly failed: string[];
  /** Pending items that had no message (a crash between storing and sending), sent now. */
  readonly resent: string[];
  /** How many of `failed` each cause ended: attempts used up, the run cancelled, a dead letter. */
  readonly failedBy: Readonly<Record<FailureCause, number>>;
}

export class Coordinator {
  private fenced = false;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly watch: HeartbeatWatch;
  private readonly maxAttempts: number;

  constructor(private readonly opts: CoordinatorOptions) {
    if (!(opts.failureTimeoutMs > 0)) throw new Error(`invalid coordinator config: failureTimeoutMs: must be positive, got ${opts.failureTimeoutMs}`);
    this.maxAttempts = opts.maxAttempts ?? MAX_ATTEMPTS;
    if (!(Number.isInteger(this.maxAttempts) && this.maxAttempts >= 1))
      throw new Error(`invalid coordinator config: maxAttempts: must be an integer ≥ 1, got ${opts.maxAttempts}`);
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? silentLogger;
    this.watch = opts.watch ?? new HeartbeatWatch();
  }

  get isFenced(): boolean {
    return this.fenced;
  }

  private token(): LeaseToken {
    const token = this.fenced ? null : this.opts.elector.token();
    if (!token) throw new NotCoordinatorError(this.opts.runId);
    return token;
  }

  /**
   * An idle worker asks for work. Only if its own backlog is empty; the victim
   * is the busiest worker by backlog (unstarted items only); the batch is
   * ceil(backlog / 2), at most MAX_STEAL_BATCH; each item moves in one fenced
   * CAS from Running(victim, unstarted) to Running(thief).
   *
   * Where the store keeps steal hints (steal-hint.ts), who is busiest comes
   * from the run's hint, at most STEAL_HINT_FRESH_MS old: the busiest entry
   * left in it is taken by this thief alone. Otherwise from the running set,
   * read now (`victims`).
   */
  async stealFor(thief: string): Promise<StealNotice> {
    const token = this.token();
    const hints = this.opts.ledger.stealHints;
    if (!hints) {
      const found = await this.victims(thief, 1);
      const best = found?.[0];
      return best ? this.move(token, best.worker, thief, best.take) : { epoch: token.epoch, victim: null, items: [] };
    }
    const hint = await this.hint(hints);
    const none = { epoch: token.epoch, victim: null, items: [] };
    // A thief the hint lists has a backlog of its own: it runs that first (reconcile finds what it does not know of).
    if (!hint || Object.hasOwn(hint.victims, thief)) return none;
    const order = Object.entries(hint.victims)
      .filter(([, ids]) => ids.length > 0)
      .sort((a, b) => b[1].length - a[1].length);
    for (const [victim] of order) {
      const ids = await hints.take(this.opts.runId, hint.builtAt, victim);
      if (ids === null) continue; // another thief took it first
      return this.move(token, victim, thief, ids);
    }
    return none;
  }

  /** The run's hint: as read while fresh; rebuilt from the running set by the one asker that claims it once stale. */
  private async hint(hints: StealHints): Promise<StealHint | null> {
    const { runId } = this.opts;
    const now = this.clock.now();
    const hint = await hints.read(runId);
    if (hint && hintFresh(hint.builtAt, now)) return hint;
    // Someone is rebuilding it: answer from what there is.
    if (hint?.claimedUntil !== undefined && hint.claimedUntil > now) return hint;
    if (!(await hints.claimRebuild(runId, hint?.builtAt ?? 0, now))) return hint;
    const found = (await this.victims(null, STEAL_HINT_VICTIMS)) ?? [];
    const built: StealHint = { builtAt: this.clock.now(), victims: Object.fromEntries(found.map((v) => [v.worker, v.take])) };
    await hints.write(runId, built);
    return built;
  }

  /**
   * The `limit` workers with the largest unstarted backlogs, most first, each
   * with what a steal from it takes: the back of its line (latest claimed,
   * which it would reach last), ceil(backlog / 2) of it, at most
   * MAX_STEAL_BATCH. Null when `thief` has an unstarted backlog of its own.
   *
   * Who holds what comes from the running set's entries (running.ts); whether
   * an item started, where an entry does not say, from the items of the
   * workers the choice turns on: the thief's, then the others' from the one
   * holding most, stopping once no worker left holds more items than the
   * smallest backlog kept (a backlog is at most what a worker holds).
   */
  private async victims(thief: string | null, limit: number): Promise<{ worker: string; take: string[] }[] | null> {
    const { ledger, runId } = this.opts;
    const byWorker = new Map<string, RunningEntry[]>();
    for (const e of await runningEntries(ledger, runId)) {
      if (e.worker === null) continue;
      const list = byWorker.get(e.worker) ?? [];
      list.push(e);
      byWorker.set(e.worker, list);
    }
    const unstarted = async (worker: string) => (await heldBy(ledger, runId, worker, byWorker.get(worker) ?? [])).filter((i) => !i.started);
    if (thief !== null && byWorker.has(thief) && (await unstarted(thief)).length > 0) return null;
    const kept: { worker: string; backlog: RunningEntry[] }[] = [];
    const floor = () => (kept.length < limit ? 0 : kept[kept.length - 1]!.backlog.length);
    let read = 0;
    // Most held first; of equal backlogs, the first found wins.
    for (const [worker, held] of [...byWorker].filter(([w]) => w !== thief).sort((a, b) => b[1].length - a[1].length)) {
      if (held.length <= floor() || read >= STEAL_READ_BUDGET) break;
      read += held.filter((e) => e.started === undefined).length;
      const line = await unstarted(worker);
      if (line.length <= floor()) continue;
      kept.push({ worker, backlog: line });
      kept.sort((a, b) => b.backlog.length - a.backlog.length);
      kept.splice(limit);
    }
    return kept.map(({ worker, backlog }) => ({
      worker,
      take: [...backlog]
        .sort((a, b) => (b.claimedAt ?? 0) - (a.claimedAt ?? 0))
        .slice(0, Math.min(Math.ceil(backlog.length / 2), MAX_STEAL_BATCH))
        .map((e) => e.id),
    }));
  }

  /** Each item in one fenced CAS from Running(victim, unstarted) to Running(thief); a lost CAS (the victim started it, or it finished) is skipped. */
  private async move(token: LeaseToken, victim: string, thief: string, ids: readonly string[]): Promise<StealNotice> {
    const taken: string[] = [];
    for (const id of ids) {
      const out = await this.guard(() => this.opts.ledger.cas(steal(token, this.opts.runId, id, victim, thief, this.clock.now()), this.clock.now()));
      if (out.ok) taken.push(id);
    }
    return { epoch: token.epoch, victim, items: taken };
  }

  /**
   * Everything the schedule asks of a run's coordinator, each step bounded:
   * the failure scan, re-sending Pending items that have no message, and
   * failing the ledger-backed queue's dead letters.
   */
  async scan(limit = 1_000): Promise<ScanReport> {
    const { repended, failed: poison } = await this.failureScan(limit);
    const cancelled = await this.failCancelled(limit);
    const { resent, exhausted } = await this.resendUnsent(limit);
    const dead = this.opts.deadLetters ? (await this.failDeadLetters(this.opts.deadLetters, limit)).failed : [];
    return {
      repended,
      failed: [...poison, ...exhausted, ...cancelled, ...dead],
      resent,
      failedBy: { attempts: poison.length + exhausted.length, cancelled: cancelled.length, dead_letter: dead.length },
    };
  }

  /**
   * A cancelled run's Pending items end Failed with the reason `cancelled…`,
   * a batch at a time, each from Pending only (an item a worker claimed
   * meanwhile runs and ends as it finishes). Nothing on a run that is not
   * cancelled. Fenced like every coordinator write.
   */
  async failCancelled(limit = 1_000): Promise<string[]> {
    const token = this.token();
    const { runId, ledger } = this.opts;
    const reason = await this.cancelReason();
    if (reason === null) return [];
    const failed: string[] = [];
    while (failed.length < limit) {
      const page = await ledger.pending(runId, Math.min(SCAN_BATCH, limit - failed.length));
      if (!page.length) break;
      const outs = await this.guard(() =>
        ledger.casMany(
          page.map((item) => fail(token, runId, item.id, { state: 'pending' }, reason, { counts: false })),
          this.clock.now(),
        ),
      );
      const now = outs.flatMap((o) => (o.ok ? [o.item.id] : []));
      failed.push(...now);
      // Every one claimed under us: what is left is running, and ends as it finishes.
      if (!now.length) break;
    }
    if (failed.length) this.logger.info('cancelled run: pending items failed', { runId, failed: failed.length });
    return failed;
  }

  /** `cancelled: <reason> (by <actor>)` while the run is cancelled; null otherwise. */
  private async cancelReason(): Promise<string | null> {
    const c = (await this.opts.ledger.getRun(this.opts.runId))?.cancelled;
    return c ? `cancelled${c.reason ? `: ${c.reason}` : ''} (by ${c.by})` : null;
  }

  /**
   * Running items whose worker went silent (staleness.ts: judged on our clock,
   * never by comparing the worker's stamp with it) go back to Pending and on
   * the queue, a batch at a time; a started one that has used up its
   * attempts ends Failed instead (poison that kills its worker).
   */
  async failureScan(limit = 1_000): Promise<{ repended: string[]; failed: string[] }> {
    const token = this.token();
    const { runId, ledger, queue } = this.opts;
    const timeoutMs = this.opts.failureTimeoutMs;
    const stale = this.watch
      .observe(runId, await ledger.running(runId), this.clock.now(), { timeoutMs, maxClockSkewMs: this.opts.maxClockSkewMs ?? 60_000 })
      .slice(0, limit);
    const repended: string[] = [];
    const failed: string[] = [];
    // A cancelled run's silent items are not run again: they end Failed, as its Pending ones do.
    const cancelled = stale.length ? await this.cancelReason() : null;
    for (let i = 0; i < stale.length; i += SCAN_BATCH) {
      const changes = stale.slice(i, i + SCAN_BATCH).map((item): ItemCas => {
        const silent = `worker ${item.worker} went silent (heartbeat unchanged for ${timeoutMs} ms)`;
        if (cancelled !== null)
          return fail(token, runId, item.id, { state: 'running', worker: item.worker, version: item.version }, `${cancelled}; ${silent}`, {
            counts: item.started,
          });
        if (item.started && item.attempts + 1 >= this.maxAttempts) {
          const reason = `poison: started ${item.attempts + 1} times without a result; last: ${silent}${item.error ? `; before: ${item.error}` : ''}`;
          return fail(token, runId, item.id, { state: 'running', worker: item.worker, version: item.version }, reason, { counts: true });
        }
        return repend(token, runId, item, silent);
      });
      const outs = await this.guard(() => ledger.casMany(changes, this.clock.now()));
      const back = outs.flatMap((o) => (o.ok && o.item.state === 'pending' ? [o.item] : []));
      failed.push(...outs.flatMap((o) => (o.ok && o.item.state === 'failed' ? [o.item.id] : [])));
      if (queue) await dispatch(ledger, queue, runId, back, this.clock.now());
      repended.push(...back.map((item) => item.id));
    }
    return { repended, failed };
  }

  /**
   * Pending items with no message — stored, then the process died (or the
   * send was refused) before the message went out — are sent now and
   * recorded. Also those sent longer ago than the queue keeps messages. A
   * duplicate (the sender was only slow) is harmless: workers drop it.
   *
   * One already tried maxAttempts times is failed instead (`exhausted`), as
   * its dead letter would have been: a message sent again starts a new
   * receive count, and the item would be tried on and on, or (a worker
   * refusing it) wait for ever with nobody to take it.
   */
  async resendUnsent(limit = 1_000): Promise<{ resent: string[]; exhausted: string[] }> {
    const token = this.token();
    const { runId, ledger, queue } = this.opts;
    if (!queue || queue.deliversFromLedger) return { resent: [], exhausted: [] };
    const items = await ledger.unsent(runId, this.clock.now() - (this.opts.resendAfterMs ?? RESEND_AFTER_MS), limit);
    const dead = await this.exhausted(items);
    const deadIds = new Set(dead.map((d) => d.id));
    const live = items.filter((item) => !deadIds.has(item.id));
    const exhausted: string[] = [];
    for (let i = 0; i < dead.length; i += SCAN_BATCH) {
      const changes = dead
        .slice(i, i + SCAN_BATCH)
        .map((item) =>
          fail(
            token,
            runId,
            item.id,
            { state: 'pending' },
            `poison: tried ${item.attempts} times without a result${item.error ? `; last error: ${item.error}` : ''}`,
            { counts: false },
          ),
        );
      const outs = await this.guard(() => ledger.casMany(changes, this.clock.now()));
      exhausted.push(...outs.flatMap((o) => (o.ok ? [o.item.id] : [])));
    }
    for (let i = 0; i < live.length; i += SCAN_BATCH) await dispatch(ledger, queue, runId, live.slice(i, i + SCAN_BATCH), this.clock.now());
    if (live.length) this.logger.warn('pending items had no message: sent again', { runId, items: live.length });
    if (exhausted.length) this.logger.warn('pending items had no message and no attempts left: failed', { runId, items: exhausted.length });
    return { resent: live.map((item) => item.id), exhausted };
  }

  /** Those of `entries` tried maxAttempts times, with their last error: as listed where the store lists attempts, else read. */
  private async exhausted(entries: readonly PendingEntry[]): Promise<Pick<WorkItem, 'id' | 'attempts' | 'error'>[]> {
    const { runId, ledger } = this.opts;
    const listed = entries.filter((e) => e.attempts !== undefined);
    const unlisted = entries.filter((e) => e.attempts === undefined).map((e) => e.id);
    const read = !unlisted.length
      ? []
      : ledger.getMany
        ? await ledger.getMany(runId, unlisted)
        : (await Promise.all(unlisted.map((id) => ledger.get(runId, id)))).filter((i): i is WorkItem => i !== null);
    return [...listed.map((e) => ({ id: e.id, attempts: e.attempts!, error: e.error ?? null })), ...read.filter((i) => i.state === 'pending')].filter(
      (i) => i.attempts >= this.maxAttempts,
    );
  }

  /**
   * Items whose message went to the dead-letter queue (poison: received
   * maxReceiveCount times without a result) are marked Failed with the reason.
   * A dead letter for an item already finished is acknowledged and dropped.
   */
  async failDeadLetters(dlq: WorkQueue, max = 100): Promise<{ failed: string[]; dropped: string[] }> {
    this.token();
    const failed: string[] = [];
    const dropped: string[] = [];
    for (;;) {
      const batch = await dlq.receive(10, 0);
      if (!batch.length) break;
      for (const m of batch) {
        // A shared DLQ holds other runs' dead letters too: theirs are left for their coordinator
        // (invisible until the DLQ's visibility timeout, so this pass does not see them again).
        if (m.runId !== this.opts.runId) continue;
        const outcome = await this.failDeadLetter(m);
        if (outcome === 'moved') continue; // look again next time
        (outcome === 'failed' ? failed : dropped).push(m.itemId);
        await dlq.delete(m);
      }
      if (failed.length + dropped.length >= max) break;
    }
    return { failed, dropped };
  }

  /**
   * One dead letter of this run: its item, if still Pending or Running, becomes Failed with the
   * reason ('failed'); a dead letter of a finished or unknown item is done with ('dropped'); an item
   * that moved while we looked is left for the next look ('moved').
   */
  async failDeadLetter(m: Pick<QueueMessage, 'runId' | 'itemId' | 'receiveCount'>): Promise<'failed' | 'dropped' | 'moved'> {
    const token = this.token();
    if (m.runId !== this.opts.runId) throw new Error(`dead letter of run ${m.runId} handed to the coordinator of ${this.opts.runId}`);
    const item = await this.opts.ledger.get(m.runId, m.itemId);
    if (item && (item.state === 'pending' || item.state === 'running')) {
      const from = item.state === 'pending' ? { state: 'pending' as const } : { state: 'running' as const, worker: item.worker };
      const reason = `poison: delivered ${m.receiveCount} times without a result${item.error ? `; last error: ${item.error}` : ''}`;
      const out = await this.guard(() => this.opts.ledger.cas(fail(token, m.runId, m.itemId, from, reason, { counts: false }), this.clock.now()));
      if (out.ok) return 'failed';
      if (out.current && (out.current.state === 'pending' || out.current.state === 'running')) return 'moved';
      return 'dropped';
    }
    this.logger.info('dead letter for an item that is finished or unknown; dropped', { runId: m.runId, itemId: m.itemId, state: item?.state ?? 'unknown' });
    return 'dropped';
  }

  /** Rebuild the in-flight map from the ledger: Running stays in flight, Pending is dispatched again, Done/Failed are skipped. */
  async replay(): Promise<InFlight> {
    this.token();
    const running = new Map<string, WorkItem[]>();
    for (const item of await this.opts.ledger.running(this.opts.runId)) {
      const list = running.get(item.worker ?? '') ?? [];
      list.push(item);
      running.set(item.worker ?? '', list);
    }
    const pending: PendingEntry[] = [];
    const size = this.opts.replayPageSize ?? 1_000;
    for (let after: PendingEntry | undefined; ;) {
      const page = await this.opts.ledger.pending(this.opts.runId, size, after);
      pending.push(...page);
      if (page.length < size) break;
      after = page.at(-1)!;
    }
    return { running, pending };
  }

  private async guard<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (err instanceof FencedError) await this.selfFence(err);
      throw err;
    }
  }

  /** Exactly once: one coordinator_fenced event, then the caller's stop. Never a shared-store write. */
  private async selfFence(err: FencedError): Promise<void> {
    if (this.fenced) return;
    this.fenced = true;
    this.logger.error('coordinator deposed; stopping', { runId: this.opts.runId, error: err.message });
    try {
      await this.opts.bus.publish([
        {
          id: `coordinator_fenced:${this.opts.runId}:${err.token.holder}:${err.token.epoch}`,
          source: 'ai.rollout',
          detailType: 'coordinator_fenced',
          time: this.clock.now(),
          detail: { runId: this.opts.runId, holder: err.token.holder, epoch: err.token.epoch, current: err.current },
        },
      ]);
    } catch (publishError) {
      this.logger.warn('coordinator_fenced event not published', { error: errorMessage(publishError) });
    }
    this.opts.onFenced?.(err);
  }
}
