/**
 * One plan, one outcome, on every backend: each kind of transition is planned
 * once, purely, from a known starting state, and the same plans are applied
 * through rollout_apply (PostgreSQL, PGlite) and the DynamoDB transaction.
 * After each plan the rollout row, its stages, whether it is listed as
 * running, and the events written must be what applying the plan means
 * (viewAfter, and the plan's own events) — so they are the same on every
 * backend, read back through each store's own mapping.
 */
import { beforeAll, expect, it } from 'vitest';
import { LeaseElector } from '../../shared/lease/elector.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import type { RolloutEvent } from '../../shared/rollout/events.js';
import { freshStages, planTransition, TRANSITION_KINDS, viewAfter, type Transition, type TransitionPlan } from '../../shared/rollout/transitions.js';
import type { RolloutView } from '../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import type { RolloutStore } from '../../shared/rollout/store.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const T0 = Date.UTC(2026, 0, 1);
const HOLDER = 'plan-contract';
/** A fresh backend's first lease: the plans below are made under it, before any backend is opened. */
const TOKEN: LeaseToken = { name: 'promotion_leader', holder: HOLDER, epoch: 0 };
const SPEC = parseRolloutSpec({
  target: { service: 'checkout', version: 'v2', labels: { team: 'payments' } },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100, alarms: ['checkout-5xx'] } },
    { name: 'half', percent: 50, bakeSeconds: 60 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});

/** Every kind of transition, each variant of it (promote then activate or complete, deadline with or without abort…) somewhere. */
const SCENARIOS: Record<string, readonly Transition[]> = {
  'stage by stage': [
    { kind: 'activate', stage: 0 },
    { kind: 'promote', stage: 0, then: 'activate_next' },
    { kind: 'promote', stage: 1, then: 'activate_next' },
    { kind: 'promote', stage: 2, then: 'complete' },
  ],
  'rollback, retry': [
    { kind: 'activate', stage: 0 },
    { kind: 'rollback', stage: 0, reason: 'error rate 0.2000 > 0.05 over 500 requests' },
    { kind: 'retry' },
    { kind: 'activate', stage: 0 },
  ],
  'pause, resume, promote-full': [
    { kind: 'activate', stage: 0 },
    { kind: 'pause', reason: 'change freeze' },
    { kind: 'resume' },
    { kind: 'promote', stage: 0, then: 'activate_next' },
    { kind: 'pause' },
    { kind: 'promote_full' },
  ],
  'deadline flagged, abort, retry': [{ kind: 'activate', stage: 0 }, { kind: 'deadline', abort: false }, { kind: 'abort', reason: 'stuck' }, { kind: 'retry' }],
  'deadline aborts': [
    { kind: 'activate', stage: 0 },
    { kind: 'deadline', abort: true },
  ],
  'abort before any stage': [{ kind: 'abort' }],
};

/** What a backend holds of one rollout, in the domain's terms (each store maps its own representation). */
interface Held {
  readonly rollout: RolloutView['rollout'];
  readonly stages: RolloutView['stages'];
  readonly running: boolean;
  readonly events: readonly RolloutEvent[];
}

interface Step {
  readonly plan: TransitionPlan;
  /** The same plan with one stage change expecting a phase its stage does not have. */
  readonly moved: TransitionPlan | null;
  readonly before: Held;
  readonly after: Held;
}

const held = (view: RolloutView, events: readonly RolloutEvent[]): Held => ({
  rollout: view.rollout,
  stages: view.stages,
  running: view.rollout.state === 'running',
  events,
});

/** The plans and what each leaves behind, computed once from the plans alone. */
function planned(name: string, transitions: readonly Transition[]) {
  const id = `ro_${name.replace(/\W+/g, '-')}`;
  const rollout: RolloutView['rollout'] = {
    id,
    spec: SPEC,
    state: 'running',
    attempt: 1,
    version: 0,
    createdAt: T0,
    updatedAt: T0,
    lastProgressAt: T0,
    deadlineExceededAt: null,
    stateBy: 'alice',
    stateReason: null,
  };
  let view: RolloutView = { rollout, stages: freshStages({ rollout }), metrics: new Map(), alarms: {}, gates: new Map() };
  const created = held(view, []);
  const steps: Step[] = [];
  for (const [i, t] of transitions.entries()) {
    // Commands are planned for an operator, decisions for the promoter: both kinds of actor get recorded.
    const actor = t.kind === 'activate' || t.kind === 'promote' || t.kind === 'rollback' || t.kind === 'deadline' ? `promoter:${HOLDER}` : 'alice';
    const plan = planTransition(view, t, { now: T0 + (i + 1) * 60_000, token: TOKEN, actor });
    const last = plan.stageChanges.at(-1);
    const moved: TransitionPlan | null = last
      ? { ...plan, stageChanges: [...plan.stageChanges.slice(0, -1), { ...last, expect: last.expect === 'pending' ? 'promoted' : 'pending' }] }
      : null;
    const before = steps.at(-1)?.after ?? created;
    view = viewAfter(view, plan);
    steps.push({ plan, moved, before, after: held(view, [...before.events, ...plan.events]) });
  }
  return { id, created, steps };
}

