/**
 * `rollout gates judge` as a pipeline runs it: one JSON line per case on
 * stdout in input order, diagnostics on stderr, exit 0 / 1 (a case refused) /
 * 2 (an unusable file), and never a stack trace.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { rollout } from '../support/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'gates-judge-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('rollout gates judge', () => {
  it('answers each case on its own line, in order', async () => {
    const cases = [
      { id: 'slow', kind: 'mann-whitney', canary: [10, 20, 30, 40], baseline: [1, 2, 3, 4], confidence: 0.95 },
      { id: 'same', kind: 'mann-whitney', canary: [1, 2, 3], baseline: [3, 2, 1] },
      {
        id: 'errors',
        kind: 'sequential-rate',
        alpha: 0.05,
        minSamples: 10,
        looks: [
          { baseline: [100, 2], canary: [100, 9] },
          { baseline: [200, 4], canary: [200, 20] },
        ],
      },
    ];
    const r = await rollout(['gates', 'judge', '--file', file('ok.json', JSON.stringify({ cases }))]);
    expect(r.code, r.err).toBe(0);
    const lines = r.out
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([
      { id: 'slow', classification: 'high', critical: false, pValue: expect.closeTo(0.0303828219765, 10) as number, ci: [6, 39], estimate: 22.5 },
      { id: 'same', classification: 'pass', critical: false, pValue: 1, ci: expect.any(Array) as unknown, estimate: 0 },
      { id: 'errors', verdict: 'fail', decidedAt: 1 },
    ]);
  }, 60_000);

  it('answers a bad case with its field and exits 1; the good ones are still answered', async () => {
    const r = await rollout([
      'gates',
      'judge',
      '--file',
      file(
        'bad.json',
        JSON.stringify({
          cases: [
            { id: 'a', kind: 'sequential-rate', alpha: 0.05, looks: [{ baseline: [5, 6], canary: [5, 0] }] },
            { id: 'b', kind: 'mann-whitney', canary: [1], baseline: [2] },
          ],
        }),
      ),
    ]);
    expect(r.code).toBe(1);
    const lines = r.out
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toEqual({ id: 'a', error: { field: 'looks[0].baseline', message: 'errors cannot exceed requests' } });
    expect(lines[1]).toMatchObject({ id: 'b', classification: 'low', ci: [-1, -1] });
    expect(r.err).toBe('1 of 2 cases refused\n');
  }, 60_000);

  it('exits 2 with one line for an empty, non-JSON or missing file', async () => {
    for (const [path, said] of [
      [file('empty.json', '\n'), 'the cases file is empty'],
      [file('text.json', 'cases: []'), 'the cases file is not JSON'],
      [join(dir, 'absent.json'), 'cannot read'],
    ] as const) {
      const r = await rollout(['gates', 'judge', '--file', path]);
      expect(r.code, path).toBe(2);
      expect(r.out).toBe('');
      expect(r.err.trimEnd().split('\n')).toHaveLength(1);
      expect(r.err).toContain(said);
    }
  }, 60_000);
});
