/**
 * The requests DynamoLedgerStore (shared/adapters/dynamodb/ledger-store.ts)
 * makes of an item and of the run's keys, charged as ITEM_WRITES
 * (shared/ledger/capacity.ts) counts them, and the ledger's view of who
 * holds what.
 */
import { INDEX_ENTRY_KB, ITEM_WRITES, type ItemWrite } from '../../../shared/ledger/capacity.js';
import { type Policy, type Proc, type Req, req } from './requests.js';
import type { Client } from './sdk.js';
import { F_ITEM, F_PENDING, F_RUNNING, type Sandbox, type SimState } from './state.js';

/** One of the item's ledger writes, charged to each shard its real items hash to. */
export function itemWrite(sim: SimState, item: number, write: ItemWrite, client: Client): Req {
  return itemMove(sim, item, ITEM_WRITES[write], client);
}

/** A write of the item: `c.item` writes of it on its partition, `c.pending` / `c.running` writes of its index entry on its PENDING and RUNNING keys. */
export function itemMove(
  sim: SimState,
  item: number,
  c: { readonly item: number; readonly pending: number; readonly running: number },
  client: Client,
  policy: Policy = 'app',
): Req {
  const keys: number[] = [];
  const kinds: number[] = [];
  const units: number[] = [];
  for (let j = sim.slotStart[item]!; j < sim.slotStart[item + 1]!; j++) {
    const s = sim.slotShard[j]!;
    const n = sim.slotCount[j]!;
    keys.push(F_ITEM * sim.n + s);
    kinds.push(0);
    units.push(c.item * n * sim.w);
    if (c.pending) {
      keys.push(F_PENDING * sim.n + s);
      kinds.push(0);
      units.push(c.pending * n * sim.e);
    }
    if (c.running) {
      keys.push(F_RUNNING * sim.n + s);
      kinds.push(0);
      units.push(c.running * n * sim.e);
    }
  }
  return req(sim, 'ddb', policy, client, keys, kinds, units);
}

/** A write refused by its condition (the item moved on): one unit of the item on its partition, nothing in the index. */
export function failedWrite(sim: SimState, item: number, client: Client): Req {
  const keys: number[] = [];
  const units: number[] = [];
  for (let j = sim.slotStart[item]!; j < sim.slotStart[item + 1]!; j++) {
    keys.push(F_ITEM * sim.n + sim.slotShard[j]!);
    units.push(sim.slotCount[j]! * sim.w);
  }
  return req(
    sim,
    'ddb',
    'app',
    client,
    keys,
    keys.map(() => 0),
    units,
  );
}

/** A steal: one fenced TransactWriteItems — the item's update (twice: prepare and commit), its RUNNING entry rewritten in place (its worker; twice), its shard fence's ConditionCheck (2). */
export function stealWrite(sim: SimState, item: number, box: Sandbox, client: Client): Req {
  return fenced(sim, itemMove(sim, item, { item: 2, pending: 0, running: 2 }, client, 'conflict'), item, box);
}

/** The item's write made a fenced transaction: a ConditionCheck (2 units a real item) on the fence of each shard it is on. */
export function fenced(sim: SimState, r: Req, item: number, box: Sandbox): Req {
  const fences: number[] = [];
  for (let j = sim.slotStart[item]!; j < sim.slotStart[item + 1]!; j++) {
    const f = sim.kFence0 + sim.slotShard[j]!;
    r.keys.push(f);
    r.kinds.push(0);
    r.units.push(2 * sim.slotCount[j]!);
    fences.push(f);
  }
  r.fences = fences;
  r.box = box;
  return r;
}

/** One request on one key; `count` real requests (the weight, or 1 for what a run does once), units × count. */
export function single(sim: SimState, key: number, kind: number, units: number, policy: Policy, client: Client, count = sim.k): Req {
  return req(sim, 'ddb', policy, client, [key], [kind], [units * count], count);
}

/**
 * Every page of a query of one index key: eventually consistent, ½ unit per started 4 KB (at least ½), 1 MB a page.
 * Each page a request of its own, retried on its own when throttled (queryAll's EachRequest): a refused page does not restart the read.
 */
export function queryPages(sim: SimState, key: number, entries: number, client: Client, count = sim.k): Req[] {
  const bytes = entries * INDEX_ENTRY_KB * 1024;
  const pages = Math.max(1, Math.ceil(bytes / (1024 * 1024)));
  const per = bytes / pages;
  return Array.from({ length: pages }, () => single(sim, key, 1, 0.5 * Math.max(1, Math.ceil(per / 4096)), 'app', client, count));
}

/** The items read consistently, 100 to a BatchGetItem (DynamoLedgerStore readItems): each charged to its partitions, each retried on its own (batchGetAll's EachRequest). */
export function readItems(sim: SimState, items: readonly number[], client: Client): Req[] {
  const reqs: Req[] = [];
  for (let i = 0; i < items.length; i += 100) {
    const keys: number[] = [];
    const units: number[] = [];
    for (const item of items.slice(i, i + 100)) {
      for (let j = sim.slotStart[item]!; j < sim.slotStart[item + 1]!; j++) {
        keys.push(F_ITEM * sim.n + sim.slotShard[j]!);
        units.push(sim.slotCount[j]! * sim.itemRead);
      }
    }
    reqs.push(
      req(
        sim,
        'ddb',
        'app',
        client,
        keys,
        keys.map(() => 1),
        units,
      ),
    );
  }
  return reqs;
}

/**
 * Every shard's RUNNING entries (their pages in order): what `holders` reads, and `running` before the items.
 * `readers`: the real readers, each reading the whole set (runningCnt counts real items) — a simulated worker's
 * reconcile is its k workers'; a hint rebuild and the coordinator's scan are one reader's, once a run.
 */
export function* readRunning(sim: SimState, client: Client, concurrency: number, readers: number): Proc<boolean> {
  const perKey: Req[][] = Array.from({ length: sim.n }, (_, s) => queryPages(sim, F_RUNNING * sim.n + s, sim.runningCnt[s]!, client, readers));
  // Pages of one key follow each other; keys fan out `concurrency` at a time.
  if (!(yield { op: 'all', reqs: perKey.map((pages) => pages[0]!), limit: concurrency })) return false;
  const rest = perKey.flatMap((pages) => pages.slice(1));
  return rest.length ? yield { op: 'all', reqs: rest, limit: concurrency } : true;
}

export function moveCounts(sim: SimState, item: number, from: Float64Array | null, to: Float64Array | null): void {
  for (let j = sim.slotStart[item]!; j < sim.slotStart[item + 1]!; j++) {
    const s = sim.slotShard[j]!;
    const c = sim.slotCount[j]!;
    if (from) from[s]! -= c;
    if (to) to[s]! += c;
  }
}

/** Who the ledger says holds a Running item (-1: nobody). */
export function setOwner(sim: SimState, i: number, id: number): void {
  const was = sim.owner[i]!;
  if (was >= 0) sim.workers[was]?.owned.delete(i);
  sim.startUnknown[i] = 0;
  sim.owner[i] = id;
  if (id >= 0) sim.workers[id]?.owned.add(i);
}
