import { describe, expect, it } from 'vitest';
import { gateJudgeSchema, judgeCounts, judgeSeries, type CountsJudge, type SeriesJudge } from '../../shared/judge/gate.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import { chaosSeries, JUDGED_KINDS, judgedSpec } from './local/judged.js';

/**
 * The chaos schedules' judged rollouts (local/judged.ts) do what their names
 * say: every spec is one a node accepts, and at any time the answerer's
 * series judge a `-same` canary as passing and a `-slow` or `-bad` one as
 * failing, once there are enough points, so the schedules exercise both
 * promotions and rollbacks on judged gates.
 */

const points = (query: string, version: string, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => chaosSeries(query.replaceAll('{{version}}', version), from + i) as number);

describe('the judged rollouts of a chaos schedule', () => {
  it('are valid specs', () => {
    for (const kind of JUDGED_KINDS) expect(() => parseRolloutSpec(judgedSpec(kind, 'k', 'http://127.0.0.1:9'))).not.toThrow();
  });

  it('a canary as good as the stable version passes every judge, a worse one fails, at any time', () => {
    const spec = (kind: (typeof JUDGED_KINDS)[number]) => judgedSpec(kind, 'k', 'http://127.0.0.1:9').stages[0]!.gates!.providers as Record<string, unknown>[];
    const [mw] = spec('mw-same');
    const [seq, rel] = spec('seq-same');
    const lat = String(mw!.query);
    for (let t = 1_700_000_000; t < 1_700_000_000 + 300; t += 7) {
      const judge = (g: Record<string, unknown>) => gateJudgeSchema.parse(g.judge) as SeriesJudge;
      const stable = points(lat, 'v1', t, 10);
      expect(judgeSeries(judge(mw!), points(lat, 'v2-same', t, 10), stable).outcome).toBe('pass');
      expect(judgeSeries(judge(mw!), points(lat, 'v2-slow', t, 10), stable).outcome).toBe('fail');
      expect(judgeSeries(judge(rel!), points(lat, 'v2-same', t, 10), stable).outcome).toBe('pass');
      const counts = (version: string) => ({
        requests: points(String(seq!.requestsQuery), version, t, 3),
        errors: points(String(seq!.query), version, t, 3),
      });
      const j = gateJudgeSchema.parse(seq!.judge) as CountsJudge;
      expect(judgeCounts(j, counts('v2-same'), counts('v1'), 10).outcome).toBe('pass');
      expect(judgeCounts(j, counts('v2-bad'), counts('v1'), 10).outcome).toBe('fail');
    }
  });
});
