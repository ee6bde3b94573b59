/**
 * The coordinator on every backend: steal policy, failure scan, stateless
 * replay and self-fencing. Workers are played by the test, step by step.
 */
import { describe, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import { Coordinator, MAX_STEAL_BATCH, NotCoordinatorError } from '../../shared/ledger/coordinator.js';
import { EpochGuard } from '../../shared/ledger/epoch-guard.js';
import { STEAL_HINT_FRESH_MS } from '../../shared/ledger/steal-hint.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { ack, claim, heartbeat, start } from '../../shared/ledger/transitions.js';
import { forEachBackend, type LeaseBackend, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

forEachBackend('coordinator on %s', (backend) => {
  const clock = new ManualClock();

  async function setup(n: number, holderId = 'c1', ownClock: ManualClock = clock) {
    const runId = uniqueName('run');
    await backend.ledger.createRun(runId, {}, clock.now());
    const { ids } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: n }, (_, i) => ({ runId, i })),
      clock.now(),
    );
    return { runId, ids, ...(await coordinatorFor(runId, holderId, ownClock)) };
  }
  async function coordinatorFor(runId: string, holderId: string, ownClock: ManualClock = clock) {
    const elector = new LeaseElector(backend.runLeases(runId), { name: coordinatorLease(runId), holderId, clock: ownClock, ...LEASE });
    await elector.campaign();
    const bus = new InProcessBus();
    const fencedCalls: FencedError[] = [];
    const coordinator = new Coordinator({
      runId,
      ledger: backend.ledger,
      elector,
      bus,
      failureTimeoutMs: LEASE.ttlMs,
      clock: ownClock,
      onFenced: (e) => fencedCalls.push(e),
    });
    return { elector, bus, coordinator, fencedCalls };
  }
  const cas = (c: Parameters<LeaseBackend['ledger']['cas']>[0]) => backend.ledger.cas(c, clock.now());
  const claimAll = async (runId: string, ids: readonly string[], worker: string) => {
    for (const id of ids) expect((await cas(claim(runId, id, worker, 0, clock.now()))).ok).toBe(true);
  };
  // The steal policy reads the running set through an index that may lag on DynamoDB: let it settle first.
  const settled = async (runId: string, running: number) => {
    await expect.poll(async () => (await backend.ledger.running(runId)).length, { interval: 20, timeout: 5_000 }).toBe(running);
  };

  it('steals only for an idle thief, from the busiest victim, ceil(backlog / 2) capped at MAX_STEAL_BATCH, never a started item', async () => {
    const { runId, ids, coordinator } = await setup(80);
    await claimAll(runId, ids.slice(0, 70), 'busy');
    await claimAll(runId, ids.slice(70, 74), 'light');
    await claimAll(runId, ids.slice(74, 75), 'thief');
    await cas(start(runId, ids[0]!, 'busy', clock.now()));
    await settled(runId, 75);
    expect((await coordinator.stealFor('thief')).items).toEqual([]); // not idle: it still has an unstarted item
    await cas(start(runId, ids[74]!, 'thief', clock.now())); // now it is executing its last one: its backlog is empty
    await settled(runId, 75);
    // A store with steal hints answers from the one the first ask built until it is STEAL_HINT_FRESH_MS old.
    clock.advance(STEAL_HINT_FRESH_MS);
    const notice = await coordinator.stealFor('thief');
    expect(notice.victim).toBe('busy');
    expect(notice.items).toHaveLength(Math.min(Math.ceil(69 / 2), MAX_STEAL_BATCH));
    expect(notice.items).not.toContain(ids[0]);
    for (const id of notice.items) expect(await backend.ledger.get(runId, id)).toMatchObject({ worker: 'thief', started: false, epoch: notice.epoch });
  });

  it('last_item_is_not_stolen_back_and_forth: one item, two workers — it completes', async () => {
    const { runId, ids, coordinator } = await setup(1);
    const id = ids[0]!;
    const guards = { a: new EpochGuard(), b: new EpochGuard() };
    await claimAll(runId, [id], 'a');
    await settled(runId, 1);
    // b is idle and asks; a has not started yet, so the item moves once…
    const notice = await coordinator.stealFor('b');
    expect(notice.items).toEqual([id]);
    expect(guards.b.accept(notice.epoch)).toBe(true);
    // …b starts what it received before anything else, so a's request finds nothing to take.
    expect((await cas(start(runId, id, 'b', clock.now()))).ok).toBe(true);
    await settled(runId, 1);
    await expect.poll(async () => (await coordinator.stealFor('a')).items, { interval: 20, timeout: 5_000 }).toEqual([]);
    expect((await cas(ack(runId, id, 'b', 'result'))).ok).toBe(true);
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 1, failed: 0 });
  });

  it('the failure scan re-pends by per-item heartbeat, and a long item with a live heartbeat survives 3 × the timeout', async () => {
    const { runId, ids, coordinator, elector } = await setup(2);
    await claimAll(runId, [ids[0]!], 'live');
    await claimAll(runId, [ids[1]!], 'dead');
    await cas(start(runId, ids[0]!, 'live', clock.now()));
    await settled(runId, 2);
    const repended: string[] = [];
    for (let i = 0; i < 9; i++) {
      repended.push(...(await coordinator.failureScan()).repended);
      clock.advance(LEASE.ttlMs / 3);
      await cas(heartbeat(runId, ids[0]!, 'live', clock.now()));
      await elector.campaign();
    }
    expect(repended).toEqual([ids[1]]);
    expect(await backend.ledger.get(runId, ids[0]!)).toMatchObject({ state: 'running', worker: 'live', started: true });
    // It never started, so it never ran: no attempt is counted against it.
    expect(await backend.ledger.get(runId, ids[1]!)).toMatchObject({ state: 'pending', attempts: 0 });
  });

  it('a restarted coordinator rebuilds its in-flight map from the ledger and requeues nothing', async () => {
    const { runId, ids, elector } = await setup(6, 'c-before');
    await claimAll(runId, ids.slice(0, 2), 'w1');
    await claimAll(runId, ids.slice(2, 3), 'w2');
    await cas(ack(runId, ids[2]!, 'w2', 'r2'));
    await elector.stop({ resign: false }); // a crash
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    const after = await coordinatorFor(runId, 'c-after');
    expect(after.elector.token()?.epoch).toBe(1);
    expect((await backend.ledger.getRun(runId))!.coordinatorEpoch).toBe(1);
    await settled(runId, 2);
    await expect.poll(async () => (await after.coordinator.replay()).pending.length, { interval: 20, timeout: 5_000 }).toBe(3);
    const inflight = await after.coordinator.replay();
    expect([...inflight.running.keys()]).toEqual(['w1']);
    expect(
      inflight.running
        .get('w1')!
        .map((i) => i.id)
        .sort(),
    ).toEqual(ids.slice(0, 2).sort());
    // w1 was never disturbed: it finishes what it holds; the rest is claimed again and done once each.
    for (const id of ids.slice(0, 2)) expect((await cas(ack(runId, id, 'w1', `r-${id}`))).ok).toBe(true);
    for (const item of inflight.pending) {
      await cas(claim(runId, item.id, 'w3', 1, clock.now()));
      expect((await cas(ack(runId, item.id, 'w3', `r-${item.id}`))).ok).toBe(true);
    }
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 6, failed: 0 });
  });

  it('cancel: recorded once; the coordinator fails the Pending items (fenced), a running one ends as it finishes, a silent one is failed, not run again', async () => {
    const { runId, ids, coordinator, elector } = await setup(5);
    expect(await coordinator.failCancelled()).toEqual([]); // not cancelled: nothing
    await claimAll(runId, [ids[0]!], 'busy');
    await claimAll(runId, [ids[1]!], 'silent');
    await cas(start(runId, ids[0]!, 'busy', clock.now()));
    await cas(start(runId, ids[1]!, 'silent', clock.now()));
    const first = await backend.ledger.cancelRun(runId, { by: 'alice', reason: 'wrong input' }, clock.now());
    expect(first).toEqual({ first: true, cancelled: { at: clock.now(), by: 'alice', reason: 'wrong input' } });
    // Monotone: a second cancel changes nothing and answers the first.
    expect(await backend.ledger.cancelRun(runId, { by: 'bob', reason: null }, clock.now() + 5)).toEqual({ first: false, cancelled: first!.cancelled });
    expect((await backend.ledger.getRun(runId))!.cancelled).toEqual(first!.cancelled);
    expect(await backend.ledger.cancelRun(uniqueName('none'), { by: 'alice', reason: null }, clock.now())).toBeNull();
    await expect.poll(async () => (await coordinator.failCancelled()).length, { interval: 20, timeout: 5_000 }).toBeGreaterThan(0);
    await expect
      .poll(async () => [...(await coordinator.failCancelled()), ...(await backend.ledger.pending(runId, 10)).map((i) => i.id)], {
        interval: 20,
        timeout: 5_000,
      })
      .toEqual([]);
    for (const id of ids.slice(2)) expect(await backend.ledger.get(runId, id)).toMatchObject({ state: 'failed', error: 'cancelled: wrong input (by alice)' });
    // The running one finishes and its result is kept.
    expect((await cas(ack(runId, ids[0]!, 'busy', 'kept'))).ok).toBe(true);
    // The silent one is failed by the scan, not re-pended to run again.
    await settled(runId, 1);
    for (let i = 0; i < 4; i++) {
      await coordinator.failureScan();
      clock.advance(LEASE.ttlMs / 2);
      await elector.campaign();
    }
    expect(await backend.ledger.get(runId, ids[1]!)).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/^cancelled: wrong input \(by alice\); worker silent went silent/) as unknown,
    });
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 1, failed: 4 });
  });

  it('replay pages through a Pending set larger than one page (no re-reading the first page forever)', async () => {
    const runId = uniqueName('run');
    await backend.ledger.createRun(runId, {}, clock.now());
    const { ids } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: 7 }, (_, i) => ({ runId, i })),
      clock.now(),
    );
    const elector = new LeaseElector(backend.runLeases(runId), { name: coordinatorLease(runId), holderId: 'c', clock, ...LEASE });
    await elector.campaign();
    const c = new Coordinator({ runId, ledger: backend.ledger, elector, bus: new InProcessBus(), failureTimeoutMs: LEASE.ttlMs, clock, replayPageSize: 3 });
    await expect.poll(async () => (await c.replay()).pending.map((i) => i.id).sort(), { interval: 20, timeout: 5_000 }).toEqual([...ids].sort());
  });

  it('split_brain_old_coord_self_fences: a deposed coordinator emits exactly one coordinator_fenced event and stops', async () => {
    // The old coordinator's clock lags: by its own view it still holds the lease when the new one takes it.
    const oldClock = new ManualClock(clock.now());
    const { runId, ids, coordinator, bus, fencedCalls, elector: oldElector } = await setup(4, 'c-old', oldClock);
    await claimAll(runId, ids, 'busy');
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    const fresh = await coordinatorFor(runId, 'c-new');
    expect(fresh.elector.token()?.epoch).toBe(1);
    await settled(runId, 4);
    expect(oldElector.token()).toMatchObject({ holder: 'c-old', epoch: 0 }); // it believes it leads; the store refuses it
    await expect(coordinator.stealFor('idle')).rejects.toBeInstanceOf(FencedError);
    await expect(coordinator.stealFor('idle')).rejects.toBeInstanceOf(NotCoordinatorError);
    await expect(coordinator.failureScan()).rejects.toBeInstanceOf(NotCoordinatorError);
    expect(coordinator.isFenced).toBe(true);
    expect(fencedCalls).toHaveLength(1);
    expect(bus.history.map((e) => e.detailType)).toEqual(['coordinator_fenced']);
    expect(bus.history[0]!.detail).toMatchObject({ runId, holder: 'c-old', epoch: 0, current: { holder: 'c-new', epoch: 1 } });
    // Nothing it tried landed.
    for (const id of ids) expect((await backend.ledger.get(runId, id))!.worker).toBe('busy');
  });
});

describe('EpochGuard', () => {
  it('accepts the same or a higher epoch and rejects a lower one', () => {
    const g = new EpochGuard();
    expect(g.accept(3)).toBe(true);
    expect(g.accept(3)).toBe(true);
    expect(g.accept(2)).toBe(false);
    expect(g.accept(5)).toBe(true);
    expect(g.current).toBe(5);
    expect(() => g.accept(-1)).toThrow(RangeError);
  });
});
