import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import ts from 'typescript';

/** Read straight from the TypeScript sources (the compiler's parser, no type checking): doc comments zod and JSON Schema never see. */
export const root = resolve(import.meta.dirname, '../../..');

function parse(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(resolve(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
}

/** The text of the `/** … *\/` comments before a node, without their stars, as one paragraph. */
function docOf(node: ts.Node, source: ts.SourceFile): string {
  const ranges = ts.getLeadingCommentRanges(source.text, node.getFullStart()) ?? [];
  return ranges
    .map((r) => source.text.slice(r.pos, r.end))
    .filter((c) => c.startsWith('/**'))
    .map((c) =>
      c
        .replace(/^\/\*\*/, '')
        .replace(/\*\/$/, '')
        .split('\n')
        .map((l) => l.replace(/^\s*\* ?/, '').trim())
        .filter((l) => !l.startsWith('@'))
        .join(' ')
        .trim(),
    )
    .join(' ')
    .replace(/\s+/g, ' ');
}

/** `@default` of a doc comment, if it has one. */
function defaultTag(node: ts.Node): string | undefined {
  for (const tag of ts.getJSDocTags(node)) if (tag.tagName.text === 'default') return ts.getTextOfJSDocComment(tag.comment)?.trim();
  return undefined;
}

const nameOf = (n: ts.PropertyName): string | undefined => (ts.isIdentifier(n) || ts.isStringLiteral(n) ? n.text : undefined);

/**
 * The doc comments on the properties of the object literals under a variable
 * (a zod `z.object({ … })` and the objects nested in it), by dotted path:
 * `auth.tokensFile`.
 */
export function propertyDocs(file: string, variable: string): Map<string, string> {
  const source = parse(file);
  const out = new Map<string, string>();
  const visit = (node: ts.Node, path: readonly string[]) => {
    if (ts.isPropertyAssignment(node)) {
      const name = nameOf(node.name);
      if (name !== undefined) {
        const here = [...path, name];
        const doc = docOf(node, source);
        if (doc && !out.has(here.join('.'))) out.set(here.join('.'), doc);
        visit(node.initializer, here);
        return;
      }
    }
    ts.forEachChild(node, (child) => visit(child, path));
  };
  for (const statement of source.statements)
    if (ts.isVariableStatement(statement))
      for (const d of statement.declarationList.declarations)
        if (ts.isIdentifier(d.name) && d.name.text === variable && d.initializer) visit(d.initializer, []);
  if (!out.size && !source.text.includes(variable)) throw new Error(`${file}: no ${variable}`);
  return out;
}

export interface Member {
  readonly name: string;
  readonly type: string;
  readonly optional: boolean;
  readonly doc: string;
  /** `@default`, or the doc's own sentence saying the default (`Default: …`, `… by default`). */
  readonly default: string;
}

/** The members of an exported interface, in order. */
export function interfaceMembers(file: string, name: string): Member[] {
  const source = parse(file);
  const decl = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name);
  if (!decl) throw new Error(`${file}: no interface ${name}`);
  return decl.members.filter(ts.isPropertySignature).map((m) => {
    const doc = docOf(m, source);
    return {
      name: nameOf(m.name) ?? m.name.getText(source),
      type: (m.type?.getText(source) ?? 'unknown').replace(/\s+/g, ' '),
      optional: m.questionToken !== undefined,
      doc,
      default: defaultTag(m) ?? defaultSentence(doc),
    };
  });
}

/** What a doc comment says the default is: `(default: …)`, `Default: a new one.`, `None by default: …`, `` `include` (the default) ``. */
export function defaultSentence(doc: string): string {
  const short = (s: string) => s.split(/[:;]| \(/)[0]!.trim();
  const paren = /\(default:? ([^)]*)\)/i.exec(doc);
  if (paren) return paren[1]!.trim();
  const the = /(`[^`]+`) \(the default\)/.exec(doc);
  if (the) return the[1]!;
  const lead = /(?:^|\. )Default(?::| (?=\w))\s*([^.]*)/.exec(doc);
  if (lead) return short(lead[1]!);
  const by = /(?:^|[.:;] )([^.:;]*?) by default\b/i.exec(doc);
  return by ? by[1]!.trim() : '';
}
