/** `rollout rollouts get`'s tree, drawn from a rollout as `GET /rollouts/{id}` answers it. */
import { describe, expect, it } from 'vitest';
import type { RolloutJson } from '../../shared/api/rollout-json.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import { rolloutTree } from '../../shared/runtimes/cli/rollout-view.js';

const T = Date.parse('2026-12-07T10:00:00.000Z');
const spec = parseRolloutSpec({
  target: { service: 'web', version: 'v2', stableVersion: 'v1' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 60, gates: { alarms: ['web-5xx'], minRequests: 100 } },
    {
      name: 'half',
      percent: 50,
      bakeSeconds: 300,
      gates: {
        providers: [{ type: 'prometheus', name: 'errors', address: 'http://prometheus:9090', query: 'sum(rate(e[1m]))', comparison: '<', threshold: 0.02 }],
      },
    },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});
const stage = (index: number, name: string, phase: RolloutJson['stages'][number]['phase'], activatedAt: number | null, promotedAt: number | null) => ({
  index,
  name,
  phase,
  activatedAt,
  promotedAt,
  promotedEpoch: promotedAt === null ? null : 3,
  promotedBy: promotedAt === null ? null : 'promoter:n1',
  rolledBackAt: null,
  reason: null,
});
const reading = {
  stage: 1,
  gate: 'errors',
  at: T + 30_000,
  outcome: 'fail' as const,
  value: 0.05,
  source: 'poll',
  reason: 'value 0.05 is not < 0.02',
  query: 'q',
};
const rollout = {
  id: 'web-v2',
  spec,
  state: 'running',
  attempt: 1,
  version: 4,
  createdAt: T - 120_000,
  updatedAt: T,
  lastProgressAt: T,
  deadlineExceededAt: null,
  stateBy: null,
  stateReason: null,
  stages: [stage(0, 'canary', 'promoted', T - 90_000, T), stage(1, 'half', 'active', T, null), stage(2, 'all', 'pending', null, null)],
  metrics: { '0': { requests: 400, errors: 2, p99LatencyMs: 120, observedAt: T - 10_000 } },
  alarms: { 'web-5xx': 'OK' },
  gates: [
    {
      stage: 1,
      name: 'errors',
      type: 'prometheus',
      judge: null,
      query: 'sum(rate(e[1m]))',
      comparison: '<',
      threshold: 0.02,
      intervalSeconds: 60,
      failureLimit: 2,
      inconclusiveLimit: 3,
      consecutiveSuccesses: 1,
      rolloutWide: false,
      status: 'fail',
      counts: { readings: 1, failures: 1, inconclusive: 0, passStreak: 0 },
      last: reading,
    },
  ],
  waiting: ['the bake, until 2026-12-07T10:05:00.000Z (300 s)', 'gate errors (prometheus): last reading fail'],
} as unknown as RolloutJson;

describe('rollouts get: the tree', () => {
  it("draws each stage with its percent, phase and bake, the judged stages' signals under them, and what it waits for", () => {
    expect(rolloutTree(rollout, null, T + 100_000).split('\n')).toEqual([
      'web-v2  running  attempt 1',
      'web: v1 → v2',
      'waiting for:',
      '  - the bake, until 2026-12-07T10:05:00.000Z (300 s)',
      '  - gate errors (prometheus): last reading fail',
      '',
      'stages',
      '✔ canary   10%  promoted     bake 90 s of 60 s',
      '│ ├ alarm web-5xx: OK',
      '│ └ metrics: 400 requests, 2 errors (0.50 %), p99 120 ms · minRequests 100',
      '● half     50%  active       bake 100 s of 300 s, 200 s left',
      '│ └ gate errors (prometheus): fail · 0.05 (passes when < 0.02) · 1 readings, 1 failed, 0 inconclusive (failureLimit 2, inconclusiveLimit 3) · last: value 0.05 is not < 0.02',
      '│     sum(rate(e[1m]))',
      '○ all     100%  pending      bake 0 s',
    ]);
  });

  it('ends with the last transitions, five at most, and a stage that never ran shows no signals', () => {
    const history = Array.from({ length: 7 }, (_, n) => ({
      at: new Date(T + n).toISOString(),
      type: `ai.rollout.e${n}`,
      stage: null,
      actor: 'a',
      epoch: 1,
      reason: null,
    })) as unknown as Parameters<typeof rolloutTree>[1];
    const drawn = rolloutTree({ ...rollout, waiting: [] }, history, T).split('\n');
    expect(drawn).not.toContain('waiting for:');
    expect(drawn.slice(drawn.indexOf('last transitions') + 2).map((l) => l.split(/\s+/)[1])).toEqual(['e2', 'e3', 'e4', 'e5', 'e6']);
    expect(drawn.filter((l) => l.startsWith('○ all')).length).toBe(1);
    expect(drawn[drawn.indexOf('○ all     100%  pending      bake 0 s') + 1]).toBe('');
  });

  it('a stage passed on too little data says so under it, and its transition says why', () => {
    const why = 'stage canary: not enough data 60 s into its period (maxBakeSeconds 60): 40 of 100 requests reported';
    const stages = [{ ...rollout.stages[0]!, reason: `passed on insufficient data (onInsufficientData pass): ${why}` }, ...rollout.stages.slice(1)];
    const history = [
      { at: new Date(T).toISOString(), type: 'ai.rollout.stage_promoted', stage: null, actor: 'promoter:n1', epoch: 3, reason: null, insufficientData: why },
    ] as unknown as Parameters<typeof rolloutTree>[1];
    const drawn = rolloutTree({ ...rollout, stages }, history, T).split('\n');
    expect(drawn[drawn.findIndex((l) => l.startsWith('✔ canary')) + 1]).toBe(`│ ├ passed on insufficient data (onInsufficientData pass): ${why}`);
    expect(drawn.at(-1)).toContain(`stage_promoted`);
    expect(drawn.at(-1)).toContain(`passed on insufficient data: ${why}`);
  });

  it("a judged gate names its judge; a mann-whitney gate's line carries its newest interval, a clipped answer none", () => {
    const judged = (answer: string) =>
      rolloutTree(
        {
          ...rollout,
          gates: [{ ...rollout.gates[0]!, judge: 'mann-whitney', comparison: null, threshold: null, last: { ...reading, value: 0.01, answer } }],
        } as unknown as RolloutJson,
        null,
        T,
      );
    expect(judged(JSON.stringify({ estimate: 0.01, ci: [-0.02, 0.03] }))).toContain(
      'gate errors (prometheus, mann-whitney): fail · 0.01 [-0.02, 0.03] · 1 readings',
    );
    expect(judged('{"estimate": 0.01, "ci": [-0.0')).toContain('gate errors (prometheus, mann-whitney): fail · 0.01 · 1 readings');
  });

  it('a rollout-wide gate says so, and a gate asking for passes in a row shows how many it has', () => {
    const drawn = rolloutTree(
      {
        ...rollout,
        gates: [
          {
            ...rollout.gates[0]!,
            rolloutWide: true,
            consecutiveSuccesses: 3,
            status: 'pass',
            counts: { readings: 4, failures: 1, inconclusive: 0, passStreak: 2 },
            last: { ...reading, outcome: 'pass', value: 0.01, reason: null },
          },
        ],
      } as unknown as RolloutJson,
      null,
      T,
    );
    expect(drawn).toContain(
      'gate errors (prometheus, rollout-wide): pass · 0.01 (passes when < 0.02) · 4 readings, 1 failed, 0 inconclusive (failureLimit 2, inconclusiveLimit 3) · 2 of 3 passes in a row',
    );
  });
});
