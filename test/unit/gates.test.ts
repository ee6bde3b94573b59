import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../shared/errors.js';
import { evaluate } from '../../shared/rollout/evaluate.js';
import { historyJson } from '../../shared/api/handler.js';
import { nextEvaluationAt } from '../../shared/rollout/schedule.js';
import { deadline, GateReader, GateTimeoutError, type GateProvider } from '../../shared/rollout/gate-reader.js';
import { dueGates, judge, providerVerdict, tallyWith, type GateReading, type GateTally, type ProviderResult } from '../../shared/rollout/gates.js';
import { inboundFromEnvelope, InvalidEventError } from '../../shared/rollout/inbound.js';
import { talliesByStage, type RolloutView } from '../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import type { CountedReading, RolloutStore } from '../../shared/rollout/store.js';
import { freshStages, planTransition } from '../../shared/rollout/transitions.js';
import type { PrometheusGate, ProviderGate } from '../../shared/rollout/gate-spec.js';
import { alarmStateChange } from '../support/cloudwatch/events.js';

const target = { service: 'checkout', version: 'v2' };
const T = 1_700_000_000_000;

function specWith(providers: unknown[], bakeSeconds = 0) {
  return parseRolloutSpec({
    target,
    stages: [
      { name: 'canary', percent: 10, bakeSeconds, gates: { providers } },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });
}

const prom = { type: 'prometheus', name: 'errors', address: 'http://prometheus:9090', query: 'sum(rate(errors[1m]))', comparison: '<', threshold: 0.05 };
const alarmGate = { type: 'cloudwatchAlarm', name: 'alarms', alarms: ['checkout-5xx', 'checkout-latency'] };

function errorsOf(input: unknown): string[] {
  try {
    parseRolloutSpec(input);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues as string[];
    throw err;
  }
  return [];
}

describe('provider gates in the spec', () => {
  it('takes each provider with its defaults', () => {
    const spec = specWith([
      prom,
      alarmGate,
      {
        type: 'cloudwatchMetric',
        name: 'rate',
        expression: 'errors / requests',
        metrics: { errors: { namespace: 'App', metricName: 'Errors', stat: 'Sum' }, requests: { namespace: 'App', metricName: 'Requests', stat: 'Sum' } },
        comparison: '<=',
        threshold: 0.01,
      },
    ]);
    const [p, a, m] = spec.stages[0]!.gates.providers!;
    expect(p).toMatchObject({ intervalSeconds: 30, timeoutSeconds: 10, initialDelaySeconds: 0, failureLimit: 0, inconclusiveLimit: 2 });
    expect(a).toMatchObject({ intervalSeconds: 10 });
    expect(m).toMatchObject({ intervalSeconds: 60, periodSeconds: 60 });
    // A stage without providers keeps no field: a spec stored before providers existed reads back equal.
    expect(spec.stages[1]!.gates).toEqual({ minRequests: 0, alarms: [] });
  });

  it('refuses a bad gate naming the field', () => {
    const at = 'stages.0.gates.providers';
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, comparison: '=' }] } }] })).toEqual([
      expect.stringMatching(new RegExp(`^${at}\\.0\\.comparison: `)),
    ]);
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, adress: 'x' }] } }] })[0]).toMatch(
      new RegExp(`^${at}\\.0: Unrecognized key: "adress"`),
    );
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [prom, prom] } }] })).toEqual([
      `${at}.1.name: duplicate gate name "errors"`,
    ]);
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, address: 'ftp://x' }] } }] })).toEqual([
      `${at}.0.address: must be an http(s) URL`,
    ]);
    expect(
      errorsOf({
        target,
        stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, auth: { type: 'bearer', token: 'secret' } }] } }],
      })[0],
    ).toMatch(new RegExp(`^${at}\\.0\\.auth`));
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, threshold: Number.NaN }] } }] })[0]).toMatch(
      new RegExp(`^${at}\\.0\\.threshold: `),
    );
    expect(
      errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, query: 'x'.repeat(4_097) }] } }] })[0],
    ).toMatch(new RegExp(`^${at}\\.0\\.query: `));
    expect(
      errorsOf({
        target,
        stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ type: 'cloudwatchMetric', name: 'm', comparison: '<', threshold: 1 }] } }],
      }),
    ).toEqual([`${at}.0.metric: give either metric, or expression with metrics`]);
    expect(
      errorsOf({
        target,
        stages: [
          {
            name: 's',
            percent: 100,
            bakeSeconds: 0,
            gates: {
              providers: [
                {
                  type: 'cloudwatchMetric',
                  name: 'm',
                  expression: 'a/b',
                  metrics: { A: { namespace: 'n', metricName: 'm', stat: 'Sum' } },
                  comparison: '<',
                  threshold: 1,
                },
              ],
            },
          },
        ],
      })[0],
    ).toMatch(new RegExp(`^${at}\\.0\\.metrics\\.A: `));
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...alarmGate, alarms: [] }] } }] })[0]).toMatch(
      new RegExp(`^${at}\\.0\\.alarms: `),
    );
    expect(errorsOf({ target, stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: [{ ...prom, type: 'datadog' }] } }] })[0]).toMatch(
      new RegExp(`^${at}\\.0\\.type: `),
    );
    expect(
      errorsOf({
        target,
        stages: [{ name: 's', percent: 100, bakeSeconds: 0, gates: { providers: Array.from({ length: 11 }, (_, i) => ({ ...prom, name: `g${i}` })) } }],
      })[0],
    ).toMatch(new RegExp(`^${at}: `));
  });
});

