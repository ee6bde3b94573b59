/**
 * The assignment rule (shared/rollout/assignment.ts): MurmurHash3 x86_32
 * against the reference implementation's published vectors, and the cohort
 * properties a rollout relies on.
 */
import { describe, expect, it } from 'vitest';
import { assignmentOf, BUCKETS, bucketOf, inCohort, murmur3x86_32, trafficOf, type Traffic } from '../../shared/rollout/assignment.js';
import type { Rollout, StageStatus } from '../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';

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

  it('is murmur3 of the UTF-8 key, whatever its characters or length', () => {
    const reference = (id: string, e: string) => murmur3x86_32(new TextEncoder().encode(`${id}:${e}`), 0) % BUCKETS;
    for (const [id, e] of [
      ['r1', 'host-7'],
      ['r1', 'hôte-7'],
      ['r1', '主机-7'],
      ['r1', '😀'],
      ['r', ''],
      ['r1', 'x'.repeat(2_000)],
      ['r1', `${'y'.repeat(700)}é`],
      ['r1', 'host-8'],
    ]) {
      expect(bucketOf(id!, e!), `${id}:${e!.slice(0, 20)}`).toBe(reference(id!, e!));
    }
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

describe('trafficOf and assignmentOf: a pure function of the committed state', () => {
  const spec = parseRolloutSpec({
    target: { service: 'checkout', version: 'v2', stableVersion: 'v1' },
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 0 },
      { name: 'half', percent: 50, bakeSeconds: 0 },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });
  const view = (state: Rollout['state'], phases: StageStatus['phase'][], over: Partial<Rollout> = {}) => ({
    rollout: {
      id: 'r1',
      spec,
      state,
      attempt: 2,
      version: 5,
      createdAt: 0,
      updatedAt: 0,
      lastProgressAt: 0,
      deadlineExceededAt: null,
      stateBy: null,
      stateReason: null,
      ...over,
    },
    stages: phases.map((phase, index) => ({
      index,
      name: spec.stages[index]!.name,
      phase,
      activatedAt: null,
      promotedAt: null,
      promotedEpoch: null,
      promotedBy: null,
      rolledBackAt: null,
      reason: null,
    })),
  });

  it.each<[string, Rollout['state'], StageStatus['phase'][], Traffic]>([
    ['before the first activation', 'running', ['pending', 'pending', 'pending'], { attempt: 2, percent: 0, stage: null, final: false }],
    ['the first stage active', 'running', ['active', 'pending', 'pending'], { attempt: 2, percent: 10, stage: { index: 0, name: 'canary' }, final: false }],
    ['paused on the second', 'paused', ['promoted', 'active', 'pending'], { attempt: 2, percent: 50, stage: { index: 1, name: 'half' }, final: false }],
    ['rolled back', 'rolled_back', ['promoted', 'rolled_back', 'pending'], { attempt: 2, percent: 0, stage: null, final: false }],
    ['aborted', 'aborted', ['active', 'pending', 'pending'], { attempt: 2, percent: 0, stage: null, final: false }],
    ['completed', 'completed', ['promoted', 'promoted', 'promoted'], { attempt: 2, percent: 100, stage: { index: 2, name: 'all' }, final: true }],
  ])('%s', (_name, state, phases, expected) => {
    expect(trafficOf(view(state, phases))).toEqual(expected);
  });

  it('answers an entity by its bucket: the new version inside the cohort, the stable one outside, everyone stable after a rollback', () => {
    const entities = Array.from({ length: 1_000 }, (_, i) => `host-${i}`);
    const at = (state: Rollout['state'], phases: StageStatus['phase'][]) => entities.map((e) => assignmentOf(view(state, phases), e));
    const canary = at('running', ['active', 'pending', 'pending']);
    for (const a of canary) expect(a).toMatchObject(a.bucket < 1_000 ? { variant: 'new', version: 'v2' } : { variant: 'stable', version: 'v1' });
    expect(canary[0]).toMatchObject({ percent: 10, stage: 'canary', attempt: 2, bucket: bucketOf('r1', 'host-0') });
    expect(canary.some((a) => a.variant === 'new')).toBe(true);
    expect(at('rolled_back', ['promoted', 'rolled_back', 'pending']).every((a) => a.variant === 'stable' && a.version === 'v1')).toBe(true);
    expect(at('completed', ['promoted', 'promoted', 'promoted']).every((a) => a.variant === 'new' && a.version === 'v2')).toBe(true);
  });

  it('names no stable version the spec does not know', () => {
    const bare = parseRolloutSpec({ target: { service: 'checkout', version: 'v2' }, stages: [{ name: 'all', percent: 100, bakeSeconds: 0 }] });
    expect(assignmentOf({ ...view('aborted', ['active']), rollout: { ...view('aborted', ['active']).rollout, spec: bare } }, 'host-1')).toMatchObject({
      variant: 'stable',
      version: null,
    });
  });
});
