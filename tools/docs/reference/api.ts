import { cell, code, GENERATED, page, table, text } from './markdown.js';
import { fieldTable, fields, typeOf, type RefLink, type Schema } from './schema.js';

/** The parts of an OpenAPI 3.1 document the page reads (openapi.json, written by `npm run openapi`). */
interface Parameter {
  readonly name: string;
  readonly in: string;
  readonly required?: boolean;
  readonly description?: string;
  readonly schema?: Schema;
}
interface Content {
  readonly schema?: Schema;
}
interface Operation {
  readonly operationId: string;
  readonly summary?: string;
  readonly description?: string;
  readonly tags?: readonly string[];
  readonly security?: readonly Record<string, readonly string[]>[];
  readonly parameters?: readonly Parameter[];
  readonly requestBody?: { readonly required?: boolean; readonly description?: string; readonly content?: Record<string, Content> };
  readonly responses: Record<string, { readonly description?: string; readonly content?: Record<string, Content>; readonly headers?: Record<string, unknown> }>;
  readonly 'x-scope'?: string;
  readonly 'x-scope-when'?: Record<string, string>;
  readonly 'x-node-only'?: boolean;
}
export interface OpenApiDocument {
  readonly info: { readonly title: string; readonly version: string; readonly description?: string };
  readonly tags?: readonly { readonly name: string; readonly description?: string }[];
  readonly paths: Record<string, Record<string, Operation>>;
  readonly components?: {
    readonly schemas?: Record<string, Schema>;
    readonly securitySchemes?: Record<string, { readonly type: string; readonly scheme?: string; readonly description?: string }>;
  };
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options'];

/** Every operation of the document, in its order: method, path and the operation. */
export function operations(doc: OpenApiDocument): { method: string; path: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
}

/** A component schema's anchor: `#schema-rollout`. */
const schemaAnchor = (name: string) => `schema-${name.toLowerCase()}`;
const refLink: RefLink = (ref) => {
  const name = ref.split('/').pop()!;
  return ref.startsWith('#/components/schemas/') ? `[${name}](#${schemaAnchor(name)})` : code(name);
};

function bodyBlock(content: Record<string, Content> | undefined): string {
  if (!content || !Object.keys(content).length) return 'No body.';
  return Object.entries(content)
    .map(([type, c]) => {
      const s = c.schema;
      if (!s) return `${code(type)}.`;
      const rows = fields(s);
      return rows.length ? `${code(type)}: ${typeOf(s, refLink)}\n\n${fieldTable(rows, refLink)}` : `${code(type)}: ${typeOf(s, refLink)}`;
    })
    .join('\n\n');
}

function responseSummary(content: Record<string, Content> | undefined): string {
  if (!content || !Object.keys(content).length) return '';
  return Object.entries(content)
    .map(([type, c]) => {
      if (!c.schema) return code(type);
      const s = c.schema;
      const keys = s.properties ? Object.keys(s.properties) : [];
      const shape = keys.length ? `object: ${keys.map(code).join(', ')}` : typeOf(s, refLink);
      return `${code(type)} ${shape}`;
    })
    .join('; ');
}

function operationBlock(method: string, path: string, op: Operation): string {
  const scope = op['x-scope'];
  const security = (op.security ?? [])
    .flatMap((req) => Object.entries(req).map(([name, scopes]) => `${code(name)}${scopes.length ? ` (${scopes.map(code).join(', ')})` : ''}`))
    .join(' or ');
  const when = Object.entries(op['x-scope-when'] ?? {}).map(([s, why]) => `scope ${code(s)} when ${text(why)}`);
  const params = op.parameters ?? [];
  return page([
    `### ${op.operationId} {#${op.operationId}}`,
    `${code(`${method} ${path}`)}${op.summary ? `: ${text(op.summary)}` : ''}`,
    op.description && text(op.description),
    [
      `- Scope: ${scope ? code(scope) : 'none (public)'}${when.length ? `; ${when.join('; ')}` : ''}`,
      `- Security: ${security || 'none'}`,
      `- Served by: ${op['x-node-only'] ? 'a node only (`rollout serve`, `rollout start`), not the deployed API' : 'a node and the deployed API'}`,
      ...(op.tags?.length ? [`- Tags: ${op.tags.map(code).join(', ')}`] : []),
    ].join('\n'),
    params.length
      ? `**Parameters**\n\n${table(
          ['Name', 'In', 'Required', 'Type', 'Description'],
          params.map((p) => [code(p.name), p.in, p.required ? 'yes' : '', typeOf(p.schema, refLink), cell(p.description ?? p.schema?.description ?? '')]),
        )}`
      : '',
    op.requestBody ? `**Request body** (${op.requestBody.required ? 'required' : 'optional'})\n\n${bodyBlock(op.requestBody.content)}` : '',
    `**Responses**\n\n${table(
      ['Status', 'Description', 'Body'],
      Object.entries(op.responses).map(([status, r]) => [code(status), cell(r.description ?? ''), responseSummary(r.content)]),
    )}`,
  ]).trimEnd();
}

/** The HTTP API reference page, from the OpenAPI document. */
export function apiReference(doc: OpenApiDocument): string {
  const ops = operations(doc);
  const tags = doc.tags?.map((t) => t.name) ?? [];
  const byTag = new Map<string, typeof ops>();
  for (const o of ops) {
    const tag = o.op.tags?.[0] ?? 'other';
    if (!tags.includes(tag)) tags.push(tag);
    byTag.set(tag, [...(byTag.get(tag) ?? []), o]);
  }
  const schemes = Object.entries(doc.components?.securitySchemes ?? {});
  const schemas = Object.entries(doc.components?.schemas ?? {});
  return page([
    '# HTTP API reference',
    GENERATED('openapi.json'),
    `${text(doc.info.title)} ${code(doc.info.version)}. ${text(doc.info.description ?? '')}`,
    `The OpenAPI document itself is ${code('openapi.json')} in the package (${code('GET /openapi.json')} on a node); this page is generated from it. ${ops.length} operations.`,
    '## Operations',
    table(
      ['Operation', 'Method and path', 'Scope', 'Summary'],
      ops.map(({ method, path, op }) => [
        `[${op.operationId}](#${op.operationId})`,
        code(`${method} ${path}`),
        op['x-scope'] ? code(op['x-scope']) : '',
        cell(op.summary ?? ''),
      ]),
    ),
    schemes.length > 0 && '## Security schemes',
    schemes.length > 0 &&
      table(
        ['Scheme', 'Type', 'Description'],
        schemes.map(([name, s]) => [code(name), `${s.type}${s.scheme ? ` (${s.scheme})` : ''}`, cell(s.description ?? '')]),
      ),
    ...tags.flatMap((tag) => {
      const list = byTag.get(tag);
      if (!list) return [];
      const description = doc.tags?.find((t) => t.name === tag)?.description;
      return [
        `## ${tag}`,
        description ? text(description[0]!.toUpperCase() + description.slice(1)) + '.' : '',
        ...list.map((o) => operationBlock(o.method, o.path, o.op)),
      ];
    }),
    schemas.length > 0 && '## Schemas',
    ...schemas.map(([name, s]) => {
      const rows = fields(s);
      return page([
        `### ${name} {#${schemaAnchor(name)}}`,
        s.description && text(s.description),
        rows.length ? fieldTable(rows, refLink) : typeOf(s, refLink),
      ]).trimEnd();
    }),
  ]);
}
