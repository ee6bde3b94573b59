/** What a run comes to: the counters, each key family's peak, where unfinished items were left. */
import type { SimState } from './state.js';
import { familyName, familyOf } from './table.js';
import type { Family, ModelResult } from './types.js';

export function unfinished(sim: SimState): Record<string, number> {
  const out: Record<string, number> = {};
  const held = new Set(sim.workers.flatMap((w) => [...w.backlog, ...w.executing, ...w.outcomes]));
  const orphans = new Set(sim.workers.flatMap((w) => [...w.owned].filter((i) => sim.heldBy[i] !== w.id)));
  for (let i = 0; i < sim.simItems; i++) {
    if (sim.state[i] === 3) continue;
    const where =
      sim.state[i] === 0
        ? sim.stored[i]
          ? 'stored, no message'
          : 'not stored'
        : sim.state[i] === 1
          ? sim.msgInFlight[i]
            ? 'pending, message in flight'
            : sim.hasMsg[i]
              ? 'pending, message queued'
              : 'pending, no message'
          : held.has(i)
            ? `running, held${sim.started[i] ? ' (started)' : ''}`
            : orphans.has(i)
              ? `running, orphaned${sim.started[i] ? ' (started)' : ''}`
              : `running, lost${sim.started[i] ? ' (started)' : ''}`;
    out[where] = (out[where] ?? 0) + sim.k;
  }
  return out;
}

export function result(sim: SimState, end: number): ModelResult {
  const seconds = end / 1000;
  const families: Family[] = ['item', 'pending', 'running', 'runRecord', 'lease', 'runs', 'hint', 'fence'];
  const peakPerKey = Object.fromEntries(families.map((f) => [f, { key: '', wcu: 0, rcu: 0 }])) as Record<Family, { key: string; wcu: number; rcu: number }>;
  let hottest = { family: '', wcu: -1 };
  for (let key = 0; key < sim.keyCount; key++) {
    const f = familyOf(sim, key);
    const p = peakPerKey[f];
    // Named by its most written key (the fence family has the marker and the shard fences).
    if (p.key === '' || sim.peak[0][key]! > p.wcu) p.key = familyName(sim, key);
    p.wcu = Math.max(p.wcu, sim.peak[0][key]!);
    p.rcu = Math.max(p.rcu, sim.peak[1][key]!);
    if (sim.peak[0][key]! > hottest.wcu) hottest = { family: familyName(sim, key), wcu: sim.peak[0][key]! };
  }
  const perSecond = 1000 / sim.o.limits.windowMs;
  return {
    seconds,
    itemsPerSecond: seconds > 0 ? (sim.doneItems * sim.k) / seconds : 0,
    workStartedSeconds: sim.workStartedAt / 1000,
    peakPerKey,
    hottest,
    throttledByFamily: Object.fromEntries([...sim.refusedByFamily].sort((a, b) => b[1] - a[1])),
    throttledRequests: sim.refusedRequests,
    tableThrottled: sim.tableRefused,
    exhausted: sim.exhaustedRequests,
    exhaustedByFamily: Object.fromEntries(sim.exhaustedBy),
    failedSteps: sim.failedSteps,
    throttledRounds: sim.throttledRounds,
    enqueueRetries: sim.enqueueRetries,
    enqueueLongestSeconds: sim.enqueueLongestMs / 1000,
    repended: sim.repended,
    requests: { dynamodb: sim.ddbRequests, sqs: sim.sqsRequests },
    units: { wcu: sim.wcu, indexWcu: sim.indexWcu, rcu: sim.rcu },
    peakTable: { wcu: sim.tablePeak[0]! * perSecond, indexWcu: sim.tablePeak[2]! * perSecond, rcu: (sim.tablePeak[1]! + sim.tablePeak[3]!) * perSecond },
    sqsInFlightPeak: sim.inFlightPeak,
    sqsOverLimit: sim.sqsOverLimit,
    runRecordReads: sim.runRecordReads,
    lambda: {
      invocations: sim.lambdaInvocations,
      concurrencyPeak: sim.lambdaConcurrencyPeak,
      throttled: sim.lambdaThrottled,
      gbSeconds: sim.lambdaGbSeconds,
      steals: sim.steals,
      itemsStolen: sim.itemsStolen,
      hintRebuilds: sim.hintRebuilds,
      hintClaims: sim.hintClaims,
      hintTakes: sim.hintTakes,
      fruitfulSteals: sim.fruitfulSteals,
      leaseWrites: sim.leaseWrites,
      leaseRenewals: sim.leaseRenewals,
      fenceConflicts: sim.fenceConflicts,
    },
    weight: sim.k,
    unfinished: unfinished(sim),
    timeline: sim.timeline,
  };
}
