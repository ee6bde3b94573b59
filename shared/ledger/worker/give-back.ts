import { dispatch } from '../dispatch.js';
import { nack } from '../transitions.js';
import { deleteAll, type Held, type WorkerContext } from './context.js';

/**
 * Nack held items without counting an attempt (we chose to stop, the item
 * did nothing wrong) and make sure each has a message: on SQS a new one
 * (releasing ours would count a receive toward the DLQ), then ours is
 * deleted. Returns the ids given back.
 */
export async function giveBack(w: WorkerContext, items: readonly Held[]): Promise<string[]> {
  if (!items.length) return [];
  const { ledger, queue, runId } = w.o;
  const fromLedger = queue.deliversFromLedger === true;
  const now = w.clock.now();
  const outs = await ledger.casMany(
    items.map((h) => nack(runId, h.itemId, w.id, 'drained', { counts: false })),
    now,
  );
  const given = outs.flatMap((o) => (o.ok ? [o.item] : []));
  if (fromLedger) {
    if (given.length)
      await queue.send(
        runId,
        given.map((i) => i.id),
      ); // a wake-up
  } else {
    await dispatch(ledger, queue, runId, given, w.clock.now());
    await deleteAll(
      queue,
      items.flatMap((h) => (h.message ? [h.message] : [])),
    );
  }
  return given.map((i) => i.id);
}
