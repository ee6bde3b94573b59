import { describe, expect, it } from 'vitest';
import { check } from './check.js';
import type { ChaosHistory, EventRow, GateReadingRow, LeaseChange, RolloutRow, RolloutTransition, StageTransition } from './history.js';

/**
 * The judged-gate rules on hand-made histories: rollout r1 (stable v1, canary
 * v2) has two stages; stage 0 holds a mann-whitney gate `latency` and a
 * dry-run relative gate `ratio`. Stage 0 is activated at 1 s (log seq 10)
 * and promoted at 5 s (seq 50) by the promoter; node-1 leads throughout.
 */

const baseline = [100, 104, 98, 101, 97, 103, 99, 102, 100, 96];
/** The same points, one step on: a canary that behaves as the baseline. */
const same = [...baseline.slice(1), 101];
/** Twice as slow. */
const slow = baseline.map((v) => 2 * v);

const latency = {
  type: 'prometheus',
  name: 'latency',
  address: 'http://127.0.0.1:9',
  query: 'lat{version="{{version}}"}',
  judge: { kind: 'mann-whitney', direction: 'increase', minSamples: 5 },
};
const ratio = {
  type: 'prometheus',
  name: 'ratio',
  address: 'http://127.0.0.1:9',
  query: 'lat{version="{{version}}"}',
  judge: { kind: 'relative', measure: 'ratio', tolerance: 0.1 },
  dryRun: true,
};

function reading(seq: number, gate: string, outcome: GateReadingRow['outcome'], canary: number[] | null, o: Partial<GateReadingRow> = {}): GateReadingRow {
  return {
    seq,
    at: seq * 100,
    rolloutId: 'r1',
    attempt: 1,
    stage: 0,
    gate,
    readAt: seq * 100 - 5,
    outcome,
    value: null,
    reason: null,
    series: canary === null ? null : { kind: 'values', canary, baseline },
    ...o,
  };
}

interface Made {
  readings: GateReadingRow[];
  gates?: Record<string, unknown>[];
  by?: string;
  leases?: LeaseChange[];
  rollout?: RolloutTransition[];
  stretch?: RolloutRow['stageStretch'];
  events?: EventRow[];
}

function history(o: Made): ChaosHistory {
  const stages: StageTransition[] = [
    { seq: 10, at: 1_000, rolloutId: 'r1', attempt: 1, index: 0, from: 'pending', to: 'active', epoch: null, by: null },
    { seq: 50, at: 5_000, rolloutId: 'r1', attempt: 1, index: 0, from: 'active', to: 'promoted', epoch: 1, by: o.by ?? 'promoter:node-1' },
    { seq: 51, at: 5_000, rolloutId: 'r1', attempt: 1, index: 1, from: 'pending', to: 'active', epoch: null, by: null },
  ];
  return {
    topology: 'local',
    seed: 'hand',
    schedule: 0,
    variant: null,
    epochMs: 0,
    nodes: ['node-1', 'node-2'],
    workers: [],
    ops: [],
    faults: [],
    processes: [
      { process: 'node-1', role: 'node', from: 0, to: null },
      { process: 'node-2', role: 'node', from: 0, to: null },
    ],
    phases: { faultsUntil: 10_000, healedAt: 10_000, quietUntil: 12_000 },
    bounds: { leaderWithinMs: 4_800, runsFinishWithinMs: 30_000, failureTimeoutMs: 3_000 },
    store: {
      leaseChanges: o.leases ?? [
        { seq: 1, at: 0, name: 'promotion_leader', change: 'update', holder: 'node-1', epoch: 1, expiresAt: 3_000 },
        { seq: 30, at: 2_900, name: 'promotion_leader', change: 'update', holder: 'node-1', epoch: 1, expiresAt: 20_000 },
      ],
      writes: [],
      stageTransitions: stages,
      rolloutTransitions: [
        { seq: 2, at: 500, rolloutId: 'r1', from: null, to: { state: 'running', attempt: 1, reason: null, by: 'creator' } },
        ...(o.rollout ?? []),
      ],
      itemTransitions: [],
      rollouts: [
        {
          id: 'r1',
          state: 'running',
          attempt: 1,
          reason: null,
          labels: {},
          stages: [
            { attempt: 1, index: 0, name: 'canary', phase: 'promoted', promotedEpoch: 1, promotedBy: 'promoter:node-1', activatedAt: 1_000 },
            { attempt: 1, index: 1, name: 'all', phase: 'active', promotedEpoch: null, promotedBy: null, activatedAt: 5_000 },
          ],
          stagePercents: [10, 100],
          stageGates: [o.gates ?? [latency, ratio], []],
          ...(o.stretch ? { stageStretch: o.stretch } : {}),
        },
      ],
      runs: [],
      items: [],
      idempotency: [],
      events: o.events ?? [],
      gateReadings: o.readings,
    },
  };
}