const gate = specWith([prom]).stages[0]!.gates.providers![0]! as PrometheusGate;
const where = { attempt: 1, stage: 0, at: T, source: 'poll' as const };

describe('judging what a provider returned', () => {
  const outcome = (r: ProviderResult, g: ProviderGate = gate) => {
    const x = judge(g, r, where);
    return [x.outcome, x.value, x.reason];
  };
  it('a number is compared; anything else is inconclusive, with the reason', () => {
    expect(outcome({ kind: 'number', value: 0.01, answer: '' })).toEqual(['pass', 0.01, null]);
    expect(outcome({ kind: 'number', value: 0.05, answer: '' })).toEqual(['fail', 0.05, '0.05 does not meet < 0.05']);
    expect(outcome({ kind: 'number', value: Number.NaN, answer: '' })).toEqual(['inconclusive', null, 'the value is NaN: no number to compare']);
    expect(outcome({ kind: 'number', value: Number.POSITIVE_INFINITY, answer: '' })[0]).toBe('inconclusive');
    expect(outcome({ kind: 'empty', answer: '' })).toEqual(['inconclusive', null, expect.stringMatching(/^empty result/)]);
    expect(outcome({ kind: 'several', count: 3, answer: '' })).toEqual(['inconclusive', null, 'the query returned 3 series; a gate needs exactly one number']);
    expect(outcome({ kind: 'error', message: 'connect ECONNREFUSED 127.0.0.1:9090', answer: '' })).toEqual([
      'inconclusive',
      null,
      'connect ECONNREFUSED 127.0.0.1:9090',
    ]);
  });
  it('an alarm gate fails on any ALARM, passes on all OK, and is inconclusive otherwise', () => {
    const g = specWith([alarmGate]).stages[0]!.gates.providers![0]!;
    const states = (a: string, b: string) => ({ kind: 'alarms', states: { 'checkout-5xx': a, 'checkout-latency': b }, answer: '' }) as ProviderResult;
    expect(outcome(states('OK', 'OK'), g)).toEqual(['pass', null, null]);
    expect(outcome(states('OK', 'ALARM'), g)).toEqual(['fail', null, 'in ALARM: checkout-latency']);
    expect(outcome(states('ALARM', 'missing'), g)[0]).toBe('fail');
    expect(outcome(states('OK', 'INSUFFICIENT_DATA'), g)).toEqual(['inconclusive', null, 'alarm checkout-latency is INSUFFICIENT_DATA']);
    expect(outcome(states('missing', 'OK'), g)).toEqual(['inconclusive', null, 'alarm checkout-5xx not found']);
  });
  it('keeps a long answer bounded', () => {
    expect(judge(gate, { kind: 'empty', answer: 'x'.repeat(5_000) }, where).answer).toHaveLength(1_000);
  });
});

const reading = (outcome: GateReading['outcome'], at: number, stage = 0): GateReading => ({
  gate: 'errors',
  type: 'prometheus',
  attempt: 1,
  stage,
  at,
  outcome,
  value: null,
  query: 'q',
  answer: '',
  reason: outcome === 'pass' ? null : outcome,
  source: 'poll',
});

describe('tallies', () => {
  it('count within a period, start again in a newer one, and ignore an older one', () => {
    const a = tallyWith(undefined, reading('fail', T + 1), T)!;
    expect(a).toMatchObject({ origin: T, readings: 1, failures: 1, inconclusive: 0 });
    const b = tallyWith(a, reading('inconclusive', T + 2), T)!;
    expect(b).toMatchObject({ readings: 2, failures: 1, inconclusive: 1, last: { at: T + 2 }, lastFailure: { at: T + 1 }, lastInconclusive: { at: T + 2 } });
    // A reading that arrives late keeps its place: the newest stays the last.
    expect(tallyWith(b, reading('pass', T + 1), T)).toMatchObject({ readings: 3, last: { at: T + 2 } });
    // Resumed at T + 10: the counts start again.
    expect(tallyWith(b, reading('pass', T + 11), T + 10)).toMatchObject({
      origin: T + 10,
      readings: 1,
      failures: 0,
      inconclusive: 0,
      lastFailure: null,
      lastInconclusive: null,
    });
    // Taken before the resume, stored after it: it does not count.
    expect(tallyWith(tallyWith(b, reading('pass', T + 11), T + 10)!, reading('fail', T + 3), T)).toBeNull();
  });
});

