/**
 * Actuation through the engine, on every store, with a real nginx as the
 * target: the store is the truth and the target follows it (after each
 * transition, and on every tick for whatever was missed); drift pauses and
 * is never fought; what was applied is stored per rollout.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { startSplitNginx, type SplitNginx } from '../support/split-nginx.js';
import { Actuation, SETTLE_AFTER_MS } from '../../shared/actuation/reconcile.js';
import type { ActuationRecord } from '../../shared/rollout/actuation-record.js';
import { NginxActuator } from '../../shared/adapters/actuators/nginx/actuator.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const SPEC = {
  target: { service: 'web', version: 'v2', stableVersion: 'v1' },
  actuators: ['web'],
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100 } },
    { name: 'half', percent: 50, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100 } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

let nginx: SplitNginx;
let atRest: string;
beforeAll(async () => {
  nginx = await startSplitNginx();
  atRest = await readFile(nginx.target.include, 'utf8');
}, 60_000);
afterAll(async () => nginx?.stop());

forEachBackend('actuation on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  beforeEach(async () => {
    clock = new ManualClock();
    // Every case starts from a target at rest, as an operator leaves it.
    await writeFile(nginx.target.include, atRest);
  });

  function node(holderId: string, o: { actuate?: boolean } = {}) {
    const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId, clock, ...LEASE });
    const actuation = o.actuate === false ? undefined : new Actuation(backend.rollouts, new Map([['web', new NginxActuator('web', nginx.target)]]), clock);
    const engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock, ...(actuation ? { actuation } : {}) });
    const leadership = campaignEachTime(elector);
    return { elector, engine, batch: new BatchPromoter(engine, leadership), streaming: new StreamingPromoter(engine, leadership) };
  }
  const metrics = (rolloutId: string, stage: number, errors: number) =>
    ({ type: 'rollout.metrics_reported', rolloutId, stage, requests: 200, errors, p99LatencyMs: 100, observedAt: clock.now() }) as const;
  const carried = async () => {
    const text = await readFile(nginx.target.include, 'utf8');
    return new NginxActuator('web', nginx.target).read().then((o) => ({ percent: o.percent, final: o.final, stage: o.stamp?.stage ?? null, text }));
  };
  const record = async (id: string): Promise<ActuationRecord> => (await backend.rollouts.actuations(id))[0]!;

  it('each committed stage reaches nginx right after its transition; a breach rolls real traffic back to stable; the record says what was applied, and settles', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.streaming.handle({ type: 'rollout.created', rolloutId: id });
    expect(await carried()).toMatchObject({ percent: 10, stage: 0 });
    expect(Math.abs((await nginx.measure(2_000)) - 10)).toBeLessThanOrEqual(3);
    expect(await record(id)).toMatchObject({
      target: 'web',
      kind: 'nginx',
      attempt: 1,
      stage: 0,
      percent: 10,
      state: 'converged',
      settled: false,
      appliedAt: clock.now(),
    });
    expect(await backend.rollouts.unsettledActuations(10)).toEqual([id]);

    await a.streaming.handle(metrics(id, 0, 0));
    clock.advance(60_000);
    await a.batch.tick();
    expect(await carried()).toMatchObject({ percent: 50, stage: 1 });
    expect(Math.abs((await nginx.measure(2_000)) - 50)).toBeLessThanOrEqual(3);

    await a.streaming.handle(metrics(id, 1, 50)); // 25 % errors: over the gate's 5 %
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('rolled_back');
    expect(await carried()).toMatchObject({ percent: 0, stage: null });
    expect(await nginx.measure(2_000)).toBe(0);
    // Read again by every tick for a while (a deposed leader's late write would be found and undone), then settled.
    expect(await record(id)).toMatchObject({ percent: 0, stage: null, state: 'converged', settled: false });
    expect(await backend.rollouts.unsettledActuations(10)).toEqual([id]);
    clock.advance(SETTLE_AFTER_MS);
    await a.batch.tick();
    expect(await record(id)).toMatchObject({ percent: 0, state: 'converged', settled: true });
    expect(await backend.rollouts.unsettledActuations(10)).toEqual([]);
  });

  it("a deposed leader's write that lands after the end was written is undone by the next tick, and the target is stamped again under the newer epoch", async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    const deposed = (await campaignEachTime(a.elector)())!;
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs + 1);
    const b = node('b');
    await b.batch.tick();
    const token = (await campaignEachTime(b.elector)())!;
    expect(token.epoch).toBeGreaterThan(deposed.epoch);
    await runCommand(b.engine, token, { rolloutId: id, command: 'abort', actor: 'alice' });
    expect(await carried()).toMatchObject({ percent: 0 });
    // The late write: the first stage's split under the deposed leader's epoch, as its paused rename would leave it.
    const late = new NginxActuator('web', nginx.target).render(
      { percent: 10, final: false },
      { rolloutId: id, attempt: 1, stage: 0, epoch: deposed.epoch, percent: 10, final: false, version: 1 },
    );
    await writeFile(nginx.target.include, late);
    await b.batch.tick();
    expect(await carried()).toMatchObject({ percent: 0, stage: null });
    expect((await new NginxActuator('web', nginx.target).read()).stamp).toMatchObject({ epoch: token.epoch });
  });

  it("a promotion decided on a pushed reading (the leader's fast path, one write for the reading and the decision) reaches nginx at once, no tick needed", async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.streaming.handle({ type: 'rollout.created', rolloutId: id });
    expect(await carried()).toMatchObject({ percent: 10, stage: 0 });
    clock.advance(60_000);
    const handled = await a.streaming.handle(metrics(id, 0, 0));
    expect(handled.actions.map((x) => x.transition)).toEqual(['promote']);
    expect(await carried()).toMatchObject({ percent: 50, stage: 1 });
  });

  it('completes: nginx carries all traffic on the new version, finalised', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    const token = (await campaignEachTime(a.elector)())!;
    await runCommand(a.engine, token, { rolloutId: id, command: 'promote-full', actor: 'alice' });
    expect(await carried()).toMatchObject({ percent: 100, final: true });
    expect(await nginx.measure(500)).toBe(100);
    expect(await record(id)).toMatchObject({ final: true, state: 'converged', settled: false });
  });

  it("a crash between a commit and its effect: the next leader's tick converges the target, for a running rollout and for one that has ended", async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    expect(await carried()).toMatchObject({ percent: 10 });
    // The same leader's transitions, committed by an engine that dies before acting on them.
    const crashed = node('a', { actuate: false });
    await crashed.streaming.handle(metrics(id, 0, 0));
    clock.advance(60_000);
    await crashed.batch.tick();
    expect((await backend.rollouts.load(id))!.stages[1]!.phase).toBe('active');
    expect(await carried()).toMatchObject({ percent: 10 });
    expect((await a.batch.tick()).actuated).toBe(1);
    expect(await carried()).toMatchObject({ percent: 50, stage: 1 });
    // Ended with no effect: found among the records not settled, not among the running.
    await runCommand(crashed.engine, (await campaignEachTime(crashed.elector)())!, { rolloutId: id, command: 'abort', actor: 'alice' });
    expect(await backend.rollouts.unsettledActuations(10)).toEqual([id]);
    await a.batch.tick();
    expect(await carried()).toMatchObject({ percent: 0, stage: null });
    clock.advance(SETTLE_AFTER_MS);
    await a.batch.tick();
    expect(await backend.rollouts.unsettledActuations(10)).toEqual([]);
  });

  it('drift: a person edits the split; the rollout is paused naming the target and what was found, the edit is left alone, and resuming takes the target back', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    const ours = await readFile(nginx.target.include, 'utf8');
    const edited = ours.replace('10%  canary;', '30%  canary;');
    await writeFile(nginx.target.include, edited);
    await a.batch.tick();
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('paused');
    expect(view.rollout.stateReason).toMatch(/^actuation drift on web \(nginx\): its weights were changed by someone else: we wrote 10%, found 30%/);
    const events = await backend.rollouts.events(id);
    expect(events.map((e) => e.detailType).slice(-2)).toEqual(['ai.rollout.actuation_drift', 'ai.rollout.paused']);
    expect(events.at(-2)!.detail).toMatchObject({ target: 'web', reason: view.rollout.stateReason });
    expect(await record(id)).toMatchObject({ state: 'drift', driftVersion: view.rollout.version, observed: { percent: 30 } });
    // Never fought: ticks while paused leave the edit as it is.
    await a.batch.tick();
    await a.batch.tick();
    expect(await readFile(nginx.target.include, 'utf8')).toBe(edited);
    // A person decides: resume, and the target carries the rollout's stage again.
    await runCommand(a.engine, (await campaignEachTime(a.elector)())!, { rolloutId: id, command: 'resume', actor: 'alice' });
    expect(await carried()).toMatchObject({ percent: 10, stage: 0 });
    expect(await record(id)).toMatchObject({ state: 'converged', driftVersion: null });
  });

  it('a target another writer split before the rollout began is not taken: paused at once, nothing written', async () => {
    const foreign = atRest.replace('*  stable;', '20%  canary;\n    *  stable;');
    await writeFile(nginx.target.include, foreign);
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    expect((await backend.rollouts.load(id))!.rollout).toMatchObject({
      state: 'paused',
      stateReason: expect.stringMatching(/it carries 20% on the new side and no stamp of ours/) as unknown,
    });
    expect(await readFile(nginx.target.include, 'utf8')).toBe(foreign);
  });

  it('records are fenced: a deposed leader writes no record, and (so) nothing to the target', async () => {
    const a = node('a');
    const { id } = await createRollout(a.engine, { spec: SPEC, actor: 'alice' });
    await a.batch.tick();
    const stale = a.elector.token()!;
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs + 1);
    // The new leader takes the lease and has not touched the target yet: only the fence stands in the old one's way.
    const b = node('b');
    expect(await campaignEachTime(b.elector)()).not.toBeNull();
    const before = await readFile(nginx.target.include, 'utf8');
    await expect(backend.rollouts.recordActuation(stale, { ...(await record(id)), percent: 50, stage: 1, state: 'pending' })).rejects.toBeInstanceOf(
      FencedError,
    );
    expect(await record(id)).toMatchObject({ percent: 10, stage: 0 });
    // The old leader's engine converging on its stale token: fenced at the record written before any write.
    const view = (await backend.rollouts.load(id))!;
    await expect(
      a.engine.actuate({ ...view, stages: view.stages.map((s, i) => ({ ...s, phase: i === 1 ? 'active' : 'promoted' })) }, stale),
    ).rejects.toBeInstanceOf(FencedError);
    expect(await readFile(nginx.target.include, 'utf8')).toBe(before);
  });
});
