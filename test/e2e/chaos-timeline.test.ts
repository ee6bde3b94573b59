import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE, fixtureHistory } from '../chaos/fixtures.js';
import { renderTimeline } from '../chaos/timeline.js';

/**
 * The chaos timeline in a real browser (Debian's Chromium through
 * playwright-core), opened from a file:// URL as a saved run would be: what a
 * person sees of who led when, the faults, the marks and the violations, and
 * that the page asks the network for nothing.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const shots = resolve(import.meta.dirname, '../../test-results');

let browser: Browser;

beforeAll(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** Writes the page where a person would find it after the run, and opens it from there; every request the page makes is kept. */
async function open(html: string, name: string): Promise<{ page: Page; requests: string[] }> {
  const file = resolve(shots, `${name}.html`);
  writeFileSync(file, html);
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  const url = pathToFileURL(file).href;
  await page.goto(url);
  return { page, requests: requests.filter((u) => u !== url) };
}

describe('chaos timeline page', () => {
  it('shows who led when, the faults, the marks and the violation', async () => {
    const { history, violations } = fixtureHistory();
    const { page, requests } = await open(renderTimeline(history, violations), 'chaos-timeline');

    expect(await page.locator('#title').innerText()).toBe('Chaos timeline · schedule 7 · seed 0x5eed-4242');
    expect(await page.locator('#meta').innerText()).toMatch(
      /^1 violation\s*topology local · variant lease-row-reset · 60\.0 s · 3 nodes, 2 workers · 74 ops \(1 refused, 1 unanswered\) · 2 faults · 1 violation$/,
    );

    // One lane per node, labelled, top to bottom in the history's order.
    const lanes = page.locator('g.lane[data-lane-kind="node"]');
    expect(await lanes.count()).toBe(3);
    expect(await lanes.locator('.lane-label').allTextContents()).toEqual(FIXTURE.nodes);
    const laneTops = await Promise.all(
      FIXTURE.nodes.map(async (n) => (await page.locator(`g.lane[data-lane="${n}"] .lane-label`).boundingBox())?.y ?? Number.NaN),
    );
    expect([...laneTops].sort((a, b) => a - b)).toEqual(laneTops);

    // Each lane's bars read e<epoch>; leadership moves node-1 → node-2 → node-3 left to right.
    const bar = (node: string, epoch: number) => page.locator(`g.lane[data-lane="${node}"] [data-kind="lease"][data-epoch="${epoch}"]`);
    expect(await bar('node-2', 1).locator('text').textContent()).toBe('e1');
    expect(await bar('node-3', 2).locator('text').textContent()).toBe('e2');
    const boxes = await Promise.all([bar('node-1', 0).first(), bar('node-2', 1), bar('node-3', 2)].map((b) => b.locator('rect').first().boundingBox()));
    const [b1, b2, b3] = boxes.map((b) => b ?? { x: Number.NaN, y: 0, width: 0, height: 0 });
    expect(b2!.x).toBeGreaterThan(b1!.x + b1!.width);
    expect(b3!.x).toBeGreaterThan(b2!.x + b2!.width);

    // The term whose epoch went backwards is the red one, and says so.
    const backwards = page.locator('[data-kind="lease"].backwards');
    expect(await backwards.count()).toBe(1);
    expect(await backwards.getAttribute('data-lane')).toBe('node-1');
    expect(await backwards.locator('text').textContent()).toMatch(/^⚠ e0\b.*e2/);
    // The node test project has no DOM types; the browser's getComputedStyle is reached through globalThis.
    const fill = await backwards
      .locator('rect')
      .evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { fill: string } }).getComputedStyle(el).fill);
    expect(fill).toBe('rgb(220, 38, 38)');
    expect(await backwards.locator('title').textContent()).toContain('EPOCH WENT BACKWARDS: the row had epoch 2 before');

    // The kill shows on node-1's own lifetime strip.
    expect(await page.locator('g.lane[data-lane="node-1"] .proc.killed').count()).toBe(1);

    // Faults: a band each, labelled with kind and target, reaching down through the lanes.
    const faults = page.locator('[data-kind="fault"]');
    expect(await faults.count()).toBe(FIXTURE.faults);
    expect(await faults.locator('.chip-label').allTextContents()).toEqual(['kill-leader node-1', 'store-blackhole node-2→store']);
    const band = await faults.first().locator('.band').boundingBox();
    const lastLane = await page.locator('g.lane[data-lane="node-3"] .lane-label').boundingBox();
    expect(band!.y + band!.height).toBeGreaterThan(lastLane!.y + lastLane!.height);
    expect(await faults.first().locator('title').textContent()).toBe('kill-leader → node-1: 20.0 s – 26.0 s (6 s) — SIGKILL; restarted at 26 s');
    expect(await page.locator('[data-kind="legend-fault"]').allInnerTexts()).toEqual(['kill-leader', 'store-blackhole']);
    expect(await Promise.all((await page.locator('[data-kind="phase"]').all()).map((p) => p.getAttribute('data-phase')))).toEqual([
      'faults',
      'healing',
      'quiet',
    ]);

    // Marks.
    expect(await page.locator('.mark.promotion').count()).toBe(FIXTURE.promotions);
    expect(await page.locator('.mark.rollback').count()).toBe(FIXTURE.rollbacks);
    expect(await page.locator('.mark.item.done').count()).toBe(FIXTURE.items - FIXTURE.failedItems.length);
    expect(await page.locator('.mark.item.failed').count()).toBe(FIXTURE.failedItems.length);
    expect(await page.locator('.mark.op.unknown title').textContent()).toMatch(
      /^op \d+ read\.rollout checkout-v2 by reader-nginx via nginx: unknown · 21\.5 s – 23\.5 s · status 504/,
    );
    expect(await page.locator('.mark.op.failed').count()).toBe(FIXTURE.failedOps);
    expect(await page.locator('.mark.rollback title').textContent()).toBe(
      'search-v5 attempt 1 stage 0: active → rolled_back at 42.0 s by node-3 at epoch 2 (seq 7)',
    );

    // The violation: a red mark at its time, its message in the tooltip, and the list under the picture.
    const mark = page.locator('.mark.violation');
    expect(await mark.count()).toBe(1);
    expect(await mark.locator('title').textContent()).toMatch(
      /^lease-epoch-monotonic \(safety\) at 51\.0 s: promotion_leader went back from epoch 2 to epoch 0/,
    );
    const markBox = await mark.locator('circle').boundingBox();
    const backwardsBox = await backwards.locator('rect').boundingBox();
    expect(Math.abs(markBox!.x + markBox!.width / 2 - backwardsBox!.x)).toBeLessThan(3);
    const listed = page.locator('#violations > li');
    expect(await listed.count()).toBe(1);
    expect(await listed.locator('.head').innerText()).toMatch(/^lease-epoch-monotonic \(safety\)\s*at 51\.0 s$/);
    expect(await listed.locator('.evidence li').allInnerTexts()).toEqual(violations[0]!.evidence);

    // Pointing at a moment names the leader and the faults then.
    const b = b2!;
    await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2);
    expect(await page.locator('#readout').innerText()).toMatch(/^\d+\.\d s · leader: node-2 \(epoch 1\) · faults: none$/);
    const chip = await faults.first().locator('.chip').boundingBox();
    await page.mouse.move(chip!.x + chip!.width / 2, chip!.y + chip!.height / 2);
    expect(await page.locator('#readout').innerText()).toMatch(/^2\d\.\d s · leader: (node-1 \(epoch 0\)|none) · faults: kill-leader → node-1$/);
    await page.mouse.move(5, 5);

    expect(requests).toEqual([]);
    await page.screenshot({ path: resolve(shots, 'chaos-timeline.png'), fullPage: true });
    await page.close();
  }, 60_000);

  it('shows hostile names as text and runs none of them', async () => {
    const { history, violations } = fixtureHistory();
    const evil = '<img src=x onerror="window.__owned=1">';
    const hostile = {
      ...history,
      nodes: [evil, ...history.nodes.slice(1)],
      store: { ...history.store, leaseChanges: history.store.leaseChanges.map((c) => (c.holder === 'node-1' ? { ...c, holder: evil } : c)) },
    };
    const { page, requests } = await open(
      renderTimeline(hostile, [{ ...violations[0]!, message: `<script>window.__owned=2</script>` }]),
      'chaos-timeline-hostile',
    );
    expect(await page.evaluate(() => (globalThis as { __owned?: number }).__owned)).toBeUndefined();
    expect(await page.locator('g.lane[data-lane-kind="node"] .label > title').first().textContent()).toBe(`${evil}: led 32 s · 2 terms`);
    expect(await page.locator('#violations .message').innerText()).toBe('<script>window.__owned=2</script>');
    expect(await page.locator('img').count()).toBe(0);
    expect(requests).toEqual([]);
    await page.close();
  }, 30_000);
});
