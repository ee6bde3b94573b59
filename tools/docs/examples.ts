import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { docsPages } from './anchors.js';

/**
 * The docs' code blocks and the examples they come from. A ```ts (or js)
 * block in a doc is preceded by `<!-- example: examples/FILE#REGION … -->`
 * and is those regions, joined by a blank line; a region is what lies
 * between `// #region NAME` and `// #endregion NAME` in the file (VitePress
 * reads the same markers), less its common indent. The examples compile
 * against the sources (examples/tsconfig.json) and the packed package.
 */
const root = resolve(import.meta.dirname, '../..');

export interface DocBlock {
  readonly doc: string;
  readonly line: number;
  readonly lang: string;
  readonly text: string;
  /** `examples/FILE#REGION`, as the marker names them; null when there is no marker. */
  readonly sources: readonly string[] | null;
}

const FENCE = /^```(\w*)\n([\s\S]*?)^```$/gm;
const MARKER = /<!-- example: ([^>]*?) -->\n$/;
export const CODE_LANGS = new Set(['ts', 'typescript', 'js', 'mjs', 'javascript']);

export function codeBlocks(doc: string): DocBlock[] {
  const text = readFileSync(join(root, doc), 'utf8');
  const out: DocBlock[] = [];
  for (const m of text.matchAll(FENCE)) {
    if (!CODE_LANGS.has(m[1]!)) continue;
    const before = text.slice(0, m.index);
    const marker = MARKER.exec(before);
    out.push({ doc, line: before.split('\n').length, lang: m[1]!, text: m[2]!, sources: marker ? marker[1]!.trim().split(/\s+/) : null });
  }
  return out;
}

/** A region of an example file, dedented; throws naming what is missing. */
export function region(source: string): string {
  const [file, name] = source.split('#');
  if (!file || !name) throw new Error(`${source}: name a file and a region (examples/FILE#REGION)`);
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === `// #region ${name}`);
  const end = lines.findIndex((l, i) => i > start && (l.trim() === `// #endregion ${name}` || l.trim() === '// #endregion'));
  if (start < 0 || end < 0) throw new Error(`${source}: no region "${name}" in ${file} (// #region ${name} … // #endregion ${name})`);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
  return body.map((l) => l.slice(indent)).join('\n') + '\n';
}

/** What a block must read: its regions, joined by a blank line. */
export const expected = (sources: readonly string[]): string => sources.map(region).join('\n');

/** Rewrites each marked block of `doc` to read as its regions; returns how many changed. */
export function syncDoc(doc: string): number {
  const path = join(root, doc);
  let text = readFileSync(path, 'utf8');
  let changed = 0;
  for (const b of codeBlocks(doc).reverse()) {
    if (!b.sources) continue;
    const want = expected(b.sources);
    if (want === b.text) continue;
    const start = text.split('\n').slice(0, b.line).join('\n').length + 1;
    text = text.slice(0, start) + want + text.slice(start + b.text.length);
    changed++;
  }
  if (changed) writeFileSync(path, text);
  return changed;
}

/** The docs whose blocks `npm run docs:examples` rewrites by default: README, the site's pages, the client package's README. */
export const defaultDocs = (): string[] => ['README.md', 'packages/client/README.md', ...docsPages()];

// npm run docs:examples [docs…]: the docs' marked blocks rewritten from the examples (default: every doc).
if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  for (const doc of process.argv.slice(2).length ? process.argv.slice(2) : defaultDocs()) console.log(`${doc}: ${syncDoc(doc)} block(s) rewritten`);
}
