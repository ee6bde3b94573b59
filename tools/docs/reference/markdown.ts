/**
 * Markdown the docs site (VitePress) renders as written: text that would be
 * read as HTML (`<id>`) or as a Vue interpolation (`{{ … }}`) is escaped,
 * and a table cell keeps to one line with its pipes escaped.
 */

/**
 * Prose: `<`, `>` and braces as entities, which neither markdown-it nor Vue's
 * template compiler reads as markup; code spans in it (`like this`) stay code.
 */
export function text(s: string): string {
  return s
    .split(/(`[^`\n]+`)/)
    .map((part, i) =>
      i % 2 === 1
        ? part.includes('{{')
          ? `<span v-pre>${part}</span>`
          : part
        : part.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\{/g, '&#123;').replace(/\}/g, '&#125;'),
    )
    .join('');
}

/** Prose in a table cell: one line, its pipes escaped. */
export function cell(s: string): string {
  return text(s)
    .replace(/\|/g, '\\|')
    .replace(/\s*\n\s*/g, ' ');
}

/**
 * Inline code, one line, its pipes escaped (a cell's end). Vue interpolates
 * `{{ … }}` even inside inline code, so such code is wrapped in v-pre.
 */
export function code(s: string): string {
  const one = s.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
  const fence = one.includes('`') ? '``' : '`';
  const pad = one.startsWith('`') || one.endsWith('`') ? ' ' : '';
  const out = `${fence}${pad}${one}${pad}${fence}`;
  return one.includes('{{') ? `<span v-pre>${out}</span>` : out;
}

export function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** A page: its blocks separated by blank lines, one newline at the end, never two blank lines in a row. */
export function page(blocks: readonly (string | false | null | undefined)[]): string {
  return `${blocks
    .filter((b): b is string => typeof b === 'string' && b !== '')
    .join('\n\n')
    .replace(/\n{3,}/g, '\n\n')}\n`;
}

export const GENERATED = (source: string, command = 'npm run docs:reference') => `<!-- Generated from ${source} by \`${command}\`; do not edit by hand. -->`;
