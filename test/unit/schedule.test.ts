/**
 * nextEvaluationAt: a tick reads only due rollouts, so the time it gives must
 * never be late. Checked against the evaluator and dueGates themselves over
 * seeded random views: nothing is decided and no gate falls due before it,
 * and when it says "now" something is.
 */
import { describe, expect, it } from 'vitest';
import { beforeRolloutHooks } from '../../shared/rollout/gate-spec.js';
import { dueGates, type GateReading, type GateTally } from '../../shared/rollout/gates.js';
import { evaluate } from '../../shared/rollout/evaluate.js';
import { movesTargets } from '../../shared/rollout/engine.js';
import { activeStage, talliesByStage, type AlarmState, type RolloutView, type StageMetrics, type StageStatus } from '../../shared/rollout/model.js';
import { nextEvaluationAt } from '../../shared/rollout/schedule.js';
import { parseRolloutSpec, stageProviders, type RolloutSpec } from '../../shared/rollout/spec.js';
import { freshStages } from '../../shared/rollout/transitions.js';
import { Rng } from '../chaos/rng.js';

const T = 1_700_000_000_000;
const RUNS = Number(process.env.SCHEDULE_PROPERTY_RUNS ?? 2_000);

function randomSpec(rng: Rng): RolloutSpec {
  const prom = (i: number) => ({
    type: 'prometheus',
    name: `g${i}`,
    address: 'http://prometheus:9090',
    query: 'up',
    comparison: '<',
    threshold: 1,
    intervalSeconds: 5 + rng.int(60),
    initialDelaySeconds: rng.int(3) === 0 ? 0 : rng.int(90),
  });
  const stages = Array.from({ length: 1 + rng.int(3) }, (_, i) => ({
    name: `s${i}`,
    percent: [10, 50, 100][i] ?? 100,
    bakeSeconds: rng.int(4) === 0 ? 0 : rng.int(300),
    gates: {
      ...(rng.int(2) ? { maxErrorRate: 0.05, minRequests: rng.int(2) * 100 } : {}),
      alarms: rng.int(3) === 0 ? ['a1'] : [],
      providers: Array.from({ length: rng.int(3) }, (_, g) => prom(g)),
    },
  }));
  stages[stages.length - 1]!.percent = 100;
  const hooks =
    rng.int(4) === 0
      ? [{ type: 'webhook', name: 'confirm', hook: 'confirm-rollout', url: 'https://hooks.example.com/ok', intervalSeconds: 5 + rng.int(30) }]
      : undefined;
  // Now and then gates that watch every stage from one on, with passes in a row asked of them.
  const rolloutGates =
    rng.int(3) === 0 ? { fromStage: rng.int(stages.length), providers: [{ ...prom(9), name: 'wide', consecutiveSuccesses: 1 + rng.int(3) }] } : undefined;
  return parseRolloutSpec({
    target: { service: 'checkout', version: 'v2' },
    progressDeadlineSeconds: 30 + rng.int(900),
    stages,
    ...(hooks ? { hooks } : {}),
    ...(rolloutGates ? { rolloutGates } : {}),
  });
}

function randomView(rng: Rng): { view: RolloutView; now: number } {
  const spec = randomSpec(rng);
  const lastProgressAt = T + rng.int(100_000);
  const stages: StageStatus[] = freshStages({ rollout: { spec } as RolloutView['rollout'] });
  const reached = rng.int(spec.stages.length + 1) - 1; // -1: nothing active yet
  for (let i = 0; i < reached; i++) stages[i] = { ...stages[i]!, phase: 'promoted', activatedAt: T, promotedAt: T };
  if (reached >= 0) stages[reached] = { ...stages[reached]!, phase: 'active', activatedAt: lastProgressAt - rng.int(2) * rng.int(50_000) };
  const stage = Math.max(0, reached);
  const gates = reached >= 0 ? stageProviders(spec, reached) : stages[0]?.phase === 'pending' ? [...beforeRolloutHooks(spec.hooks)] : [];
  const tallies: GateTally[] = [];
  for (const g of gates) {
    if (rng.int(6) === 0) continue;
    const outcome = (['pass', 'pass', 'pass', 'fail', 'inconclusive'] as const)[rng.int(5)]!;
    const at = lastProgressAt + rng.int(600_000);
    const reading: GateReading = {
      gate: g.name,
      type: g.type,
      attempt: 1,
      stage,
      at,
      outcome,
      value: 0,
      query: 'q',
      answer: 'a',
      reason: outcome === 'pass' ? null : 'r',
      source: 'poll',
    };
    const failures = outcome === 'fail' ? 1 + rng.int(2) : 0;
    const inconclusive = outcome === 'inconclusive' ? 1 + rng.int(4) : 0;
    // A tally of an earlier period now and then: it counts as no reading in this one.
    const origin = rng.int(6) === 0 ? lastProgressAt - 1_000 : lastProgressAt;
    tallies.push({
      gate: g.name,
      stage,
      origin,
      readings: 1 + failures + inconclusive,
      failures,
      inconclusive,
      passStreak: outcome === 'pass' ? 1 + rng.int(3) : 0,
      last: reading,
      lastFailure: failures ? reading : null,
      lastInconclusive: inconclusive ? reading : null,
    });
  }
  const metrics = new Map<number, StageMetrics>();
  if (reached >= 0 && rng.int(2)) {
    const requests = rng.int(300);
    metrics.set(reached, {
      requests,
      errors: rng.int(3) === 0 ? Math.floor(requests / 5) : 0,
      p99LatencyMs: null,
      observedAt: lastProgressAt + rng.int(100_000),
    });
  }
  const alarms: Record<string, AlarmState> = rng.int(2) ? { a1: (['OK', 'ALARM', 'INSUFFICIENT_DATA'] as const)[rng.int(3)]! } : {};
  const deadlineExceededAt = rng.int(4) === 0 ? lastProgressAt + spec.progressDeadlineSeconds * 1000 + 1 : null;
  const view: RolloutView = {
    rollout: {
      id: 'r',
      spec,
      state: 'running',
      attempt: 1,
      version: 3,
      createdAt: T,
      updatedAt: lastProgressAt,
      lastProgressAt,
      deadlineExceededAt,
      stateBy: null,
      stateReason: null,
    },
    stages,
    metrics,
    alarms,
    gates: talliesByStage(tallies),
  };
  return { view, now: lastProgressAt + rng.int(300_000) };
}

