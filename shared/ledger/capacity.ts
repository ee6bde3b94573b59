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
 *   start     UpdateItem                    index: none (its RUNNING entry does not change)
 *   heartbeat UpdateItem, H of them         index: none
 *   ack       UpdateItem (with the result)  index: RUNNING delete
 *
 * H is the heartbeat writes an item takes while held: a worker writes a held
 * item only when it would otherwise go a heartbeat interval without a write
 * (worker.ts heartbeatDue), so an item claimed, started and acked within an
 * interval takes none.
 *
 * A write costs one write unit per KB of the item (rounded up); an index
 * write one per KB of the entry, which is the keys and the few attributes
 * gsi1 projects (table.ts GSI1_PROJECTED): under a KB, one unit whatever the
 * item's size. Every one of an item's writes lands on its shard's keys: the
 * item partition, and its shard's PENDING and RUNNING keys.
 */

/** DynamoDB's per-partition ceilings (Service Quotas: not adjustable). */
export const PARTITION_WCU = 1_000;
export const PARTITION_RCU = 3_000;
/** The share of a key's ceiling a plan lets one key reach: headroom for bursts, retries and uneven hashing. */
export const DEFAULT_KEY_SHARE = 0.5;
/**
 * Shards of a run created without a rate or a count: about 330 items/s of
 * 1 KB items, one heartbeat write each, at DEFAULT_KEY_SHARE — more than most
 * runs need, for four index queries where one would do.
 */
export const DEFAULT_RUN_SHARDS = 4;
/** The most shards a run may have (the DynamoDB ledger's keys refuse more). */
export const MAX_RUN_SHARDS = 512;

/**
 * An index entry's size: the table's keys (`RUN#<run>#<s>`, `ITEM#<64 hex>`),
 * the index's (`RUNNING#<run>#<s>`, the id or `<15 digits>#<id>`), the
 * projected attributes (the id again, run id, state, worker, times, version)
 * with their names, and the 100 bytes DynamoDB adds to each index entry:
 * about 600 bytes for run and worker ids of 30 characters.
 */
export const INDEX_ENTRY_KB = 0.6;

export interface ItemShape {
  /** Size of an item as stored, payload, result and bookkeeping together (KB). */
  readonly itemKb: number;
  /** Heartbeat writes per item while it is held (0 for items claimed, run and acked within an interval). */
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
  const e = unitsPerWrite(INDEX_ENTRY_KB);
  const h = Math.max(0, shape.heartbeats);
  const writes = Object.entries(ITEM_WRITES).map(([write, units]) => ({ n: write === 'heartbeat' ? h : 1, units }));
  const sum = (on: 'item' | 'pending' | 'running') => writes.reduce((total, x) => total + x.n * x.units[on], 0);
  const itemWrites = writes.reduce((total, x) => total + x.n, 0);
  return { itemWrites, itemWcu: sum('item') * w, pendingWcu: sum('pending') * e, runningWcu: sum('running') * e };
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
 * What each of those writes costs: writes of the item on its partition key
 * (each a unit per KB of the item), and index entry writes on its shard's
 * PENDING and RUNNING keys (each a unit per KB of the entry). The header's
 * table, one row a write; `perItem` is their sum, so the plan and the model
 * (tools/capacity/) charge each request what `perItem` counts in total.
 */
export const ITEM_WRITES: Readonly<Record<ItemWrite, { readonly item: number; readonly pending: number; readonly running: number }>> = {
  enqueue: { item: 1, pending: 1, running: 0 },
  markSent: { item: 1, pending: 2, running: 0 },
  claim: { item: 1, pending: 1, running: 1 },
  start: { item: 1, pending: 0, running: 0 },
  heartbeat: { item: 1, pending: 0, running: 0 },
  ack: { item: 1, pending: 0, running: 1 },
};

/** Write units per KB-rounded write of an item of `itemKb` KB (1 per started KB, at least 1). */
export const unitsPerWrite = (itemKb: number): number => Math.max(1, Math.ceil(itemKb));
