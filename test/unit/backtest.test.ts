/**
 * Backtesting a proposed gate over stored readings: each reading judged
 * again from what it kept, the proposed limits applied stage by stage by
 * the promoter's own rule, and the replay set against what happened.
 */
import { describe, expect, it } from 'vitest';
import { backtestRow, backtestSummary, rejudge, replay, type PastRollout } from '../../shared/rollout/backtest.js';
import { providerGateSchema, queryOf, type ProviderGate } from '../../shared/rollout/gate-spec.js';
import type { GateReading } from '../../shared/rollout/gates.js';
import { judgeCounts, judgeSeries, mannWhitneyJudgeSchema, sequentialRateJudgeSchema } from '../../shared/judge/gate.js';

const T = Date.parse('2026-12-01T10:00:00Z');
const gate = (o: Record<string, unknown> = {}): ProviderGate =>
  providerGateSchema.parse({
    type: 'prometheus',
    name: 'errors',
    address: 'http://prometheus:9090',
    query: 'sum(rate(e[1m]))',
    comparison: '<',
    threshold: 0.05,
    ...o,
  });
const judged = (judge: Record<string, unknown>, o: Record<string, unknown> = {}): ProviderGate =>
  providerGateSchema.parse({ type: 'prometheus', name: 'errors', address: 'http://prometheus:9090', query: 'e{version="{{version}}"}', judge, ...o });

/** Readings of `g` in stage `stage`, one a minute from `from`, with these values (null: inconclusive). */
function readings(
  g: ProviderGate,
  stage: number,
  from: number,
  values: readonly (number | null)[],
  outcome?: (v: number | null) => GateReading['outcome'],
): GateReading[] {
  return values.map((value, i) => ({
    gate: g.name,
    type: g.type,
    attempt: 1,
    stage,
    at: from + i * 60_000,
    outcome: outcome ? outcome(value) : value === null ? 'inconclusive' : value < 0.05 ? 'pass' : 'fail',
    value,
    query: queryOf(g),
    answer: '',
    reason: value === null ? 'empty result' : null,
    source: 'poll',
  }));
}
const past = (id: string, state: PastRollout['state'], updatedAt: number): PastRollout => ({
  id,
  state,
  stateReason: null,
  updatedAt,
  stages: [
    { index: 0, name: 'canary', activatedAt: T },
    { index: 1, name: 'half', activatedAt: T + 10 * 60_000 },
  ],
});