/** Whether a tick at `t` would do something for the view: decide, or read one of its gates. */
function dueAt(view: RolloutView, t: number): boolean {
  const active = activeStage(view);
  const gates = active
    ? stageProviders(view.rollout.spec, active.index)
    : view.stages[0]?.phase === 'pending'
      ? beforeRolloutHooks(view.rollout.spec.hooks)
      : undefined;
  return evaluate(view, t) !== null || dueGates(gates ?? [], view.gates, active?.index ?? 0, view.rollout.lastProgressAt, t).length > 0;
}

describe('nextEvaluationAt', () => {
  it(`is never late and never says "now" for nothing, over ${RUNS} random views`, () => {
    const rng = new Rng('schedule');
    let future = 0;
    for (let run = 0; run < RUNS; run++) {
      const { view, now } = randomView(rng);
      const next = nextEvaluationAt(view, now);
      expect(next, `run ${run}`).toBeGreaterThanOrEqual(now);
      if (next === now) {
        expect(dueAt(view, now), `run ${run}: due now, yet nothing to do`).toBe(true);
        continue;
      }
      future++;
      // Every millisecond boundary that matters lies on a candidate; sample the span densely and at its last moment.
      const end = Number.isFinite(next) ? next - 1 : now + 10_000_000;
      for (const t of [now, end, ...Array.from({ length: 40 }, () => now + rng.int(end - now + 1))]) {
        expect(dueAt(view, t), `run ${run}: due at ${t - now} ms, scheduled for ${next - now} ms`).toBe(false);
      }
    }
    // The property says something only if many views were not due at once.
    expect(future, 'views not due at once').toBeGreaterThan(RUNS / 8);
  });

  it('names the bake end, the deadline and a gate’s next reading, whichever comes first', () => {
    const spec = parseRolloutSpec({
      target: { service: 'checkout', version: 'v2' },
      progressDeadlineSeconds: 600,
      stages: [
        {
          name: 'canary',
          percent: 10,
          bakeSeconds: 120,
          gates: {
            providers: [
              {
                type: 'prometheus',
                name: 'p',
                address: 'http://p:9090',
                query: 'up',
                comparison: '<',
                threshold: 1,
                intervalSeconds: 30,
                initialDelaySeconds: 60,
              },
            ],
          },
        },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
    const stages = freshStages({ rollout: { spec } as RolloutView['rollout'] });
    stages[0] = { ...stages[0]!, phase: 'active', activatedAt: T };
    const view: RolloutView = {
      rollout: {
        id: 'r',
        spec,
        state: 'running',
        attempt: 1,
        version: 1,
        createdAt: T,
        updatedAt: T,
        lastProgressAt: T,
        deadlineExceededAt: null,
        stateBy: null,
        stateReason: null,
      },
      stages,
      metrics: new Map(),
      alarms: {},
      gates: new Map(),
    };
    // The gate's initial delay first, then (read at T+60 s) its interval, then the bake end; past the bake, the deadline.
    expect(nextEvaluationAt(view, T)).toBe(T + 60_000);
    const read: GateReading = {
      gate: 'p',
      type: 'prometheus',
      attempt: 1,
      stage: 0,
      at: T + 60_000,
      outcome: 'inconclusive',
      value: null,
      query: 'up',
      answer: '',
      reason: 'empty result',
      source: 'poll',
    };
    const tallied: RolloutView = {
      ...view,
      gates: talliesByStage([
        { gate: 'p', stage: 0, origin: T, readings: 1, failures: 0, inconclusive: 1, passStreak: 0, last: read, lastFailure: null, lastInconclusive: read },
      ]),
    };
    expect(nextEvaluationAt(tallied, T + 60_000)).toBe(T + 90_000);
    expect(nextEvaluationAt(tallied, T + 100_000)).toBe(T + 100_000); // the gate is due again
    const noGates = {
      ...view,
      rollout: {
        ...view.rollout,
        spec: { ...spec, stages: [{ ...spec.stages[0]!, gates: { ...spec.stages[0]!.gates, minRequests: 100, providers: [] } }, spec.stages[1]!] },
      },
    };
    expect(nextEvaluationAt(noGates, T)).toBe(T + 120_000);
    // Baked, but waiting on traffic: only a signal can change that, or the deadline.
    expect(nextEvaluationAt(noGates, T + 130_000)).toBe(T + 600_001);
    // Not running: never; moving targets: every tick.
    expect(nextEvaluationAt({ ...view, rollout: { ...view.rollout, state: 'paused' } }, T)).toBe(Infinity);
    const withTarget = {
      ...noGates,
      rollout: { ...noGates.rollout, spec: { ...noGates.rollout.spec, actuators: [{ type: 'nginx', name: 'web' }] } },
    } as unknown as RolloutView;
    expect(movesTargets(withTarget)).toBe(true);
    expect(nextEvaluationAt(withTarget, T)).toBe(T);
  });
});
