/**
 * The AWS topology attacked as a whole: two short chaos schedules over
 * DynamoDB Local (behind the observing proxy), fauxqs and the EventBridge
 * stand-in loaded with the synthesized stack, the Lambda handlers and the
 * workers as real processes, faults from a seeded plan. The checker reads
 * only the recorded history; on correct code it finds nothing.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { check, report } from '../chaos/check.js';
import { runAwsSchedule, stopAwsServices } from '../chaos/aws/run.js';
import { AWS_FAULTS } from '../chaos/aws/plan.js';

const SEED = 'integration';
/** Four faults a schedule, round-robin over one seeded order of the kinds: two schedules cover eight of the nine. */
const SHAPE = { faultCount: 4, faultsMs: 16_000, rollouts: 3, runs: [{ items: 40, workers: 2 }], itemMs: 100 };

describe('chaos over the AWS topology', () => {
  afterAll(async () => {
    await stopAwsServices();
  }, 120_000);

  // A budget for a hang, not for speed: a schedule is its 16 s of faults, a quiet period of at most
  // 60 s (stretched by the processes' stalls, at most twice) and the settling after: about a minute
  // on a loaded 2-core host, at worst about three, so ten covers a host three times slower.
  it.each([0, 1])(
    'schedule %i: the history shows no broken invariant',
    async (schedule) => {
      const history = await runAwsSchedule({ seed: SEED, schedule, quietMs: 60_000, shape: SHAPE, log: () => undefined });
      // The schedule did what it was for: faults were injected, clients were answered, the observer saw writes.
      expect(history.faults.length).toBeGreaterThan(0);
      expect(history.faults.every((f) => (AWS_FAULTS as readonly string[]).includes(f.kind))).toBe(true);
      expect(history.ops.some((o) => o.kind === 'rollout.create' && o.outcome === 'ok')).toBe(true);
      expect(history.store.writes.length).toBeGreaterThan(0);
      expect(history.store.leaseChanges.some((c) => c.name === 'promotion_leader')).toBe(true);
      const violations = check(history);
      // Kept for a look afterwards (and for the timeline page), as `npm run chaos` keeps its histories.
      const out = resolve('test-results/chaos');
      mkdirSync(out, { recursive: true });
      writeFileSync(resolve(out, `aws-${SEED}-${schedule}.json`), JSON.stringify({ history, violations }));
      expect(violations.map(report)).toEqual([]);
    },
    600_000,
  );
});
