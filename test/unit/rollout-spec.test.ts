import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../shared/errors.js';
import { evaluate } from '../../shared/rollout/evaluate.js';
import { waitingOn } from '../../shared/rollout/waiting.js';
import type { RolloutView, StageStatus } from '../../shared/rollout/model.js';
import { parseRolloutSpec, stageIndexOf } from '../../shared/rollout/spec.js';
import { freshStages, planTransition, TransitionRejectedError, viewAfter } from '../../shared/rollout/transitions.js';
import { parseInboundEvent } from '../../shared/rollout/inbound.js';

const target = { service: 'checkout', version: 'v42' };

describe('rollout spec', () => {
  it('a signal names its stage by index or by unique name; anything else names none', () => {
    const spec = parseRolloutSpec({
      target,
      stages: [
        { name: 'canary', percent: 5, bakeSeconds: 60 },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
    expect([stageIndexOf(spec, 0), stageIndexOf(spec, 1), stageIndexOf(spec, 'canary'), stageIndexOf(spec, 'all')]).toEqual([0, 1, 0, 1]);
    expect([stageIndexOf(spec, 2), stageIndexOf(spec, -1), stageIndexOf(spec, 0.5), stageIndexOf(spec, 'Canary'), stageIndexOf(spec, '')]).toEqual([
      null,
      null,
      null,
      null,
      null,
    ]);
  });

  it('accepts explicit stages and fills gate defaults', () => {
    const spec = parseRolloutSpec({
      target,
      stages: [
        { name: 'canary', percent: 5, bakeSeconds: 300, gates: { maxErrorRate: 0.01, minRequests: 500, alarms: ['checkout-5xx'] } },
        { name: 'half', percent: 50, bakeSeconds: 600 },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
    expect(spec.stages[1]!.gates).toEqual({ minRequests: 0, alarms: [] });
    expect(spec.target.labels).toEqual({});
    expect(spec.progressDeadlineSeconds).toBe(3_600);
  });

  it.each([
    [{ target, stages: [] }, /stages: a rollout needs at least one stage/],
    [
      {
        target,
        stages: [
          { name: 'a', percent: 50, bakeSeconds: 1 },
          { name: 'b', percent: 40, bakeSeconds: 1 },
        ],
      },
      /stages\.1\.percent: must increase: 40 after 50/,
    ],
    [{ target, stages: [{ name: 'a', percent: 50, bakeSeconds: -1 }] }, /stages\.0\.bakeSeconds/],
    [{ target, stages: [{ name: 'a', percent: 100, bakeSeconds: 1, gates: { maxErrorRat: 0.1 } }] }, /stages\.0\.gates.*maxErrorRat/],
    [{ target, stages: [{ name: 'a', percent: 50, bakeSeconds: 1 }] }, /stages\.0\.percent: the last stage must reach 100/],
    [
      {
        target,
        stages: [
          { name: 'a', percent: 50, bakeSeconds: 1 },
          { name: 'a', percent: 100, bakeSeconds: 1 },
        ],
      },
      /stages\.1\.name: duplicate stage name "a"/,
    ],
    [{ stages: [{ name: 'a', percent: 100, bakeSeconds: 1 }] }, /target/],
    [{ target, preset: 'zigzag', bakeSeconds: 1 }, /preset: unknown preset "zigzag"/],
    [{ target, preset: 'linear', bakeSeconds: 1 }, /stepPercent/],
  ])('refuses a bad spec, naming the field (%#)', (input, message) => {
    expect(() => parseRolloutSpec(input)).toThrow(ConfigError);
    expect(() => parseRolloutSpec(input)).toThrow(message);
  });

  it('expands presets to explicit stages', () => {
    const pct = (input: object) => parseRolloutSpec({ target, ...input }).stages.map((s) => s.percent);
    expect(pct({ preset: 'linear', stepPercent: 20, bakeSeconds: 60 })).toEqual([20, 40, 60, 80, 100]);
    expect(pct({ preset: 'linear', stepPercent: 30, bakeSeconds: 60 })).toEqual([30, 60, 90, 100]);
    expect(pct({ preset: 'exponential', initialPercent: 5, growthFactor: 2, bakeSeconds: 60 })).toEqual([5, 10, 20, 40, 80, 100]);
    expect(pct({ preset: 'canary', bakeSeconds: 600 })).toEqual([10, 100]);
    expect(pct({ preset: 'all-at-once' })).toEqual([100]);
    const gated = parseRolloutSpec({ target, preset: 'canary', bakeSeconds: 600, gates: { maxErrorRate: 0.02 } });
    expect(gated.stages.every((s) => s.gates.maxErrorRate === 0.02 && s.bakeSeconds === 600)).toBe(true);
  });
});

describe('evaluator', () => {
  const T = 1_700_000_000_000;
  const spec = parseRolloutSpec({
    target,
    progressDeadlineSeconds: 3_600,
    stages: [
      { name: 's0', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.05, maxP99LatencyMs: 500, minRequests: 100, alarms: ['a1'] } },
      { name: 's1', percent: 100, bakeSeconds: 60 },
    ],
  });
  function view(stages: Partial<StageStatus>[], extra: Partial<RolloutView> = {}, state: RolloutView['rollout']['state'] = 'running'): RolloutView {
    const base = freshStages({ rollout: { spec } as RolloutView['rollout'] });
    return {
      rollout: {
        id: 'r',
        spec,
        state,
        attempt: 1,
        version: 3,
        createdAt: T,
        updatedAt: T,
        lastProgressAt: T,
        deadlineExceededAt: null,
        stateBy: null,
        stateReason: null,
      },
      stages: base.map((s, i) => ({ ...s, ...stages[i] })),
      metrics: new Map(),
      alarms: { a1: 'OK' },
      gates: new Map(),
      ...extra,
    };
  }
  const active = { phase: 'active' as const, activatedAt: T };
  const healthy = new Map([[0, { requests: 1_000, errors: 10, p99LatencyMs: 200, observedAt: T }]]);

  it('activates the first stage of a new rollout', () => {
    expect(evaluate(view([]), T)).toEqual({ kind: 'activate', stage: 0 });
  });
  it('waits for the bake, then promotes and activates the next', () => {
    expect(evaluate(view([active], { metrics: healthy }), T + 59_999)).toBeNull();
    expect(evaluate(view([active], { metrics: healthy }), T + 60_000)).toEqual({ kind: 'promote', stage: 0, then: 'activate_next', metrics: healthy.get(0) });
  });
  it('waits for the minimum request count and for every alarm to be OK', () => {
    const few = new Map([[0, { requests: 99, errors: 0, p99LatencyMs: 1, observedAt: T }]]);
    expect(evaluate(view([active], { metrics: few }), T + 120_000)).toBeNull();
    expect(evaluate(view([active], { metrics: healthy, alarms: {} }), T + 120_000)).toBeNull();
    expect(evaluate(view([active], { metrics: healthy, alarms: { a1: 'INSUFFICIENT_DATA' } }), T + 120_000)).toBeNull();
  });
  it('says what it waits for (waitingOn): nothing exactly when the evaluator promotes, each unmet condition otherwise', () => {
    const few = new Map([[0, { requests: 99, errors: 0, p99LatencyMs: 1, observedAt: T }]]);
    let promoted = 0;
    for (const metrics of [new Map(), few, healthy])
      for (const alarms of [{ a1: 'OK' }, { a1: 'INSUFFICIENT_DATA' }, {}] as RolloutView['alarms'][])
        for (const at of [T, T + 59_999, T + 60_000, T + 600_000]) {
          const v = view([active], { metrics, alarms });
          const waits = waitingOn(v, at);
          const decision = evaluate(v, at);
          expect([decision?.kind === 'promote', waits.length === 0], JSON.stringify({ waits, decision, at })).toEqual([waits.length === 0, waits.length === 0]);
          if (!waits.length) promoted++;
        }
    expect(promoted).toBe(2);
    expect(waitingOn(view([active], { metrics: few, alarms: {} }), T + 1_000)).toEqual([
      `the bake, until ${new Date(T + 60_000).toISOString()} (60 s)`,
      'alarm a1 to be OK (not reported yet)',
      '100 requests reported (99 so far)',
    ]);
    expect(waitingOn(view([active], {}, 'paused'), T)).toEqual(['a resume (paused)']);
    expect(waitingOn(view([{ phase: 'promoted' }, { phase: 'promoted' }], {}, 'completed'), T)).toEqual([]);
  });
  it('rolls back on a breach, even once the bake has elapsed', () => {
    const bad = new Map([[0, { requests: 200, errors: 20, p99LatencyMs: 100, observedAt: T }]]);
    expect(evaluate(view([active], { metrics: bad }), T + 90_000)).toEqual({
      kind: 'rollback',
      stage: 0,
      reason: 'error rate 0.1000 > 0.05 over 200 requests',
      metrics: bad.get(0),
    });
    const slow = new Map([[0, { requests: 200, errors: 0, p99LatencyMs: 900, observedAt: T }]]);
    expect(evaluate(view([active], { metrics: slow }), T)).toEqual({ kind: 'rollback', stage: 0, reason: 'p99 latency 900 ms > 500 ms', metrics: slow.get(0) });
    // An alarm decides before the metrics are judged: the rollback carries no reading of them.
    expect(evaluate(view([active], { metrics: bad, alarms: { a1: 'ALARM' } }), T)).toEqual({ kind: 'rollback', stage: 0, reason: 'alarm a1 is in ALARM' });
  });
  it('the pushed reading that decided rides on the event, and only the one that decided', () => {
    const token = { name: 'promotion_leader', holder: 'n1', epoch: 7 };
    const planned = (v: RolloutView, now: number) => planTransition(v, evaluate(v, now)!, { now, token, actor: 'promoter:n1' });
    const promoted = planned(view([active], { metrics: healthy }), T + 60_000);
    expect(promoted.events.map((e) => [e.detailType, e.detail.metrics])).toEqual([['ai.rollout.stage_promoted', healthy.get(0)]]);
    const bad = new Map([[0, { requests: 200, errors: 20, p99LatencyMs: 100, observedAt: T }]]);
    expect(planned(view([active], { metrics: bad }), T).events.map((e) => [e.detailType, e.detail.metrics])).toEqual([
      ['ai.rollout.rollback_detected', bad.get(0)],
    ]);
    expect(planned(view([active], { metrics: bad, alarms: { a1: 'ALARM' } }), T).events[0]!.detail).not.toHaveProperty('metrics');
    // A stage with no traffic or threshold gate judged no reading: its promotion names none.
    const last = planned(view([{ phase: 'promoted' }, active], { metrics: new Map([[1, healthy.get(0)!]]) }), T + 60_000);
    expect(last.events.map((e) => [e.detailType, e.detail.metrics])).toEqual([
      ['ai.rollout.stage_promoted', undefined],
      ['ai.rollout.completed', undefined],
    ]);
  });
  it('does not judge metrics below the minimum request count', () => {
    const early = new Map([[0, { requests: 10, errors: 9, p99LatencyMs: 100, observedAt: T }]]);
    expect(evaluate(view([active], { metrics: early }), T)).toBeNull();
  });
  it('completes with the last stage', () => {
    expect(evaluate(view([{ phase: 'promoted' }, active]), T + 60_000)).toEqual({ kind: 'promote', stage: 1, then: 'complete' });
  });
  it('flags a rollout without progress once, and nothing at all unless running', () => {
    expect(evaluate(view([active]), T + 3_600_001)).toEqual({ kind: 'deadline', abort: false });
    const flagged = view([active]);
    expect(evaluate({ ...flagged, rollout: { ...flagged.rollout, deadlineExceededAt: T + 1 } }, T + 9_999_999)).toBeNull();
    expect(evaluate(view([active], { metrics: healthy }, 'paused'), T + 120_000)).toBeNull();
  });
});

describe('transition plans', () => {
  const spec = parseRolloutSpec({ target, preset: 'canary', bakeSeconds: 0 });
  const T = 1_700_000_000_000;
  const token = { name: 'promotion_leader', holder: 'n1', epoch: 7 };
  const v = (state: RolloutView['rollout']['state'], phases: StageStatus['phase'][]): RolloutView => ({
    rollout: {
      id: 'r',
      spec,
      state,
      attempt: 1,
      version: 5,
      createdAt: T,
      updatedAt: T,
      lastProgressAt: T,
      deadlineExceededAt: null,
      stateBy: null,
      stateReason: null,
    },
    stages: freshStages({ rollout: { spec } as RolloutView['rollout'] }).map((s, i) => ({ ...s, phase: phases[i]! })),
    metrics: new Map(),
    alarms: {},
    gates: new Map(),
  });

  it('a promotion expects the exact evaluated state and records the epoch', () => {
    const plan = planTransition(
      v('running', ['active', 'pending']),
      { kind: 'promote', stage: 0, then: 'activate_next' },
      { now: T, token, actor: 'promoter:n1' },
    );
    expect(plan.expect).toEqual({ version: 5, state: 'running', attempt: 1 });
    expect(plan.next.version).toBe(6);
    expect(plan.stageChanges).toEqual([
      { index: 0, expect: 'active', set: { phase: 'promoted', promotedAt: T, promotedEpoch: 7, promotedBy: 'promoter:n1' } },
      { index: 1, expect: 'pending', set: { phase: 'active', activatedAt: T } },
    ]);
    expect(plan.events.map((e) => e.detailType)).toEqual(['ai.rollout.stage_promoted']);
    expect(plan.events[0]!.detail).toMatchObject({ stage: { index: 0, percent: 10 }, nextStage: { index: 1, percent: 100 }, epoch: 7 });
  });

  it('viewAfter is the view a re-read would give after the plan was applied', () => {
    const before = v('running', ['active', 'pending']);
    const plan = planTransition(before, { kind: 'promote', stage: 0, then: 'activate_next' }, { now: T, token, actor: 'p' });
    const after = viewAfter(before, plan);
    expect(after.rollout).toEqual(plan.next);
    expect(after.stages.map((s) => [s.phase, s.promotedEpoch, s.activatedAt])).toEqual([
      ['promoted', 7, null],
      ['active', null, T],
    ]);
    const retried = viewAfter(
      v('aborted', ['rolled_back', 'pending']),
      planTransition(v('aborted', ['rolled_back', 'pending']), { kind: 'retry' }, { now: T, token, actor: 'p' }),
    );
    expect(retried.rollout).toMatchObject({ attempt: 2, state: 'running' });
    expect(retried.stages.map((s) => s.phase)).toEqual(['pending', 'pending']);
  });

  it('the same transition of the same version yields the same event id', () => {
    const a = planTransition(v('running', ['active', 'pending']), { kind: 'pause' }, { now: T, token, actor: 'alice' });
    const b = planTransition(v('running', ['active', 'pending']), { kind: 'pause' }, { now: T + 5, token, actor: 'alice' });
    expect(a.events[0]!.id).toBe(b.events[0]!.id);
  });

  it('refuses commands that do not apply', () => {
    expect(() => planTransition(v('completed', ['promoted', 'promoted']), { kind: 'pause' }, { now: T, token, actor: 'a' })).toThrow(TransitionRejectedError);
    expect(() =>
      planTransition(v('running', ['rolled_back', 'pending']), { kind: 'promote', stage: 0, then: 'activate_next' }, { now: T, token, actor: 'a' }),
    ).toThrow(/stage 0 \(10%\) is rolled_back, expected active/);
    expect(() => planTransition(v('running', ['active', 'pending']), { kind: 'retry' }, { now: T, token, actor: 'a' })).toThrow(
      /expected rolled_back or aborted/,
    );
  });
});

describe('inbound events', () => {
  it('accepts a metrics report with an ISO time and refuses bad ones naming the field', () => {
    expect(
      parseInboundEvent({ type: 'rollout.metrics_reported', rolloutId: 'r', stage: 'canary', requests: 10, errors: 1, observedAt: '2026-11-22T10:00:00Z' }),
    ).toMatchObject({
      observedAt: Date.parse('2026-11-22T10:00:00Z'),
      p99LatencyMs: null,
    });
    expect(() => parseInboundEvent({ type: 'rollout.metrics_reported', rolloutId: 'r', stage: 0, requests: 1, errors: 2, observedAt: 1 })).toThrow(
      /errors: must not exceed requests/,
    );
    expect(() => parseInboundEvent({ type: 'rollout.alarm_changed', alarm: 'a', state: 'RED', changedAt: 1 })).toThrow(/state/);
    expect(() => parseInboundEvent({ type: 'rollout.exploded' })).toThrow(/type/);
  });
});
