/**
 * Measured figures are data, not prose: a bench records its last run in
 * docs/data/bench/NAME.json, and what was measured by hand in
 * docs/data/bench/history/NAME.json; the generated Benchmark figures page
 * renders both. This test fails when a measurement is typed into a page a
 * person writes (every page of the site but the generated references, and
 * README.md), and holds the history files to their shape.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { docsPages } from '../../tools/docs/anchors.js';
import { BENCH_HISTORY, checkHistory, historyAnchor, readHistory } from '../../tools/docs/reference/benchmarks.js';

const root = resolve(import.meta.dirname, '../..');

/** A number as prose writes one: 1,474 / 0.43 / 17.7k / 1.31M, perhaps approximate. */
const NUM = String.raw`(?:~|≈|about\s+|some\s+)?(?<![\w.])\d[\d,]*(?:\.\d+)?[kM]?`;
/** One number or a range of them (0.43–0.60, 12,534 / 12,288). */
const RANGE = String.raw`${NUM}(?:\s*(?:[–-]|/|to)\s*${NUM})*`;
/** A duration, a rate or a ratio: what a measurement reports. */
const UNIT = String.raw`(?:ms|µs|s|min)\b|×|(?:items|requests|req|messages|resolutions)?/s\b`;
/** Within one sentence: a decimal point does not end it. */
const SAME_SENTENCE = String.raw`(?:[^.;\n]|\.\d)*?`;

/**
 * What a measurement typed into prose looks like. Configuration values and
 * limits (a TTL of 2 s, "at most 1,000 points", "default 30 s", "50 req/s
 * (burst 100)") match none of these: they carry no quantile, no before → after,
 * no "measured" and no machine.
 */
export const MEASUREMENT: readonly { readonly name: string; readonly re: RegExp }[] = [
  { name: 'a quantile with a duration', re: new RegExp(String.raw`\b(?:p\d{2,3}|median)\s+(?:of\s+|at\s+)?${RANGE}\s*(?:${UNIT})`, 'i') },
  { name: 'a duration or ratio at a quantile', re: new RegExp(String.raw`${RANGE}\s*(?:${UNIT})\s+at\s+(?:the\s+)?(?:p\d{2,3}|median)\b`, 'i') },
  { name: 'a figure before → after', re: new RegExp(String.raw`${RANGE}\s*(?:${UNIT})?\s*→\s*${NUM}\s*(?:${UNIT})`, 'i') },
  { name: '"measured" with a duration, rate or ratio', re: new RegExp(String.raw`\bmeasured\b(?:[^.;\n]|\.\d){0,20}?${RANGE}\s*(?:${UNIT})`, 'i') },
  { name: '"measured here/on/once"', re: /\bmeasured (?:here|on|once|at)\b/i },
  { name: 'a figure on a machine', re: new RegExp(String.raw`\bon (?:a|this|the) (?:[\w-]+ ){0,3}machine\b${SAME_SENTENCE}${RANGE}\s*(?:${UNIT})`, 'i') },
  { name: 'microseconds', re: new RegExp(String.raw`${RANGE}\s*µs`) },
];

