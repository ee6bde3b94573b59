/** The coordinator's scheduled scan-all (Coordinator scan, failureScan): open runs probed, silent items re-pended, unsent ones found. */
import { campaign, coordinatorEnd, coordinatorStart, ensureFences } from './coordinator.js';
import { dispatch } from './dispatch.js';
import { fenced, itemMove, moveCounts, queryPages, readItems, readRunning, setOwner, single } from './ledger-store.js';
import type { Proc, Req } from './requests.js';
import type { Client } from './sdk.js';
import { F_PENDING, F_RUNNING, type Sandbox, type SimState } from './state.js';

/**
 * Coordinator.failureScan: Running items whose heartbeat has not moved for
 * the failure timeout, at two looks in a row, go back to Pending (a fenced
 * transaction each on its shard's fence, a batch of 100 at a time, the
 * ledger's 16 in flight; at most 1,000 a scan) and on the queue. A worker
 * still holding one finds its ack refused.
 */
export function* failureScan(sim: SimState, box: Sandbox, client: Client): Proc {
  const timeout = sim.o.failureTimeoutSeconds * 1000;
  const stale: number[] = [];
  for (const w of sim.workers) {
    for (const i of w.owned) {
      const silent = sim.now - sim.lastBeat[i]! >= timeout;
      if (silent && sim.staleSeen[i] && stale.length * sim.k < 1000) stale.push(i);
      sim.staleSeen[i] = silent ? 1 : 0;
    }
  }
  if (stale.length && !(yield* ensureFences(sim, box, client))) return;
  const batch = Math.max(1, Math.floor(100 / sim.k));
  for (let j = 0; j < stale.length; j += batch) {
    const back: number[] = [];
    const repends = stale.slice(j, j + batch).map((i) => {
      // repend: the item ×2, its index entry RUNNING → PENDING (delete + put) ×2, its shard fence's ConditionCheck.
      const r = fenced(sim, itemMove(sim, i, { item: 2, pending: 2, running: 2 }, client, 'conflict'), i, box);
      r.onOk = () => {
        if (sim.state[i] !== 2 || sim.now - sim.lastBeat[i]! < timeout) return;
        // A worker that still has it waiting drops it at its next heartbeat; one running it finds its ack refused.
        const holder = sim.heldBy[i]! >= 0 ? sim.workers[sim.heldBy[i]!] : undefined;
        const waiting = holder ? holder.backlog.indexOf(i) : -1;
        if (holder && waiting >= 0) {
          holder.backlog.splice(waiting, 1);
          sim.heldBy[i] = -1;
        }
        sim.state[i] = 1;
        setOwner(sim, i, -1);
        sim.started[i] = 0;
        sim.staleSeen[i] = 0;
        sim.sentRecorded[i] = 0;
        moveCounts(sim, i, sim.runningCnt, sim.pendingCnt);
        moveCounts(sim, i, null, sim.unsentCnt);
        back.push(i);
        sim.repended += sim.k;
      };
      return r;
    });
    const ok = yield { op: 'all', reqs: repends, limit: 16 };
    // What landed goes on the queue even when the batch failed (the next scan's resend would send it).
    if (back.length) yield* dispatch(sim, back, client, 16);
    if (!ok) break;
  }
}

/** The schedule's scan-all: open runs (one probe of every PENDING and RUNNING key), then this run's failure scan and unsent re-send. */
export function* scan(sim: SimState): Proc {
  const inv = coordinatorStart(sim);
  if (inv === null) return;
  const client = sim.coordinatorClient;
  yield { op: 'sleep', ms: sim.o.latencyMs.lambda };
  yield { op: 'all', reqs: [single(sim, sim.kRuns, 1, 0.5, 'sdk', client)], limit: 1 };
  const probes: Req[] = [];
  for (let s = 0; s < sim.n; s++)
    probes.push(single(sim, F_PENDING * sim.n + s, 1, 0.5, 'app', client), single(sim, F_RUNNING * sim.n + s, 1, 0.5, 'app', client));
  yield { op: 'all', reqs: probes, limit: 16 };
  const lead = yield* campaign(sim, inv.box, client);
  // ledger.running: the entries, then every running item (their heartbeats are not in the index).
  const runningItems: number[] = [];
  for (let i = 0; i < sim.simItems; i++) if (sim.state[i] === 2) runningItems.push(i);
  if (lead && (yield* readRunning(sim, client, 16, 1)) && (yield { op: 'all', reqs: readItems(sim, runningItems, client), limit: 16 }))
    yield* failureScan(sim, inv.box, client);
  // Unsent items (stored, message not yet recorded): at most 1,000 a key.
  const unsent: Req[] = [];
  for (let s = 0; s < sim.n; s++) unsent.push(...queryPages(sim, F_PENDING * sim.n + s, Math.min(1000, sim.unsentCnt[s]! / sim.k), client));
  yield { op: 'all', reqs: unsent, limit: 16 };
  yield { op: 'all', reqs: [single(sim, sim.kRunRecord, 1, 1, 'sdk', client)], limit: 1 };
  coordinatorEnd(sim, inv);
}