describe('rejudge', () => {
  it("judges a threshold gate's kept value against the proposed threshold; an inconclusive reading stays so", () => {
    const [r] = readings(gate(), 0, T, [0.03]);
    expect(rejudge(gate({ threshold: 0.02 }), r!)).toBe('fail');
    expect(rejudge(gate({ threshold: 0.04 }), r!)).toBe('pass');
    expect(rejudge(gate({ comparison: '>', threshold: 0.01 }), r!)).toBe('pass');
    expect(rejudge(gate(), readings(gate(), 0, T, [null])[0]!)).toBe('inconclusive');
  });

  it("judges a relative gate's kept ratio against the proposed tolerance, and replays only the limits of a judge that needs the series", () => {
    const rel = judged({ kind: 'relative', measure: 'ratio', direction: 'increase', tolerance: 0.5 });
    const [r] = readings(rel, 0, T, [1.3], () => 'pass');
    expect(rejudge(rel, r!)).toBe('pass');
    expect(rejudge(judged({ kind: 'relative', measure: 'ratio', direction: 'increase', tolerance: 0.2 }), r!)).toBe('fail');
    const mw = judged({ kind: 'mann-whitney' });
    const [m] = readings(mw, 0, T, [0.2], () => 'fail');
    expect(rejudge(judged({ kind: 'mann-whitney', tolerance: 0.5 }), m!)).toBe('fail');
    expect(rejudge(rel, m!)).toEqual({ cannot: 'the readings were judged mann-whitney, the proposed gate relative' });
    // Nor is a judged reading's figure (a shift, a ratio) read against a threshold.
    expect(rejudge(gate(), m!)).toEqual({ cannot: 'the readings were judged mann-whitney, the proposed gate against a threshold' });
    expect(rejudge({ ...gate(), type: 'cloudwatchAlarm', alarms: ['a'] }, m!)).toEqual({
      cannot: 'a prometheus reading, not a cloudwatchAlarm one',
    });
  });

  it("judges a reading that kept its series again by the proposed judge, whichever judge took it, the judges' own code deciding", () => {
    const SEQ = { query: 'sum(increase(e{version="{{version}}"}[{{step}}]))', requestsQuery: 'sum(increase(r{version="{{version}}"}[{{step}}]))' };
    const seeded = (n: number, shift: number) => Array.from({ length: n }, (_, i) => 100 + ((i * 37) % 23) + shift);
    const slower = { kind: 'values' as const, canary: seeded(30, 10), baseline: seeded(30, 0) };
    const mw = judged({ kind: 'mann-whitney' });
    const [m] = readings(mw, 0, T, [10], () => 'fail');
    const kept = { ...m!, series: slower };
    expect(rejudge(mw, kept)).toBe(judgeSeries(mannWhitneyJudgeSchema.parse({ kind: 'mann-whitney' }), slower.canary, slower.baseline).outcome);
    expect(rejudge(mw, kept)).toBe('fail');
    // A tolerance wide enough for the 9 % shift passes it; so does a relative ratio of 10 %; 5 % does not.
    expect(rejudge(judged({ kind: 'mann-whitney', tolerance: 2 }), kept)).toBe('pass');
    expect(rejudge(judged({ kind: 'relative', measure: 'ratio', tolerance: 0.1 }), kept)).toBe('pass');
    expect(rejudge(judged({ kind: 'relative', measure: 'ratio', tolerance: 0.05 }), kept)).toBe('fail');
    // A stricter minimum turns it into too little data; an inconclusive reading with its series is judged again too.
    expect(rejudge(judged({ kind: 'mann-whitney', minSamples: 31 }), kept)).toBe('inconclusive');
    expect(rejudge(judged({ kind: 'mann-whitney', minSamples: 5 }), { ...kept, outcome: 'inconclusive' })).toBe('fail');
    expect(rejudge(judged({ kind: 'sequential-rate' }, SEQ), kept)).toEqual({
      cannot: 'the readings kept series of values; a sequential-rate gate judges counts',
    });

    const seq = judged({ kind: 'sequential-rate', minSamples: 100 }, SEQ);
    const step = (n: number) => Array.from({ length: 12 }, () => n);
    const counts = {
      kind: 'counts' as const,
      canary: { requests: step(100), errors: step(4) },
      baseline: { requests: step(900), errors: step(18) },
      percent: 10,
    };
    const [c] = readings(seq, 0, T, [2], () => 'fail');
    const withCounts = { ...c!, series: counts };
    expect(rejudge(seq, withCounts)).toBe('fail');
    // A smaller alpha asks for more evidence than 12 steps of 4 % against 2 % give.
    expect(rejudge(judged({ kind: 'sequential-rate', alpha: 1e-12 }, SEQ), withCounts)).toBe('pass');
    expect(rejudge(judged({ kind: 'sequential-rate', alpha: 1e-12 }, SEQ), withCounts)).toBe(
      judgeCounts(sequentialRateJudgeSchema.parse({ kind: 'sequential-rate', alpha: 1e-12 }), counts.canary, counts.baseline, 10).outcome,
    );
    expect(rejudge(mw, withCounts)).toEqual({ cannot: 'the readings kept counts; a mann-whitney gate judges series of values' });
  });
});

