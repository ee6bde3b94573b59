/**
 * Retention: a test clock runs past every lifetime, on every backend, and
 * each family is pruned, except what README ("What is kept") lists as kept.
 */
import { beforeEach, expect, it } from 'vitest';
import { InProcessBus, type EventBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter } from '../../shared/rollout/promoters.js';
import { DAY_MS } from '../../shared/retention.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
/** `waits`: a stage that waits for traffic no one reports, so it runs as long as the test does. */
const spec = (alarms: string[], waits = false) => ({
  target: { service: 'checkout', version: 'v2' },
  stages: [{ name: 'all', percent: 100, bakeSeconds: 0, gates: { alarms, minRequests: waits ? 100 : 0 } }],
});

forEachBackend('retention on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock();
  });

  function node(bus: EventBus = new InProcessBus()) {
    const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
    const engine = new RolloutEngine({ store: backend.rollouts, bus, clock });
    return { elector, engine, batch: new BatchPromoter(engine, campaignEachTime(elector)) };
  }
  const ids = async () => (await backend.rollouts.list({ limit: 100 })).rollouts.map((r) => r.id).sort();

  it('a rollout that ended goes, whole, once its 90 days have passed; what runs, is paused or is unpublished stays', async () => {
    let down = false;
    const bus = new InProcessBus();
    const a = node({ publish: (events) => (down ? Promise.reject(new Error('bus down')) : bus.publish(events)) });
    const ended = (await createRollout(a.engine, { spec: spec(['only-ended']), actor: 'alice' })).id;
    const sharing = (await createRollout(a.engine, { spec: spec(['shared']), actor: 'alice' })).id;
    const running = (await createRollout(a.engine, { spec: spec(['shared'], true), actor: 'alice' })).id;
    const paused = (await createRollout(a.engine, { spec: spec([], true), actor: 'alice' })).id;
    await backend.rollouts.recordAlarm('only-ended', 'OK', clock.now());
    await backend.rollouts.recordAlarm('shared', 'OK', clock.now());
    await backend.rollouts.recordMetrics(ended, { stage: 0 }, { requests: 10, errors: 0, p99LatencyMs: null, observedAt: clock.now() });
    await a.batch.tick();
    await a.batch.tick();
    expect((await backend.rollouts.load(ended))?.rollout.state).toBe('completed');
    expect((await backend.rollouts.load(sharing))?.rollout.state).toBe('completed');
    await a.elector.campaign();
    await a.engine.command(paused, () => ({ kind: 'pause', reason: 'by hand' }), a.elector.token()!, 'alice');
    // One that ends while the bus is down: its events stay in the outbox, and it stays with them.
    down = true;
    const unpublished = (await createRollout(a.engine, { spec: spec([]), actor: 'alice' })).id;
    await a.batch.tick();
    expect((await backend.rollouts.load(unpublished))?.rollout.state).toBe('completed');
    const all = [ended, sharing, running, paused, unpublished].sort();
    expect(await ids()).toEqual(all);

    // A minute short of 90 days after they ended: nothing goes.
    clock.advance(90 * DAY_MS - 60_000);
    expect((await a.batch.tick()).ended).toBe(0);
    expect(await ids()).toEqual(all);
    clock.advance(120_000);
    expect((await a.batch.tick()).ended).toBe(2);
    expect(await ids()).toEqual([running, paused, unpublished].sort());
    for (const id of [ended, sharing]) {
      expect(await backend.rollouts.load(id)).toBeNull();
      expect(await backend.rollouts.events(id)).toEqual([]);
      expect(await backend.rollouts.actuations(id)).toEqual([]);
      expect(await backend.rollouts.gateReadings(id)).toEqual([]);
    }
    // The state of the alarm only the pruned rollout watched is gone; the one a kept rollout watches stays.
    const watcher = (await createRollout(a.engine, { spec: spec(['only-ended', 'shared'], true), actor: 'alice' })).id;
    expect((await backend.rollouts.load(watcher))?.alarms).toEqual({ shared: 'OK' });
    expect((await backend.rollouts.loadWatching('shared')).map((v) => v.rollout.id).sort()).toEqual([running, watcher].sort());

    // Published at last: the third goes on the next tick; a tick with nothing past its lifetime deletes nothing.
    down = false;
    await expect
      .poll(async () => {
        await a.batch.tick();
        return (await backend.rollouts.unpublishedEvents(10)).length;
      }, { interval: 20, timeout: 10_000 })
      .toBe(0);
    await expect
      .poll(async () => {
        await a.batch.tick();
        return (await ids()).includes(unpublished);
      }, { interval: 20, timeout: 10_000 })
      .toBe(false);
    expect(await ids()).toEqual([running, paused, watcher].sort());
    expect((await a.batch.tick()).ended).toBe(0);
  });

  it('a rollout retried after it ended is not pruned on its first ending', async () => {
    const a = node();
    const { id } = await createRollout(a.engine, { spec: spec([]), actor: 'alice' });
    await a.elector.campaign();
    await a.engine.command(id, () => ({ kind: 'abort', reason: 'by hand' }), a.elector.token()!, 'alice');
    clock.advance(30 * DAY_MS);
    await a.elector.campaign();
    await a.engine.command(id, () => ({ kind: 'retry' }), a.elector.token()!, 'alice');
    clock.advance(61 * DAY_MS);
    await a.batch.tick();
    expect((await backend.rollouts.load(id))?.rollout.state).toBe('completed');
    // Ended again just now (completed on that tick): its 90 days start there.
    clock.advance(89 * DAY_MS);
    expect((await a.batch.tick()).ended).toBe(0);
    clock.advance(DAY_MS + 1);
    expect((await a.batch.tick()).ended).toBe(1);
    expect(await backend.rollouts.load(id)).toBeNull();
  });
});