const PLANNED = Object.entries(SCENARIOS).map(([name, transitions]) => ({ name, ...planned(name, transitions) }));
/** The same scenarios on rollouts of their own, their plans applied all at once. */
const TOGETHER = Object.entries(SCENARIOS).map(([name, transitions]) => ({ name, ...planned(`${name} together`, transitions) }));

it('the scenarios apply every kind of transition', () => {
  expect(new Set(PLANNED.flatMap((s) => s.steps.map((step) => step.plan.transition)))).toEqual(new Set(TRANSITION_KINDS));
});

forEachBackend('transition plans on %s', (backend) => {
  let token: LeaseToken;
  beforeAll(async () => {
    const elector = new LeaseElector(backend.store, {
      name: TOKEN.name,
      holderId: HOLDER,
      clock: new ManualClock(T0),
      ttlMs: 30_000,
      renewIntervalMs: 10_000,
      retryIntervalMs: 5_000,
      clockSkewMs: 1_000,
    });
    expect((await elector.campaign()).leader).toBe(true);
    token = elector.token()!;
    expect(token).toEqual(TOKEN);
  });

  async function read(store: RolloutStore, id: string): Promise<Held> {
    const view = await store.load(id);
    return {
      rollout: view!.rollout,
      stages: view!.stages,
      running: (await store.loadRunning()).some((v) => v.rollout.id === id),
      events: await store.events(id),
    };
  }

  it.each(PLANNED)('$name', async ({ id, created, steps }) => {
    const store = backend.rollouts;
    expect(await store.create(id, SPEC, T0, 'alice')).toEqual({ created: true });
    expect(await read(store, id), 'as created').toEqual(created);
    for (const [i, { plan, moved, before, after }] of steps.entries()) {
      const step = `step ${i} (${plan.transition})`;
      if (moved) {
        // One stage is not as evaluated: nothing of the plan is written, the rollout row included.
        expect(await store.apply(token, moved), `${step}, a stage moved`).toBe(false);
        expect(await read(store, id), `${step}, a stage moved`).toEqual(before);
      }
      expect(await store.apply(token, plan), step).toBe(true);
      expect(await read(store, id), step).toEqual(after);
      // Once applied, the row is no longer as evaluated: the same plan again writes nothing.
      expect(await store.apply(token, plan), `${step}, again`).toBe(false);
      expect(await read(store, id), `${step}, again`).toEqual(after);
    }
  });

  // A store may send plans applied at once together (PostgreSQL: rollout_apply_many); each is still its own
  // fenced conditional write, answered as it would be alone. Calls made at once have no order among them.
  it('plans applied at once each get the answer they would alone', async () => {
    const store = backend.rollouts;
    for (const { id } of TOGETHER) expect(await store.create(id, SPEC, T0, 'alice')).toEqual({ created: true });
    const longest = Math.max(...TOGETHER.map((s) => s.steps.length));
    for (let i = 0; i < longest; i++) {
      const now = TOGETHER.filter((s) => s.steps[i]);
      // Per rollout, at once: a plan with a stage not as evaluated (never written, before the plan or after it), and the
      // plan twice (written once: whichever goes second finds the rollout no longer as evaluated).
      const answers = await Promise.all(
        now.map(async ({ steps }) => {
          const { plan, moved } = steps[i]!;
          const [m, ...twice] = await Promise.all([moved ? store.apply(token, moved) : false, store.apply(token, plan), store.apply(token, plan)]);
          return { moved: m, twice: twice.sort() };
        }),
      );
      expect(answers).toEqual(now.map(() => ({ moved: false, twice: [false, true] })));
      for (const { id, steps } of now) expect(await read(store, id), `${id} step ${i}`).toEqual(steps[i]!.after);
    }
    // Under a token the lease no longer has, every one of them is fenced, and nothing is written.
    const deposed = { ...token, epoch: token.epoch + 1 };
    const fenced = await Promise.allSettled(TOGETHER.map(({ steps }) => store.apply(deposed, steps[0]!.plan)));
    expect(fenced.map((r) => (r.status === 'rejected' ? (r.reason as Error).name : r.status))).toEqual(TOGETHER.map(() => 'FencedError'));
    for (const { id, steps } of TOGETHER) expect(await read(store, id)).toEqual(steps.at(-1)!.after);
  });
});
