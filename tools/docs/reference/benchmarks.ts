import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { BenchRecord } from '../../../test/harness/bench-record.js';
import { cell, code, GENERATED, page, table, text } from './markdown.js';
import { root } from './source.js';

/** Where `npm run bench -- NAME` leaves its figures (test/harness/bench-record.ts). */
export const BENCH_DATA = 'docs/data/bench';

/** Figures measured by hand around a change (before and after) or once, kept as data: one file a bench. */
export const BENCH_HISTORY = `${BENCH_DATA}/history`;

/** One figure: a single value, or the value before a change and after it. */
export type HistoryFigure = { readonly name: string; readonly value: string } | { readonly name: string; readonly before: string; readonly after: string };

/** A measurement made by hand and recorded from the prose it was first written in. */
export interface HistoryEntry {
  readonly date: string;
  /** What was measured, or what changed between before and after. */
  readonly what: string;
  /** How it was run: the part, the arguments, the number of runs. */
  readonly how: string;
  /** The machine as the measurement described it. */
  readonly machine: string;
  /** The code measured, when known; null when only the commit that recorded the figures is. */
  readonly commits: { readonly before: string | null; readonly after: string | null } | null;
  /** The commit that first wrote these figures into the docs. */
  readonly recorded_in: string;
  readonly figures: readonly HistoryFigure[];
  readonly notes?: string;
}

export interface BenchHistory {
  readonly bench: string;
  readonly entries: readonly HistoryEntry[];
}

/** The history files, each checked: a bad one is refused naming its file and field. */
export function readHistory(dir = resolve(root, BENCH_HISTORY)): BenchHistory[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => checkHistory(f, JSON.parse(readFileSync(join(dir, f), 'utf8')) as unknown));
}

export function checkHistory(file: string, raw: unknown): BenchHistory {
  const fail = (field: string, why: string): never => {
    throw new Error(`${BENCH_HISTORY}/${file}: ${field} ${why}`);
  };
  const str = (v: unknown, field: string) => (typeof v === 'string' && v.trim() !== '' ? v : fail(field, 'must be a non-empty string'));
  const h = raw as Partial<BenchHistory> | null;
  if (h === null || typeof h !== 'object') return fail('(file)', 'must be an object {bench, entries}');
  if (str(h.bench, 'bench') !== file.replace(/\.json$/, '')) fail('bench', `must be the file's name (${file.replace(/\.json$/, '')})`);
  if (!Array.isArray(h.entries) || h.entries.length === 0) fail('entries', 'must be a non-empty array');
  (h.entries as unknown[]).forEach((e, i) => {
    const at = `entries[${i}]`;
    const x = e as Partial<HistoryEntry>;
    if (!/^\d{4}-\d{2}-\d{2}$/.test(str(x.date, `${at}.date`))) fail(`${at}.date`, 'must be YYYY-MM-DD');
    for (const k of ['what', 'how', 'machine', 'recorded_in'] as const) str(x[k], `${at}.${k}`);
    if (x.notes !== undefined) str(x.notes, `${at}.notes`);
    if (x.commits !== null && (typeof x.commits !== 'object' || !('before' in x.commits) || !('after' in x.commits)))
      fail(`${at}.commits`, 'must be null or {before, after}');
    if (!Array.isArray(x.figures) || x.figures.length === 0) fail(`${at}.figures`, 'must be a non-empty array');
    (x.figures as unknown[]).forEach((f, j) => {
      const g = f as Record<string, unknown>;
      str(g.name, `${at}.figures[${j}].name`);
      if ('value' in g) str(g.value, `${at}.figures[${j}].value`);
      else if ('before' in g || 'after' in g) {
        str(g.before, `${at}.figures[${j}].before`);
        str(g.after, `${at}.figures[${j}].after`);
      } else fail(`${at}.figures[${j}]`, 'must have a value, or a before and an after');
    });
  });
  return h as BenchHistory;
}

/**
 * The benchmark figures page, from the data files the benches write: each
 * bench's last figures, with the run that made them (commit, machine, date,
 * arguments). Nothing here is typed by hand, and the page changes only when a
 * bench is run again.
 */
export function benchmarksReference(dir = resolve(root, BENCH_DATA), history = readHistory(resolve(dir, 'history'))): string {
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
    ...historySection(history),
  ]);
}

/** The anchor of a bench's measurements before and after changes. */
export const historyAnchor = (bench: string) => `measured-${bench}`;

function historySection(history: readonly BenchHistory[]): string[] {
  if (!history.length) return [];
  return [
    '## Measured before and after changes',
    `Figures measured by hand: around a change (the same bench on the code before and after it), or once, to compare with a peer or to find where the time goes. Each is kept as it was first written, with the date, the machine as described then and the commit that recorded it, in ${code(`${BENCH_HISTORY}/NAME.json`)}; newest first. They compare within a measurement, not across machines or days.`,
    ...history.map((h) =>
      page([
        `### ${h.bench}, measured {#${historyAnchor(h.bench)}}`,
        ...[...h.entries]
          .sort((a, b) => b.date.localeCompare(a.date))
          .map((e) => {
            const changed = e.figures.filter((f) => 'before' in f);
            const once = e.figures.filter((f) => 'value' in f);
            return page([
              `**${e.date}: ${text(e.what)}**`,
              [
                `- How: ${text(e.how)}`,
                `- Machine: ${text(e.machine)}`,
                e.commits
                  ? `- Commits: before ${e.commits.before ? code(e.commits.before) : 'unknown'}, after ${e.commits.after ? code(e.commits.after) : 'unknown'}`
                  : '',
                `- Recorded in: ${code(e.recorded_in)}`,
              ]
                .filter(Boolean)
                .join('\n'),
              changed.length
                ? table(
                    ['Figure', 'Before', 'After'],
                    changed.map((f) => [cell(f.name), cell(f.before), cell(f.after)]),
                  )
                : '',
              once.length
                ? table(
                    ['Figure', 'Value'],
                    once.map((f) => [cell(f.name), cell(f.value)]),
                  )
                : '',
              e.notes ? text(e.notes) : '',
            ]).trimEnd();
          }),
      ]).trimEnd(),
    ),
  ];
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
