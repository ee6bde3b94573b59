import type { Clock } from '../clock.js';
import { systemClock } from '../clock.js';
import type { EventBus } from '../events/bus.js';
import type { LeaderElector } from '../lease/elector.js';
import { FencedError } from '../lease/fencing.js';
import type { LeaseToken } from '../lease/record.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import type { WorkItem } from './model.js';
import type { QueueMessage, WorkQueue } from '../queue/port.js';
import type { LedgerStore } from './store.js';
import { fail, repend, steal } from './transitions.js';

/**
 * The coordinator of one run: exactly one at a time, by the lease
 * `coordinator:<runId>`. It holds nothing it cannot rebuild from the ledger
 * (in AWS every Lambda invocation is a restart), and every write it makes is
 * fenced by its epoch. Deposed, it emits one `coordinator_fenced` event —
 * observability only, never a shared-store write — and stops.
 */

export const MAX_STEAL_BATCH = 32;

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
  readonly pending: readonly WorkItem[];
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
  /** coordinator_failure_timeout: a Running item whose heartbeat is older goes back to Pending. Equals the lease TTL. */
  failureTimeoutMs: number;
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

export class Coordinator {
  private fenced = false;
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(private readonly opts: CoordinatorOptions) {
    if (!(opts.failureTimeoutMs > 0)) throw new Error(`invalid coordinator config: failureTimeoutMs: must be positive, got ${opts.failureTimeoutMs}`);
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? silentLogger;
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
   */
  async stealFor(thief: string): Promise<StealNotice> {
    const token = this.token();
    const byWorker = backlogs(await this.opts.ledger.running(this.opts.runId));
    if ((byWorker.get(thief)?.length ?? 0) > 0) return { epoch: token.epoch, victim: null, items: [] };
    let victim: string | null = null;
    let most = 0;
    for (const [worker, items] of byWorker) {
      if (worker !== thief && items.length > most) [victim, most] = [worker, items.length];
    }
    if (victim === null) return { epoch: token.epoch, victim: null, items: [] };
    // Take from the back of the victim's line (latest claimed): it would reach them last.
    const candidates = [...byWorker.get(victim)!].sort((a, b) => (b.claimedAt ?? 0) - (a.claimedAt ?? 0)).slice(0, Math.min(Math.ceil(most / 2), MAX_STEAL_BATCH));
    const taken: string[] = [];
    for (const item of candidates) {
      const out = await this.guard(() => this.opts.ledger.cas(steal(token, this.opts.runId, item.id, victim, thief, this.clock.now()), this.clock.now()));
      if (out.ok) taken.push(item.id); // a lost CAS: the victim started it (or acked) first
    }
    return { epoch: token.epoch, victim, items: taken };
  }

  /** Running items whose per-item heartbeat is older than the failure timeout go back to Pending (and on the queue). */
  async failureScan(limit = 1_000): Promise<string[]> {
    const token = this.token();
    const cutoff = this.clock.now() - this.opts.failureTimeoutMs;
    const stale = await this.opts.ledger.staleRunning(this.opts.runId, cutoff, limit);
    const repended: string[] = [];
    for (const item of stale) {
      if (item.heartbeatAt === null || item.worker === null || item.heartbeatAt >= cutoff) continue;
      const out = await this.guard(() => this.opts.ledger.cas(repend(token, this.opts.runId, item.id, item.worker!, item.heartbeatAt!), this.clock.now()));
      if (out.ok) repended.push(item.id);
    }
    if (repended.length) await this.opts.queue?.send(this.opts.runId, repended);
    return repended;
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
      const out = await this.guard(() => this.opts.ledger.cas(fail(token, m.runId, m.itemId, from, reason), this.clock.now()));
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
    const pending: WorkItem[] = [];
    const size = this.opts.replayPageSize ?? 1_000;
    for (let after: string | undefined; ; ) {
      const page = await this.opts.ledger.pending(this.opts.runId, size, after);
      pending.push(...page);
      if (page.length < size) break;
      after = page.at(-1)!.id;
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
