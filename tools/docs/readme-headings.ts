import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { docsPages, headingsOf } from './anchors.js';

/**
 * Where each heading of the README the docs site grew from now lives: the
 * README as it stood at BEFORE (one long file), every heading of level 2 to 4,
 * mapped to the page (and heading) that holds its text now. Written to
 * docs/readme-headings.json; a unit test checks every entry against the pages.
 *
 *   node --import tsx tools/docs/readme-headings.ts
 */
const root = resolve(import.meta.dirname, '../..');
/** The last commit whose README held every section. */
export const BEFORE = 'e1d0f00089756d87dc0a2e59797695162a1be6e4';
export const OUT = 'docs/readme-headings.json';

export interface HeadingMove {
  readonly heading: string;
  readonly level: number;
  readonly page: string;
  readonly anchor: string;
}

export function readmeHeadingMoves(before: string): HeadingMove[] {
  const pages = docsPages().map((page) => ({ page, headings: headingsOf(readFileSync(join(root, page), 'utf8')) }));
  return headingsOf(before)
    .filter((h) => h.level >= 2 && h.level <= 4)
    .map((h) => {
      const found = pages.flatMap(({ page, headings }) => headings.filter((x) => x.text === h.text).map((x) => ({ page, anchor: x.anchor })));
      if (found.length !== 1)
        throw new Error(`README heading "${h.source}" is on ${found.length} pages (${found.map((f) => f.page).join(', ') || 'none'}); want one`);
      return { heading: h.source, level: h.level, page: found[0]!.page, anchor: found[0]!.anchor };
    });
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const before = execFileSync('git', ['show', `${BEFORE}:README.md`], { cwd: root, encoding: 'utf8' });
  const moves = readmeHeadingMoves(before);
  writeFileSync(join(root, OUT), `${JSON.stringify({ from: `README.md at ${BEFORE}`, headings: moves }, null, 2)}\n`);
  console.log(`${OUT}: ${moves.length} headings`);
}
