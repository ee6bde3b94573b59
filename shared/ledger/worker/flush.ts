import { errorMessage } from '../../log.js';
import { dispatch } from '../dispatch.js';
import { canonicalJson, MAX_RESULT_BYTES, type WorkItem } from '../model.js';
import { PartialBatchError } from '../store.js';
import { ack, nack, reject, type ItemCas } from '../transitions.js';
import { deleteAll, spent, type Held, type Outcome, type WorkerContext } from './context.js';

/**
 * Records executed items: results as acks (or, when a result cannot be
 * stored, as a rejection that fails the item with the reason), backend
 * failures as nacks that count toward poison. An outcome leaves the list
 * only once the ledger has answered for it.
 */
export class Flusher {
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly w: WorkerContext) {}

  /** An executed item's outcome, recorded at the next flush. */
  add(outcome: Outcome): void {
    this.w.held.outcomes.push(outcome);
  }

  get pending(): number {
    return this.w.held.outcomes.length;
  }

  flush(): Promise<void> {
    // One at a time: a drain records outcomes while the loop may be recording them too.
    const next = this.flushing.then(() => this.flushOnce());
    this.flushing = next.catch(() => undefined);
    return next;
  }

  private async flushOnce(): Promise<void> {
    const { stats } = this.w;
    const { ledger, queue, runId } = this.w.o;
    const outcomes = this.w.held.outcomes;
    if (!outcomes.length) return;
    const batch = outcomes.slice();
    const results = batch.filter((o): o is Extract<Outcome, { kind: 'result' }> => o.kind === 'result');
    const failures = batch.filter((o): o is Extract<Outcome, { kind: 'failure' }> => o.kind === 'failure');
    const now = this.w.clock.now();
    if (results.length) {
      const changes = results.map((r) => this.recordable(r));
      let outs: readonly (boolean | undefined)[];
      let partial: PartialBatchError<boolean> | null = null;
      try {
        outs = await ledger.applyMany(changes, now);
      } catch (err) {
        if (!(err instanceof PartialBatchError)) throw err;
        partial = err as PartialBatchError<boolean>;
        outs = partial.outcomes;
      }
      // Those answered leave the list; the others are recorded at a later flush.
      const answered = results.filter((_, i) => outs[i] !== undefined);
      this.forget(answered);
      // Lost: re-pended meanwhile; whoever holds it now records the result.
      outs.forEach((ok, i) => (ok === undefined ? undefined : ok ? (changes[i]!.transition === 'reject' ? stats.rejected++ : stats.done++) : stats.lost++));
      await deleteAll(
        queue,
        answered.flatMap((r) => (r.h.message ? [r.h.message] : [])),
      );
      if (partial) throw partial;
    }
    if (failures.length) {
      const outs = await ledger.casMany(
        failures.map((f) => nack(runId, f.h.itemId, this.w.id, f.reason, { counts: true })),
        now,
      );
      this.forget(failures);
      // Our message comes back (its receives count toward the DLQ); without one, or when it can no
      // longer be released (another worker deleted the copy it got), a new one is sent.
      const released: WorkItem[] = [];
      const resend: WorkItem[] = [];
      const exhausted: string[] = [];
      await Promise.all(
        failures.map(async (f, i) => {
          const out = outs[i]!;
          if (!out.ok) return f.h.message ? queue.delete(f.h.message) : undefined;
          if (spent(queue, out.item)) {
            exhausted.push(out.item.id);
            return f.h.message ? queue.delete(f.h.message) : undefined;
          }
          if (!f.h.message) return resend.push(out.item);
          try {
            await queue.release(f.h.message);
            released.push(out.item);
          } catch (err) {
            this.w.logger.warn('releasing a message failed: sending a new one', { itemId: f.h.itemId, error: errorMessage(err) });
            resend.push(out.item);
          }
          return undefined;
        }),
      );
      if (exhausted.length) this.w.logger.info('items tried for the last time: left to the coordinator to fail', { runId, items: exhausted.length });
      if (released.length && !queue.deliversFromLedger) await ledger.markSent(runId, released, this.w.clock.now());
      await dispatch(ledger, queue, runId, resend, this.w.clock.now());
    }
  }

  /** An ack, unless the result cannot be stored: then a rejection naming why. */
  private recordable(r: { h: Held; result: unknown }): ItemCas {
    const { runId } = this.w.o;
    let canonical: string;
    try {
      canonical = canonicalJson(r.result);
    } catch (err) {
      return reject(runId, r.h.itemId, this.w.id, `result is not storable as JSON: ${errorMessage(err)}`);
    }
    const bytes = Buffer.byteLength(canonical);
    if (bytes > MAX_RESULT_BYTES) {
      return reject(
        runId,
        r.h.itemId,
        this.w.id,
        `result of ${bytes} bytes exceeds the limit of ${MAX_RESULT_BYTES} bytes: store it elsewhere (e.g. S3) and return a reference`,
      );
    }
    return ack(runId, r.h.itemId, this.w.id, r.result, canonical);
  }

  private forget(done: readonly Outcome[]): void {
    const outcomes = this.w.held.outcomes;
    const set = new Set(done);
    for (let i = outcomes.length - 1; i >= 0; i--) if (set.has(outcomes[i]!)) outcomes.splice(i, 1);
  }
}
