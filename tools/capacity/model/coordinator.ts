/**
 * The coordinator Lambda's sandboxes (functions/coordinator.ts
 * coordinatorOf): the lease a warm sandbox keeps, renews past half its TTL
 * or adopts when cold, and the shard fences raised once an epoch
 * (RunFences.ensure). A process coordinator (the benchmark's) is one
 * sandbox that never lapses. What a sandbox keeps across invocations is
 * state.ts Sandbox.
 */
import { COORDINATOR_LEASE_TTL_MS } from '../steal-hint.js';
import { lambdaEnd, lambdaStart } from './lambda.js';
import { single } from './ledger-store.js';
import { type Proc, req } from './requests.js';
import type { Client } from './sdk.js';
import type { Sandbox, SimState } from './state.js';

/** An invocation of the coordinator on a warm sandbox if one is free (the last freed), else a cold one; null: a 429. A process coordinator: its own. */
export function coordinatorStart(sim: SimState): { readonly began: number; readonly box: Sandbox } | null {
  if (sim.processBox) return { began: sim.now, box: sim.processBox };
  const began = lambdaStart(sim);
  if (began === null) return null;
  return { began, box: sim.idleBoxes.pop() ?? { tokenUntil: 0, fencesSeen: false, turns: new Set(), waiting: [] } };
}

export function coordinatorEnd(sim: SimState, inv: { readonly began: number; readonly box: Sandbox }): void {
  if (inv.box === sim.processBox) return;
  lambdaEnd(sim, inv.began);
  sim.idleBoxes.push(inv.box);
}

/**
 * The run's coordinator on this sandbox (functions/coordinator.ts
 * coordinatorOf): kept while its token has more than half the lease TTL
 * left — nothing read or written. Past half, a renewal from the row it last
 * saw, refused (and sent again from the row handed back) when another
 * sandbox renewed since; cold, or its token run out, the elector reads the
 * row first (readFirst: a consistent read, one unit) and leads on it
 * without a write while it has more than half its TTL left; else a renewal
 * (an acquire when there is no row yet), not sent again when refused
 * because another sandbox wrote first and the row is now fresh. Every
 * refused or landed write is a unit; the same holder keeps its epoch.
 */
export function* campaign(sim: SimState, box: Sandbox, client: Client): Proc<boolean> {
  const fresh = (until: number) => until - sim.now > COORDINATOR_LEASE_TTL_MS / 2;
  if (fresh(box.tokenUntil)) return true;
  let seen: number | null = box.tokenUntil > sim.now ? box.tokenUntil : null;
  if (seen === null) {
    const read = single(sim, sim.kLease, 1, 1, 'sdk', client);
    read.onOk = () => (seen = sim.leaseUntil === 0 ? null : sim.leaseUntil);
    if (!(yield { op: 'all', reqs: [read], limit: 1 })) return false;
    if (seen !== null && fresh(seen)) {
      box.tokenUntil = seen;
      return true;
    }
  }
  for (let attempt = 0; attempt < 2; attempt++) {
    let landed = false;
    const write = single(sim, sim.kLease, 0, 1, 'sdk', client);
    write.onOk = () => {
      landed = seen === null ? sim.leaseUntil === 0 : seen === sim.leaseUntil;
      if (landed) {
        sim.leaseUntil = sim.now + COORDINATOR_LEASE_TTL_MS;
        sim.leaseRenewals += sim.k;
      }
      seen = sim.leaseUntil;
    };
    sim.leaseWrites += sim.k;
    if (!(yield { op: 'all', reqs: [write], limit: 1 })) return false;
    if (landed) break;
    // Refused because another sandbox wrote first: fresh, led on as it stands (readFirst), not written again.
    if (fresh(sim.leaseUntil)) break;
  }
  box.tokenUntil = sim.leaseUntil;
  return true;
}

/** A process coordinator's elector renewing its lease: one conditional put, one real request. */
export function* renewLease(sim: SimState): Proc {
  const write = single(sim, sim.kLease, 0, 1, 'sdk', sim.coordinatorClient, 1);
  write.onOk = () => (sim.leaseRenewals += 1);
  sim.leaseWrites += 1;
  yield { op: 'all', reqs: [write], limit: 1 };
}

/**
 * RunFences.ensure, before a sandbox's first fenced write of the epoch: the
 * marker read (consistent); none, the fences raised — every shard's, ≤ 99 a
 * transaction with the lease's ConditionCheck, one after another — then
 * the marker, in its own. Sandboxes that find none at once each raise
 * (the same holder and epoch: idempotent), conflicting on the lease.
 */
export function* ensureFences(sim: SimState, box: Sandbox, client: Client): Proc<boolean> {
  if (box.fencesSeen) return true;
  if (box.ensuring) {
    const waiters = box.ensuring;
    yield { op: 'wait', register: (resume) => waiters.push(resume) };
    return box.fencesSeen;
  }
  const waiters: (() => void)[] = (box.ensuring = []);
  try {
    return yield* ensureFencesOnce(sim, box, client);
  } finally {
    box.ensuring = undefined;
    for (const resume of waiters) resume();
  }
}

export function* ensureFencesOnce(sim: SimState, box: Sandbox, client: Client): Proc<boolean> {
  if (!(yield { op: 'all', reqs: [single(sim, sim.kMarker, 1, 1, 'sdk', client)], limit: 1 })) return false;
  if (!sim.fencesUp) {
    const chunks: number[][] = [];
    for (let s = 0; s < sim.n; s += 99) chunks.push(Array.from({ length: Math.min(99, sim.n - s) }, (_, j) => sim.kFence0 + s + j));
    chunks.push([sim.kMarker]);
    for (const keys of chunks) {
      const raise = req(sim, 'ddb', 'conflict', client, [sim.kLease, ...keys], [0, ...keys.map(() => 0)], [2, ...keys.map(() => 2)], 1);
      raise.fences = [sim.kLease];
      raise.box = box;
      if (keys[0] === sim.kMarker) raise.onOk = () => (sim.fencesUp = true);
      if (!(yield { op: 'all', reqs: [raise], limit: 1 })) return false;
    }
  }
  box.fencesSeen = true;
  return true;
}
