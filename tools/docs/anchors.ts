import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * The docs' pages and the anchors VitePress gives their headings, so that a
 * citation `docs/<page>.md#<anchor>` (in a comment, in readme-headings.json)
 * can be checked without building the site. The slug rule is VitePress's own
 * (@mdit-vue/shared's slugify, bundled in vitepress and not exported), copied;
 * a unit test holds it to the ids VitePress's renderer gives every heading.
 */
const root = resolve(import.meta.dirname, '../..');

// eslint-disable-next-line no-control-regex -- VitePress's rule drops control characters from a slug
const rControl = /[\u0000-\u001f]/g;
const rSpecial = /[\s~`!@#$%^&*()\-_+=[\]{}|\\;:"'“”‘’<>,.?/]+/g;
const rCombining = /[\u0300-\u036F]/g;

export const slugify = (str: string): string =>
  str
    .normalize('NFKD')
    .replace(rCombining, '')
    .replace(rControl, '')
    .replace(rSpecial, '-')
    .replace(/-{2,}/g, '-')
    .replace(/^-+|-+$/g, '')
    .replace(/^(\d)/, '_$1')
    .toLowerCase();

/** Every Markdown page of the site, as `docs/…` paths (the build's output and cache are not pages). */
export function docsPages(dir = join(root, 'docs')): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.name === '.vitepress' ? [] : e.isDirectory() ? docsPages(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : []))
    .map((p) => (p.startsWith(root) ? relative(root, p) : p))
    .sort();
}

export interface Heading {
  readonly level: number;
  /** As written, Markdown included. */
  readonly source: string;
  /** As rendered: code spans, emphasis and links reduced to their text. */
  readonly text: string;
  /** The id VitePress gives it: the slug, with `-1`, `-2` … for repeats on the page. */
  readonly anchor: string;
  readonly line: number;
}

/** A heading's text as the renderer sees it (what the slug is made from). */
export const headingText = (source: string): string =>
  source
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .replace(/\*\*|__/g, '')
    .trim();

/** The ATX headings of a Markdown text, outside fenced code. */
export function headingsOf(markdown: string): Heading[] {
  const out: Heading[] = [];
  const seen = new Map<string, number>();
  let fence = false;
  markdown.split('\n').forEach((line, i) => {
    if (/^(```|~~~)/.test(line)) fence = !fence;
    const m = fence ? null : /^(#{1,6}) (.*?)\s*$/.exec(line);
    if (!m) return;
    // `## Title {#id}`: VitePress's custom anchor, taken as written (generated pages name operations by id).
    const custom = /^(.*?)\s*\{#([^}\s]+)\}$/.exec(m[2]!);
    const text = headingText(custom ? custom[1]! : m[2]!);
    if (custom) {
      out.push({ level: m[1]!.length, source: m[2]!, text, anchor: custom[2]!, line: i + 1 });
      return;
    }
    const slug = slugify(text);
    const n = seen.get(slug);
    seen.set(slug, (n ?? -1) + 1);
    out.push({ level: m[1]!.length, source: m[2]!, text, anchor: n === undefined ? slug : `${slug}-${n + 1}`, line: i + 1 });
  });
  return out;
}

/** The anchors of a page: its headings' ids and any explicit `id="…"`. */
export function anchorsOf(page: string): Set<string> {
  const text = readFileSync(join(root, page), 'utf8');
  const ids = [...text.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1]!);
  return new Set([...headingsOf(text).map((h) => h.anchor), ...ids]);
}

/** `docs/<page>.md` or `docs/<page>.md#<anchor>`, as source comments cite the docs. */
const CITATION = /\bdocs\/[\w./-]+?\.md(?:#[\w-]+)?/g;

export const citationsIn = (text: string): string[] => [...text.matchAll(CITATION)].map((m) => m[0]);

/** Why a citation does not resolve (no such page, or no such heading on it), or null when it does. */
export function citationProblem(citation: string): string | null {
  const [page, anchor] = citation.split('#') as [string, string | undefined];
  if (!docsPages().includes(page)) return `${citation}: no page ${page}`;
  if (anchor !== undefined && !anchorsOf(page).has(anchor)) return `${citation}: no heading with anchor #${anchor} on ${page}`;
  return null;
}
