import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { check, report } from '../chaos/check.js';
import { ChaosCluster } from '../chaos/local/cluster.js';
import { ACTUATION_FAULTS, LOCAL_FAULTS, planFaults, runLocalSchedule } from '../chaos/local/schedule.js';

/**
 * The chaos smoke in `npm test`: the local cluster (PostgreSQL, three
 * `rollout serve` nodes behind nginx, worker processes, the split nginx
 * targets the rollouts move) under a short seeded
 * nemesis, checked by the independent checker. `npm run chaos` runs as many
 * schedules as you like; the seed replays one.
 */
const SEED = 'ci-smoke';
const SCHEDULES = 2;
/*
 * A schedule takes about a minute and a half on a loaded 2-core host: faults for about 40 s, a quiet
 * period of at most 35 s (stretched by the processes' stalls, at most twice), the loops' 25 s to
 * stop, up to 30 s to retire its rollouts. Its budget below is three times that.
 */

let cluster: ChaosCluster;

// Budgets for a hang, not for speed, on a host three times slower than a loaded 2-core runner: the
// cluster's own waits (PostgreSQL 30 s, each node 60 s) give up first, with a message that says why.
beforeAll(async () => {
  cluster = new ChaosCluster({ nodes: 3, variant: null });
  await cluster.start();
}, 240_000);

afterAll(async () => {
  await cluster?.stop();
}, 120_000);

describe('chaos smoke (local cluster)', () => {
  it('a seed fixes the fault plan, and six schedules cover every fault kind', () => {
    expect(planFaults(SEED, 1, 3)).toEqual(planFaults(SEED, 1, 3));
    // Round-robin over a shuffle: ceil(kinds / 3 per schedule) schedules name every kind once at least;
    // the actuation faults have a rotation of their own, one closing every schedule.
    const schedules = Array.from({ length: Math.ceil((LOCAL_FAULTS.length - ACTUATION_FAULTS.length) / 3) }, (_, i) =>
      planFaults(SEED, i, 3).map((p) => p.kind),
    );
    for (const plan of schedules) expect(ACTUATION_FAULTS).toContain(plan.at(-1));
    expect(new Set(schedules.flat()).size).toBe(LOCAL_FAULTS.length);
  });

  for (let i = 0; i < SCHEDULES; i++) {
    it(`schedule ${i}: no safety or liveness violation`, async () => {
      const h = await runLocalSchedule(cluster, {
        seed: SEED,
        schedule: i,
        variant: null,
        faultsPerSchedule: 3,
        items: 120,
        log: (l) => process.stderr.write(`${l}\n`),
      });
      // The history is not empty: work was done and faults were injected.
      expect(h.faults.length).toBeGreaterThan(0);
      expect(h.store.itemTransitions.some((t) => t.to.state === 'done')).toBe(true);
      expect(h.store.stageTransitions.some((t) => t.to === 'promoted')).toBe(true);
      // Targets moved: some carried a rollout's stamp and a share on the new version.
      expect(h.targets?.samples.some((x) => x.stamp !== null && x.percent > 0)).toBe(true);
      // Judged gates were read and kept their series, so the checker judged them again.
      expect(h.store.gateReadings?.some((x) => x.series !== null && x.outcome === 'pass')).toBe(true);
      expect(h.store.gateReadings?.some((x) => x.series !== null && x.outcome === 'fail')).toBe(true);
      const violations = check(h);
      // Kept for a look afterwards (and for the timeline page), as `npm run chaos` keeps its histories.
      const out = resolve('test-results/chaos');
      mkdirSync(out, { recursive: true });
      writeFileSync(resolve(out, `local-${SEED}-${i}.json`), JSON.stringify({ history: h, violations }));
      expect(violations.map(report)).toEqual([]);
    }, 480_000);
  }
});
