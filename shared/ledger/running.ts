import type { WorkItem } from './model.js';
import type { LedgerStore, RunningEntry } from './store.js';

/**
 * The running set at the cost its readers need. Who holds what (a steal's
 * victim, a worker's reconcile) comes from the store's index where it has
 * one (`holders`): its entries carry nothing a start or a heartbeat changes,
 * so they say who holds an item but, on DynamoDB, not whether it started.
 * That is read from the items themselves, and only for the few entries a
 * decision turns on (one worker's). The failure scan needs every heartbeat:
 * it reads `running`, the items whole.
 */

/**
 * What reading the running set takes: the store's index of holders, or the
 * items themselves (a store port has one or both; a remote worker's view of
 * a node has holders only), and reads of items by id.
 */
export type RunningReader = Pick<LedgerStore, 'get' | 'getMany'> &
  ({ readonly holders: NonNullable<LedgerStore['holders']>; readonly running?: undefined } | Pick<LedgerStore, 'running' | 'holders'>);

/** Who holds each Running item: the store's index where it has one, else the items. */
export function runningEntries(ledger: RunningReader, runId: string): Promise<readonly RunningEntry[]> {
  return ledger.holders ? ledger.holders(runId) : ledger.running!(runId);
}

/** The items named, read consistently (the store's batch read, else one read each); missing ones left out. */
export async function readItems(ledger: RunningReader, runId: string, ids: readonly string[]): Promise<WorkItem[]> {
  if (!ids.length) return [];
  if (ledger.getMany) return ledger.getMany(runId, ids);
  return (await Promise.all(ids.map((id) => ledger.get(runId, id)))).filter((i): i is WorkItem => i !== null);
}

/** A Running(worker) item and whether it started. */
export type Held = RunningEntry & { readonly started: boolean };

/**
 * Of `entries` (one worker's), those still Running(worker), each with whether
 * it started: an entry that says so is taken as it is (as fresh as the
 * reading it came in), the others are read. A decision taken on either is
 * then made by a compare-and-swap on the item, so a stale answer never wins.
 */
export async function heldBy(ledger: RunningReader, runId: string, worker: string, entries: readonly RunningEntry[]): Promise<Held[]> {
  const known = entries.filter((e): e is Held => e.started !== undefined);
  const read = await readItems(
    ledger,
    runId,
    entries.filter((e) => e.started === undefined).map((e) => e.id),
  );
  return [...known, ...read.filter((i) => i.state === 'running' && i.worker === worker)];
}
