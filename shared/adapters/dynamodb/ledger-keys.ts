/**
 * Where a run's items and their index entries live on DynamoDB.
 *
 * One partition key serves about 1,000 write units/s, and a throttled index
 * key throttles the table's writes: no key may take a write per item
 * processed at a rate near that. So a run's items are spread over N shards,
 * N fixed when the run is created and recorded on it:
 *
 *   sharded (every run created with `shards`)     RUN#<run>#<s> / ITEM#<id>
 *                                                 gsi1: PENDING#<run>#<s>, RUNNING#<run>#<s>, FAILED#<run>#<s>
 *   first layout (runs created before sharding)   RUN#<run> / ITEM#<id>
 *                                                 gsi1: PENDING#<run>, RUNNING#<run>, FAILED#<run>
 *   coordinator fences, one a shard               FENCE#<run>#<s> / FENCE (first layout: FENCE#<run> / FENCE)
 *                                                 and FENCE#<run> / RAISED
 *
 * with s = shardOf(id, N): the item's id is the hash of its content, so its
 * shard follows from the id alone and every party (worker, coordinator, API)
 * finds it without a lookup. A run id never contains `#`, so no two runs'
 * keys meet. The run's own record stays at RUN#<run> / RUN, written per
 * request (enqueue, lease win), never per item.
 */

import { MAX_RUN_SHARDS as MAX_SHARDS } from '../../ledger/capacity.js';

export interface RunKeys {
  /** N, or null for the first layout. */
  readonly shards: number | null;
  /** The partition keys holding the run's items. */
  readonly partitions: readonly string[];
  readonly pendingKeys: readonly string[];
  readonly runningKeys: readonly string[];
  readonly failedKeys: readonly string[];
  /** Each shard's coordinator fence (ledger-fences.ts), in shard order. */
  readonly fences: readonly { readonly pk: string; readonly sk: string }[];
  /** The record that every shard's fence was raised to an epoch. */
  readonly fencesRaised: { readonly pk: string; readonly sk: string };
  /** The fence of the item's shard. */
  fence(itemId: string): { readonly pk: string; readonly sk: string };
  item(itemId: string): { readonly pk: string; readonly sk: string };
  /** The item's index keys while Pending, Running and Failed. */
  index(itemId: string): { readonly pending: string; readonly running: string; readonly failed: string };
}

/** An item's shard: the first 32 bits of its content hash, modulo N (ids that are not hex are hashed first). */
export function shardOf(itemId: string, shards: number): number {
  const head = /^[0-9a-f]{8}/i.test(itemId) ? Number.parseInt(itemId.slice(0, 8), 16) : fnv1a(itemId);
  return head % shards;
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export const runPk = (runId: string) => `RUN#${runId}`;
export const itemSk = (itemId: string) => `ITEM#${itemId}`;

export function runKeys(runId: string, shards: number | null): RunKeys {
  if (shards !== null && !(Number.isInteger(shards) && shards >= 1 && shards <= MAX_SHARDS))
    throw new Error(`run ${runId}: shards must be a whole number from 1 to ${MAX_SHARDS}, got ${shards}`);
  const suffix = (s: number | null) => (s === null ? '' : `#${s}`);
  const all = shards === null ? [null] : Array.from({ length: shards }, (_, s) => s);
  const at = (itemId: string) => (shards === null ? null : shardOf(itemId, shards));
  return {
    shards,
    partitions: all.map((s) => `${runPk(runId)}${suffix(s)}`),
    pendingKeys: all.map((s) => `PENDING#${runId}${suffix(s)}`),
    runningKeys: all.map((s) => `RUNNING#${runId}${suffix(s)}`),
    failedKeys: all.map((s) => `FAILED#${runId}${suffix(s)}`),
    fences: all.map((s) => ({ pk: `FENCE#${runId}${suffix(s)}`, sk: 'FENCE' })),
    fencesRaised: { pk: `FENCE#${runId}`, sk: 'RAISED' },
    fence: (itemId) => ({ pk: `FENCE#${runId}${suffix(at(itemId))}`, sk: 'FENCE' }),
    item: (itemId) => ({ pk: `${runPk(runId)}${suffix(at(itemId))}`, sk: itemSk(itemId) }),
    index: (itemId) => {
      const s = suffix(at(itemId));
      return { pending: `PENDING#${runId}${s}`, running: `RUNNING#${runId}${s}`, failed: `FAILED#${runId}${s}` };
    },
  };
}

/** The run an item partition or index key belongs to: `RUN#r1#3` → `r1`, `RUNNING#r1` → `r1`. */
export function runOfKey(key: string): string {
  return key.replace(/^[A-Z]+#/, '').replace(/#\d+$/, '');
}
