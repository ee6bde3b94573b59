import type { Span } from '@opentelemetry/api';
import { errorMessage } from '../../log.js';
import type { QueueMessage } from '../../queue/port.js';
import { activeIn, failSpan, SPAN, startSpan } from '../../tracing.js';
import type { ItemCasOutcome } from '../store.js';
import { nack, start } from '../transitions.js';
import { deleteAll, spent, type Held, type WorkerContext } from './context.js';
import type { Flusher } from './flush.js';
import { giveBack } from './give-back.js';
import type { Heartbeats } from './heartbeat.js';

/**
 * Ends a `run.item` span with what became of the item's run
 * (docs/operating/observability.md#operating: traces). Only a backend's own failure is the span's error: a
 * run stopped because the claim was lost or the worker drained did nothing wrong.
 */
function endItem(span: Span, outcome: 'ok' | 'failed' | 'lost' | 'drained', err?: unknown): void {
  span.setAttribute('run.item.outcome', outcome);
  if (outcome === 'failed') failSpan(span, err);
  span.end();
}

/**
 * Runs held items a chunk at a time: the chunk started in one round trip
 * (made unstealable), its items run one by one on the backend, their
 * outcomes recorded in batches. A chunk is sized from the measured item
 * duration so it lasts about `chunkBudgetMs`.
 */
export class Chunks {
  private readonly chunkBudgetMs: number;
  private readonly maxChunk: number;
  /** Moving average of one item's execution time; null until measured. */
  private itemMs: number | null = null;

  constructor(
    private readonly w: WorkerContext,
    private readonly beats: Heartbeats,
    private readonly flusher: Flusher,
  ) {
    this.chunkBudgetMs = w.o.chunkBudgetMs ?? 100;
    this.maxChunk = w.o.maxChunk ?? 64;
  }

  /** Whether an item's duration has been measured (a chunk's size is then more than a guess). */
  get measured(): boolean {
    return this.itemMs !== null;
  }

  size(): number {
    if (this.itemMs === null) return 1;
    return Math.max(1, Math.min(this.maxChunk, Math.floor(this.chunkBudgetMs / Math.max(this.itemMs, 0.01))));
  }

