/**
 * No spec can stall a leader: validating a spec does a bounded amount of work
 * whatever its numbers. A preset whose step rounds to nothing used to expand
 * forever before the stage limit was checked (the event loop blocked, the
 * heap filled). The reproduction runs in a child process with a small heap,
 * so the old behaviour fails it at once (out of memory) instead of hanging
 * the run; the properties assert the bound structurally, by counting the
 * candidates expansion generates and by the heap the child may use, never by
 * timing it.
 */
import fc from 'fast-check';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_STAGES, steppedPercents } from '../../shared/rollout/spec.js';
import { anyNumber } from '../support/spec-inputs.js';

const root = resolve(import.meta.dirname, '../..');
const target = { service: 'checkout', version: 'v2' };

/** An ES module script run by a child process whose heap is 64 MB; what it printed, one JSON value a line. */
function inChild(script: string): { status: number | null; signal: string | null; lines: unknown[]; stderr: string } {
  const r = spawnSync(process.execPath, ['--max-old-space-size=64', '--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
  return {
    status: r.status,
    signal: r.signal,
    lines: r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as unknown),
    stderr: r.stderr
      .split('\n')
      .filter((l) => /heap|memory|Error/i.test(l))
      .slice(0, 3)
      .join('\n'),
  };
}

/** parseRolloutSpec in the child: each outcome. */
function parseInChild(specs: readonly object[]) {
  const r = inChild(`
    const { parseRolloutSpec } = await import(${JSON.stringify(resolve(root, 'shared/rollout/spec.ts'))});
    for (const spec of ${JSON.stringify(specs)}) {
      try { console.log(JSON.stringify({ stages: parseRolloutSpec(spec).stages.length })); }
      catch (err) { console.log(JSON.stringify({ error: err.name, message: err.message })); }
    }`);
  return { ...r, outcomes: r.lines };
}

describe('spec expansion is bounded', () => {
  it('presets whose step rounds to nothing, or that need too many stages, are refused naming the field and the stages they would need', () => {
    const r = parseInChild([
      { target, preset: 'linear', stepPercent: 0.001, bakeSeconds: 60 },
      { target, preset: 'exponential', growthFactor: 1.001, bakeSeconds: 60 },
      { target, preset: 'linear', stepPercent: 1, bakeSeconds: 60 },
      { target, preset: 'exponential', initialPercent: 50, growthFactor: 1.001, bakeSeconds: 60 },
      { target, preset: 'linear', stepPercent: 2.5, bakeSeconds: 60 },
    ]);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
    expect(r.outcomes).toEqual([
      {
        error: 'ConfigError',
        message: 'invalid rollout spec config: stepPercent: 0.001 does not advance at two decimals (it stays at 0%): the preset never reaches 100',
      },
      {
        error: 'ConfigError',
        message:
          'invalid rollout spec config: growthFactor: 1.001 from initialPercent 1 does not grow at two decimals (it stays at 1%): the preset never reaches 100',
      },
      { error: 'ConfigError', message: `invalid rollout spec config: stepPercent: 1 needs about 100 stages to reach 100; at most ${MAX_STAGES}` },
      {
        error: 'ConfigError',
        message: `invalid rollout spec config: growthFactor: 1.001 from initialPercent 50 needs about 695 stages to reach 100; at most ${MAX_STAGES}`,
      },
      { stages: 40 },
    ]);
  });
});

describe('properties: validating any spec does bounded work', () => {
  it(`stepping calls next at most ${MAX_STAGES} times whatever next does (so expansion generates at most ${MAX_STAGES + 1} candidates)`, () => {
    const step = fc.oneof(
      anyNumber.map((s) => (p: number) => p + s),
      anyNumber.map((g) => (p: number) => p * g),
      anyNumber.map((s) => (p: number) => Math.round((p + s) * 100) / 100),
      fc.constant((p: number) => p),
      fc.constant(() => Number.NaN),
    );
    fc.assert(
      fc.property(anyNumber, step, (first, next) => {
        let calls = 0;
        const r = steppedPercents(first, (p) => (calls++, next(p)));
        expect(calls).toBeLessThanOrEqual(MAX_STAGES);
        expect(r.percents.length).toBeLessThanOrEqual(MAX_STAGES);
      }),
      { numRuns: 5_000 },
    );
  });

  // In the memory-capped child: were expansion ever unbounded again, this fails at once instead of hanging the run.
  it(`any spec input — adversarial numbers included — is either a spec of 1 to ${MAX_STAGES} rising stages ending at 100, or refused with a ConfigError`, () => {
    const r = inChild(`
      const fc = (await import('fast-check')).default;
      const { specInput, parsesOrRefuses } = await import(${JSON.stringify(resolve(root, 'test/support/spec-inputs.ts'))});
      fc.assert(fc.property(specInput, parsesOrRefuses), { numRuns: 5000 });
      console.log(JSON.stringify({ ok: true }));`);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr, lines: r.lines }).toEqual({ status: 0, signal: null, stderr: '', lines: [{ ok: true }] });
  });
});
