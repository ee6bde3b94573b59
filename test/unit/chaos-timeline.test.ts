import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURE, fixtureHistory } from '../chaos/fixtures.js';
import type { ChaosHistory, ItemTransition, LeaseChange, ProcessSpan } from '../chaos/history.js';
import { parseSaved } from '../chaos/timeline-cli.js';
import { histogram, leaderIntervals, MAX_ITEM_TICKS, packRows, processSegments, renderTimeline, ticks, timeRange } from '../chaos/timeline.js';

/**
 * The timeline picture's reading of a history (lease terms, process
 * lifetimes, bins) and the page it draws, without a browser: escaping, and
 * one mark per thing that happened.
 */

const L = 'promotion_leader';
let seq = 0;
const ch = (at: number, change: LeaseChange['change'], holder: string | null, epoch: number, expiresAt: number | null, name = L): LeaseChange => ({
  seq: ++seq,
  at,
  name,
  change,
  holder,
  epoch,
  expiresAt,
});
const brief = (terms: ReturnType<typeof leaderIntervals>) =>
  terms.map(({ holder, epoch, from, to, end, anomaly }) => ({ holder, epoch, from, to, end, anomaly }));
/** Occurrences of `needle`; marks are counted as attributes, with their leading space, so the page script's selectors do not count. */
const count = (html: string, needle: string) => html.split(needle).length - 1;

describe('leaderIntervals', () => {
  it('a steal before expiry ends the old term where the new one starts; renewals extend a term without splitting it', () => {
    const terms = leaderIntervals(
      [ch(0, 'insert', 'a', 0, 5_000), ch(2_000, 'update', 'a', 0, 7_000), ch(4_000, 'update', 'a', 0, 9_000), ch(6_000, 'update', 'b', 1, 11_000)],
      L,
      8_000,
    );
    expect(brief(terms)).toEqual([
      { holder: 'a', epoch: 0, from: 0, to: 6_000, end: 'replaced', anomaly: null },
      { holder: 'b', epoch: 1, from: 6_000, to: 8_000, end: 'open', anomaly: null },
    ]);
    expect(terms[0]?.renewals).toBe(2);
  });

  it('a lease nobody renewed ends at its expiry, leaving a gap before the next holder', () => {
    const terms = leaderIntervals([ch(0, 'insert', 'a', 0, 5_000), ch(2_000, 'update', 'a', 0, 7_000), ch(9_000, 'update', 'b', 1, 14_000)], L, 20_000);
    expect(brief(terms)).toEqual([
      { holder: 'a', epoch: 0, from: 0, to: 7_000, end: 'expired', anomaly: null },
      { holder: 'b', epoch: 1, from: 9_000, to: 14_000, end: 'expired', anomaly: null },
    ]);
  });

  it('a release ends the term; the next holder at epoch + 1 is no anomaly', () => {
    const terms = leaderIntervals([ch(0, 'insert', 'a', 0, 5_000), ch(3_000, 'update', null, 0, 2_999), ch(3_500, 'update', 'b', 1, 8_500)], L, 6_000);
    expect(brief(terms)).toEqual([
      { holder: 'a', epoch: 0, from: 0, to: 3_000, end: 'released', anomaly: null },
      { holder: 'b', epoch: 1, from: 3_500, to: 6_000, end: 'open', anomaly: null },
    ]);
  });

  it('a row deleted and inserted again at epoch 0 is flagged as going backwards, with the epoch it had', () => {
    const terms = leaderIntervals(
      [
        ch(0, 'insert', 'a', 0, 5_000),
        ch(4_000, 'update', 'b', 1, 9_000),
        ch(5_000, 'update', 'c', 2, 10_000),
        ch(6_000, 'delete', 'c', 2, 10_000),
        ch(7_000, 'insert', 'a', 0, 12_000),
      ],
      L,
      8_000,
    );
    expect(brief(terms).map((t) => [t.holder, t.epoch, t.end, t.anomaly])).toEqual([
      ['a', 0, 'replaced', null],
      ['b', 1, 'replaced', null],
      ['c', 2, 'deleted', null],
      ['a', 0, 'open', 'backwards'],
    ]);
    expect(terms[3]?.previousEpoch).toBe(2);
  });

  it('a new holder at the epoch another holder had is flagged as not advanced; the same holder after its own expiry is not', () => {
    const stolenWithoutEpoch = leaderIntervals([ch(0, 'insert', 'a', 3, 5_000), ch(6_000, 'update', 'b', 3, 11_000)], L, 8_000);
    expect(brief(stolenWithoutEpoch).map((t) => t.anomaly)).toEqual([null, 'not-advanced']);

    const lateRenewal = leaderIntervals([ch(0, 'insert', 'a', 3, 5_000), ch(6_000, 'update', 'a', 3, 11_000)], L, 8_000);
    expect(brief(lateRenewal)).toEqual([
      { holder: 'a', epoch: 3, from: 0, to: 5_000, end: 'expired', anomaly: null },
      { holder: 'a', epoch: 3, from: 6_000, to: 8_000, end: 'open', anomaly: null },
    ]);
  });

  it('reads only the named lease, in commit order rather than array order', () => {
    const a = ch(0, 'insert', 'a', 0, 50_000);
    const other = ch(1_000, 'insert', 'x', 0, 50_000, 'coordinator:run-1');
    const b = ch(2_000, 'update', 'b', 1, 50_000);
    expect(brief(leaderIntervals([b, other, a], L, 10_000)).map((t) => t.holder)).toEqual(['a', 'b']);
  });

  it("reads the fixture's terms as its story tells them", () => {
    const { history } = fixtureHistory();
    expect(brief(leaderIntervals(history.store.leaseChanges, L, history.phases.quietUntil))).toEqual(FIXTURE.terms);
  });
});

