import { cell, code } from './markdown.js';

/** A JSON Schema (draft 2020-12, as zod's toJSONSchema writes it), loosely typed: the pages read what is there. */
export interface Schema {
  readonly type?: string | readonly string[];
  readonly $ref?: string;
  readonly const?: unknown;
  readonly enum?: readonly unknown[];
  readonly anyOf?: readonly Schema[];
  readonly oneOf?: readonly Schema[];
  readonly allOf?: readonly Schema[];
  readonly items?: Schema;
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly additionalProperties?: boolean | Schema;
  readonly propertyNames?: Schema;
  readonly default?: unknown;
  readonly description?: string;
  readonly format?: string;
  readonly pattern?: string;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: number;
  readonly exclusiveMaximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
}

/** How a `$ref` is written: a link to where the page describes it. */
export type RefLink = (ref: string) => string;

const plainRef: RefLink = (ref) => code(ref.split('/').pop()!);

/** The type of a value, in words, for a table cell: `string or null`, `array of Rollout`, `one of "a", "b"`. */
export function typeOf(s: Schema | undefined, ref: RefLink = plainRef): string {
  if (s === undefined) return 'any';
  if (s.$ref) return ref(s.$ref);
  if (s.const !== undefined) return code(JSON.stringify(s.const));
  if (s.enum) return `one of ${s.enum.map((v) => code(JSON.stringify(v))).join(', ')}`;
  const union = s.anyOf ?? s.oneOf;
  if (union) return [...new Set(union.map((u) => typeOf(u, ref)))].join(' or ');
  if (s.allOf) return s.allOf.map((u) => typeOf(u, ref)).join(' and ');
  const types = s.type === undefined ? [] : typeof s.type === 'string' ? [s.type] : s.type;
  if (!types.length) return 'any';
  return types
    .map((t) => {
      if (t === 'array') return `array of ${typeOf(s.items, ref)}`;
      if (t === 'object' && !s.properties && s.additionalProperties && typeof s.additionalProperties === 'object')
        return `map of ${typeOf(s.additionalProperties, ref)}`;
      if (t === 'string' && s.format) return `string (${s.format})`;
      return t;
    })
    .join(' or ');
}

/** zod writes a JavaScript safe integer's bounds on every integer: no limit worth stating. */
const SAFE = 9007199254740991;

/** What a value must be beyond its type: bounds, lengths, a pattern. */
export function constraints(s: Schema): string[] {
  const out: string[] = [];
  const bound = (label: string, v: number | undefined) => {
    if (v !== undefined && Math.abs(v) !== SAFE) out.push(`${label} ${v}`);
  };
  bound('≥', s.minimum);
  bound('>', s.exclusiveMinimum);
  bound('≤', s.maximum);
  bound('<', s.exclusiveMaximum);
  if (s.minLength !== undefined) out.push(`length ≥ ${s.minLength}`);
  if (s.maxLength !== undefined) out.push(`length ≤ ${s.maxLength}`);
  if (s.minItems !== undefined) out.push(`items ≥ ${s.minItems}`);
  if (s.maxItems !== undefined) out.push(`items ≤ ${s.maxItems}`);
  if (s.pattern !== undefined) out.push(`pattern ${code(s.pattern)}`);
  if (s.propertyNames?.pattern !== undefined) out.push(`keys match ${code(s.propertyNames.pattern)}`);
  return out;
}

export interface FieldRow {
  /** Dotted, with `[]` for an array's items: `stages[].gates.alarms`. */
  readonly path: string;
  readonly schema: Schema;
  readonly required: boolean;
}

/** Every field of an object schema, nested objects (and arrays of objects) after their parent. */
export function fields(s: Schema, prefix = '', depth = 0): FieldRow[] {
  const out: FieldRow[] = [];
  const required = new Set(s.required ?? []);
  for (const [name, child] of Object.entries(s.properties ?? {})) {
    const path = prefix ? `${prefix}.${name}` : name;
    out.push({ path, schema: child, required: required.has(name) });
    if (depth >= 6) continue;
    const inner = objectOf(child);
    if (inner) out.push(...fields(inner.schema, `${path}${inner.suffix}`, depth + 1));
  }
  return out;
}

/** The object a field holds (itself, an array's items, the one object of a nullable union), if it has properties. */
function objectOf(s: Schema): { schema: Schema; suffix: string } | null {
  if (s.properties) return { schema: s, suffix: '' };
  if (s.items?.properties) return { schema: s.items, suffix: '[]' };
  const objects = (s.anyOf ?? []).filter((u) => u.properties);
  if (objects.length === 1) return { schema: objects[0]!, suffix: '' };
  return null;
}

/** A table of fields: name, type, required, default, constraints and description. */
export function fieldTable(rows: readonly FieldRow[], ref?: RefLink): string {
  const head = ['Field', 'Type', 'Required', 'Default', 'Notes'];
  const body = rows.map((r) => [
    code(r.path),
    typeOf(r.schema, ref),
    r.required ? 'yes' : '',
    r.schema.default !== undefined ? code(JSON.stringify(r.schema.default)) : '',
    describe(r.schema.description ? cell(r.schema.description) : '', constraints(r.schema)),
  ]);
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...body.map((c) => `| ${c.join(' | ')} |`)].join('\n');
}

/** A description, then what the value must be in parentheses. */
export function describe(description: string, limits: readonly string[]): string {
  return [description, limits.length ? `(${limits.join(', ')})` : ''].filter(Boolean).join(' ');
}
