/**
 * A test's timeout is a budget for a hang, sized for a machine three times
 * slower than an idle one: a test that starts the `rollout` CLI as a process
 * (tsx compiles it on each start, seconds on a busy 2-core runner) gives
 * each start CLI_START_BUDGET_MS. Read from the test files themselves, so a
 * test that adds starts without raising its budget fails here, not on a busy CI.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const CLI_START_BUDGET_MS = 30_000;
/** vitest.config.ts's testTimeout: a test that names none has this. */
const DEFAULT_TIMEOUT_MS = 60_000;

interface Budget {
  readonly name: string;
  readonly starts: number;
  readonly timeoutMs: number;
}

/** Each test (`it(…)` / `test(…)`) of a file's source: how many CLI starts it makes, and its timeout. */
function budgets(source: string): Budget[] {
  const out: Budget[] = [];
  for (const m of source.matchAll(/\n( +)(?:it|test)\((['"`])(.*?)\2,/g)) {
    const indent = m[1]!;
    const start = m.index + m[0].length;
    const end = source.indexOf(`\n${indent}}`, start);
    if (end < 0) continue;
    const starts = source.slice(start, end).match(/\brollout\(\[/g)?.length ?? 0;
    const close = new RegExp(`^\\n${indent}\\}(?:, ([\\d_]+))?\\);`).exec(source.slice(end));
    const timeoutMs = close?.[1] ? Number(close[1].replaceAll('_', '')) : DEFAULT_TIMEOUT_MS;
    out.push({ name: m[3]!, starts, timeoutMs });
  }
  return out;
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

describe('test budgets', () => {
  it('reads starts and timeouts: the default timeout where none is named, a test short of budget found', () => {
    const source = [
      '',
      "  it('default', async () => {",
      "    await rollout(['a']);",
      "    await rollout(['b']);",
      '  });',
      '',
      "  it('enough', async () => {",
      "    await rollout(['a']);",
      "    await rollout(['b']);",
      '  }, 60_000);',
      '',
    ].join('\n');
    expect(budgets(source)).toEqual([
      { name: 'default', starts: 2, timeoutMs: 60_000 },
      { name: 'enough', starts: 2, timeoutMs: 60_000 },
    ]);
    const tight = source.replace('  }, 60_000);', '  }, 30_000);');
    expect(
      budgets(tight)
        .filter((b) => b.timeoutMs < b.starts * CLI_START_BUDGET_MS)
        .map((b) => b.name),
    ).toEqual(['enough']);
  });

  it('every test that starts the CLI as a process has at least 30 s a start', () => {
    // This file's own sources are fixtures, not tests that start anything.
    const short = testFiles('test')
      .filter((file) => !file.endsWith('test-budgets.test.ts'))
      .flatMap((file) =>
        budgets(readFileSync(file, 'utf8'))
          .filter((b) => b.timeoutMs < b.starts * CLI_START_BUDGET_MS)
          .map((b) => `${file}: "${b.name.slice(0, 60)}" starts the CLI ${b.starts} times in ${b.timeoutMs} ms`),
      );
    expect(short).toEqual([]);
  });
});