describe('processSegments', () => {
  it('alive spans, and between them the state each ended in', () => {
    const spans: ProcessSpan[] = [
      { process: 'n', role: 'node', from: 5_000, to: 7_000, end: 'paused' },
      { process: 'n', role: 'node', from: 0, to: 3_000, end: 'killed' },
      { process: 'other', role: 'node', from: 0, to: null },
      { process: 'n', role: 'node', from: 8_000, to: null },
    ];
    expect(processSegments(spans, 'n', 10_000).map(({ state, from, to }) => [state, from, to])).toEqual([
      ['alive', 0, 3_000],
      ['killed', 3_000, 5_000],
      ['alive', 5_000, 7_000],
      ['paused', 7_000, 8_000],
      ['alive', 8_000, 10_000],
    ]);
  });
});

describe('drawing helpers', () => {
  it('histogram counts every time once, clamping strays into the end bins', () => {
    expect(histogram([0, 1, 9.99, 10, -5, 25], 0, 10, 2)).toEqual([3, 3]);
    expect(histogram([2, 3, 7], 0, 10, 5)).toEqual([0, 2, 0, 1, 0]);
  });

  it('packRows puts overlapping extents on separate rows and reuses a row once it is free', () => {
    expect(
      packRows([
        { x0: 0, x1: 50 },
        { x0: 10, x1: 20 },
        { x0: 60, x1: 70 },
        { x0: 30, x1: 40 },
      ]),
    ).toEqual([0, 1, 0, 1]);
  });

  it('ticks fall on round seconds covering the range', () => {
    expect(ticks(0, 60_000)).toEqual([0, 5_000, 10_000, 15_000, 20_000, 25_000, 30_000, 35_000, 40_000, 45_000, 50_000, 55_000, 60_000]);
    expect(ticks(-2_000, 300_000)[0]).toBe(0);
  });

  it('the time range starts before 0 when something happened before the schedule did', () => {
    const { history, violations } = fixtureHistory();
    const early: ChaosHistory = {
      ...history,
      store: { ...history.store, leaseChanges: [ch(-1_500, 'insert', 'node-1', 0, 3_500), ...history.store.leaseChanges] },
    };
    expect(timeRange(early, violations)).toEqual({ t0: -1_500, t1: 60_000 });
  });
});

