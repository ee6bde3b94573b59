import { errorMessage } from '../../log.js';
import type { QueueMessage } from '../../queue/port.js';
import { heartbeat } from '../transitions.js';
import type { Held, WorkerContext } from './context.js';

/**
 * Heartbeat rounds per heartbeat interval. Each writes the held items whose
 * last write is at least an interval less one round old: by the next round
 * they would be past the interval. More rounds, fewer writes (an item's writes
 * come closer to one per interval) but more wake-ups.
 */
export const HEARTBEAT_ROUNDS = 4;

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

/**
 * Keeps everything held alive: each item written to the ledger at least once
 * a heartbeat interval (a claim and a start count), each message kept
 * invisible, in rounds (HEARTBEAT_ROUNDS an interval) while the worker is
 * active.
 */
export class Heartbeats {
  /** Heartbeat rounds over everything held, by result (rollout_worker_heartbeats_total). */
  readonly rounds = { ok: 0, failed: 0 };
  /**
   * Per held item: when this worker last wrote it (before the write was sent:
   * a lower bound) and until when its message is invisible, on the monotonic
   * clock. No entry, or -Infinity: not known, so due at the next round.
   */
  private readonly marks = new Map<string, { wrote: number; visibleUntil: number }>();
  /** The items the last round saw held: a mark is forgotten once two rounds in a row have not (a chunk being started is in neither list for a moment). */
  private heldAtLastRound = new Set<string>();
  /** Rounds run while the worker is active (its run loop, or a chunk being executed). */
  private active = 0;
  private beat: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;

  constructor(private readonly w: WorkerContext) {}

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
        (wrote) => void (wrote && this.rounds.ok++),
        (err: unknown) => {
          this.rounds.failed++;
          throw err;
        },
      )
      .finally(() => (this.beating = null));
    return this.beating;
  }

  /** One round; whether it wrote anything. */
  private async beatOnce(): Promise<boolean> {
    const { held: all, stats } = this.w;
    const { ledger, queue, runId } = this.w.o;
    const byId = new Map<string, Held>();
    for (const h of [...all.backlog, ...all.executing.values(), ...all.outcomes.map((o) => o.h)]) byId.set(h.itemId, h);
    for (const id of this.marks.keys()) if (!byId.has(id) && !this.heldAtLastRound.has(id)) this.marks.delete(id);
    this.heldAtLastRound = new Set(byId.keys());
    const held = [...byId.values()];
    if (!held.length) return false;
    const sent = this.w.monotonic.now();
    const due = held.filter((h) => heartbeatDue(sent, this.marks.get(h.itemId)?.wrote ?? Number.NEGATIVE_INFINITY, this.w.heartbeatMs));
    const at = this.w.clock.now();
    const outs = due.length
      ? await ledger.applyMany(
          due.map((h) => heartbeat(runId, h.itemId, this.w.id, at)),
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
      const waiting = all.backlog.findIndex((b) => b.itemId === h.itemId);
      if (waiting >= 0) {
        all.backlog.splice(waiting, 1);
        stats.lost++;
        if (h.message) gone.push(h.message);
      } else if (all.executing.has(h.itemId)) {
        all.lostIds.add(h.itemId);
        if (all.current?.itemId === h.itemId) all.current.abort(new Error(`claim on ${h.itemId} lost`));
      }
    });
    const now = this.w.monotonic.now();
    const extend = held.filter(
      (h) =>
        h.message &&
        !lost.has(h.itemId) &&
        extensionDue(now, this.marks.get(h.itemId)?.visibleUntil ?? Number.NEGATIVE_INFINITY, this.w.visibilitySeconds * 1000, this.w.heartbeatMs),
    );
    await Promise.all([this.extendAll(extend), ...(gone.length ? [queue.deleteMany(gone)] : [])]);
    return due.length > 0;
  }

  /** This worker wrote the item (a claim, a start, a heartbeat), the write sent at `at` (the monotonic clock). */
  wrote(itemId: string, at: number): void {
    const m = this.marks.get(itemId);
    if (m) m.wrote = Math.max(m.wrote, at);
    else this.marks.set(itemId, { wrote: at, visibleUntil: Number.NEGATIVE_INFINITY });
  }

  /** Keep the held items' messages invisible for `visibilitySeconds` more; each one's mark moves as its extension lands. */
  async extendAll(held: readonly Held[]): Promise<void> {
    const { queue } = this.w.o;
    if (queue.deliversFromLedger) return; // its rows are the messages: nothing to keep invisible
    const at = this.w.monotonic.now();
    const visibilitySeconds = this.w.visibilitySeconds;
    await Promise.all(
      held.map(async (h) => {
        if (!h.message) return;
        await queue.extend(h.message, visibilitySeconds);
        const m = this.marks.get(h.itemId);
        if (m) m.visibleUntil = at + visibilitySeconds * 1000;
        else this.marks.set(h.itemId, { wrote: Number.NEGATIVE_INFINITY, visibleUntil: at + visibilitySeconds * 1000 });
      }),
    );
  }

  /** The worker became active (its loop, or a chunk): rounds run until each activation is matched by a deactivate. */
  activate(): void {
    if (this.active++ === 0) {
      this.beat = setInterval(() => {
        void this.heartbeat().catch((err: unknown) => this.w.logger.warn('heartbeat failed', { workerId: this.w.id, error: errorMessage(err) }));
      }, this.w.heartbeatMs / HEARTBEAT_ROUNDS);
      this.beat.unref?.();
    }
  }

  deactivate(): void {
    if (--this.active === 0 && this.beat) {
      clearInterval(this.beat);
      this.beat = null;
    }
  }
}
