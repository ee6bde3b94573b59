/**
 * The docs site's pages hold what README held, and what cites them resolves:
 * every heading of the old README (docs/readme-headings.json) is on the page
 * it is listed under; every `docs/<page>.md#<anchor>` a source file cites is a
 * page with that heading; every link between pages lands on a heading; and the
 * anchors computed here are the ids VitePress gives the headings.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, resolve } from 'node:path';
import { createMarkdownRenderer } from 'vitepress';
import { describe, expect, it } from 'vitest';
import { anchorsOf, citationProblem, citationsIn, docsPages, headingsOf, slugify } from '../../tools/docs/anchors.js';
import { readmeHeadingMoves, type HeadingMove } from '../../tools/docs/readme-headings.js';

const root = resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** The source files that may cite the docs: code, configuration, scripts. */
const SOURCE_DIRS = ['shared', 'infra', 'functions', 'tools', 'test', 'examples', 'packages', '.ci'];
const SKIP = new Set(['node_modules', 'dist', 'cdk.out', 'test-results']);
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (SKIP.has(e.name)) return [];
    if (e.isDirectory()) return sources(path);
    return /\.(ts|mts|mjs|js|yml|yaml|sh|json)$|^run$/.test(e.name) ? [path] : [];
  });
}

describe('the docs site', () => {
  const pages = docsPages();

  it('has the pages the sidebar and README link, each with one top heading', () => {
    for (const page of ['docs/index.md', 'docs/reference/api.md', 'docs/guides/prometheus.md', 'docs/concepts/leases-and-fencing.md'])
      expect(pages).toContain(page);
    for (const page of pages)
      expect(
        headingsOf(read(page)).filter((h) => h.level === 1),
        page,
      ).toHaveLength(1);
  });

  it('holds every heading of the old README on the page readme-headings.json names', () => {
    const { headings } = JSON.parse(read('docs/readme-headings.json')) as { headings: HeadingMove[] };
    expect(headings.length).toBeGreaterThanOrEqual(56);
    const missing = headings.filter((h) => {
      const found = pages.includes(h.page) ? headingsOf(read(h.page)).find((x) => x.anchor === h.anchor) : undefined;
      return !found || found.source !== h.heading;
    });
    expect(missing.map((h) => `${h.heading} → ${h.page}#${h.anchor}`)).toEqual([]);
  });

  it('maps a README heading that is on no page, or on two, to an error naming it', () => {
    expect(() => readmeHeadingMoves('# t\n\n## A heading no page has\n')).toThrow(/"A heading no page has" is on 0 pages/);
    expect(readmeHeadingMoves('# t\n\n```sh\n## not a heading\n```\n\n## Leases\n')).toEqual([
      { heading: 'Leases', level: 2, page: 'docs/concepts/leases-and-fencing.md', anchor: 'leases' },
    ]);
  });

  it('README is a front door: at most 150 lines, naming `npm test` (CI runs what it names)', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(151);
    expect(readme).toContain('npm test');
    expect(readme).toContain('npm ci && npm start');
  });

  it('every docs/<page>.md#<anchor> a source file cites is a page with that heading', () => {
    const cited = SOURCE_DIRS.flatMap(sources).flatMap((file) => citationsIn(read(file)).map((c) => ({ file, c })));
    expect(cited.length).toBeGreaterThanOrEqual(40);
    expect(cited.flatMap(({ file, c }) => (citationProblem(c) ? [`${file}: ${citationProblem(c)}`] : []))).toEqual([]);
  });

  it('finds a citation of a page that does not exist, and of a heading a page does not have', () => {
    const page = 'docs/' + 'nowhere.md';
    expect(citationsIn(`see ${page}#x.`)).toEqual([`${page}#x`]);
    expect(citationProblem(`${page}#x`)).toMatch(/no page/);
    expect(citationProblem('docs/concepts/leases-and-fencing.md#' + 'no-such-heading')).toMatch(/no heading with anchor #no-such-heading/);
    expect(citationProblem('docs/concepts/leases-and-fencing.md#electors')).toBeNull();
  });

  it('every relative link between pages (and from README) lands on a page and, when it names one, a heading', () => {
    const broken: string[] = [];
    for (const doc of ['README.md', ...pages]) {
      for (const m of read(doc).matchAll(/\]\((\.{0,2}\/?[\w./-]*\.md)?(#[\w-]+)?\)/g)) {
        const [, file, hash] = m;
        if (!file && !hash) continue;
        const target = file ? normalize(join(dirname(doc), file)) : doc;
        if (target.startsWith('packages/')) continue; // the client package's README, beside its package
        if (!target.startsWith('docs/') && target !== 'README.md') broken.push(`${doc}: ${m[0]} leaves the docs`);
        else if (target !== 'README.md' && !pages.includes(target)) broken.push(`${doc}: ${m[0]}: no page ${target}`);
        else if (hash && target !== 'README.md' && !anchorsOf(target).has(hash.slice(1))) broken.push(`${doc}: ${m[0]}: no heading ${hash} on ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("computes the anchors VitePress's renderer gives every heading", { timeout: 120_000 }, async () => {
    const md = await createMarkdownRenderer(join(root, 'docs'), {}, '/');
    for (const page of pages) {
      const env = { path: join(root, page), relativePath: relative(join(root, 'docs'), page), cleanUrls: false };
      const html = md.render(read(page), env);
      const ids = [...html.matchAll(/<h[1-6] id="([^"]+)"/g)].map((m) => decodeURIComponent(m[1]!));
      expect(
        headingsOf(read(page)).map((h) => h.anchor),
        page,
      ).toEqual(ids);
    }
    expect(slugify('Cluster mode: `rollout serve`'.replace(/`/g, ''))).toBe('cluster-mode-rollout-serve');
    expect(slugify('10 million items at 10,000 items/s')).toBe('_10-million-items-at-10-000-items-s');
  });
});
