/**
 * EventBridge event-pattern matching, as the EventBridge user guide
 * ("Creating event patterns", "Content filtering in event patterns", "Arrays
 * in event patterns") and AWS's Event Ruler, the engine those pages
 * describe, define it. The local runtime routes its bus with it (a rule that
 * deploys is the rule that runs), and so does the tests' EventBridge stand-in:
 *  - every field named in the pattern must match; fields the pattern does not name are ignored;
 *  - conditions apply to leaf values only: a field whose value is an object (or an array
 *    holding no scalars) has no value to match, and counts as absent for `exists`;
 *  - a leaf is an array of conditions, any of which may match; an array in the event
 *    matches when any of its elements does (anything-but included: one element that is
 *    not excluded is enough);
 *  - an array of objects is "crushed out" of the path: a nested pattern matches when
 *    one element matches all of it (array-consistent, as Event Ruler's JSON matching);
 *  - conditions: exact values (string, number, null, ""), prefix, suffix (both also with
 *    equals-ignore-case), anything-but (a value, a list, prefix, suffix, equals-ignore-case,
 *    wildcard), numeric ranges, exists, equals-ignore-case, wildcard, cidr (IPv4 and IPv6);
 *  - `$or` takes a list of sub-patterns, any of which may match.
 * test/infra/pattern-differential.test.ts holds it against moto's matcher and
 * writes down where, and why, they differ.
 */
import { own } from '../own.js';
export type Pattern = Record<string, unknown>;

export function matches(pattern: Pattern, event: unknown): boolean {
  return matchObject(pattern, event);
}

function matchObject(pattern: Pattern, value: unknown): boolean {
  if (Array.isArray(value)) {
    const elements = value.flat(Infinity).filter(isObject);
    if (elements.length > 0) return elements.some((e) => matchFields(pattern, e));
    value = undefined; // no object to descend into: every field below is absent
  }
  return matchFields(pattern, value);
}

function matchFields(pattern: Pattern, value: unknown): boolean {
  for (const [key, rule] of Object.entries(pattern)) {
    if (key === '$or') {
      if (!Array.isArray(rule) || !rule.some((p) => matchObject(p as Pattern, value))) return false;
      continue;
    }
    const field = isObject(value) ? own(value, key) : undefined;
    if (Array.isArray(rule)) {
      if (!matchLeaf(rule, leafValues(field))) return false;
    } else if (isObject(rule)) {
      if (!matchObject(rule, field)) return false;
    } else {
      throw new Error(`invalid event pattern at "${key}": a leaf must be an array of conditions`);
    }
  }
  return true;
}

/** The scalar values a field holds; none for an absent field, an object, or an array of objects. */
function leafValues(field: unknown): unknown[] {
  if (field === undefined || isObject(field)) return [];
  return Array.isArray(field) ? field.flat(Infinity).filter((v) => !isObject(v)) : [field];
}

function matchLeaf(conditions: unknown[], values: unknown[]): boolean {
  return conditions.some((c) => (isObject(c) && 'exists' in c ? c.exists === values.length > 0 : values.some((v) => matchCondition(c, v))));
}

function matchCondition(c: unknown, v: unknown): boolean {
  if (!isObject(c)) return c === v; // exact: string, number, boolean, null
  const [op, arg] = Object.entries(c)[0] ?? [];
  switch (op) {
    case 'prefix':
      return typeof v === 'string' && (isObject(arg) ? v.toLowerCase().startsWith(String(arg['equals-ignore-case']).toLowerCase()) : v.startsWith(String(arg)));
    case 'suffix':
      return typeof v === 'string' && (isObject(arg) ? v.toLowerCase().endsWith(String(arg['equals-ignore-case']).toLowerCase()) : v.endsWith(String(arg)));
    case 'equals-ignore-case':
      return typeof v === 'string' && v.toLowerCase() === String(arg).toLowerCase();
    case 'wildcard':
      return typeof v === 'string' && wildcard(String(arg)).test(v);
    case 'numeric':
      return typeof v === 'number' && numeric(arg as unknown[], v);
    case 'cidr':
      return typeof v === 'string' && inCidr(String(arg), v);
    case 'anything-but':
      return !anythingButMatches(arg, v);
    default:
      throw new Error(`unsupported event pattern condition: ${JSON.stringify(c)}`);
  }
}

function anythingButMatches(arg: unknown, v: unknown): boolean {
  if (Array.isArray(arg)) return arg.some((x) => x === v);
  if (isObject(arg)) {
    const [op, inner] = Object.entries(arg)[0] ?? [];
    if (op === 'equals-ignore-case') return typeof v === 'string' && [inner].flat().some((x) => String(x).toLowerCase() === v.toLowerCase());
    return matchCondition({ [op!]: inner }, v);
  }
  return arg === v;
}

function numeric(spec: unknown[], v: number): boolean {
  for (let i = 0; i < spec.length; i += 2) {
    const op = spec[i];
    const bound = Number(spec[i + 1]);
    const ok = op === '=' ? v === bound : op === '<' ? v < bound : op === '<=' ? v <= bound : op === '>' ? v > bound : op === '>=' ? v >= bound : null;
    if (ok === null) throw new Error(`numeric: unknown operator ${String(op)}`);
    if (!ok) return false;
  }
  return true;
}

function wildcard(p: string): RegExp {
  let re = '';
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    if (ch === '\\' && i + 1 < p.length) re += escape(p[++i]!);
    else if (ch === '*') re += '.*';
    else re += escape(ch);
  }
  return new RegExp(`^${re}$`, 's');
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

function inCidr(cidr: string, ip: string): boolean {
  const [net, bitsText] = cidr.split('/');
  const a = ipBits(net ?? '');
  const b = ipBits(ip);
  if (!a || !b || a.length !== b.length) return false;
  const bits = bitsText === undefined ? a.length : Number(bitsText);
  return a.slice(0, bits) === b.slice(0, bits);
}

function ipBits(ip: string): string | null {
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(ip))
    return ip
      .split('.')
      .map((o) => Number(o).toString(2).padStart(8, '0'))
      .join('');
  if (!ip.includes(':')) return null;
  const [head, tail] = ip.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) return null;
  return groups
    .map((g) =>
      parseInt(g || '0', 16)
        .toString(2)
        .padStart(16, '0'),
    )
    .join('');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
