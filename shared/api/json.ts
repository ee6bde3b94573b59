/**
 * A request body as JSON, bounded before anything loops over it (DESIGN.md
 * "Trust boundaries"): nesting is counted in one linear pass before the text
 * is parsed, and every string and key is checked for what no field of ours
 * accepts and a store may choke on (NUL, which PostgreSQL text refuses, and
 * lone UTF-16 surrogates, which are not Unicode). Bytes that are not UTF-8
 * are refused where the bytes arrive (the transport), before this.
 */

/** Deeper than any body of ours (a spec is 6 levels deep). */
export const MAX_JSON_DEPTH = 32;

export class JsonBodyError extends Error {
  override readonly name = 'JsonBodyError';
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The nesting depth of JSON text, counted without parsing; stops counting past `limit`. */
function depthOf(text: string, limit: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
      continue;
    }
    if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > max) max = depth;
      if (max > limit) return max;
    } else if (c === 93 || c === 125) depth--;
  }
  return max;
}

/** Why a parsed value holds a string no field accepts, naming where (null: none). */
function badString(value: unknown, path: string, budget: { left: number }): string | null {
  if (--budget.left < 0) return null; // the depth and the body size bound this; the budget is a second stop
  if (typeof value === 'string') {
    if (value.includes('\u0000')) return `${path}: contains a NUL character`;
    if (LONE_SURROGATE.test(value)) return `${path}: contains a lone UTF-16 surrogate (not Unicode text)`;
    return null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const bad = badString(value[i], `${path}.${i}`, budget);
      if (bad) return bad;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const keyBad = badString(k, `${path} key "${k.slice(0, 40)}"`, budget);
      if (keyBad) return keyBad;
      const bad = badString(v, `${path}.${k}`, budget);
      if (bad) return bad;
    }
  }
  return null;
}

/** Parse `text` as a request body; JsonBodyError naming what is wrong otherwise. */
export function parseJsonBody(text: string, maxDepth = MAX_JSON_DEPTH): unknown {
  const depth = depthOf(text, maxDepth);
  if (depth > maxDepth) throw new JsonBodyError(`request body nests deeper than ${maxDepth} levels`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new JsonBodyError(`request body is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const bad = badString(json, 'body', { left: 1_000_000 });
  if (bad) throw new JsonBodyError(bad);
  return json;
}