describe('renderTimeline', () => {
  const { history, violations } = fixtureHistory();
  const html = renderTimeline(history, violations);

  it('draws one lane per node, one band per fault, and one mark per promotion, rollback, completion, troubled op and violation', () => {
    expect(count(html, 'data-lane-kind="node"')).toBe(FIXTURE.nodes.length);
    expect(count(html, 'data-lane-kind="worker"')).toBe(FIXTURE.workers.length);
    expect(count(html, ' data-kind="fault"')).toBe(FIXTURE.faults);
    expect(count(html, ' data-kind="promotion"')).toBe(FIXTURE.promotions);
    expect(count(html, ' data-kind="rollback"')).toBe(FIXTURE.rollbacks);
    expect(count(html, ' data-kind="item-done"')).toBe(FIXTURE.items - FIXTURE.failedItems.length);
    expect(count(html, ' data-kind="item-failed"')).toBe(FIXTURE.failedItems.length);
    expect(count(html, ' data-kind="op-failed"')).toBe(FIXTURE.failedOps);
    expect(count(html, ' data-kind="op-unknown"')).toBe(FIXTURE.unknownOps);
    expect(count(html, ' data-kind="violation"')).toBe(FIXTURE.violations);
    expect(count(html, ' data-kind="lease"')).toBe(FIXTURE.terms.length);
    expect(count(html, 'class="lease anomaly backwards')).toBe(1);
  });

  it('gives every band and mark a tooltip', () => {
    const groups = html.match(/<g class="(?:mark|fault|lease)[^"]*"[^>]*>(<title>)?/g) ?? [];
    expect(groups.length).toBeGreaterThan(50);
    expect(groups.filter((g) => !g.endsWith('<title>'))).toEqual([]);
  });

  it('says what happened in its title lines and lists each violation with its evidence', () => {
    expect(html).toContain('Chaos timeline · schedule 7 · seed 0x5eed-4242');
    expect(html).toContain('variant lease-row-reset');
    expect(html).toMatch(/74 ops \(1 refused, 1 unanswered\) · 2 faults · 1 violation</);
    expect(html).toContain('node-1 e0 (epoch went backwards!) 51.0 s–60.0 s');
    for (const line of violations[0]?.evidence ?? []) expect(html).toContain(`<li>${line}</li>`);
  });

  it('escapes whatever the store or the checker said', () => {
    const evil = '<script>alert(1)</script>';
    const quote = '"><img src=x onerror=alert(2)>';
    const hostile: ChaosHistory = {
      ...history,
      seed: evil,
      variant: quote,
      nodes: [evil, 'node-2', 'node-3'],
      faults: [{ kind: 'kill-leader', target: evil, startAt: 1_000, endAt: 2_000, detail: quote }],
      processes: [...history.processes, { process: evil, role: 'node', from: 0, to: null }],
      ops: history.ops.map((o) => (o.outcome === 'ok' ? o : { ...o, client: quote, detail: evil })),
      store: {
        ...history.store,
        leaseChanges: history.store.leaseChanges.map((c) => (c.holder === 'node-1' ? { ...c, holder: evil } : c)),
        stageTransitions: history.store.stageTransitions.map((t) => ({ ...t, rolloutId: quote, by: evil })),
        itemTransitions: history.store.itemTransitions.map((t) => ({ ...t, runId: evil, itemId: quote })),
        runs: [{ id: evil, items: 50 }],
      },
    };
    const page = renderTimeline(hostile, [{ ...violations[0]!, invariant: quote, message: evil, evidence: [evil, quote] }]);
    expect(page).not.toContain(evil);
    expect(page).not.toContain('<img');
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page).toContain('&quot;&gt;&lt;img src=x onerror=alert(2)&gt;');
    // The page's own script, and no other.
    expect(count(page, '<script')).toBe(1);
    // The hostile holder is still drawn, as a lane of its own name.
    expect(page).toContain(`data-lane="&lt;script&gt;alert(1)&lt;/script&gt;" data-lane-kind="node"`);
  });

  it('bins a run with hundreds of completions into a histogram that still accounts for every one', () => {
    const many: ItemTransition[] = Array.from({ length: MAX_ITEM_TICKS + 300 }, (_, i) => ({
      seq: i + 1,
      at: (i * 97) % 60_000,
      runId: 'big-run',
      itemId: `i-${i}`,
      from: { state: 'running', worker: 'worker-1', started: true },
      to: { state: i % 25 === 0 ? 'failed' : 'done', worker: 'worker-1', started: true, resultHash: null, error: null, attempts: 1 },
    }));
    const page = renderTimeline({ ...history, store: { ...history.store, itemTransitions: many, runs: [{ id: 'big-run', items: many.length }] } }, []);
    expect(count(page, ' data-kind="item-done"')).toBe(0);
    const sum = (attr: string) => [...page.matchAll(new RegExp(`data-kind="item-bin"[^>]*${attr}="(\\d+)"`, 'g'))].reduce((n, m) => n + Number(m[1]), 0);
    expect(sum('data-done')).toBe(many.length - 20);
    expect(sum('data-failed')).toBe(20);
  });

  it('draws an empty schedule without failing, and says nobody led', () => {
    const empty: ChaosHistory = {
      ...history,
      nodes: [],
      workers: [],
      ops: [],
      faults: [],
      processes: [],
      store: { ...history.store, leaseChanges: [], stageTransitions: [], itemTransitions: [], runs: [] },
    };
    const page = renderTimeline(empty, []);
    expect(page).toContain('Nobody held promotion_leader.');
    expect(page).toContain('The checker found no violations.');
    expect(count(page, ' data-kind="lease"')).toBe(0);
  });
});

describe('timeline CLI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'chaos-timeline-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cli = resolve(import.meta.dirname, '../chaos/timeline-cli.ts');

  it('draws a saved history into the file named by --out', () => {
    const input = join(dir, 'run-7.json');
    writeFileSync(input, JSON.stringify(fixtureHistory()));
    const out = join(dir, 'picture.html');
    const run = spawnSync(process.execPath, ['--import', 'tsx', cli, input, '--out', out], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const page = readFileSync(out, 'utf8');
    expect(count(page, ' data-kind="violation"')).toBe(1);
    expect(count(page, 'data-lane-kind="node"')).toBe(3);
  });

  it('names the file when it is not a saved history', () => {
    expect(() => parseSaved('{"history": {"nodes": []}}', 'x.json')).toThrow(/x\.json: history\.workers is not a list/);
    expect(() => parseSaved('nope', 'y.json')).toThrow(/y\.json: not JSON/);
    const input = join(dir, 'broken.json');
    writeFileSync(input, '{}');
    const run = spawnSync(process.execPath, ['--import', 'tsx', cli, input], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('broken.json: no "history" object');
  });
});
