/**
 * The lease contract (DESIGN.md "Lease semantics"), one suite for every
 * backend. Time is a ManualClock; nothing here sleeps.
 */
import { expect, it } from 'vitest';
import { FencedError } from '../../shared/lease/fencing.js';
import { LeaseElector, type LeaseElectorOptions, type StopReason } from '../../shared/lease/elector.js';
import type { LeaseRecord } from '../../shared/lease/record.js';
import type { LeaseStore } from '../../shared/lease/store.js';
import { forEachBackend, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { gate, until, type Gate } from '../support/gate.js';

const TIMINGS = { ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 100, isLeaderCacheMs: 1_000 };

forEachBackend('lease contract on %s', (backend) => {
  function elector(holderId: string, name: string, clock: ManualClock, extra: Partial<LeaseElectorOptions> = {}, store: LeaseStore = backend.store) {
    return new LeaseElector(store, { name, holderId, clock, ...TIMINGS, ...extra });
  }

  it('acquires an absent lease at epoch 0', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const a = elector('a', name, clock);
    const res = await a.campaign();
    expect(res.leader).toBe(true);
    expect(a.token()).toEqual({ name, holder: 'a', epoch: 0 });
    expect(a.state).toBe('leader');
    const row = await backend.store.read(name);
    expect(row).toMatchObject({ name, holder: 'a', epoch: 0, version: 0, expiresAt: clock.now() + TIMINGS.ttlMs });
  });

  it('renews without changing the epoch', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const a = elector('a', name, clock);
    await a.campaign();
    const before = (await backend.store.read(name))!;
    clock.advance(TIMINGS.renewIntervalMs);
    expect((await a.campaign()).leader).toBe(true);
    const after = (await backend.store.read(name))!;
    expect(after.epoch).toBe(before.epoch);
    expect(after.version).toBe(before.version + 1);
    expect(after.expiresAt).toBe(clock.now() + TIMINGS.ttlMs);
    expect(a.stats.renewals).toBe(1);
  });

  it('a contender waits while the lease is valid, and steals at expiry + skew with epoch + 1', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const a = elector('a', name, clock);
    const b = elector('b', name, clock);
    await a.campaign();
    const held = (await backend.store.read(name))!;

    expect((await b.campaign()).leader).toBe(false);
    expect(b.state).toBe('follower');
    // Fast takeover: b schedules its next attempt for the instant the lease becomes stealable.
    expect(b.nextDelay(clock.now())).toBeLessThanOrEqual(held.expiresAt + TIMINGS.clockSkewMs - clock.now());

    clock.set(held.expiresAt + TIMINGS.clockSkewMs - 1);
    expect((await b.campaign()).leader).toBe(false);
    clock.set(held.expiresAt + TIMINGS.clockSkewMs);
    expect((await b.campaign()).leader).toBe(true);
    expect(b.token()).toEqual({ name, holder: 'b', epoch: 1 });
    expect(await backend.store.read(name)).toMatchObject({ holder: 'b', epoch: 1 });
  });

  it('a holder whose lease was stolen is fenced: renew returns false and its writes are rejected', async () => {
    const name = uniqueName('lease');
    // Separate clocks: a's runs behind, so a still believes it leads when b steals.
    const clockA = new ManualClock();
    const clockB = new ManualClock();
    const stops: StopReason[] = [];
    const a = elector('a', name, clockA, { onStoppedLeading: (_t, reason) => stops.push(reason) });
    const b = elector('b', name, clockB);
    await a.campaign();
    const tokenA = a.token()!;
    await backend.fencedPut(tokenA, 'k', 'a-before');

    clockB.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
    expect((await b.campaign()).leader).toBe(true);
    expect(a.token()).toEqual(tokenA); // a's own clock says it still leads…

    await expect(backend.fencedPut(tokenA, 'k', 'a-after')).rejects.toMatchObject({
      name: 'FencedError',
      current: { holder: 'b', epoch: 1 },
    }); // …but the store says no.
    expect(await backend.probe('k')).toBe('a-before');

    clockA.advance(TIMINGS.renewIntervalMs);
    expect((await a.campaign()).leader).toBe(false);
    expect(a.token()).toBeNull();
    expect(stops).toEqual(['fenced']);
    await backend.fencedPut(b.token()!, 'k', 'b');
    expect(await backend.probe('k')).toBe('b');
  });

  it('a fenced write with a token for a lease that does not exist is rejected', async () => {
    const err = await backend.fencedPut({ name: uniqueName('none'), holder: 'a', epoch: 0 }, 'k2', 'v').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FencedError);
    expect((err as FencedError).current).toBeNull();
  });

  it('resign releases without deleting: the next acquisition is epoch + 1, never a reset', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const a = elector('a', name, clock);
    const b = elector('b', name, clock);
    await a.campaign();
    await a.resign();
    expect(a.token()).toBeNull();
    const released = await backend.store.read(name);
    expect(released).toMatchObject({ holder: null, epoch: 0 });
    expect(released!.expiresAt).toBeLessThan(clock.now());

    // Released rows are taken at once: no waiting out the old expiry.
    expect((await b.campaign()).leader).toBe(true);
    expect(b.token()?.epoch).toBe(1);
    await b.resign();
    expect((await a.campaign()).leader).toBe(true);
    expect(a.token()?.epoch).toBe(2);
    await expect(backend.fencedPut({ name, holder: 'a', epoch: 0 }, 'k3', 'stale')).rejects.toBeInstanceOf(FencedError);
  });

  it('stop() resigns; stop({ resign: false }) leaves the row held until it expires', async () => {
    const clock = new ManualClock();
    const n1 = uniqueName('lease');
    const a = elector('a', n1, clock);
    await a.campaign();
    await a.stop();
    expect(a.state).toBe('stopped');
    expect(await backend.store.read(n1)).toMatchObject({ holder: null, epoch: 0 });

    const n2 = uniqueName('lease');
    const c = elector('c', n2, clock);
    await c.campaign();
    await c.stop({ resign: false });
    expect(await backend.store.read(n2)).toMatchObject({ holder: 'c', epoch: 0 });
  });

  it('isLeader is cached, but never past the holder’s expiry minus the skew margin', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    let reads = 0;
    const counting: LeaseStore = {
      read: (n) => {
        reads++;
        return backend.store.read(n);
      },
      compareAndSwap: (e, n) => backend.store.compareAndSwap(e, n),
    };
    const a = elector('a', name, clock, {}, counting);
    await a.campaign();
    const row = (await backend.store.read(name))!;

    clock.set(row.expiresAt - TIMINGS.clockSkewMs - 60);
    const readsBefore = reads;
    expect(await a.isLeader()).toBe(true); // cache older than 1 s: reads the row
    expect(reads).toBe(readsBefore + 1);
    clock.advance(50);
    expect(await a.isLeader()).toBe(true); // within the cache window: no read
    expect(reads).toBe(readsBefore + 1);
    clock.advance(10); // now exactly expiry − skew; the cache is 60 ms old
    expect(await a.isLeader()).toBe(false);
    expect(a.token()).toBeNull();
  });

  /**
   * The store answers a leadership check's read at once, but the reply is held
   * until the test opens a gate: the read was served before our own write
   * committed and is applied after it, as a slow reply under load is.
   */
  function heldReplies(): { store: LeaseStore; holdNextRead(): Gate & { readonly served: Promise<void> } } {
    let hold: (Gate & { served: Promise<void>; markServed(): void }) | null = null;
    const store: LeaseStore = {
      read: async (n) => {
        const held = hold;
        hold = null;
        const row = await backend.store.read(n);
        if (held) {
          held.markServed();
          await held.wait;
        }
        return row;
      },
      compareAndSwap: (e, n) => backend.store.compareAndSwap(e, n),
    };
    return {
      store,
      holdNextRead: () => {
        const g = gate();
        const served = gate();
        hold = { ...g, served: served.wait, markServed: () => served.open() };
        return hold;
      },
    };
  }

  it.each([
    ['absent', 'a fresh lease'],
    ['released', 'a released lease'],
  ] as const)('a leadership check read before our acquire of %s row, answered after it, does not undo it (%s)', async (before, _what) => {
    const name = uniqueName('stale');
    const clock = new ManualClock();
    if (before === 'released') {
      const old = elector('old', name, clock);
      await old.campaign();
      await old.resign();
    }
    const held = heldReplies();
    const stopped: StopReason[] = [];
    const a = elector('a', name, clock, { onStoppedLeading: (_t, reason) => stopped.push(reason) }, held.store);
    const release = held.holdNextRead();
    const check = a.isLeader();
    await release.served; // the store has answered: the row as it was before a's write
    expect((await a.campaign()).leader).toBe(true);
    const epoch = before === 'absent' ? 0 : 1;
    expect(a.token()).toEqual({ name, holder: 'a', epoch });
    release.open();
    expect(await check).toBe(true);
    expect(stopped).toEqual([]);
    expect(a.state).toBe('leader');
    expect(a.token()).toEqual({ name, holder: 'a', epoch });
    expect(await backend.store.read(name)).toMatchObject({ holder: 'a', epoch });
  });

  it('stop() releases a row held in our name that we did not know we held, and says so (followers are told)', async () => {
    const name = uniqueName('unknown');
    const clock = new ManualClock();
    let lose = false;
    // The acquire commits, then its reply and the read that would settle it are lost.
    const lossy: LeaseStore = {
      read: (n) => (lose ? Promise.reject(new Error('connection terminated')) : backend.store.read(n)),
      compareAndSwap: async (e, n) => {
        const outcome = await backend.store.compareAndSwap(e, n);
        if (!lose) return outcome;
        throw new Error('connection terminated');
      },
    };
    const a = elector('a', name, clock, {}, lossy);
    lose = true;
    await expect(a.campaign()).rejects.toThrow(/outcome unknown/);
    lose = false;
    expect(a.token()).toBeNull();
    expect(await backend.store.read(name)).toMatchObject({ holder: 'a', epoch: 0 });
    expect(await a.stop()).toEqual({ released: true });
    expect(await backend.store.read(name)).toMatchObject({ holder: null, epoch: 0 });
    const b = elector('b', name, clock);
    expect(await b.stop()).toEqual({ released: false });
  });

  it('reports state changes through onStartedLeading, onStoppedLeading and onNewLeader', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const events: string[] = [];
    const a = elector('a', name, clock, {
      onStartedLeading: (t) => events.push(`a started ${t.epoch}`),
      onStoppedLeading: (t, r) => events.push(`a stopped ${t.epoch} ${r}`),
    });
    const b = elector('b', name, clock, { onNewLeader: (l) => events.push(`b sees ${l.holder ?? 'nobody'}@${l.epoch}`) });
    await a.campaign();
    await b.campaign();
    await a.resign();
    await b.campaign();
    // b reads the released row (nobody leads) before it takes it.
    expect(events).toEqual(['a started 0', 'b sees a@0', 'a stopped 0 resigned', 'b sees nobody@0', 'b sees b@1']);
  });

  it('a row held by this holder id (another invocation of the same node) is adopted at its epoch', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const first = elector('node-1', name, clock);
    await first.campaign();
    const second = elector('node-1', name, clock);
    expect((await second.campaign()).leader).toBe(true);
    expect(second.token()).toEqual({ name, holder: 'node-1', epoch: 0 });
  });

  it('readFirst (sandboxes sharing a holder id): a cold elector leads on its own fresh lease without a write; past half the TTL it renews once; a lease not ours it leaves alone', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const first = elector('stack-a', name, clock, { readFirst: true });
    expect((await first.campaign()).leader).toBe(true);
    const written = (await backend.store.read(name))!;
    // Fresh: more than half the TTL (plus the skew margin) left. Adopted as it stands, the row untouched.
    clock.advance(TIMINGS.ttlMs / 2 - TIMINGS.clockSkewMs - 1);
    const cold = elector('stack-a', name, clock, { readFirst: true });
    expect((await cold.campaign()).leader).toBe(true);
    expect(cold.token()).toEqual({ name, holder: 'stack-a', epoch: written.epoch });
    expect(await backend.store.read(name)).toEqual(written);
    expect(cold.stats).toMatchObject({ acquisitions: 0, renewals: 0 });
    // Past half: one renewal, same epoch.
    clock.advance(2);
    const late = elector('stack-a', name, clock, { readFirst: true });
    expect((await late.campaign()).leader).toBe(true);
    const renewed = (await backend.store.read(name))!;
    expect(renewed).toMatchObject({ holder: 'stack-a', epoch: written.epoch, version: written.version + 1, expiresAt: clock.now() + TIMINGS.ttlMs });
    // Another stack's elector reads, finds it held, and writes nothing.
    const other = elector('stack-b', name, clock, { readFirst: true });
    expect((await other.campaign()).leader).toBe(false);
    expect(await backend.store.read(name)).toEqual(renewed);
    // No row yet: read, then acquire.
    const fresh = uniqueName('lease');
    const firstEver = elector('stack-a', fresh, clock, { readFirst: true });
    expect((await firstEver.campaign()).leader).toBe(true);
    expect(await backend.store.read(fresh)).toMatchObject({ holder: 'stack-a', epoch: 0, version: 0 });
  });

  it('the running loop: a follower takes a crashed leader’s lease once it is stealable, never before', async () => {
    const name = uniqueName('loop');
    const timings = { ttlMs: 600, renewIntervalMs: 200, retryIntervalMs: 150, clockSkewMs: 20 };
    const started = new Map<string, number>();
    const make = (id: string) => new LeaseElector(backend.store, { name, holderId: id, ...timings, onStartedLeading: () => started.set(id, Date.now()) });
    const a = make('a');
    a.start();
    await until('a leads', () => a.state === 'leader');
    const b = make('b');
    b.start();
    await until('b has seen a as leader', () => b.lastObserved()?.holder === 'a');
    await a.stop({ resign: false }); // a crash: no resign
    const last = (await backend.store.read(name))!;
    await until('b takes over', () => started.has('b'), 5_000);
    await b.stop();
    expect(started.get('b')!).toBeGreaterThanOrEqual(last.expiresAt + timings.clockSkewMs);
    expect(await backend.store.read(name)).toMatchObject({ holder: null, epoch: 1 });
  });

  it('a follower woken when the leader resigns keeps trying through store errors, not only at its next retry', async () => {
    const name = uniqueName('wake');
    // The next retry is ten minutes away: only the wake-up and its own retries can elect b here.
    const timings = { ttlMs: 1_800_000, renewIntervalMs: 900_000, retryIntervalMs: 600_000, clockSkewMs: 100 };
    let failing = 0;
    let failed = 0;
    // The real store, with b's next reads and writes refused as a dropped connection would.
    const flaky: LeaseStore = {
      read: (n) => (failing > 0 ? (failing--, failed++, Promise.reject(new Error('connection terminated'))) : backend.store.read(n)),
      compareAndSwap: (e, n) => (failing > 0 ? (failing--, failed++, Promise.reject(new Error('connection terminated'))) : backend.store.compareAndSwap(e, n)),
    };
    const a = new LeaseElector(backend.store, { name, holderId: 'a', ...timings });
    const b = new LeaseElector(flaky, { name, holderId: 'b', ...timings });
    a.start();
    await until('a leads', () => a.state === 'leader');
    b.start();
    await until('b has seen a as leader', () => b.lastObserved()?.holder === 'a');
    await a.stop();
    failing = 3;
    b.tryNow();
    await until('b leads', () => b.state === 'leader', 30_000);
    expect(failed).toBe(3);
    expect(b.token()).toEqual({ name, holder: 'b', epoch: 1 });
    await b.stop();
  });

  it('versions only grow and the row survives every transition', async () => {
    const name = uniqueName('lease');
    const clock = new ManualClock();
    const a = elector('a', name, clock);
    const b = elector('b', name, clock);
    const seen: LeaseRecord[] = [];
    const snap = async () => seen.push((await backend.store.read(name))!);
    await a.campaign();
    await snap();
    clock.advance(1_000);
    await a.campaign();
    await snap();
    await a.resign();
    await snap();
    await b.campaign();
    await snap();
    clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
    await a.campaign();
    await snap();
    expect(seen.map((r) => [r.holder, r.epoch, r.version])).toEqual([
      ['a', 0, 0],
      ['a', 0, 1],
      [null, 0, 2],
      ['b', 1, 3],
      ['a', 2, 4],
    ]);
  });
});
