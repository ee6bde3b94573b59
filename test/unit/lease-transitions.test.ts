import { describe, expect, it } from 'vitest';
import { StaticElector } from '../../shared/lease/static-elector.js';
import { acquire, release, renew, stealable, steal, validFor } from '../../shared/lease/transitions.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import type { LeaseStore } from '../../shared/lease/store.js';
import { ManualClock } from '../support/clock.js';
import { sameRow, tokenOf } from '../../shared/lease/record.js';

const T0 = 1_000_000;

describe('lease transitions', () => {
  const held = acquire('l', 'a', T0, 3_000, { hostname: 'h', apiUrl: 'http://h' });

  it('acquire starts at epoch 0, version 0', () => {
    expect(held).toEqual({
      name: 'l',
      holder: 'a',
      epoch: 0,
      version: 0,
      acquiredAt: T0,
      renewedAt: T0,
      expiresAt: T0 + 3_000,
      hostname: 'h',
      apiUrl: 'http://h',
    });
  });

  it('renew keeps holder and epoch, moves expiry, bumps version', () => {
    expect(renew(held, T0 + 1_000, 3_000)).toMatchObject({ holder: 'a', epoch: 0, version: 1, acquiredAt: T0, renewedAt: T0 + 1_000, expiresAt: T0 + 4_000 });
  });

  it('steal advances the epoch', () => {
    expect(steal(held, 'b', T0 + 5_000, 3_000)).toMatchObject({ holder: 'b', epoch: 1, version: 1, acquiredAt: T0 + 5_000, hostname: null });
  });

  it('release clears the holder, keeps the epoch, and puts expiry in the past', () => {
    const r = release(held, T0 + 10);
    expect(r).toMatchObject({ holder: null, epoch: 0, version: 1 });
    expect(r.expiresAt).toBeLessThan(T0 + 10);
    expect(() => tokenOf(r)).toThrow(/released/);
  });

  it('stealable at expiry + skew, or at once when released', () => {
    expect(stealable(held, held.expiresAt + 99, 100)).toBe(false);
    expect(stealable(held, held.expiresAt + 100, 100)).toBe(true);
    expect(stealable(release(held, T0), T0, 100)).toBe(true);
  });

  it('valid for the holder until expiry − skew', () => {
    expect(validFor(held, 'a', held.expiresAt - 101, 100)).toBe(true);
    expect(validFor(held, 'a', held.expiresAt - 100, 100)).toBe(false);
    expect(validFor(held, 'b', T0, 100)).toBe(false);
    expect(validFor(null, 'a', T0, 100)).toBe(false);
  });

  it('sameRow compares identity by version, holder and epoch', () => {
    expect(sameRow(held, { ...held })).toBe(true);
    expect(sameRow(held, renew(held, T0, 3_000))).toBe(false);
    expect(sameRow(null, null)).toBe(true);
    expect(sameRow(held, null)).toBe(false);
  });
});

describe('elector scheduling', () => {
  const never: LeaseStore = { read: () => Promise.resolve(null), compareAndSwap: (_e, n) => Promise.resolve({ ok: true, record: n }) };
  const timings = { ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 100, retryJitter: 0 };

  it('a leader renews every renewInterval', async () => {
    const clock = new ManualClock(T0);
    const e = new LeaseElector(never, { holderId: 'a', clock, ...timings });
    await e.campaign();
    expect(e.nextDelay(T0)).toBe(1_000);
    expect(e.nextDelay(T0 + 900)).toBe(100);
  });

  it('a follower wakes at the exact moment the observed lease becomes stealable', async () => {
    const clock = new ManualClock(T0);
    const other = acquire('promotion_leader', 'b', T0 - 2_800, 3_000);
    const store: LeaseStore = { read: () => Promise.resolve(other), compareAndSwap: () => Promise.resolve({ ok: false, current: other }) };
    const e = new LeaseElector(store, { holderId: 'a', clock, ...timings });
    expect((await e.campaign()).leader).toBe(false);
    // expires at T0+200, stealable at T0+300: sooner than the 500 ms retry
    expect(e.nextDelay(T0)).toBe(300);
  });
});

describe('StaticElector', () => {
  it('always leads with a fixed epoch until stopped, and touches nothing', async () => {
    const e = new StaticElector('node-1');
    expect(await e.isLeader()).toBe(true);
    expect(e.token()).toEqual({ name: 'promotion_leader', holder: 'node-1', epoch: 0 });
    await e.stop();
    expect(e.state).toBe('stopped');
    expect(e.token()).toBeNull();
    expect(() => new StaticElector(' ')).toThrow(/holderId/);
  });
});
