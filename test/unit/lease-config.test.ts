import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../shared/errors.js';
import { parseConfig } from '../../shared/config.js';
import { leaseTimingsSchema } from '../../shared/lease/config.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import type { LeaseStore } from '../../shared/lease/store.js';

// Construction validates before any I/O; this store is never called.
const unused: LeaseStore = {
  read: () => Promise.reject(new Error('not used')),
  compareAndSwap: () => Promise.reject(new Error('not used')),
};

const timings = (t: Record<string, unknown>) => parseConfig('lease timing', leaseTimingsSchema, t);

describe('lease timing config', () => {
  it('defaults to the usual controller timings: TTL 30 s, renew 10 s, retry 5 s, IsLeader cache 1 s', () => {
    expect(timings({})).toEqual({ ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000, isLeaderCacheMs: 1_000 });
  });

  it.each([
    [{ ttlMs: 10_000, renewIntervalMs: 10_000, retryIntervalMs: 1_000 }, /renewIntervalMs: must be less than ttlMs \(10000\)/],
    [
      { ttlMs: 30_000, renewIntervalMs: 6_000, retryIntervalMs: 5_000 },
      /retryIntervalMs: renewIntervalMs \(6000\) must exceed 1\.2 × retryIntervalMs \(5000\)/,
    ],
    [{ ttlMs: -1 }, /ttlMs: .*(>0|positive|greater than 0)/i],
    [{ clockSkewMs: -5 }, /clockSkewMs/],
    [{ ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 2_000 }, /clockSkewMs: must be less than ttlMs − renewIntervalMs \(2000\)/],
    [{ ttlMs: 1.5 }, /ttlMs/],
    [{ tttl: 5 }, /tttl|unrecognized/i],
  ])('refuses %j, naming the field', (input, message) => {
    expect(() => timings(input)).toThrow(ConfigError);
    expect(() => timings(input)).toThrow(message);
  });

  it('the elector refuses an empty holder id and bad timings at construction', () => {
    expect(() => new LeaseElector(unused, { holderId: '  ' })).toThrow(/lease elector config: holderId: must not be empty/);
    expect(() => new LeaseElector(unused, { holderId: 'a', ttlMs: 5_000, renewIntervalMs: 5_000 })).toThrow(/renewIntervalMs/);
    expect(() => new LeaseElector(unused, { holderId: 'a', name: '' })).toThrow(/name: must not be empty/);
  });
});
