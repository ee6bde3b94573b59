/**
 * Draws the timeline of a saved schedule:
 *
 *   node --import tsx test/chaos/timeline-cli.ts <history.json> [--out timeline.html]
 *   node --import tsx test/chaos/timeline-cli.ts --fixture [--out timeline.html]
 *
 * The JSON file holds `{ history, violations }` as the chaos run saved them.
 * Without --out the page goes next to the input (`<name>.html`); --fixture
 * draws the hand-made schedule the tests use.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fixtureHistory } from './fixtures.js';
import type { ChaosHistory, Violation } from './history.js';
import { renderTimeline } from './timeline.js';

const usage = 'usage: node --import tsx test/chaos/timeline-cli.ts <history.json | --fixture> [--out timeline.html]';

/** Enough of a check that a wrong file fails with its name, not deep inside the drawing. */
export function parseSaved(text: string, source: string): { history: ChaosHistory; violations: Violation[] } {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const d = data as { history?: Partial<ChaosHistory>; violations?: unknown };
  const h = d?.history;
  if (!h || typeof h !== 'object') throw new Error(`${source}: no "history" object`);
  for (const key of ['nodes', 'workers', 'ops', 'faults', 'processes'] as const)
    if (!Array.isArray(h[key])) throw new Error(`${source}: history.${key} is not a list`);
  if (!h.phases || !h.store || !Array.isArray(h.store.leaseChanges)) throw new Error(`${source}: history.phases or history.store is missing`);
  const violations = d.violations ?? [];
  if (!Array.isArray(violations)) throw new Error(`${source}: "violations" is not a list`);
  return { history: h as ChaosHistory, violations: violations as Violation[] };
}

function main(argv: string[]): number {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { out: { type: 'string', short: 'o' }, fixture: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const input = positionals[0];
  if ((!input && !values.fixture) || positionals.length > 1) {
    console.error(usage);
    return 2;
  }
  const saved = values.fixture || !input ? fixtureHistory() : parseSaved(readFileSync(input, 'utf8'), input);
  const out = resolve(values.out ?? (input ? join(dirname(input), `${basename(input, extname(input))}.html`) : 'timeline.html'));
  writeFileSync(out, renderTimeline(saved.history, saved.violations));
  console.log(`timeline: ${out} (${saved.violations.length} violation${saved.violations.length === 1 ? '' : 's'})`);
  return 0;
}

// Imported by a test for parseSaved, it must not run.
if (resolve(process.argv[1] ?? '') === import.meta.filename) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (err) {
    console.error(`timeline: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  }
}
