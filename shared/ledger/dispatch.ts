import type { WorkQueue } from '../queue/port.js';
import type { WorkItem } from './model.js';
import type { LedgerStore } from './store.js';

/**
 * Put Pending items on the queue, then record that their messages exist.
 *
 * Storing a change and sending its message are two steps, and a crash, a
 * timeout or a refused send can fall between them. The order makes that
 * safe: an item is recorded as sent only after its message went out, so one
 * that never got a message stays `sentAt = null` and the coordinator's scan
 * sends it (`Coordinator.resendUnsent`). The worst a crash after the send
 * does is a second message, which workers drop (see the queue rule in
 * worker.ts).
 *
 * `items` carry the version of the Pending row the caller made or saw: a
 * row claimed since then is not marked.
 */
export async function dispatch(
  ledger: Pick<LedgerStore, 'markSent'>,
  queue: WorkQueue,
  runId: string,
  items: readonly Pick<WorkItem, 'id' | 'version'>[],
  now: number,
): Promise<void> {
  if (!items.length) return;
  await queue.send(
    runId,
    items.map((i) => i.id),
  );
  if (!queue.deliversFromLedger) await ledger.markSent(runId, items, now);
}