function tally(t: Partial<GateTally>): GateTally {
  const last = t.last ?? reading('pass', T + 1);
  return {
    gate: 'errors',
    stage: 0,
    origin: T,
    readings: 1,
    failures: 0,
    inconclusive: 0,
    passStreak: last.outcome === 'pass' ? 1 : 0,
    last,
    lastFailure: null,
    lastInconclusive: null,
    ...t,
  };
}

describe('the provider verdict', () => {
  const gates = [gate];
  const of = (t?: GateTally) => providerVerdict(gates, talliesByStage(t ? [t] : []), 0, T);
  it('waits with no data, or while the newest reading does not pass; passes on a passing newest reading', () => {
    expect(of()).toEqual({ kind: 'wait', reason: 'gate errors (prometheus): no data yet' });
    expect(of(tally({ origin: T - 1 }))).toMatchObject({ kind: 'wait', reason: 'gate errors (prometheus): no data yet' });
    expect(of(tally({ last: reading('inconclusive', T + 1), inconclusive: 1 }))).toMatchObject({ kind: 'wait' });
    expect(of(tally({}))).toEqual({ kind: 'pass', readings: [reading('pass', T + 1)] });
  });
  it('rolls back past failureLimit and pauses past inconclusiveLimit, naming the gate and the last reason', () => {
    const failed = reading('fail', T + 5);
    expect(of(tally({ failures: 1, last: failed, lastFailure: failed }))).toEqual({
      kind: 'rollback',
      reason: 'gate errors (prometheus): 1 failed reading > failureLimit 0; last: fail',
      readings: [failed],
    });
    const down = { ...reading('inconclusive', T + 9), reason: 'connect ECONNREFUSED 127.0.0.1:9090' };
    expect(of(tally({ inconclusive: 2, last: down, lastInconclusive: down }))).toMatchObject({ kind: 'wait' });
    expect(of(tally({ inconclusive: 3, last: down, lastInconclusive: down }))).toEqual({
      kind: 'pause',
      reason: 'gate errors (prometheus): 3 inconclusive readings > inconclusiveLimit 2; last: connect ECONNREFUSED 127.0.0.1:9090',
      readings: [down],
    });
    // A breach is looked at first: it rolls back even while the provider is also flaky.
    expect(of(tally({ failures: 1, inconclusive: 5, lastFailure: failed, lastInconclusive: down })).kind).toBe('rollback');
  });
});

describe('due gates', () => {
  const g = { ...gate, intervalSeconds: 30, initialDelaySeconds: 5 };
  const due = (t: GateTally | undefined, now: number) => dueGates([g], talliesByStage(t ? [t] : []), 0, T, now).length === 1;
  it('waits out the initial delay, then reads at most once per interval', () => {
    expect(due(undefined, T + 4_999)).toBe(false);
    expect(due(undefined, T + 5_000)).toBe(true);
    expect(due(tally({ last: reading('pass', T + 5_000) }), T + 34_999)).toBe(false);
    expect(due(tally({ last: reading('pass', T + 5_000) }), T + 35_000)).toBe(true);
    // A tally of an earlier period is no reading of this one.
    expect(due(tally({ origin: T - 60_000, last: reading('pass', T + 5_000) }), T + 6_000)).toBe(true);
  });
});

/** A running rollout of `spec` with its first stage active since `activatedAt`, in the period begun at `lastProgressAt`. */
function runningView(
  spec: ReturnType<typeof parseRolloutSpec>,
  o: { id?: string; tallies?: GateTally[]; lastProgressAt?: number; activatedAt?: number; requests?: number } = {},
): RolloutView {
  const stages = freshStages({ rollout: { spec } as RolloutView['rollout'] });
  stages[0] = { ...stages[0]!, phase: 'active', activatedAt: o.activatedAt ?? T };
  return {
    rollout: {
      id: o.id ?? 'r',
      spec,
      state: 'running',
      attempt: 1,
      version: 2,
      createdAt: T,
      updatedAt: T,
      lastProgressAt: o.lastProgressAt ?? T,
      deadlineExceededAt: null,
      stateBy: null,
      stateReason: null,
    },
    stages,
    metrics: new Map(o.requests === undefined ? [] : [[0, { requests: o.requests, errors: 0, p99LatencyMs: null, observedAt: T + 1 }]]),
    alarms: {},
    gates: talliesByStage(o.tallies ?? []),
  };
}

