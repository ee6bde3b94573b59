/**
 * What a work run asks of DynamoDB, per item and per key, on the sharded
 * layout (shared/adapters/dynamodb/ledger-keys.ts) — and so how many shards
 * a run needs. Pure arithmetic over the ledger's own writes, so the plan
 * (`npm run capacity`), the shard count a run is created with and the
 * simulation all count the same thing.
 *
 * An item's life on DynamoDB, one write each (ledger-updates.ts):
 *
 *   enqueue   PutItem                       index: PENDING put
 *   markSent  UpdateItem (sentAt)           index: PENDING key's sort key moves (delete + put)
 *   claim     UpdateItem                    index: PENDING delete, RUNNING put
 *   start     UpdateItem                    index: RUNNING sort key moves (delete + put)
 *   heartbeat UpdateItem, H of them         index: RUNNING sort key moves (delete + put) each
 *   ack       UpdateItem (with the result)  index: RUNNING delete
 *
 * A write costs one write unit per KB of the item (rounded up); an index
 * write one per KB of the projected entry (the index projects the whole
 * item). Every one of an item's writes lands on its shard's keys: the item
 * partition, and its shard's PENDING and RUNNING keys.
 */

/** DynamoDB's per-partition ceilings (Service Quotas: not adjustable). */
export const PARTITION_WCU = 1_000;
export const PARTITION_RCU = 3_000;
/** The share of a key's ceiling a plan lets one key reach: headroom for bursts, retries and uneven hashing. */
export const DEFAULT_KEY_SHARE = 0.5;
/**
 * Shards of a run created without a rate or a count: about 330 items/s of
 * 1 KB items, one heartbeat each, at DEFAULT_KEY_SHARE — more than most runs
 * need, for four index queries where one would do.
 */
export const DEFAULT_RUN_SHARDS = 4;
/** The most shards a run may have (the DynamoDB ledger's keys refuse more). */
export const MAX_RUN_SHARDS = 512;

export interface ItemShape {
  /** Size of an item as stored, payload, result and bookkeeping together (KB). */
  readonly itemKb: number;
  /** Heartbeats per item: how long it runs divided by the worker's heartbeat interval (0 for items done within one). */
  readonly heartbeats: number;
}

export interface PerItem {
  /** Writes to the item's partition key, and the write units they cost. */
  readonly itemWrites: number;
  readonly itemWcu: number;
  /** Index write units on the shard's PENDING key and RUNNING key. */
  readonly pendingWcu: number;
  readonly runningWcu: number;
}

export function perItem(shape: ItemShape): PerItem {
  const w = unitsPerWrite(shape.itemKb);
  const h = Math.max(0, shape.heartbeats);
  const writes = Object.entries(ITEM_WRITES).map(([write, units]) => ({ n: write === 'heartbeat' ? h : 1, units }));
  const sum = (on: 'item' | 'pending' | 'running') => writes.reduce((total, x) => total + x.n * x.units[on], 0);
  const itemWrites = writes.reduce((total, x) => total + x.n, 0);
  return { itemWrites, itemWcu: sum('item') * w, pendingWcu: sum('pending') * w, runningWcu: sum('running') * w };
}

/**
 * The shards a run needs so that at `itemsPerSecond` no key of a shard takes
 * more than `share` of a partition's write units: at least 1, at most
 * MAX_RUN_SHARDS (a rate that needs more is refused by the caller).
 */
export function shardsFor(itemsPerSecond: number, shape: ItemShape = { itemKb: 1, heartbeats: 1 }, share = DEFAULT_KEY_SHARE): number {
  const p = perItem(shape);
  const hottest = Math.max(p.itemWcu, p.pendingWcu, p.runningWcu);
  return Math.max(1, Math.ceil((itemsPerSecond * hottest) / (share * PARTITION_WCU)));
}

/** The ledger writes of an item's life, each on the item's shard (ledger-updates.ts). */
export type ItemWrite = 'enqueue' | 'markSent' | 'claim' | 'start' | 'heartbeat' | 'ack';

/**
 * What each of those writes costs, in write units per KB of the item: on the
 * item's partition key and as index writes on its shard's PENDING and RUNNING
 * keys. The header's table, one row a write; `perItem` is their sum, so the plan and the model (infra/capacity/)
 * charge each request what `perItem` counts in total.
 */
export const ITEM_WRITES: Readonly<Record<ItemWrite, { readonly item: number; readonly pending: number; readonly running: number }>> = {
  enqueue: { item: 1, pending: 1, running: 0 },
  markSent: { item: 1, pending: 2, running: 0 },
  claim: { item: 1, pending: 1, running: 1 },
  start: { item: 1, pending: 0, running: 2 },
  heartbeat: { item: 1, pending: 0, running: 2 },
  ack: { item: 1, pending: 0, running: 1 },
};

/** Write units per KB-rounded write of an item of `itemKb` KB (1 per started KB, at least 1). */
export const unitsPerWrite = (itemKb: number): number => Math.max(1, Math.ceil(itemKb));