/** A page's prose, its paragraphs' lines joined (a sentence may span lines), with the line each starts on. */
function paragraphs(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let start = 0;
  let lines: string[] = [];
  text.split('\n').forEach((l, i) => {
    if (l.trim() === '' || /^\s*(?:```|\||#|[-*] |\d+\. )/.test(l)) {
      if (lines.length) out.push({ line: start + 1, text: lines.join(' ') });
      lines = [];
      if (l.trim() !== '') out.push({ line: i + 1, text: l });
      return;
    }
    if (!lines.length) start = i;
    lines.push(l.trim());
  });
  if (lines.length) out.push({ line: start + 1, text: lines.join(' ') });
  return out;
}

/** Each measurement found on a page, as `page:line: the words (the pattern)`. */
export function measurementsIn(page: string, text: string): string[] {
  return paragraphs(text).flatMap(({ line, text: t }) =>
    MEASUREMENT.flatMap(({ name, re }) => {
      const m = re.exec(t);
      return m ? [`${page}:${line}: "${m[0]}" (${name})`] : [];
    }),
  );
}

/**
 * Figures on pages this change could not edit, each recorded in
 * docs/data/bench/history/ already: to be replaced there by a link to the
 * figures page. Exact text, so a new figure on those pages still fails.
 */
const NOT_YET_MOVED: readonly { readonly page: string; readonly text: string }[] = [];

/** Not measurements: what the demo prints, quoted as an example of its output. */
const NOT_MEASUREMENTS: readonly { readonly page: string; readonly text: string }[] = [{ page: 'docs/getting-started/local.md', text: 'p99 161 ms' }];

const allowed = (finding: string) => [...NOT_YET_MOVED, ...NOT_MEASUREMENTS].some((a) => finding.startsWith(`${a.page}:`) && finding.includes(`"${a.text}"`));

describe('measured figures are data, not prose', () => {
  const pages = [...docsPages().filter((p) => !p.startsWith('docs/reference/')), 'README.md'];

  it('no page a person writes has a measurement typed into it (record it in docs/data/bench/history/ and link to the figures page)', () => {
    expect(pages.length).toBeGreaterThan(20);
    const found = pages.flatMap((p) => measurementsIn(p, readFileSync(join(root, p), 'utf8')));
    expect(found.filter((f) => !allowed(f))).toEqual([]);
  });

  it('every allowance still matches its page (drop one once its figure is gone)', () => {
    const found = pages.flatMap((p) => measurementsIn(p, readFileSync(join(root, p), 'utf8')));
    for (const a of [...NOT_YET_MOVED, ...NOT_MEASUREMENTS])
      expect(
        found.some((f) => f.startsWith(`${a.page}:`) && f.includes(`"${a.text}"`)),
        `${a.page}: "${a.text}"`,
      ).toBe(true);
  });

  it('finds a measurement typed into prose, whichever way it is written', () => {
    const cases = [
      'The tick was measured here: 672 ms on PostgreSQL.',
      'Measured here on 2026-12-07 (medians of two pairs): the all-due tick\non PostgreSQL took longer.',
      'the all-due tick on PostgreSQL 672 → 340 ms, 3.27× →\n1.63× the raw write alone',
      'Handover takes p50 15.5 ms, p99 77.9 ms here.',
      'The bench measures it (p50 about 10 ms, against the 2 s retry).',
      'Our ledger measured 17.7k items/s against 16.5k (5 reps).',
      'Measured on a 2-core machine: the cost is below the noise floor.',
      'It prints what a judgement costs: on a 2-core machine, a threshold reading 0.002 ms.',
      'a no-op span costs about 0.1 µs each',
      'node 48,302 req/s, measured with wrk, 0.507× the bare server',
      'Earlier runs: nginx 219–223 ms at p50 before the actuator read the pid file; about 94× at the median.',
    ];
    for (const c of cases) expect(measurementsIn('x.md', c), c).not.toEqual([]);
  });

  it('leaves configuration values and limits alone', () => {
    const cases = [
      '3 contenders, TTL 2 s (renew 0.6 s, retry 0.45 s, skew 50 ms), 6 groups × 8 rounds by default',
      'mann-whitney takes at most 1,000 points a side; the default step is 30 s.',
      'each stage bakes 3 s and must stay under 5% errors and 800 ms p99',
      'retried with full-jitter exponential backoff: 10 ms doubling to 400 ms',
      '| api | 50 req/s (burst 100) | 29 s / 512 MB |',
      'A layout agrees when the bench’s rate is within ±35 % of the model’s median over 20 seeds, and that batch waits 60 s for its messages.',
      'one key would be throttled at some 150 items/s; without either a run gets 4 (~330 items/s)',
      '`ttlMs > renewIntervalMs > 1.2 × retryIntervalMs`',
      'started a chunk at a time, sized from the measured item time so a chunk lasts about 100 ms',
      'the stage moves from 10 % → 50 % when the gate passes',
      'on a shared machine the p99s are the machine’s, not the code’s',
      'The stop first lets an in-flight promoter tick finish. The target is a handover under 100 ms.',
      '```json\n{"bench":"lease","backends":{"postgres":{"acquire_p50_ms":…,"ttl_ms":2000}}}\n```',
    ];
    for (const c of cases) expect(measurementsIn('x.md', c), c).toEqual([]);
  });

  it('the history files are well formed, each linked as the prose links it', () => {
    const history = readHistory();
    expect(history.map((h) => h.bench)).toEqual(expect.arrayContaining(['promotion', 'ledger', 'handover', 'lease', 'actuation', 'scale']));
    const figures = readFileSync(join(root, 'docs/reference/benchmarks.md'), 'utf8');
    for (const h of history) expect(figures).toContain(`{#${historyAnchor(h.bench)}}`);
  });

  it('refuses a history file with a figure that has neither a value nor a before and an after, naming the field', () => {
    const entry = { date: '2026-12-07', what: 'w', how: 'h', machine: 'm', commits: null, recorded_in: 'abc', figures: [{ name: 'tick' }] };
    expect(() => checkHistory('promotion.json', { bench: 'promotion', entries: [entry] })).toThrow(
      `${BENCH_HISTORY}/promotion.json: entries[0].figures[0] must have a value, or a before and an after`,
    );
    expect(() => checkHistory('promotion.json', { bench: 'ledger', entries: [entry] })).toThrow(/bench must be the file's name \(promotion\)/);
    expect(() =>
      checkHistory('promotion.json', { bench: 'promotion', entries: [{ ...entry, date: '7 Dec', figures: [{ name: 'n', value: '1 ms' }] }] }),
    ).toThrow(/entries\[0\]\.date must be YYYY-MM-DD/);
  });
});