const judged = (h: ChaosHistory) => check(h).filter((x) => x.invariant === 'promotion-judged-pass' || x.invariant === 'judged-reading-agrees');

describe('promotion-judged-pass and judged-reading-agrees', () => {
  it('a promotion after a passing judged reading is not flagged, whatever a dry-run gate said', () => {
    const h = history({
      readings: [
        reading(20, 'latency', 'inconclusive', same.slice(0, 3)),
        reading(21, 'ratio', 'fail', slow),
        reading(40, 'latency', 'pass', same),
        reading(41, 'ratio', 'fail', slow),
      ],
    });
    expect(judged(h)).toEqual([]);
  });

  it('a promotion after a failing judged reading is flagged, with the readings that show it', () => {
    const h = history({ readings: [reading(20, 'latency', 'pass', same), reading(40, 'latency', 'fail', slow)] });
    const [v, ...more] = judged(h);
    expect(more).toEqual([]);
    expect(v!.invariant).toBe('promotion-judged-pass');
    expect(v!.message).toBe("r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading, judged again, was fail");
    expect(v!.evidence.at(-2)).toMatch(
      /^4\.00s reading #40 of latency \(stage 0, read at 4\.00s\): stored fail; judged again fail: high: shift 100, interval \[95, 105\]/,
    );
    expect(v!.at).toBe(5_000);
  });

  it('the newest is by the reading time a tally keeps; a reading logged late still ends the passes in a row', () => {
    // Logged last and read last: the newest.
    expect(
      judged(history({ readings: [reading(20, 'latency', 'fail', slow, { readAt: 2_000 }), reading(40, 'latency', 'pass', same, { readAt: 3_000 })] })),
    ).toEqual([]);
    // A pass logged after a newer failure is not the newest.
    const latePass = history({ readings: [reading(20, 'latency', 'fail', slow, { readAt: 3_000 }), reading(40, 'latency', 'pass', same, { readAt: 2_000 })] });
    expect(judged(latePass).map((x) => x.message)).toEqual([
      "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading, judged again, was fail",
    ]);
    // A failure logged after a newer pass leaves the pass the newest, with no passes in a row: the stage waits.
    const lateFail = history({ readings: [reading(20, 'latency', 'pass', same, { readAt: 3_000 }), reading(40, 'latency', 'fail', slow, { readAt: 2_000 })] });
    expect(judged(lateFail).map((x) => x.message)).toEqual([
      "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading passed, judged again, with 0 of the 1 passes in a row it needs (a failing or inconclusive reading ends them, even one logged late)",
    ]);
  });

  it('a promotion with no judged reading in its period is flagged; one before the activation does not count', () => {
    const h = history({ readings: [reading(5, 'latency', 'pass', same), reading(60, 'latency', 'pass', same)] });
    expect(judged(h).map((x) => x.message)).toEqual(["r1 attempt 1 stage #0 was promoted with no reading of its judged gate latency in the stage's period"]);
  });

  it('the stored outcome must be what the series give: a flipped judgement is flagged twice over', () => {
    const h = history({ readings: [reading(40, 'latency', 'pass', slow)] });
    expect(judged(h).map((x) => x.invariant)).toEqual(['judged-reading-agrees', 'promotion-judged-pass']);
    expect(judged(h)[0]!.message).toBe('gate latency of r1 (attempt 1, stage 0) stored a pass where its series give fail');
    // A provider error keeps no series and is inconclusive: nothing to judge again. A pass without series is no pass.
    expect(judged(history({ readings: [reading(30, 'latency', 'inconclusive', null), reading(40, 'latency', 'pass', same)] }))).toEqual([]);
    expect(judged(history({ readings: [reading(40, 'latency', 'pass', null)] }))[0]!.message).toContain('stored a pass with no series kept');
  });

  it('consecutiveSuccesses: the passes in a row ending with the newest', () => {
    const gates = [{ ...latency, consecutiveSuccesses: 2 }];
    expect(judged(history({ gates, readings: [reading(30, 'latency', 'pass', same), reading(40, 'latency', 'pass', same)] }))).toEqual([]);
    const broken = history({
      gates,
      readings: [reading(20, 'latency', 'pass', same), reading(30, 'latency', 'inconclusive', same.slice(0, 2)), reading(40, 'latency', 'pass', same)],
    });
    expect(judged(broken).map((x) => x.message)).toEqual([
      "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading passed, judged again, with 1 of the 2 passes in a row it needs (a failing or inconclusive reading ends them, even one logged late)",
    ]);
  });

  it('a promotion by a person is not judged; onFail hold holds like any gate', () => {
    expect(judged(history({ by: 'operator', readings: [reading(40, 'latency', 'fail', slow)] }))).toEqual([]);
    const hold = history({ gates: [{ ...latency, onFail: 'hold' }], readings: [reading(40, 'latency', 'fail', slow)] });
    expect(judged(hold).map((x) => x.invariant)).toEqual(['promotion-judged-pass']);
  });

  it('where leadership moved in the period, a late reading is not held against the promoter, but a tally that never passed is', () => {
    const leases: LeaseChange[] = [
      { seq: 1, at: 0, name: 'promotion_leader', change: 'update', holder: 'node-1', epoch: 1, expiresAt: 3_000 },
      { seq: 35, at: 3_500, name: 'promotion_leader', change: 'update', holder: 'node-2', epoch: 2, expiresAt: 20_000 },
    ];
    const late = history({ leases, readings: [reading(30, 'latency', 'pass', same), reading(45, 'latency', 'inconclusive', same.slice(0, 2))] });
    expect(judged(late)).toEqual([]);
    const never = history({ leases, readings: [reading(30, 'latency', 'inconclusive', same.slice(0, 2)), reading(45, 'latency', 'fail', slow)] });
    expect(judged(never).map((x) => x.message)).toEqual([
      "r1 attempt 1 stage #0 was promoted, and its judged gate latency's tally never passed in the stage's period, judged again (leadership moved or the rollout was resumed within the period: a reading logged after the promoter's view is not held against it)",
    ]);
    // The same late reading with one leader throughout is held against it.
    expect(judged(history({ readings: late.store.gateReadings as GateReadingRow[] })).map((x) => x.invariant)).toEqual(['promotion-judged-pass']);
  });

  it("a resume starts the stage's period again", () => {
    const rollout: RolloutTransition[] = [
      { seq: 25, at: 2_500, rolloutId: 'r1', from: { state: 'running', attempt: 1 }, to: { state: 'paused', attempt: 1, reason: 'hold on', by: 'operator' } },
      { seq: 28, at: 2_800, rolloutId: 'r1', from: { state: 'paused', attempt: 1 }, to: { state: 'running', attempt: 1, reason: null, by: 'operator' } },
    ];
    expect(judged(history({ rollout, readings: [reading(20, 'latency', 'pass', same)] })).map((x) => x.message)).toEqual([
      "r1 attempt 1 stage #0 was promoted with no reading of its judged gate latency in the stage's period",
    ]);
    expect(judged(history({ rollout, readings: [reading(20, 'latency', 'pass', same), reading(40, 'latency', 'pass', same)] }))).toEqual([]);
  });

  it('sequential-rate and rollout-wide gates are judged from their counts', () => {
    const seq = { ...latency, name: 'errors', judge: { kind: 'sequential-rate', minSamples: 100, srm: false } };
    const counts = (errors: number) => ({
      kind: 'counts',
      canary: { requests: [50, 50, 50], errors: [errors, errors, errors] },
      baseline: { requests: [450, 450, 450], errors: [9, 9, 9] },
      percent: 10,
    });
    const h = (errors: number, outcome: GateReadingRow['outcome']) => {
      const x = history({ gates: [], readings: [reading(40, 'errors', outcome, null, { series: counts(errors) })] });
      const r = x.store.rollouts[0]!;
      return { ...x, store: { ...x.store, rollouts: [{ ...r, rolloutGates: { fromStage: 'canary', providers: [seq] } }] } };
    };
    expect(judged(h(1, 'pass'))).toEqual([]);
    expect(judged(h(5, 'fail')).map((x) => x.invariant)).toEqual(['promotion-judged-pass']);
    expect(judged(h(5, 'pass')).map((x) => x.invariant)).toEqual(['judged-reading-agrees', 'promotion-judged-pass']);
  });

  describe('onInsufficientData: "pass"', () => {
    // Stage 0 stretches to 3 s and then passes on too little data; its period began with the activation event at 1 s.
    const stretch = [{ seconds: 3, onInsufficientData: 'pass' }, null];
    const event = (seq: number, type: string, at: number, extra: Record<string, unknown> = {}): EventRow => ({
      seq,
      rolloutId: 'r1',
      detailType: `ai.rollout.${type}`,
      detail: { rolloutId: 'r1', attempt: 1, stage: { index: 0, name: 'canary', percent: 10 }, ...extra },
      at,
      publishedAt: null,
    });
    const events = (promotedAt: number, marked = true) => [
      event(1, 'stage_activated', 1_000),
      event(2, 'stage_promoted', promotedAt, marked ? { insufficientData: 'stage canary: not enough data 4 s into its period' } : {}),
    ];
    const shortReading = reading(40, 'latency', 'inconclusive', same.slice(0, 3), { reason: 'not enough data: 3 canary and 10 baseline points' });

    it('a promotion on a newest reading short of data, marked, once the stretch was over, is not flagged', () => {
      expect(judged(history({ stretch, events: events(4_900), readings: [shortReading] }))).toEqual([]);
    });

    it('is flagged before the stretch was over, without the mark, or where the spec does not say pass', () => {
      expect(judged(history({ stretch, events: events(3_500), readings: [shortReading] })).map((x) => x.message)).toEqual([
        "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading was short of data, judged again, and it passed on insufficient data 2.50s into its period, before the stretch (3 s) was over",
      ]);
      expect(judged(history({ stretch, events: events(4_900, false), readings: [shortReading] })).map((x) => x.message)).toEqual([
        "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading was short of data, judged again, and its stage_promoted event does not say it passed on insufficient data",
      ]);
      const pause = [{ seconds: 3, onInsufficientData: 'pause' }, null];
      expect(judged(history({ stretch: pause, events: events(4_900), readings: [shortReading] })).map((x) => x.message)).toEqual([
        "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading, judged again, was inconclusive",
      ]);
    });

    it('never over a failing or otherwise inconclusive reading: those are flagged as ever', () => {
      const failing = history({ stretch, events: events(4_900), readings: [shortReading, reading(45, 'latency', 'fail', slow)] });
      expect(judged(failing).map((x) => x.message)).toEqual([
        "r1 attempt 1 stage #0 was promoted while its judged gate latency's newest reading, judged again, was fail",
      ]);
      // A provider error is inconclusive with no series: not short of data.
      const down = history({ stretch, events: events(4_900), readings: [reading(40, 'latency', 'inconclusive', null, { reason: 'connect ECONNREFUSED' })] });
      expect(judged(down).map((x) => x.invariant)).toEqual(['promotion-judged-pass']);
      // A stored reading that claims to be short while its series judge a failure is judged by its series.
      const claimed = history({ stretch, events: events(4_900), readings: [reading(40, 'latency', 'inconclusive', slow, { reason: 'not enough data' })] });
      expect(judged(claimed).map((x) => x.invariant)).toEqual(['judged-reading-agrees', 'promotion-judged-pass']);
    });
  });
});
