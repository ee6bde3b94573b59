/**
 * The assignment rule (shared/rollout/assignment.ts): MurmurHash3 x86_32
 * against the reference implementation's published vectors, and the cohort
 * properties a rollout relies on.
 */
import { describe, expect, it } from 'vitest';
import { BUCKETS, bucketOf, inCohort, murmur3x86_32 } from '../../shared/rollout/assignment.js';

const bytes = (s: string) => new TextEncoder().encode(s);

describe('murmur3x86_32', () => {
  // Vectors of the reference MurmurHash3_x86_32 (SMHasher), as commonly published.
  it.each([
    ['', 0, 0x00000000],
    ['', 1, 0x514e28b7],
    ['', 0xffffffff, 0x81f16f39],
    ['\0\0\0\0', 0, 0x2362f9de],
    ['aaaa', 0x9747b28c, 0x5a97808a],
    ['aaa', 0x9747b28c, 0x283e0130],
    ['aa', 0x9747b28c, 0x5d211726],
    ['a', 0x9747b28c, 0x7fa09ea6],
    ['abcd', 0x9747b28c, 0xf0478627],
    ['abc', 0x9747b28c, 0xc84a62dd],
    ['ab', 0x9747b28c, 0x74875592],
    ['Hello, world!', 0x9747b28c, 0x24884cba],
    ['The quick brown fox jumps over the lazy dog', 0x9747b28c, 0x2fa826cd],
  ])('%j with seed %i', (input, seed, expected) => {
    expect(murmur3x86_32(bytes(input), seed)).toBe(expected);
  });

  it('hashes UTF-8 bytes (π is 0xCF 0x80)', () => {
    expect(murmur3x86_32(bytes('π'), 0x9747b28c)).toBe(murmur3x86_32(new Uint8Array([0xcf, 0x80]), 0x9747b28c));
    expect(murmur3x86_32(bytes('ππππππππ'), 0x9747b28c)).toBe(0xd58063c1);
  });
});

describe('bucketOf and inCohort', () => {
  const entities = Array.from({ length: 20_000 }, (_, i) => `host-${i}`);

  it('is the same bucket for the same rollout and entity, and spreads entities evenly', () => {
    expect(bucketOf('r1', 'host-7')).toBe(bucketOf('r1', 'host-7'));
    const buckets = entities.map((e) => bucketOf('r1', e));
    expect(Math.min(...buckets)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...buckets)).toBeLessThan(BUCKETS);
    // 10% of 20,000 is 2,000; a fair hash lands within a few standard deviations (σ ≈ 42).
    const tenth = buckets.filter((b) => inCohort(b, 10)).length;
    expect(tenth).toBeGreaterThan(1_800);
    expect(tenth).toBeLessThan(2_200);
  });

  it('a growing percent only adds entities; 0 holds none and 100 holds all', () => {
    const cohort = (p: number) => new Set(entities.filter((e) => inCohort(bucketOf('r1', e), p)));
    let before = cohort(0);
    expect(before.size).toBe(0);
    for (const p of [0.5, 1, 5, 12.25, 50, 99.99, 100]) {
      const now = cohort(p);
      for (const e of before) expect(now.has(e), `${e} left the cohort at ${p}%`).toBe(true);
      before = now;
    }
    expect(before.size).toBe(entities.length);
  });

  it('another rollout draws another cohort', () => {
    const a = entities.filter((e) => inCohort(bucketOf('r1', e), 10));
    const b = new Set(entities.filter((e) => inCohort(bucketOf('r2', e), 10)));
    expect(a.filter((e) => b.has(e)).length).toBeLessThan(a.length / 2);
  });
});