describe('the evaluator with provider gates', () => {
  const spec = specWith([prom], 60);
  const view = (tallies: GateTally[], o: { lastProgressAt?: number; activatedAt?: number } = {}): RolloutView => runningView(spec, { ...o, tallies });
  it('promotes only once baked and the gate passes, carrying the reading', () => {
    expect(evaluate(view([]), T + 61_000)).toBeNull();
    expect(evaluate(view([tally({})]), T + 59_000)).toBeNull();
    expect(evaluate(view([tally({})]), T + 61_000)).toEqual({ kind: 'promote', stage: 0, then: 'activate_next', readings: [reading('pass', T + 1)] });
  });
  it('pauses on an outage instead of promoting, and a resume starts the count again', () => {
    const down = reading('inconclusive', T + 9);
    const outage = tally({ inconclusive: 3, last: down, lastInconclusive: down });
    expect(evaluate(view([outage]), T + 61_000)).toMatchObject({ kind: 'pause', readings: [down] });
    // Resumed at T + 100: the old period's tally is no data; nothing happens until the gate is read again.
    expect(evaluate(view([outage], { lastProgressAt: T + 100_000 }), T + 161_000)).toBeNull();
  });
  it('a pause plan stops the rollout with the reason and the reading in its event', () => {
    const down = reading('inconclusive', T + 9);
    const v = view([tally({ inconclusive: 3, last: down, lastInconclusive: down })]);
    const decision = evaluate(v, T + 61_000)!;
    const plan = planTransition(v, decision, { now: T + 61_000, token: { name: 'promotion_leader', holder: 'n1', epoch: 3 }, actor: 'promoter:n1' });
    expect(plan.next).toMatchObject({ state: 'paused', stateBy: 'promoter:n1' });
    expect(plan.next.stateReason).toMatch(/^gate errors \(prometheus\): 3 inconclusive readings/);
    expect(plan.stageChanges).toEqual([]);
    expect(plan.events.map((e) => e.detailType)).toEqual(['ai.rollout.paused']);
    expect(plan.events[0]!.detail).toMatchObject({ stage: { index: 0, name: 'canary', percent: 10 }, readings: [down] });
  });
  it('a rollback names the failing reading in its event', () => {
    const failed = { ...reading('fail', T + 9), value: 0.4, reason: '0.4 does not meet < 0.05' };
    const v = view([tally({ failures: 1, last: failed, lastFailure: failed })]);
    const plan = planTransition(v, evaluate(v, T + 10_000)!, {
      now: T + 10_000,
      token: { name: 'promotion_leader', holder: 'n1', epoch: 3 },
      actor: 'promoter:n1',
    });
    expect(plan.next.state).toBe('rolled_back');
    expect(plan.events[0]).toMatchObject({
      detailType: 'ai.rollout.rollback_detected',
      detail: { reason: 'gate errors (prometheus): 1 failed reading > failureLimit 0; last: 0.4 does not meet < 0.05', readings: [failed] },
    });
  });
});

