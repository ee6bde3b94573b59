/**
 * The leader's fast path for a metrics reading. A StreamingPromoter keeps the
 * view it last left each running rollout in; a reading is decided on that
 * view and written with its decision in one round trip (one statement on
 * PostgreSQL and PGlite, one transaction on DynamoDB). The store applies the
 * decision only if it still holds what the view was read from, so whatever
 * changed since (an alarm, another node's reading, another writer's
 * transition, a new leader) makes the decision be taken again on the fresh
 * view, never on the old one. Time is a ManualClock.
 */
import { beforeEach, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { FencedError } from '../../shared/lease/fencing.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine, type Leadership } from '../../shared/rollout/engine.js';
import { StreamingPromoter } from '../../shared/rollout/promoters.js';
import type { RolloutStore } from '../../shared/rollout/store.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { CHECKOUT_SPEC, LEASE } from '../support/checkout-rollout.js';

const SPEC = CHECKOUT_SPEC;

/** The store as it is, recording which of its methods were called: the round trips a path takes. */
function counted(store: RolloutStore): { store: RolloutStore; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(store, {
    get(target, key, receiver) {
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.push(String(key));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

forEachBackend('a reading decided on the leader’s held view, on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  let engine: RolloutEngine;
  let calls: string[];
  let streaming: StreamingPromoter;
  /** The round trips of a reading that promotes on a current held view: one. */
  const oneWrite = () => ['recordMetricsAndApply'];

  beforeEach(() => {
    clock = new ManualClock();
    const c = counted(backend.rollouts);
    calls = c.calls;
    engine = new RolloutEngine({ store: c.store, bus: new InProcessBus(), clock });
    streaming = new StreamingPromoter(engine, campaignEachTime(new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE })));
  });

  const metrics = (rolloutId: string, stage: number, errors: number, observedAt: number) =>
    ({ type: 'rollout.metrics_reported', rolloutId, stage, requests: 200, errors, p99LatencyMs: 100, observedAt }) as const;
  /** Created and its alarm reported OK through `promoter`, which therefore holds its view; then the canary's bake passes. */
  async function held(promoter = streaming): Promise<string> {
    const { id } = await createRollout(engine, { spec: SPEC, actor: 'alice' });
    await promoter.handle({ type: 'rollout.created', rolloutId: id });
    await promoter.handle({ type: 'rollout.alarm_changed', alarm: 'checkout-5xx', state: 'OK', changedAt: clock.now() });
    clock.advance(61_000);
    calls.length = 0;
    return id;
  }
  const writes = () => calls.filter((c) => c !== 'markPublished');

  it('a healthy reading on a current held view promotes the stage, written with the reading in one round trip', async () => {
    const id = await held();
    const r = await streaming.handle(metrics(id, 0, 0, clock.now()));
    expect(r.stored).toBe('stored');
    expect(r.actions.map((a) => [a.transition, a.stage, a.applied])).toEqual([['promote', 0, true]]);
    expect(writes()).toEqual(oneWrite());
    const view = (await backend.rollouts.load(id))!;
    expect(view.stages.map((s) => s.phase)).toEqual(['promoted', 'active', 'pending']);
    expect(view.metrics.get(0)).toEqual({ requests: 200, errors: 0, p99LatencyMs: 100, observedAt: clock.now() });
    // The one write stored the event with the reading it was decided on.
    const promoted = (await backend.rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.stage_promoted')!;
    expect(promoted.detail.metrics).toEqual(view.metrics.get(0));

    // The view it left is held in turn: the next stage's reading goes the same way (and the last stage, no bake, no gates, follows at once).
    clock.advance(61_000);
    calls.length = 0;
    const next = await streaming.handle(metrics(id, 1, 0, clock.now()));
    expect(next.actions.map((a) => [a.transition, a.stage, a.applied])).toEqual([
      ['promote', 1, true],
      ['promote', 2, true],
    ]);
    expect(writes()).toEqual([...oneWrite(), 'apply']);
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('completed');
  });

  it('an alarm that went to ALARM after the view was held: the stage rolls back, it does not promote', async () => {
    const id = await held();
    // Stored by another node; this promoter's view still says OK.
    expect(await backend.rollouts.recordAlarm('checkout-5xx', 'ALARM', clock.now())).toBe('stored');
    const r = await streaming.handle(metrics(id, 0, 0, clock.now()));
    expect(r.stored).toBe('stored');
    expect(r.actions.map((a) => [a.transition, a.stage, a.applied])).toEqual([['rollback', 0, true]]);
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('rolled_back');
    expect(view.stages[0]).toMatchObject({ phase: 'rolled_back', reason: 'alarm checkout-5xx is in ALARM' });
    expect(view.metrics.get(0)?.observedAt).toBe(clock.now());
  });

  it('a gate reading that failed after the view was held: the stage rolls back on it, it does not promote', async () => {
    const gated = {
      ...SPEC,
      stages: [
        {
          ...SPEC.stages[0]!,
          gates: {
            ...SPEC.stages[0]!.gates,
            providers: [{ type: 'prometheus', name: 'errors', address: 'http://127.0.0.1:9', query: 'errors', comparison: '<', threshold: 1 }],
          },
        },
        ...SPEC.stages.slice(1),
      ],
    };
    const { id } = await createRollout(engine, { spec: gated, actor: 'alice' });
    await streaming.handle({ type: 'rollout.created', rolloutId: id });
    const origin = (await backend.rollouts.load(id))!.rollout.lastProgressAt;
    const reading = (outcome: 'pass' | 'fail', value: number) =>
      ({
        gate: 'errors',
        type: 'prometheus',
        attempt: 1,
        stage: 0,
        at: clock.now(),
        outcome,
        value,
        query: 'errors',
        answer: String(value),
        reason: outcome === 'fail' ? `${value} is not < 1` : null,
        source: 'poll',
      }) as const;
    await backend.rollouts.recordGateReadings([{ rolloutId: id, origin, reading: reading('pass', 0) }]);
    // The alarm's report makes this promoter read the rollout afresh and hold it, its gate passing.
    await streaming.handle({ type: 'rollout.alarm_changed', alarm: 'checkout-5xx', state: 'OK', changedAt: clock.now() });
    clock.advance(61_000);
    await backend.rollouts.recordGateReadings([{ rolloutId: id, origin, reading: reading('fail', 7) }]);
    const r = await streaming.handle(metrics(id, 0, 0, clock.now()));
    expect(r.actions.map((a) => [a.transition, a.stage, a.applied])).toEqual([['rollback', 0, true]]);
    expect((await backend.rollouts.load(id))!.stages[0]).toMatchObject({ phase: 'rolled_back' });
  });

  it('a breach another node stored after the view was held, newer than this reading: this one is stale and the breach decides', async () => {
    const id = await held();
    expect(await backend.rollouts.recordMetrics(id, { stage: 0 }, { requests: 200, errors: 60, p99LatencyMs: 100, observedAt: clock.now() })).toBe('stored');
    const r = await streaming.handle(metrics(id, 0, 0, clock.now() - 1_000));
    expect(r.stored).toBe('stale');
    expect(r.actions.map((a) => [a.transition, a.stage, a.applied])).toEqual([['rollback', 0, true]]);
    const view = (await backend.rollouts.load(id))!;
    expect(view.stages[0]).toMatchObject({ phase: 'rolled_back', reason: 'error rate 0.3000 > 0.05 over 200 requests' });
    expect(view.metrics.get(0)?.errors).toBe(60);
  });

  it('a reading for the next stage, while the canary’s own reading turned into a breach after the view was held: the breach decides', async () => {
    const { id } = await createRollout(engine, { spec: SPEC, actor: 'alice' });
    await streaming.handle({ type: 'rollout.created', rolloutId: id });
    await streaming.handle({ type: 'rollout.alarm_changed', alarm: 'checkout-5xx', state: 'OK', changedAt: clock.now() });
    clock.advance(30_000);
    // Healthy, but before the bake ends: decides nothing, and the view holding it is kept.
    expect((await streaming.handle(metrics(id, 0, 0, clock.now()))).actions).toEqual([]);
    // Another node stores the canary's newer reading, a breach; this promoter's view still has the healthy one.
    expect(await backend.rollouts.recordMetrics(id, { stage: 0 }, { requests: 200, errors: 60, p99LatencyMs: 100, observedAt: clock.now() + 1 })).toBe(
      'stored',
    );
    clock.advance(31_000);
    // On the held view the canary has baked and is healthy: promotion, unless the store says its reading moved.
    const r = await streaming.handle(metrics(id, 1, 0, clock.now()));
    expect(r.stored).toBe('stored');
    expect(r.actions.map((a) => [a.transition, a.stage, a.applied])).toEqual([['rollback', 0, true]]);
    const view = (await backend.rollouts.load(id))!;
    expect(view.stages[0]).toMatchObject({ phase: 'rolled_back', reason: 'error rate 0.3000 > 0.05 over 200 requests' });
  });

  it('another writer paused the rollout after the view was held: the reading is stored, nothing is promoted', async () => {
    const id = await held();
    const other = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
    await other.campaign();
    await engine.command(id, () => ({ kind: 'pause', reason: 'by hand' }), other.token()!, 'bob');
    calls.length = 0;
    const r = await streaming.handle(metrics(id, 0, 0, clock.now()));
    expect(r.stored).toBe('stored');
    expect(r.actions).toEqual([]);
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('paused');
    expect(view.stages[0]?.phase).toBe('active');
    expect(view.metrics.get(0)?.observedAt).toBe(clock.now());
  });

  it('a reading after a retry counts for the new attempt, though the store last read the rollout at the old one', async () => {
    const id = await held();
    await streaming.handle(metrics(id, 0, 60, clock.now())); // 30 % errors: rolled back
    const leader = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
    await leader.campaign();
    await engine.command(id, () => ({ kind: 'retry' }), leader.token()!, 'bob');
    clock.advance(1_000);
    const r = await streaming.handle(metrics(id, 0, 0, clock.now()));
    expect(r.stored).toBe('stored');
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.attempt).toBe(2);
    expect(view.metrics.get(0)).toEqual({ requests: 200, errors: 0, p99LatencyMs: 100, observedAt: clock.now() });
  });

  it('a deposed leader that still believes it leads: its reading is stored, its promotion refused as fenced', async () => {
    const a = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
    await a.campaign();
    const stale: LeaseToken = a.token()!;
    const zombie: Leadership = () => Promise.resolve(stale);
    const promoter = new StreamingPromoter(engine, zombie);
    const id = await held(promoter);
    // The lease ran out during the bake; b holds it now.
    expect((await new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'b', clock, ...LEASE }).campaign()).leader).toBe(true);
    await expect(promoter.handle(metrics(id, 0, 0, clock.now()))).rejects.toThrow(FencedError);
    const view = (await backend.rollouts.load(id))!;
    expect(view.stages[0]?.phase).toBe('active');
    expect(view.metrics.get(0)?.observedAt).toBe(clock.now());
  });
});
