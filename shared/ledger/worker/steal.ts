import { errorMessage } from '../../log.js';
import { dispatch } from '../dispatch.js';
import { EpochGuard } from '../epoch-guard.js';
import { heldBy, runningEntries } from '../running.js';
import { nack } from '../transitions.js';
import type { WorkerContext } from './context.js';

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

/**
 * What an idle worker does besides long-polling: adopts the Running(itself)
 * items the ledger has that it does not hold (reconcile), only when that may
 * find something, and asks the coordinator for work, less and less often
 * while none comes.
 */
export class Steals {
  readonly guard = new EpochGuard();
  /**
   * Whether the ledger may hold Running(me) items this worker does not know
   * of: at start (a previous life's), after an ask whose answer was lost or
   * refused (a steal committed for us but never delivered), and after a
   * failed step. Only then is the running set read, not on every idle step.
   */
  reconcileDue = true;
  /** When a failed steal request was last logged: at most one warning a minute. */
  private stealErrorLoggedAt = Number.NEGATIVE_INFINITY;
  /** Asks that found nothing since work last came, and when the next ask is due (stealBackoffMs). */
  private fruitlessAsks = 0;
  private nextAskAt = 0;

  constructor(private readonly w: WorkerContext) {
    if (!w.o.askAtStart) this.nextAskAt = w.clock.now() + stealBackoffMs(1);
  }

  /** Whether an ask is due now (a worker without a coordinator never asks). */
  get askDue(): boolean {
    return !!this.w.o.coordinator && this.w.clock.now() >= this.nextAskAt;
  }

  /**
   * How long a poll may wait, at most `wait` seconds: it ends by the next ask's time, so asks keep their jitter
   * instead of falling on poll boundaries (a fleet started together would otherwise ask together, one poll after its start).
   */
  pollSeconds(wait: number): number {
    return this.w.o.coordinator ? Math.min(wait, Math.max(1, Math.ceil((this.nextAskAt - this.w.clock.now()) / 1000))) : wait;
  }

  /** Work came: once this worker runs dry again, it asks at once. */
  workCame<T>(did: T): T {
    this.fruitlessAsks = 0;
    this.nextAskAt = 0;
    return did;
  }

  /**
   * Ask the coordinator for work; whether it gave some. A steal is a shortcut, not a need: a coordinator
   * that cannot answer (refused, unreachable) leaves the long poll, and the check that the run is done, to go on as usual.
   */
  async ask(): Promise<boolean> {
    if (await this.askForWork().catch((err: unknown) => this.stealFailed(err))) return true;
    this.nextAskAt = this.w.clock.now() + stealBackoffMs(++this.fruitlessAsks);
    return false;
  }

  private async askForWork(): Promise<boolean> {
    const notice = await this.w.o.coordinator!.requestWork(this.w.id);
    if (!this.guard.accept(notice.epoch)) {
      // A deposed coordinator's late answer: ignore it. Items it moved to us are adopted by reconcile.
      this.w.stats.staleNotices++;
      this.reconcileDue = true;
      return false;
    }
    const backlog = this.w.held.backlog;
    const held = new Set(this.w.held.waiting());
    for (const itemId of notice.items) if (!held.has(itemId)) backlog.push({ itemId, message: null });
    this.w.stats.stolen += notice.items.length;
    return notice.items.length > 0;
  }

  private stealFailed(err: unknown): false {
    // The ask may have been answered and the answer lost: what it moved to us is found by reading the ledger.
    // Not when Lambda refused the invocation (its concurrency spent): it never ran, and a fleet whose asks are
    // refused would otherwise all read the running set at once.
    if ((err as { name?: string }).name !== 'TooManyRequestsException') this.reconcileDue = true;
    const stats = this.w.stats;
    stats.stealErrors++;
    const now = this.w.clock.now();
    if (now - this.stealErrorLoggedAt >= 60_000) {
      this.stealErrorLoggedAt = now;
      this.w.logger.warn('asking the coordinator for work failed; long-polling instead', { failures: stats.stealErrors, error: errorMessage(err) });
    }
    return false;
  }

  /** Adopt Running(me) items the worker does not hold: a steal whose notice was lost or rejected. */
  async reconcile(): Promise<boolean> {
    const { ledger, queue, runId } = this.w.o;
    const id = this.w.id;
    const backlog = this.w.held.backlog;
    const held = new Set([...this.w.held.waiting(), ...this.w.held.outcomes.map((o) => o.h.itemId)]);
    const entries = (await runningEntries(ledger, runId)).filter((i) => i.worker === id && !held.has(i.id));
    const mine = await heldBy(ledger, runId, id, entries);
    const restarted = mine.filter((i) => i.started);
    if (restarted.length) {
      // We started these in a previous life and no longer run them: give them back. It may be what
      // killed us, so it counts toward poison.
      const now = this.w.clock.now();
      const outs = await ledger.casMany(
        restarted.map((i) => nack(runId, i.id, id, 'worker restarted while running it', { counts: true })),
        now,
      );
      await dispatch(
        ledger,
        queue,
        runId,
        outs.flatMap((o) => (o.ok ? [o.item] : [])),
        this.w.clock.now(),
      );
    }
    for (const item of mine) if (!item.started) backlog.push({ itemId: item.id, message: null });
    return backlog.length > 0;
  }
}