describe('a stage short of data (maxBakeSeconds, onInsufficientData)', () => {
  const judged = {
    ...prom,
    comparison: undefined,
    threshold: undefined,
    query: 'x{version="{{version}}"}',
    judge: { kind: 'mann-whitney' },
    inconclusiveLimit: 100,
  };
  const specOf = (stage: Record<string, unknown>, gates: Record<string, unknown> = { providers: [judged] }) =>
    parseRolloutSpec({
      target,
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 60, gates, ...stage },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
  const view = (spec: ReturnType<typeof specOf>, tallies: GateTally[], metrics?: { requests: number }): RolloutView =>
    runningView(spec, { tallies, ...(metrics ? { requests: metrics.requests } : {}) });
  const short = { ...reading('inconclusive', T + 50_000), reason: 'not enough data: 3 canary and 9 baseline points, 10 needed on each side' };
  const shortTally = tally({ inconclusive: 5, last: short, lastInconclusive: short });

  it('stretches the bake to maxBakeSeconds without pausing at inconclusiveLimit, then pauses by default naming what was short', () => {
    const spec = specOf({ maxBakeSeconds: 300 });
    // Five readings short of data, over the default limit of two: within the stretch they wait.
    const overLimit = tally({ inconclusive: 5, last: short, lastInconclusive: short });
    const limited = specOf({ maxBakeSeconds: 300 }, { providers: [{ ...judged, inconclusiveLimit: 2 }] });
    expect(evaluate(view(limited, [overLimit]), T + 61_000)).toBeNull();
    expect(evaluate(view(spec, [shortTally]), T + 299_000)).toBeNull();
    expect(evaluate(view(limited, [overLimit]), T + 300_000)).toEqual({
      kind: 'pause',
      reason:
        'stage canary: not enough data 300 s into its period (maxBakeSeconds 300): gate errors: not enough data: 3 canary and 9 baseline points, 10 needed on each side',
      readings: [short],
    });
    // Without a stretch the limit pauses as before; a provider outage past the limit pauses even within one.
    expect(evaluate(view(specOf({}, { providers: [{ ...judged, inconclusiveLimit: 2 }] }), [overLimit]), T + 61_000)).toMatchObject({ kind: 'pause' });
    const down = { ...reading('inconclusive', T + 50_000), reason: 'connect ECONNREFUSED 127.0.0.1:9090' };
    const outage = evaluate(view(limited, [tally({ inconclusive: 3, last: down, lastInconclusive: down })]), T + 61_000);
    expect(outage?.kind).toBe('pause');
    expect(outage && 'reason' in outage ? outage.reason : '').toContain('ECONNREFUSED');
    // The stage promotes as soon as the data comes.
    expect(evaluate(view(spec, [tally({})]), T + 61_000)).toMatchObject({ kind: 'promote' });
  });

  it('counts the stretch from the current period: a resume gives the stage that time again', () => {
    const spec = specOf({ maxBakeSeconds: 300 });
    const resumed = { ...view(spec, [{ ...shortTally, origin: T + 400_000 }]), rollout: { ...view(spec, []).rollout, lastProgressAt: T + 400_000 } };
    expect(evaluate(resumed, T + 401_000)).toBeNull();
    const again = evaluate(resumed, T + 700_000);
    expect(again?.kind).toBe('pause');
    expect(again && 'reason' in again ? again.reason : '').toMatch(/^stage canary: not enough data 300 s into its period/);
    // And the promoter's schedule wakes for it: the stretch's end is a time to look.
    const pushed = specOf({ maxBakeSeconds: 300 }, { minRequests: 1_000 });
    const waiting = { ...view(pushed, [], { requests: 10 }), rollout: { ...view(pushed, []).rollout, lastProgressAt: T + 400_000 } };
    expect(nextEvaluationAt(waiting, T + 401_000)).toBe(T + 700_000);
  });

  it('rolls back when told', () => {
    expect(evaluate(view(specOf({ maxBakeSeconds: 120, onInsufficientData: 'rollback' }), [shortTally]), T + 120_000)).toMatchObject({
      kind: 'rollback',
      stage: 0,
      reason:
        'stage canary: not enough data 120 s into its period (maxBakeSeconds 120): gate errors: not enough data: 3 canary and 9 baseline points, 10 needed on each side',
      readings: [short],
    });
  });

  describe('onInsufficientData: "pass"', () => {
    const passSpec = (gates?: Record<string, unknown>) => specOf({ maxBakeSeconds: 120, onInsufficientData: 'pass' }, gates);
    const END = T + 120_000;
    const WHY =
      'stage canary: not enough data 120 s into its period (maxBakeSeconds 120): gate errors: not enough data: 3 canary and 9 baseline points, 10 needed on each side';
    const ctx = { now: END, token: { name: 'promotion_leader', holder: 'n1', epoch: 3 }, actor: 'promoter:n1' };
    const other = (outcome: GateReading['outcome'], o: Partial<GateTally> = {}, why?: string) => {
      const r = { ...reading(outcome, T + 60_000), gate: 'latency', ...(why ? { reason: why } : {}) };
      return tally({ gate: 'latency', last: r, passStreak: outcome === 'pass' ? 1 : 0, ...o });
    };
    const two = (extra: Record<string, unknown> = {}) => passSpec({ providers: [judged, { ...judged, name: 'latency', ...extra }] });

    it('promotes once the stretch is over and the stage is short, never before; the promotion says why and on what', () => {
      expect(evaluate(view(passSpec(), [shortTally]), END - 1_000)).toBeNull();
      const d = evaluate(view(passSpec(), [shortTally]), END);
      expect(d).toEqual({ kind: 'promote', stage: 0, then: 'activate_next', readings: [short], insufficientData: WHY });
      // The event and the stage row carry it: an operator sees the stage passed on too little data, and what it passed on.
      const plan = planTransition(view(passSpec(), [shortTally]), d!, ctx);
      expect(plan.events[0]).toMatchObject({ detailType: 'ai.rollout.stage_promoted', detail: { insufficientData: WHY, readings: [short] } });
      expect(plan.stageChanges[0]).toMatchObject({
        index: 0,
        set: { phase: 'promoted', reason: `passed on insufficient data (onInsufficientData pass): ${WHY}` },
      });
      expect(historyJson(plan.events[0]!)).toMatchObject({ type: 'ai.rollout.stage_promoted', insufficientData: WHY, reason: null });
      // A stage with enough data promotes as ever, with no such mark.
      const normal = evaluate(view(passSpec(), [tally({})]), T + 61_000);
      expect(normal).toMatchObject({ kind: 'promote' });
      expect(normal).not.toHaveProperty('insufficientData');
    });

    it('never over a failure: a failing gate past its limit rolls back, a newest failure within it holds', () => {
      const failed = { ...reading('fail', T + 40_000), reason: 'canary higher' };
      const past = tally({ failures: 1, lastFailure: failed, last: short, lastInconclusive: short, inconclusive: 1 });
      expect(evaluate(view(passSpec(), [past]), END)).toMatchObject({ kind: 'rollback', readings: [failed] });
      const within = passSpec({ providers: [{ ...judged, failureLimit: 3 }] });
      expect(evaluate(view(within, [tally({ failures: 1, last: failed, lastFailure: failed })]), END)).toBeNull();
    });

    it('a gate that is not short of data must still pass', () => {
      // The other gate failed (within its limit), has a provider error, has no reading, or has too few passes in a row: the stage holds.
      expect(evaluate(view(two({ failureLimit: 3 }), [shortTally, other('fail', { failures: 1 })]), END)).toBeNull();
      expect(evaluate(view(two(), [shortTally, other('inconclusive', { inconclusive: 1 }, 'connect ECONNREFUSED')]), END)).toBeNull();
      expect(evaluate(view(two(), [shortTally]), END)).toBeNull();
      expect(evaluate(view(two({ consecutiveSuccesses: 2 }), [shortTally, other('pass')]), END)).toBeNull();
      // Once it passes, the stage promotes on both: the short reading and the passing one.
      const passing = other('pass');
      expect(evaluate(view(two(), [shortTally, passing]), END)).toMatchObject({ kind: 'promote', readings: [short, passing.last], insufficientData: WHY });
    });

    it('an alarm that is not OK holds it; one in ALARM rolls back', () => {
      const alarmed = passSpec({ providers: [judged], alarms: ['checkout-5xx'] });
      const at = (state: 'OK' | 'ALARM' | 'INSUFFICIENT_DATA') => ({ ...view(alarmed, [shortTally]), alarms: { 'checkout-5xx': state } });
      expect(evaluate(at('INSUFFICIENT_DATA'), END)).toBeNull();
      expect(evaluate(at('ALARM'), END)).toMatchObject({ kind: 'rollback', reason: 'alarm checkout-5xx is in ALARM' });
      expect(evaluate(at('OK'), END)).toMatchObject({ kind: 'promote', insufficientData: WHY });
    });

    it('passes too few pushed requests on what was seen, and pauses when what was seen is over the thresholds', () => {
      const pushed = passSpec({ minRequests: 1_000, maxErrorRate: 0.05 });
      const seen = (errors: number) => {
        const v = view(pushed, [], { requests: 200 });
        return { ...v, metrics: new Map([[0, { requests: 200, errors, p99LatencyMs: null, observedAt: T + 1 }]]) };
      };
      expect(evaluate(seen(2), END)).toEqual({
        kind: 'promote',
        stage: 0,
        then: 'activate_next',
        metrics: { requests: 200, errors: 2, p99LatencyMs: null, observedAt: T + 1 },
        insufficientData: 'stage canary: not enough data 120 s into its period (maxBakeSeconds 120): 200 of 1000 requests reported',
      });
      expect(evaluate(seen(50), END)).toMatchObject({
        kind: 'pause',
        reason:
          'stage canary: not enough data 120 s into its period (maxBakeSeconds 120): 200 of 1000 requests reported; onInsufficientData pass does not pass over what was seen: error rate 0.2500 > 0.05 over 200 requests',
      });
    });
  });

  it('counts too few pushed requests as short of data too, and without either field waits as before', () => {
    const pushed = specOf({ maxBakeSeconds: 90 }, { minRequests: 1_000 });
    expect(evaluate(view(pushed, [], { requests: 200 }), T + 89_000)).toBeNull();
    expect(nextEvaluationAt(view(pushed, [], { requests: 200 }), T + 61_000)).toBe(T + 90_000);
    expect(evaluate(view(pushed, [], { requests: 200 }), T + 90_000)).toMatchObject({
      kind: 'pause',
      reason: 'stage canary: not enough data 90 s into its period (maxBakeSeconds 90): 200 of 1000 requests reported',
    });
    expect(evaluate(view(specOf({}), [shortTally]), T + 3_000_000)).toBeNull();
  });

  it('refuses a maxBakeSeconds shorter than the bake or past the progress deadline, naming it', () => {
    expect(() => specOf({ maxBakeSeconds: 30 })).toThrow(/maxBakeSeconds: must be at least bakeSeconds/);
    expect(() => specOf({ maxBakeSeconds: 7_200 })).toThrow(
      /stages\.0\.maxBakeSeconds: 7200 is longer than progressDeadlineSeconds \(3600\): the deadline would fire first/,
    );
    expect(() => specOf({ onInsufficientData: 'later' })).toThrow(/onInsufficientData/);
  });

  it('refuses a judged gate on a stage at 100 %: no baseline is left', () => {
    expect(() => parseRolloutSpec({ target, stages: [{ name: 'all', percent: 100, bakeSeconds: 60, gates: { providers: [judged] } }] })).toThrow(
      /stages\.0\.gates\.providers\.0\.judge: stage all sends 100 % to the new version, so no baseline is left/,
    );
  });
});

describe('the GateReader', () => {
  const spec = specWith([
    { ...prom, timeoutSeconds: 1 },
    { ...alarmGate, timeoutSeconds: 1 },
  ]);
  const running = (id: string): RolloutView => runningView(spec, { id });
  function storeThatCounts() {
    const stored: CountedReading[] = [];
    const store = {
      recordGateReadings: (rs: readonly { rolloutId: string; origin: number; reading: GateReading }[]) => {
        const out = rs.map((r) => ({ rolloutId: r.rolloutId, tally: tallyWith(undefined, r.reading, r.origin)! }));
        stored.push(...out);
        return Promise.resolve(out);
      },
    } as unknown as RolloutStore;
    return { store, stored };
  }

  it('asks each kind of provider once with all its due gates, stores every answer and returns the views with their tallies', async () => {
    const calls: number[] = [];
    const prometheus: GateProvider<PrometheusGate> = {
      read: (gs) => (calls.push(gs.length), Promise.resolve(gs.map(() => ({ kind: 'number', value: 0.01, answer: '0.01' })))),
    };
    const { store, stored } = storeThatCounts();
    const reader = new GateReader({ prometheus }, store, { clock: { now: () => T + 1_000 } });
    const { views, readings } = await reader.read([running('a'), running('b')]);
    expect(calls).toEqual([2]);
    expect(readings.map((r) => [r.gate, r.outcome, r.reason])).toEqual([
      ['errors', 'pass', null],
      ['alarms', 'inconclusive', 'no cloudwatchAlarm provider is configured where the promoter runs'],
      ['errors', 'pass', null],
      ['alarms', 'inconclusive', 'no cloudwatchAlarm provider is configured where the promoter runs'],
    ]);
    expect(stored).toHaveLength(4);
    expect(views[0]!.gates.get(0)?.get('errors')?.last.outcome).toBe('pass');
  });

  it('a provider that ignores its signal still ends at the timeout: every gate it held is inconclusive', async () => {
    const hung: GateProvider<PrometheusGate> = { read: () => new Promise<ProviderResult[]>(() => undefined) };
    const { store } = storeThatCounts();
    const ok: ProviderResult = { kind: 'alarms', states: { 'checkout-5xx': 'OK', 'checkout-latency': 'OK' }, answer: '' };
    const reader = new GateReader({ prometheus: hung, cloudwatchAlarm: { read: (gs) => Promise.resolve(gs.map(() => ok)) } }, store, {
      clock: { now: () => T },
    });
    const { readings } = await reader.read([running('a')]);
    expect(readings.map((r) => [r.gate, r.outcome, r.reason])).toEqual([
      ['errors', 'inconclusive', 'timed out after 1 s'],
      ['alarms', 'pass', null],
    ]);
  });

  it('deadline() aborts the signal it handed out and rejects with GateTimeoutError', async () => {
    let aborted: unknown;
    const err = await deadline(
      20,
      undefined,
      (signal) => new Promise((_, reject) => signal.addEventListener('abort', () => ((aborted = signal.reason), reject(new Error('late'))))),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GateTimeoutError);
    expect(aborted).toBeInstanceOf(GateTimeoutError);
  });

  it('deadline() under a batch whose deadline has passed starts nothing and rejects with the batch’s reason', async () => {
    const batch = new AbortController();
    batch.abort(new GateTimeoutError(10_000));
    let started = false;
    const err = await deadline(20, batch.signal, () => ((started = true), Promise.resolve('answer'))).catch((e: unknown) => e);
    expect(err).toBe(batch.signal.reason);
    expect(started).toBe(false);
  });
});

describe('native CloudWatch alarm state changes', () => {
  it.each(['OK', 'ALARM', 'INSUFFICIENT_DATA'] as const)('AWS’s %s event becomes an alarm change with its state timestamp', (state) => {
    expect(inboundFromEnvelope(alarmStateChange('ServerCpuTooHigh', state))).toEqual({
      type: 'cloudwatch.alarm_state_change',
      alarm: 'ServerCpuTooHigh',
      state,
      changedAt: Date.parse('2019-10-02T17:04:40.989Z'),
      region: 'us-east-1',
    });
  });
  it('a malformed one is refused with the field named', () => {
    const bad = alarmStateChange('x', 'ALARM');
    (bad.detail.state as { value: string }).value = 'FIRING';
    expect(() => inboundFromEnvelope(bad)).toThrow(InvalidEventError);
    expect(() => inboundFromEnvelope(bad)).toThrow(/detail\.state\.value: /);
    const noTime = alarmStateChange('x', 'ALARM', 'yesterday');
    expect(() => inboundFromEnvelope(noTime)).toThrow(/detail\.state\.timestamp: not a timestamp: "yesterday"/);
  });
});

describe('rollout-wide gates counted across the rollout (rolloutGates.count: "rollout")', () => {
  const wide = (count?: 'stage' | 'rollout') =>
    parseRolloutSpec({
      target,
      stages: [
        { name: 'canary', percent: 5, bakeSeconds: 0 },
        { name: 'half', percent: 50, bakeSeconds: 0 },
        { name: 'most', percent: 80, bakeSeconds: 0 },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
      rolloutGates: { fromStage: 'canary', ...(count ? { count } : {}), providers: [{ ...prom, failureLimit: 1, inconclusiveLimit: 2 }] },
    });
  /** Stage 2 active since T + 100 (its period), after canary and half each ended with these counts. */
  const inThird = (spec: ReturnType<typeof parseRolloutSpec>, here: Partial<GateTally>) => {
    const v = runningView(spec, {
      lastProgressAt: T + 100,
      tallies: [
        tally({ stage: 0, failures: 1, lastFailure: reading('fail', T + 10, 0), last: reading('pass', T + 11, 0) }),
        tally({ stage: 1, inconclusive: 2, lastInconclusive: reading('inconclusive', T + 50, 1), last: reading('pass', T + 51, 1) }),
        ...(Object.keys(here).length ? [tally({ stage: 2, origin: T + 100, ...here })] : []),
      ],
    });
    const stages = v.stages.map((s, i) =>
      i < 2 ? { ...s, phase: 'promoted' as const } : i === 2 ? { ...s, phase: 'active' as const, activatedAt: T + 100 } : { ...s, phase: 'pending' as const },
    );
    return { ...v, stages };
  };

  it('adds the earlier stages’ failures and inconclusive readings to the active stage’s, and says since when', () => {
    const failed = reading('fail', T + 120, 2);
    const v = inThird(wide('rollout'), { failures: 1, lastFailure: failed, last: failed, passStreak: 0 });
    expect(evaluate(v, T + 200_000)).toEqual({
      kind: 'rollback',
      stage: 2,
      reason: 'gate errors (prometheus): 2 failed readings since stage canary > failureLimit 1; last: fail',
      readings: [failed],
    });
    const down = reading('inconclusive', T + 130, 2);
    expect(evaluate(inThird(wide('rollout'), { inconclusive: 1, lastInconclusive: down, last: down, passStreak: 0 }), T + 200_000)).toMatchObject({
      kind: 'pause',
      reason: 'gate errors (prometheus): 3 inconclusive readings since stage canary > inconclusiveLimit 2; last: inconclusive',
    });
    // Counted by stage (the default), the same readings are within the limits: the stage waits for its pass.
    expect(evaluate(inThird(wide(), { failures: 1, lastFailure: failed, last: failed, passStreak: 0 }), T + 200_000)).toBeNull();
    expect(evaluate(inThird(wide('stage'), { inconclusive: 1, lastInconclusive: down, last: down, passStreak: 0 }), T + 200_000)).toBeNull();
  });

  it('carries nothing else: a stage still waits for a pass of its own, and then promotes', () => {
    expect(evaluate(inThird(wide('rollout'), {}), T + 200_000)).toBeNull();
    const passed = reading('pass', T + 140, 2);
    expect(evaluate(inThird(wide('rollout'), { last: passed }), T + 200_000)).toMatchObject({ kind: 'promote', stage: 2, readings: [passed] });
  });

  it('is refused naming the field when it is neither stage nor rollout', () => {
    expect(() => parseRolloutSpec({ ...wide(), rolloutGates: { count: 'attempt', providers: [prom] } })).toThrow(/rolloutGates\.count/);
  });
});
