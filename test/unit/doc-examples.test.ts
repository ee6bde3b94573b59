/**
 * Code in the docs is the code the examples hold: every TypeScript or
 * JavaScript block in a Markdown file names the example regions it shows
 * and reads exactly as they do. The examples themselves compile against the
 * sources (`npm test`'s typecheck of examples/tsconfig.json) and against the
 * packed package in a CommonJS and an ESM project (test/e2e/package.test.ts).
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeBlocks, defaultDocs, expected, region } from '../../tools/docs/examples.js';

const root = resolve(import.meta.dirname, '../..');
// docs/.vitepress holds the site's config, build and cache: no doc of ours.
const SKIP = new Set(['node_modules', 'dist', 'cdk.out', 'test-results', '.git', '.rollout', 'coverage', '.vitepress']);

function markdown(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    SKIP.has(e.name) ? [] : e.isDirectory() ? markdown(join(dir, e.name)) : e.name.endsWith('.md') ? [relative(root, join(dir, e.name))] : [],
  );
}

describe("the docs' code", () => {
  const docs = markdown(root);
  const blocks = docs.flatMap(codeBlocks);

  it('finds the docs and their blocks', () => {
    expect(docs).toContain('README.md');
    expect(docs).toContain('docs/getting-started/package.md');
    expect(blocks.filter((b) => b.doc === 'README.md').length).toBeGreaterThanOrEqual(1);
    expect(blocks.filter((b) => b.doc.startsWith('docs/')).length).toBeGreaterThanOrEqual(7);
    // `npm run docs:examples` rewrites every doc this test reads.
    expect(new Set(defaultDocs())).toEqual(new Set(docs));
  });

  it('every TypeScript or JavaScript block names the example regions it shows, and reads as they do', () => {
    const wrong = blocks.flatMap((b) => {
      const where = `${b.doc}:${b.line}`;
      if (!b.sources) return [`${where}: no <!-- example: examples/FILE#REGION --> before the block`];
      try {
        return b.text === expected(b.sources) ? [] : [`${where}: differs from ${b.sources.join(' ')} (npm run docs:examples rewrites it)`];
      } catch (err) {
        return [`${where}: ${(err as Error).message}`];
      }
    });
    expect(wrong).toEqual([]);
  });

  it('a block that differs from its region, a missing region and a block with no marker are each found', () => {
    const dir = mkdtempSync(join(root, 'test-results', 'doc-examples-'));
    try {
      mkdirSync(join(dir, 'ex'));
      writeFileSync(join(dir, 'ex/a.ts'), 'x();\n  // #region one\n  const a = 1;\n  // #endregion one\n');
      const rel = relative(root, dir);
      expect(region(`${rel}/ex/a.ts#one`)).toBe('const a = 1;\n');
      expect(() => region(`${rel}/ex/a.ts#two`)).toThrow(/no region "two"/);
      writeFileSync(join(dir, 'doc.md'), `<!-- example: ${rel}/ex/a.ts#one -->\n\`\`\`ts\nconst a = 2;\n\`\`\`\n\n\`\`\`js\nloose();\n\`\`\`\n`);
      const [marked, loose] = codeBlocks(`${rel}/doc.md`);
      expect(marked!.sources).toEqual([`${rel}/ex/a.ts#one`]);
      expect(marked!.text).not.toBe(expected(marked!.sources!));
      expect(loose!.sources).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
