/**
 * The simulated DynamoDB table: its keys (per shard: the items' partition,
 * the PENDING and RUNNING index keys; then the run record, the lease, the
 * RUNS index key, the steal hint, the fences), each metered per fixed
 * window against its partition's limit and the table's quota, as the
 * throttling simulator (test/support/dynamodb-throttle.ts) meters them.
 */
import { F_ITEM, F_PENDING, type SimState } from './state.js';
import type { Family } from './types.js';

/** What a request charges: key ids, kinds (0 write, 1 read) and units (already × weight). */
export interface Charge {
  readonly keys: readonly number[];
  readonly kinds: readonly number[];
  readonly units: readonly number[];
}

export function roll(sim: SimState, key: number): void {
  const win = Math.floor(sim.now / sim.o.limits.windowMs);
  if (sim.keyWindow[key] !== win) {
    sim.keyWindow[key] = win;
    sim.used[0][key] = 0;
    sim.used[1][key] = 0;
    sim.reserved[0][key] = 0;
    sim.reserved[1][key] = 0;
  }
}

export function rollTable(sim: SimState): void {
  const win = Math.floor(sim.now / sim.o.limits.windowMs);
  if (sim.tableWindow !== win) {
    sim.tableWindow = win;
    sim.tableUsed.fill(0);
    sim.tableReserved.fill(0);
  }
}

/** The keys at their limit, as key × 2 + kind (null: admitted; empty: refused by the table quota alone). */
export function hotKeys(sim: SimState, r: Charge): number[] | null {
  let hot: number[] | null = null;
  for (let i = 0; i < r.keys.length; i++) {
    const key = r.keys[i]!;
    const kind = r.kinds[i]!;
    roll(sim, key);
    const lim = sim.limit[(sim.isGsi[key] ? 2 : 0) + kind]!;
    if (sim.used[kind as 0 | 1][key]! + sim.reserved[kind as 0 | 1][key]! < lim) continue;
    hot ??= [];
    const code = key * 2 + kind;
    if (!hot.includes(code)) hot.push(code);
  }
  if (hot === null && sim.quota) {
    rollTable(sim);
    for (let i = 0; i < r.keys.length; i++) {
      const slot = (sim.isGsi[r.keys[i]!] ? 2 : 0) + r.kinds[i]!;
      if (sim.tableUsed[slot]! + sim.tableReserved[slot]! >= sim.quota[slot]!) return [];
    }
  }
  return hot;
}

export function reserve(sim: SimState, r: Charge): number {
  rollTable(sim);
  for (let i = 0; i < r.keys.length; i++) {
    const key = r.keys[i]!;
    const kind = r.kinds[i]!;
    sim.reserved[kind as 0 | 1][key]! += r.units[i]!;
    sim.tableReserved[(sim.isGsi[key] ? 2 : 0) + kind]! += r.units[i]!;
  }
  return sim.tableWindow;
}

/** The reservation gives way to the units used, charged in the window the answer comes in (as the simulator does). */
export function settle(sim: SimState, r: Charge, window: number): void {
  const sameWindow = Math.floor(sim.now / sim.o.limits.windowMs) === window;
  rollTable(sim);
  for (let i = 0; i < r.keys.length; i++) {
    const key = r.keys[i]!;
    const kind = r.kinds[i]!;
    const u = r.units[i]!;
    const slot = (sim.isGsi[key] ? 2 : 0) + kind;
    roll(sim, key);
    if (sameWindow) {
      sim.reserved[kind as 0 | 1][key] = Math.max(0, sim.reserved[kind as 0 | 1][key]! - u);
      sim.tableReserved[slot] = Math.max(0, sim.tableReserved[slot]! - u);
    }
    const v = (sim.used[kind as 0 | 1][key]! += u);
    if (v > sim.peak[kind as 0 | 1][key]!) sim.peak[kind as 0 | 1][key] = v;
    const t = (sim.tableUsed[slot]! += u);
    if (t > sim.tablePeak[slot]!) sim.tablePeak[slot] = t;
    if (kind === 1) sim.rcu += u;
    else if (sim.isGsi[key]) sim.indexWcu += u;
    else sim.wcu += u;
  }
}

export function familyName(sim: SimState, key: number): string {
  const sharded = sim.o.shards !== null;
  if (key === sim.kRunRecord) return sharded ? 'RUN#*' : 'RUN#*';
  if (key === sim.kLease) return 'LEASE#*';
  if (key === sim.kRuns) return 'gsi1:RUNS';
  if (key === sim.kHint) return 'STEAL#*';
  if (key === sim.kMarker) return 'FENCE#*';
  if (key >= sim.kFence0) return 'FENCE#*#*';
  const f = Math.floor(key / sim.n);
  const suffix = sharded ? '#*#*' : '#*';
  return f === F_ITEM ? `RUN${suffix}` : f === F_PENDING ? `gsi1:PENDING${suffix}` : `gsi1:RUNNING${suffix}`;
}

export function familyOf(sim: SimState, key: number): Family {
  if (key === sim.kLease) return 'lease';
  if (key === sim.kRuns) return 'runs';
  if (key === sim.kHint) return 'hint';
  if (key === sim.kMarker || key >= sim.kFence0) return 'fence';
  if (key === sim.kRunRecord && sim.o.shards !== null) return 'runRecord';
  const f = Math.floor(key / sim.n);
  return f === F_ITEM ? 'item' : f === F_PENDING ? 'pending' : 'running';
}
