/**
 * Rollout promotion witnesses, on every backend. Time is a ManualClock;
 * interleavings are forced with gates, never with sleeps.
 */
import { beforeEach, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { evaluate } from '../../shared/rollout/evaluate.js';
import type { RolloutStore } from '../../shared/rollout/store.js';
import { planTransition } from '../../shared/rollout/transitions.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { gate } from '../support/gate.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100 } },
    { name: 'half', percent: 50, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100 } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

forEachBackend('rollout promotion on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock();
  });

  function node(holderId: string, store: RolloutStore = backend.rollouts) {
    const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId, clock, ...LEASE });
    const bus = new InProcessBus();
    const engine = new RolloutEngine({ store, bus, clock });
    const leadership = campaignEachTime(elector);
    return { elector, bus, engine, batch: new BatchPromoter(engine, leadership), streaming: new StreamingPromoter(engine, leadership) };
  }
  const metrics = (rolloutId: string, stage: number, errors: number, observedAt = clock.now()) =>
    ({ type: 'rollout.metrics_reported', rolloutId, stage, requests: 200, errors, p99LatencyMs: 100, observedAt }) as const;
  const types = async (id: string) =>
    (await backend.rollouts.events(id)).map((e) => `${e.detailType.slice(11)}${e.detail.stage ? `:${e.detail.stage.index}` : ''}`);

  it('promotes stage by stage and completes, one event per action, none when nothing happens', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.streaming.handle({ type: 'rollout.created', rolloutId: id });
    expect((await a.batch.tick()).actions).toEqual([]); // bake not over: no action, no event
    await a.streaming.handle(metrics(id, 0, 1));
    clock.advance(60_000);
    await a.batch.tick();
    await a.streaming.handle(metrics(id, 1, 2));
    clock.advance(60_000);
    await a.batch.tick();
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('completed');
    expect(view.stages.map((s) => [s.phase, s.promotedEpoch])).toEqual([
      ['promoted', 0],
      ['promoted', 0],
      ['promoted', 0],
    ]);
    expect(await types(id)).toEqual(['stage_activated:0', 'stage_promoted:0', 'stage_promoted:1', 'stage_promoted:2', 'completed']);
    // A consumer of an unordered bus orders them by seq, and reads the traffic each left in force.
    const details = (await backend.rollouts.events(id)).map((e) => e.detail);
    expect(details.map((d) => d.percent)).toEqual([10, 50, 100, 100, 100]);
    expect(details.every((d, i) => i === 0 || d.seq! > details[i - 1]!.seq!)).toBe(true);
    expect(details[0]).toMatchObject({ labels: {}, stableVersion: null, seq: 100 });
    // The pushed reading each gated stage was promoted on is stored with its event; the ungated last stage names none.
    const promotedOn = (await backend.rollouts.events(id))
      .filter((e) => e.detailType === 'ai.rollout.stage_promoted')
      .map((e) => e.detail.metrics?.errors ?? null);
    expect(promotedOn).toEqual([1, 2, null]);
    expect(a.bus.history.map((e) => e.id)).toEqual((await backend.rollouts.events(id)).map((e) => e.id));
    expect(await backend.rollouts.unpublishedEvents(10)).toEqual([]);
    expect((await a.batch.tick()).actions).toEqual([]);
  });

  it('overlapping_leaders_promote_once', async () => {
    const oldLeader = node('old');
    const { id } = await createRollout(oldLeader.engine, { spec: SPEC, actor: 'alice' });
    await oldLeader.batch.tick();
    await oldLeader.streaming.handle(metrics(id, 0, 0));
    clock.advance(60_000);
    await oldLeader.elector.campaign(); // its renew loop keeps the lease
    // The old leader's last evaluation: it has decided to promote stage 0…
    const token = oldLeader.elector.token()!;
    const view = (await backend.rollouts.load(id))!;
    const plan = planTransition(view, evaluate(view, clock.now())!, { now: clock.now(), token, actor: 'promoter:old' });
    // …its lease expires and a new leader takes over; both now write at once.
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    const newLeader = node('new');
    expect((await newLeader.elector.campaign()).leader).toBe(true); // the new epoch exists from here on
    const [late, first] = await Promise.allSettled([backend.rollouts.apply(token, plan), newLeader.batch.tick()]);
    expect(late.status).toBe('rejected');
    expect((late as PromiseRejectedResult).reason).toBeInstanceOf(FencedError);
    expect(first.status).toBe('fulfilled');

    const after = (await backend.rollouts.load(id))!;
    expect(after.stages[0]).toMatchObject({ phase: 'promoted', promotedEpoch: 1, promotedBy: 'promoter:new' });
    expect((await types(id)).filter((t) => t === 'stage_promoted:0')).toHaveLength(1);
    // And the old leader's own promoter is fenced as a whole.
    await expect(oldLeader.engine.evaluate(id, token)).resolves.toEqual([]);
    await expect(backend.rollouts.apply(token, planTransition(after, { kind: 'pause' }, { now: clock.now(), token, actor: 'x' }))).rejects.toBeInstanceOf(
      FencedError,
    );
  });

  it('streaming_miss_batch_catches_up', async () => {
    const leader = node('leader');
    const follower = node('follower');
    await leader.elector.campaign();
    const { id } = await createRollout(leader.engine, { spec: SPEC, actor: 'alice' });
    await leader.batch.tick();
    clock.advance(60_000);
    await leader.elector.campaign(); // its renew loop keeps the lease
    // The event lands on a node that does not lead: stored, not evaluated.
    expect(await follower.streaming.handle(metrics(id, 0, 0))).toMatchObject({ stored: 'stored', evaluated: false });
    expect((await backend.rollouts.load(id))!.stages[0]!.phase).toBe('active');
    const tick = await leader.batch.tick();
    expect(tick.actions.filter((a) => a.applied).map((a) => a.transition)).toEqual(['promote']);
    expect((await backend.rollouts.load(id))!.stages.map((s) => s.phase)).toEqual(['promoted', 'active', 'pending']);
  });

  it('duplicate_and_reordered_events_are_idempotent', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    for (let i = 0; i < 3; i++) await a.streaming.handle({ type: 'rollout.created', rolloutId: id });
    const t0 = clock.now();
    clock.advance(60_000);
    const newer = metrics(id, 0, 2, t0 + 50_000);
    const older = metrics(id, 0, 150, t0 + 10_000); // a breach, but older than what is stored
    expect((await a.streaming.handle(newer)).stored).toBe('stored');
    expect((await a.streaming.handle(newer)).stored).toBe('stale');
    expect((await a.streaming.handle(older)).stored).toBe('stale');
    expect((await backend.rollouts.load(id))!.metrics.get(0)).toMatchObject({ errors: 2, observedAt: t0 + 50_000 });
    expect(await types(id)).toEqual(['stage_activated:0', 'stage_promoted:0']);
    // Re-publishing the outbox after a crash carries the same ids.
    const again = await backend.rollouts.events(id);
    expect(new Set(again.map((e) => e.id)).size).toBe(again.length);
    expect(await createRollout(a.engine, { id, spec: SPEC, actor: 'alice' })).toEqual({ id, created: false });
  });

  it('rollback_is_detected_and_final, also against a batch promoter acting on an older healthy reading', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    await a.streaming.handle(metrics(id, 0, 0));
    clock.advance(60_000);

    // A BatchPromoter whose writes wait at a gate: it reads the stage as healthy and decides to promote.
    const release = gate();
    const reachedWrite = gate();
    const gated: RolloutStore = Object.assign(Object.create(backend.rollouts) as RolloutStore, {
      apply: async (...args: Parameters<RolloutStore['apply']>) => {
        reachedWrite.open();
        await release.wait;
        return backend.rollouts.apply(...args);
      },
    });
    const slowBatch = node('a', gated);
    const tick = slowBatch.batch.tick();
    await reachedWrite.wait;

    // Meanwhile the breach arrives and the StreamingPromoter rolls back.
    const breach = await a.streaming.handle(metrics(id, 0, 90, clock.now() + 1));
    expect(breach.actions.map((x) => [x.transition, x.applied])).toEqual([['rollback', true]]);
    release.open();
    const late = await tick;
    expect(late.actions.map((x) => [x.transition, x.applied])).toEqual([['promote', false]]);

    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('rolled_back');
    expect(view.stages.map((s) => s.phase)).toEqual(['rolled_back', 'pending', 'pending']);
    expect(view.stages[0]!.reason).toMatch(/error rate/);
    clock.advance(600_000);
    await a.batch.tick();
    await a.streaming.handle(metrics(id, 0, 0, clock.now()));
    expect((await types(id)).filter((t) => t.startsWith('rollback'))).toEqual(['rollback_detected:0']);
    expect(await types(id)).not.toContain('stage_promoted:0');
  });

  it('manual commands: pause, resume, promote, abort, retry, promote-full — fenced, recorded, each with its event', async () => {
    const a = node('a');
    await a.elector.campaign();
    const token = a.elector.token()!;
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();

    await runCommand(a.engine, token, { rolloutId: id, command: 'pause', actor: 'bob', reason: 'investigating' });
    clock.advance(120_000);
    await a.streaming.handle(metrics(id, 0, 0));
    expect((await backend.rollouts.load(id))!.rollout).toMatchObject({ state: 'paused', stateBy: 'bob', stateReason: 'investigating' });
    await expect(runCommand(a.engine, token, { rolloutId: id, command: 'pause', actor: 'bob' })).rejects.toThrow(/rollout is paused, expected running/);

    await runCommand(a.engine, token, { rolloutId: id, command: 'resume', actor: 'bob', reason: 'false alarm' }); // resumes and evaluates: stage 0 is healthy and baked
    await runCommand(a.engine, token, { rolloutId: id, command: 'promote', actor: 'carol', reason: 'soaked in staging' }); // skip stage 1's bake
    expect((await backend.rollouts.load(id))!.stages.map((s) => [s.phase, s.promotedBy])).toEqual([
      ['promoted', 'promoter:a'],
      ['promoted', 'carol'],
      ['active', null],
    ]);
    await runCommand(a.engine, token, { rolloutId: id, command: 'abort', actor: 'dave', reason: 'wrong build' });
    expect((await backend.rollouts.load(id))!.stages[2]!.phase).toBe('rolled_back');
    await runCommand(a.engine, token, { rolloutId: id, command: 'retry', actor: 'dave', reason: 'fixed build' });
    let view = (await backend.rollouts.load(id))!;
    expect(view.rollout).toMatchObject({ state: 'running', attempt: 2 });
    expect(view.stages.map((s) => s.phase)).toEqual(['active', 'pending', 'pending']);
    await runCommand(a.engine, token, { rolloutId: id, command: 'promote-full', actor: 'erin' });
    view = (await backend.rollouts.load(id))!;
    expect(view.rollout).toMatchObject({ state: 'completed', stateBy: 'erin' });
    expect(view.stages.every((s) => s.phase === 'promoted' && s.promotedBy === 'erin')).toBe(true);

    const events = await backend.rollouts.events(id);
    // Each command's events carry what its caller said, whichever command it was.
    expect(events.map((e) => [e.detailType.slice(11), e.detail.actor, e.detail.reason ?? null])).toEqual([
      ['stage_activated', 'promoter:a', null],
      ['paused', 'bob', 'investigating'],
      ['resumed', 'bob', 'false alarm'],
      ['stage_promoted', 'promoter:a', null],
      ['stage_promoted', 'carol', 'soaked in staging'],
      ['aborted', 'dave', 'wrong build'],
      ['retried', 'dave', 'fixed build'],
      ['stage_activated', 'promoter:a', null],
      ['stage_promoted', 'erin', 'promote-full'],
      ['stage_promoted', 'erin', 'promote-full'],
      ['stage_promoted', 'erin', 'promote-full'],
      ['completed', 'erin', 'promote-full'],
    ]);
    // A deposed caller's command is fenced.
    const b = node('b');
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    await b.elector.campaign();
    const { id: id2 } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await expect(runCommand(a.engine, token, { rolloutId: id2, command: 'pause', actor: 'bob' })).rejects.toBeInstanceOf(FencedError);
  });

  it('flags a rollout that makes no progress, and aborts it when asked', async () => {
    const a = node('a');
    const spec = { ...SPEC, progressDeadlineSeconds: 600, progressDeadlineAbort: true };
    const { id } = await createRollout(a.engine, { spec, actor: 'alice' });
    await a.batch.tick();
    clock.advance(601_000); // no metrics ever arrive: stuck waiting for minRequests
    await a.batch.tick();
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout).toMatchObject({ state: 'aborted', stateReason: 'no progress for 600 s' });
    expect(await types(id)).toEqual(['stage_activated:0', 'progress_deadline_exceeded', 'aborted:0']);
  });

  it('a view holds the state of exactly the alarms its spec names — stage alarms and cloudwatchAlarm gates — on every read path', async () => {
    const a = node('a');
    const watching = {
      target: { service: 'checkout', version: 'v2' },
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 60, gates: { alarms: ['checkout-5xx', 'checkout-p99'] } },
        {
          name: 'half',
          percent: 50,
          bakeSeconds: 60,
          gates: { alarms: ['checkout-5xx'], providers: [{ type: 'cloudwatchAlarm', name: 'aws', alarms: ['db-cpu'] }] },
        },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    };
    const { id } = await createRollout(a.engine, { spec: watching, actor: 'alice' });
    const { id: plain } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.streaming.handle({ type: 'rollout.created', rolloutId: id });
    for (const [alarm, state] of [
      ['checkout-5xx', 'OK'],
      ['checkout-p99', 'OK'],
      ['db-cpu', 'ALARM'],
      ['unrelated', 'ALARM'],
    ] as const) {
      await backend.rollouts.recordAlarm(alarm, state, clock.now());
    }
    const expected = { 'checkout-5xx': 'OK', 'checkout-p99': 'OK', 'db-cpu': 'ALARM' };
    expect((await backend.rollouts.load(id))!.alarms).toEqual(expected);
    expect((await backend.rollouts.loadRunning()).find((v) => v.rollout.id === id)!.alarms).toEqual(expected);
    expect((await backend.rollouts.load(plain))!.alarms).toEqual({});
    // The record path, twice: the second read comes after the store has seen the spec once.
    for (const observedAt of [clock.now(), clock.now() + 1]) {
      const { view } = await backend.rollouts.recordMetricsAndLoad(id, { stage: 0 }, { requests: 1, errors: 0, p99LatencyMs: null, observedAt });
      expect(view.alarms).toEqual(expected);
      expect(view.rollout.spec).toEqual((await backend.rollouts.load(id))!.rollout.spec);
    }
    // What an alarm's change reads: the running rollouts that watch it, whichever stage names it; none for an alarm nobody watches.
    const watchers = async (alarm: string) => (await backend.rollouts.loadWatching(alarm)).map((v) => v.rollout.id);
    expect([await watchers('checkout-p99'), await watchers('db-cpu'), await watchers('unrelated')]).toEqual([[id], [id], []]);
    expect((await backend.rollouts.loadWatching('checkout-5xx'))[0]!.alarms).toEqual(expected);
    await a.elector.campaign();
    const token = a.elector.token()!;
    await runCommand(a.engine, token, { rolloutId: id, command: 'pause', actor: 'alice' });
    expect(await watchers('checkout-5xx')).toEqual([]);
    await runCommand(a.engine, token, { rolloutId: id, command: 'resume', actor: 'alice' });
    expect(await watchers('checkout-5xx')).toEqual([id]);
    await runCommand(a.engine, token, { rolloutId: id, command: 'abort', actor: 'alice' });
    expect(await watchers('checkout-5xx')).toEqual([]);
  });

  it('an event left unpublished by a failed publish goes out on the next tick, with the same id', async () => {
    const a = node('a');
    let failing = true;
    const flaky = { publish: (events: Parameters<InProcessBus['publish']>[0]) => (failing ? Promise.reject(new Error('bus down')) : a.bus.publish(events)) };
    const engine = new RolloutEngine({ store: backend.rollouts, bus: flaky, clock });
    const batch = new BatchPromoter(engine, campaignEachTime(a.elector));
    const { id } = await createRollout(engine, { spec: SPEC, actor: 'alice' });
    await batch.tick();
    const stored = await backend.rollouts.events(id);
    expect(a.bus.history).toHaveLength(0);
    failing = false;
    // DynamoDB's outbox index is eventually consistent: a tick may not see the event yet, so tick until it does.
    await expect
      .poll(
        async () => {
          await batch.tick();
          return a.bus.history.map((e) => e.id);
        },
        { interval: 20, timeout: 10_000 },
      )
      .toEqual(stored.map((e) => e.id));
  });
});