  /** Run the next chunk of the backlog. */
  execute(): Promise<void> {
    const held = this.w.held;
    const backlog = held.backlog;
    // Items started already are run now, whatever the chunk size.
    const preStarted = backlog.findIndex((h) => !h.started);
    const chunk = backlog.splice(0, preStarted === 0 ? this.size() : preStarted === -1 ? backlog.length : preStarted);
    // One controller for the item being run; replaced only after it fired (a lost claim), so a
    // chunk of fast items does not allocate a signal per item.
    const ctl = { c: new AbortController() };
    this.beats.activate();
    const done = this.run(chunk, ctl);
    held.current = { abort: (reason) => ctl.c.abort(reason), done, itemId: null };
    return done.then(
      () => {
        held.current = null;
        this.beats.deactivate();
      },
      (err: unknown) => {
        held.current = null;
        this.beats.deactivate();
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
    const { ledger, runId } = this.w.o;
    const id = this.w.id;
    try {
      return await ledger.casMany(
        toStart.map((h) => start(runId, h.itemId, id, now)),
        now,
      );
    } catch (err) {
      const back: Held[] = [];
      for (const h of chunk) {
        if (h.started) {
          back.push(h);
          continue;
        }
        const item = await ledger.get(runId, h.itemId).catch(() => undefined);
        // Unknown (the store is down): keep it unstarted; a start CAS that finds it started by us then loses it to the scan, counted.
        if (item === undefined) back.push(h);
        else if (item?.state === 'running' && item.worker === id) back.push(item.started ? { ...h, started: { payload: item.payload } } : h);
        else this.w.stats.lost++;
      }
      this.w.held.backlog.unshift(...back);
      throw err;
    }
  }

  /**
   * Items a copy of an old message brought after their last attempt: back to
   * Pending as they were (last error kept, no attempt counted) with no
   * message, for the coordinator's scan to fail.
   */
  private async leaveSpent(items: readonly { h: Held; error: string | null }[]): Promise<void> {
    const { ledger, queue, runId } = this.w.o;
    try {
      await ledger.casMany(
        items.map(({ h, error }) => nack(runId, h.itemId, this.w.id, error ?? 'tried the most times an item is tried', { counts: false })),
        this.w.clock.now(),
      );
      await deleteAll(
        queue,
        items.flatMap(({ h }) => (h.message ? [h.message] : [])),
      );
      this.w.logger.info('items already tried the most times: not run, left to the coordinator to fail', { runId, items: items.length });
    } catch (err) {
      // Not held, so not heartbeated: the failure scan finds them silent and, started and spent, fails them.
      // The chunk's other items go on.
      this.w.logger.warn('giving back items already tried the most times failed: the failure scan ends them', { runId, error: errorMessage(err) });
    }
  }

  /** Start the chunk in one round trip, run its items one by one, record outcomes in batches. Returns the ids given back by a drain. */
  private async run(chunk: Held[], ctl: { c: AbortController }): Promise<string[]> {
    const w = this.w;
    const { runId } = w.o;
    const { executing, lostIds } = w.held;
    const stats = w.stats;
    const now = w.clock.now();
    const toStart = chunk.filter((h) => !h.started);
    const sent = w.monotonic.now();
    const startOuts = toStart.length ? await this.startRound(chunk, toStart, now) : [];
    const todo: { h: Held; payload: unknown }[] = chunk.flatMap((h) => (h.started ? [{ h, payload: h.started.payload }] : []));
    const gone: QueueMessage[] = [];
    const spentOnes: { h: Held; error: string | null }[] = [];
    toStart.forEach((h, i) => {
      const out = startOuts[i]!;
      if (out.ok && spent(w.o.queue, out.item)) spentOnes.push({ h, error: out.item.error });
      else if (out.ok) {
        todo.push({ h, payload: out.item.payload });
        this.beats.wrote(h.itemId, sent);
      } else {
        // Stolen before we started it (the thief runs it), or no longer ours.
        stats.lost++;
        if (h.message) gone.push(h.message);
      }
    });
    if (spentOnes.length) await this.leaveSpent(spentOnes);
    lostIds.clear();
    for (const t of todo) executing.set(t.h.itemId, { ...t.h, started: { payload: t.payload } });
    const given: string[] = [];
    let lastFlush = performance.now();
    try {
      await deleteAll(w.o.queue, gone);
      for (const [n, t] of todo.entries()) {
        const id = t.h.itemId;
        if (w.stopping) {
          // Drained: the rest of the chunk was started but never run; give it all back now.
          given.push(
            ...(await giveBack(
              w,
              todo.slice(n).map((x) => x.h),
            )),
          );
          for (const x of todo.slice(n)) executing.delete(x.h.itemId);
          break;
        }
        if (lostIds.has(id)) {
          stats.lost++;
          executing.delete(id);
          continue;
        }
        if (this.flusher.pending && performance.now() - lastFlush >= this.chunkBudgetMs) {
          await this.flusher.flush();
          lastFlush = performance.now();
        }
        if (ctl.c.signal.aborted && !w.stopping) ctl.c = new AbortController();
        if (w.held.current) w.held.current.itemId = id;
        const signal = ctl.c.signal;
        const began = performance.now();
        const payload = t.payload ?? (await w.o.ledger.get(runId, id))?.payload;
        const item = { runId: t.h.message?.runId ?? runId, itemId: id, attempt: t.h.message?.receiveCount ?? null };
        const span = startSpan(SPAN.item, { 'run.id': item.runId, 'run.item.id': id, 'run.item.attempt': item.attempt ?? undefined, 'worker.id': w.id });
        try {
          const result = await activeIn(span, () => w.o.backend(payload, signal, item));
          endItem(span, 'ok');
          executing.delete(id);
          this.flusher.add({ h: t.h, kind: 'result', result });
          const took = performance.now() - began;
          this.itemMs = this.itemMs === null ? took : this.itemMs * 0.8 + took * 0.2;
        } catch (err) {
          endItem(span, signal.aborted ? (w.stopping ? 'drained' : 'lost') : 'failed', err);
          if (signal.aborted && w.stopping) {
            // Drained mid-run: hand it back so another worker runs it now, not after the failure timeout.
            given.push(
              ...(await giveBack(
                w,
                todo.slice(n).map((x) => x.h),
              )),
            );
            for (const x of todo.slice(n)) executing.delete(x.h.itemId);
            break;
          }
          executing.delete(id);
          if (signal.aborted) {
            stats.lost++;
            continue;
          }
          // The backend failed: give the item back now (it counts toward poison).
          stats.failedAttempts++;
          this.itemMs = this.itemMs ?? performance.now() - began;
          this.flusher.add({ h: t.h, kind: 'failure', reason: errorMessage(err) });
          await this.flusher.flush();
        }
      }
      await this.flusher.flush();
    } catch (err) {
      // A store or queue error: the chunk's unrun items go back to the front of the line, still
      // started and heartbeated, and are run at the next step; outcomes wait to be recorded.
      const unrun = todo.filter((t) => executing.has(t.h.itemId)).map((t) => executing.get(t.h.itemId)!);
      w.held.backlog.unshift(...unrun);
      throw err;
    } finally {
      executing.clear();
    }
    return given;
  }
}
