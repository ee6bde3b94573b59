import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokenLinks } from '../support/linkinator.js';

/**
 * The docs site as a reader gets it: built with `vitepress build docs`
 * (offline), every internal link and #anchor of the built HTML resolving
 * (linkinator over a local static server), and three pages opened in
 * Debian's Chromium with their headings found.
 */
const root = resolve(import.meta.dirname, '../..');
const dist = join(root, 'docs/.vitepress/dist');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** The client package's README: linked from the docs, kept beside its package, not a page of the site. */
const OUTSIDE_THE_SITE = [/\/packages\/client\/README(\.html)?$/];

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.woff2': 'font/woff2',
};

/** A static server over `dir`: `/a/b` is `a/b`, `a/b.html` or `a/b/index.html`, as a host serving VitePress's output would answer. */
function serve(dir: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    const candidates = [path, `${path}.html`, join(path, 'index.html')].map((p) => join(dir, p));
    const file = candidates.find((f) => f.startsWith(dir) && existsSync(f) && statSync(f).isFile());
    if (!file) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` })));
}

function build(): Promise<{ code: number; output: string }> {
  return new Promise((done) => {
    const child = spawn(join(root, 'node_modules/.bin/vitepress'), ['build', 'docs'], { cwd: root, env: { ...process.env, CI: '1' } });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('exit', (code) => done({ code: code ?? 1, output }));
  });
}

let site: { server: Server; url: string };
let built: { code: number; output: string };

beforeAll(async () => {
  rmSync(dist, { recursive: true, force: true });
  built = await build();
  site = await serve(dist);
}, 600_000);

afterAll(async () => {
  await new Promise((done) => site?.server.close(done));
});

describe('docs site', () => {
  it('builds with vitepress build docs', () => {
    expect(built.code, built.output).toBe(0);
    for (const page of ['index.html', 'reference/api.html', 'guides/prometheus.html', 'concepts/leases-and-fencing.html', '404.html'])
      expect(existsSync(join(dist, page)), page).toBe(true);
  });

  it('has no broken internal link or anchor (linkinator over the built site)', { timeout: 600_000 }, async () => {
    const { checked, broken } = await brokenLinks(site.url, OUTSIDE_THE_SITE);
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(40);
  });

  it('the link check finds a missing page and a missing anchor', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(root, 'test-results', 'links-'));
    const bad = await serve(dir);
    try {
      writeFileSync(join(dir, 'index.html'), '<h1 id="top">t</h1><a href="/gone.html">gone</a> <a href="/other.html#nowhere">anchor</a> <a href="#top">ok</a>');
      writeFileSync(join(dir, 'other.html'), '<h1 id="here">o</h1>');
      const { broken } = await brokenLinks(bad.url);
      expect(broken.map((b) => new URL(b.url).pathname + new URL(b.url).hash).sort()).toEqual(['/gone.html', '/other.html#nowhere']);
    } finally {
      await new Promise((done) => bad.server.close(done));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('in Chromium', () => {
    let browser: Browser;
    beforeAll(async () => {
      mkdirSync(join(root, 'test-results'), { recursive: true });
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    }, 120_000);
    afterAll(async () => {
      await browser?.close();
    });

    it('opens the home page, the API reference and a guide, and finds their headings', { timeout: 180_000 }, async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      const offSite: string[] = [];
      page.on('request', (r) => {
        if (!r.url().startsWith(site.url) && !r.url().startsWith('data:')) offSite.push(r.url());
      });
      for (const [path, heading, shot] of [
        ['', 'rollout control plane', 'docs-home'],
        ['reference/api.html', 'HTTP API reference', 'docs-api'],
        ['guides/prometheus.html', 'Gate a rollout on Prometheus', 'docs-guide'],
      ] as const) {
        await page.goto(site.url + path);
        const h1 = page.locator('.vp-doc h1').first();
        await h1.waitFor({ timeout: 60_000 });
        expect((await h1.innerText()).replace(/\u200b/g, '').trim()).toBe(heading);
        // The sidebar is there, with every section a reader looks in.
        for (const section of ['Getting started', 'Concepts', 'Guides', 'Operating', 'Reference', 'Development'])
          expect(await page.locator('.VPSidebar').getByText(section, { exact: true }).count(), `${path}: ${section}`).toBeGreaterThan(0);
        await page.screenshot({ path: join(root, 'test-results', `${shot}.png`) });
      }
      // A guide's own subheading links are anchors on the page.
      expect(await page.locator('.vp-doc a[href*="gates.html#gates-read-from-where-your-metrics-live-providers"]').count()).toBeGreaterThan(0);
      expect(offSite).toEqual([]);
      await page.close();
    });
  });
});