describe('replay', () => {
  it('applies the proposed limits stage by stage, from each stage’s activation, with the promoter’s rule', () => {
    const values = [0.01, 0.06, 0.01, 0.07];
    const rs = readings(gate(), 0, T + 60_000, values);
    // failureLimit 0: the first failure (the second reading) rolls back.
    expect(replay(gate(), past('r', 'completed', T), rs)).toMatchObject({ kind: 'stop', action: 'rollback', stage: 0, at: T + 2 * 60_000 });
    // failureLimit 1: the second failure does; onFail pause pauses instead.
    expect(replay(gate({ failureLimit: 1, onFail: 'pause' }), past('r', 'completed', T), rs)).toMatchObject({
      kind: 'stop',
      action: 'pause',
      at: T + 4 * 60_000,
    });
    // Not read within its initial delay: the failures before it do not count. Its newest reading failed within
    // failureLimit, so the stage would have waited on it: a hold, where the rollout in fact went on.
    expect(replay(gate({ failureLimit: 1, initialDelaySeconds: 150 }), past('r', 'completed', T), rs)).toMatchObject({
      kind: 'stop',
      action: 'hold',
      stage: 0,
      at: T + 4 * 60_000,
      reason: 'gate errors (prometheus): last reading fail',
    });
    expect(replay(gate({ failureLimit: 1, initialDelaySeconds: 150 }), past('r', 'completed', T), rs.slice(0, 3))).toEqual({
      kind: 'pass',
      stages: 1,
      readings: 1,
    });
    // Passes short of consecutiveSuccesses at the end of a stage that went on: a hold too.
    expect(replay(gate({ consecutiveSuccesses: 3 }), past('r', 'completed', T), readings(gate(), 0, T + 60_000, [0.01, 0.01]))).toMatchObject({
      kind: 'stop',
      action: 'hold',
      reason: 'gate errors (prometheus): 2 of 3 passes in a row (consecutiveSuccesses)',
    });
    // A stage still going when it ended (a rollout rolled back in it) is no hold: it never went on.
    expect(replay(gate({ consecutiveSuccesses: 3 }), past('r', 'rolled_back', T), readings(gate(), 0, T + 60_000, [0.01, 0.01]))).toMatchObject({
      kind: 'pass',
    });
    // Counted per stage: one failure in each of two stages stays within failureLimit 1.
    const twoStages = [...readings(gate(), 0, T + 60_000, [0.06, 0.01]), ...readings(gate(), 1, T + 11 * 60_000, [0.06, 0.01])];
    expect(replay(gate({ failureLimit: 1 }), past('r', 'completed', T), twoStages)).toEqual({ kind: 'pass', stages: 2, readings: 4 });
    // A gate on trial is replayed as if it acted.
    expect(replay(gate({ dryRun: true }), past('r', 'completed', T), rs)).toMatchObject({ kind: 'stop' });
  });

  it('says when there is nothing to replay', () => {
    expect(replay(gate(), past('r', 'completed', T), [])).toEqual({ kind: 'none', reason: 'no readings of gate errors' });
    const mw = readings(judged({ kind: 'mann-whitney' }), 0, T, [0.2], () => 'fail');
    const sequential = judged(
      { kind: 'sequential-rate', minSamples: 10 },
      { query: 'sum(increase(e{version="{{version}}"}[{{step}}]))', requestsQuery: 'sum(increase(r{version="{{version}}"}[{{step}}]))' },
    );
    expect(replay(sequential, past('r', 'completed', T), mw)).toEqual({
      kind: 'none',
      reason: 'the readings were judged mann-whitney, the proposed gate sequential-rate',
    });
  });
});

describe('backtestRow', () => {
  it('sets the replay against what happened: caught (and how much earlier), false alarm, missed, agreed, unknown', () => {
    const bad = readings(gate(), 0, T + 60_000, [0.01, 0.06, 0.09]);
    const good = readings(gate(), 0, T + 60_000, [0.01, 0.01, 0.01]);
    const ended = T + 30 * 60_000;
    const rows = [
      backtestRow(gate(), past('bad-caught', 'rolled_back', ended), bad),
      backtestRow(gate({ threshold: 0.1 }), past('bad-missed', 'aborted', ended), bad),
      backtestRow(gate({ threshold: 0.005 }), past('good-stopped', 'completed', ended), good),
      backtestRow(gate(), past('good-passed', 'completed', ended), good),
      backtestRow(gate(), past('still-going', 'running', ended), bad),
      backtestRow(gate(), past('no-readings', 'rolled_back', ended), []),
    ];
    expect(rows.map((r) => [r.rollout, r.verdict, r.earlierMs])).toEqual([
      ['bad-caught', 'caught', 28 * 60_000],
      ['bad-missed', 'missed', null],
      ['good-stopped', 'falseAlarm', null],
      ['good-passed', 'agreed', null],
      ['still-going', 'unknown', null],
      ['no-readings', 'unknown', null],
    ]);
    expect(backtestSummary(rows)).toEqual({ caught: 1, falseAlarm: 1, missed: 1, agreed: 1, unknown: 2 });
  });
});
