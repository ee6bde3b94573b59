import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { BenchRecord } from '../../../test/harness/bench-record.js';
import { cell, code, GENERATED, page, table, text } from './markdown.js';
import { root } from './source.js';

/** Where `npm run bench -- NAME` leaves its figures (test/harness/bench-record.ts). */
export const BENCH_DATA = 'docs/data/bench';

/**
 * The benchmark figures page, from the data files the benches write: each
 * bench's last figures, with the run that made them (commit, machine, date,
 * arguments). Nothing here is typed by hand, and the page changes only when a
 * bench is run again.
 */
export function benchmarksReference(dir = resolve(root, BENCH_DATA)): string {
  const records = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as BenchRecord)
    : [];
  return page([
    '# Benchmark figures',
    GENERATED(`${BENCH_DATA}/*.json, written by \`npm run bench -- NAME\``),
    `The figures each benchmark (${code('test/bench/NAME.ts')}) printed on its last run, as ${code('npm run bench -- NAME …')} recorded them in ${code(`${BENCH_DATA}/NAME.json`)}: with the commit, the machine, the date and the arguments of that run. They are from that run only: the short runs CI makes to keep the benches working (few operations, one round) say that the bench runs, not how fast anything is; run a bench with its default arguments on your machine for figures worth comparing.`,
    records.length
      ? table(
          ['Bench', 'Run', 'Commit', 'Machine'],
          records.map((r) => [`[${r.bench}](#${r.bench})`, r.date.slice(0, 10), commit(r), machine(r)]),
        )
      : 'No bench has recorded figures yet.',
    ...records.map((r) =>
      page([
        `## ${r.bench}`,
        [
          `- Command: ${code(['npm run bench --', r.bench, ...r.args].join(' '))}`,
          `- Commit: ${commit(r)}`,
          `- Machine: ${machine(r)}`,
          `- Date: ${r.date}`,
        ].join('\n'),
        table(
          ['Figure', 'Value'],
          flatten(r.figures).map(([k, v]) => [code(k), cell(v)]),
        ),
      ]).trimEnd(),
    ),
  ]);
}

const commit = (r: BenchRecord) => `${code(r.commit.slice(0, 12))}${r.dirty ? ' (with uncommitted changes)' : ''}`;
const machine = (r: BenchRecord) =>
  text(`${r.machine.cpus} × ${r.machine.model}, ${r.machine.memoryGiB} GiB, Node.js ${r.machine.node}, ${r.machine.platform}`);

/** Nested figures as dotted paths (`backends.0.p99_ms`); an array of plain values stays one row. */
function flatten(value: unknown, prefix = ''): [string, string][] {
  if (value !== null && typeof value === 'object') {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
    if (Array.isArray(value) && value.every((v) => v === null || typeof v !== 'object')) return [[prefix, value.map((v) => JSON.stringify(v)).join(', ')]];
    if (!entries.length) return [[prefix, JSON.stringify(value)]];
    return entries.flatMap(([k, v]) => flatten(v, prefix ? `${prefix}.${k}` : k));
  }
  return [[prefix, typeof value === 'string' ? value : JSON.stringify(value)]];
}
