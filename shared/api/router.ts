import { RegExpRouter } from 'hono/router/reg-exp-router';
import { channel } from 'node:diagnostics_channel';
import type { z } from 'zod';
import { ID_MESSAGE, ID_RULE } from '../ids.js';
import { JsonBodyError, parseJsonBody } from './json.js';
import { own } from '../own.js';
import { HttpError, type ApiResponse, type Caller, type Handler, type Handlers, type Parsed, type RouteDef } from './route.js';

/**
 * The router: matches a request's path to its route (Hono's RegExpRouter,
 * every path in one regular expression), then parses the request against the
 * route's schemas (path parameters, query, body) before the route's handler
 * runs. Every decision about a request (scope, signature, leadership, what a
 * node does after the answer) is made on this match, once.
 */

/** What the router found: the route and its path parameters (decoded), or the methods the path takes (405). */
export type Match<R extends RouteDef = RouteDef> =
  | { readonly route: R; readonly params: Readonly<Record<string, string>> }
  | {
      readonly route: null;
      readonly allowed: readonly string[];
      /** The path would name a route of this family with another last segment (an unknown command): what the family has. */
      readonly family?: { readonly name: string; readonly given: string; readonly members: readonly string[] };
    };

/** A request target that names no path in one spelling: answered 400 with this message. */
export class TargetError extends Error {
  override readonly name = 'TargetError';
}

/*
 * A path has one spelling. Every decision about a request (scope, signature,
 * leadership, what is cached or carried out after a commit) is made on the
 * router's match, and the router matches the path as it was sent; so a
 * spelling that a client, a proxy or URL parsing would read as another path
 * is refused, never normalised here into something the layer in front did not
 * see: an empty segment (a doubled or trailing slash), a dot segment (`.`,
 * `..`, `%2e`…), a character a path does not carry unencoded, a malformed
 * percent-escape, a fragment. A fixed segment spelled otherwise (another case,
 * a needless escape) is simply no route: 404. Parameters are decoded once,
 * here; an id's own rule (ID_RULE) is held by parseInput, before any handler.
 */
const CANONICAL_PATH = /^\/$|^(?:\/(?!\.\.?(?:\/|$))(?:[\w\-.~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+)+$/;
const ENCODED_DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?=\/|$)/i;

function canonical(path: string): boolean {
  return CANONICAL_PATH.test(path) && !(path.includes('%') && ENCODED_DOT_SEGMENT.test(path));
}

/** Why `path` is not in its one spelling (it is not: canonical() said so). */
function whyNotCanonical(path: string): string {
  const shown = JSON.stringify(path.slice(0, 200));
  if (!path.startsWith('/')) return `request target ${shown} is not a path: it must start with /`;
  if (path !== '/' && /\/(?:\/|$)/.test(path))
    return `path ${shown} has an empty segment (a doubled or trailing slash): send each segment once, with no slash at the end`;
  if (ENCODED_DOT_SEGMENT.test(path)) return `path ${shown} has a dot segment (. or ..): send the path it means`;
  const escape = /%(?![0-9A-Fa-f]{2})/.exec(path);
  if (escape) return `path ${shown} has a malformed percent-escape at character ${escape.index + 1}: % must be followed by two hex digits`;
  const bad = /[^\w\-.~!$&'()*+,;=:@/%]/.exec(path)!;
  return `path ${shown} has the character ${JSON.stringify(bad[0])} (code ${bad[0].codePointAt(0)}), which a path carries only percent-encoded`;
}

/**
 * A request target (origin-form: path and query) split into its path, in its
 * one spelling (see above), and its query; TargetError naming what is wrong
 * otherwise. What a transport hands the router and the guard.
 */
export function parseTarget(raw: string): { readonly path: string; readonly query: string } {
  if (raw.includes('#')) throw new TargetError('a request target carries no fragment (#)');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  if (!canonical(path)) throw new TargetError(whyNotCanonical(path));
  return { path, query: q < 0 ? '' : raw.slice(q + 1) };
}

function decodeParam(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new TargetError(`path segment ${JSON.stringify(raw.slice(0, 200))} is not valid percent-encoding (UTF-8 bytes as %XX)`);
  }
}

/**
 * A router over `routes`, for paths in their one spelling: any other
 * spelling throws TargetError (a 400), so what the router matches is what was
 * sent.
 */
export function routerOf<R extends RouteDef>(routes: readonly R[]): (method: string, path: string) => Match<R> {
  const router = new RegExpRouter<R>();
  for (const r of routes) router.add(r.method, r.path.replace(/\{([^}]+)\}/g, ':$1'), r);
  const methods = [...new Set(routes.map((r) => r.method))];
  // Each family's members by last segment, and one of them to find the family by.
  const families = new Map<string, { members: string[]; probe: string }>();
  for (const r of routes) {
    if (!r.family) continue;
    const last = r.path.slice(r.path.lastIndexOf('/') + 1);
    const f = families.get(r.family) ?? { members: [], probe: last };
    f.members.push(last);
    families.set(r.family, f);
  }
  const find = (method: string, path: string): { route: R; params: Record<string, string> } | null => {
    const [found, stash] = router.match(method, path);
    const first = found[0];
    if (!first) return null;
    const params: Record<string, string> = {};
    for (const [name, at] of Object.entries(first[1] as Record<string, number | string>)) params[name] = decodeParam(stash ? stash[at as number]! : String(at));
    return { route: first[0], params };
  };
  const familyOf = (method: string, path: string): { name: string; given: string; members: readonly string[] } | null => {
    const cut = path.lastIndexOf('/');
    if (cut <= 0) return null;
    for (const [name, f] of families) {
      if (find(method, `${path.slice(0, cut)}/${f.probe}`)?.route.family === name) return { name, given: path.slice(cut + 1), members: f.members };
    }
    return null;
  };
  const matchOf = (method: string, path: string): Match<R> => {
    if (!canonical(path)) throw new TargetError(whyNotCanonical(path));
    const m = method.toUpperCase();
    const hit = find(m === 'HEAD' ? 'GET' : m, path);
    if (hit) return hit;
    const allowed = methods.filter((x) => x !== m && find(x, path));
    const family = allowed.length ? null : familyOf(m, path);
    return family ? { route: null, allowed, family } : { route: null, allowed };
  };
  // A match is a pure function of the method and the path: a fleet asking one rollout's assignment
  // sends one path again and again, matched once. Bounded, and short paths only, so a caller
  // sending a new path each time costs a miss, never memory.
  const seen = new Map<string, Match<R>>();
  return (method, path) => {
    if (path.length > MEMO_PATH_CHARS) return matchOf(method, path);
    const key = `${method} ${path}`;
    let match = seen.get(key);
    if (match === undefined) {
      match = matchOf(method, path);
      if ('params' in match) Object.freeze(match.params);
      if (seen.size >= MEMO_ENTRIES) seen.delete(seen.keys().next().value!);
      seen.set(key, Object.freeze(match));
    }
    return match;
  };
}

/** The matches a router keeps, and the longest path it keeps one for. */
const MEMO_ENTRIES = 1_024;
const MEMO_PATH_CHARS = 256;

/** A request that matched no route, refused with what the path takes instead. */
export function unmatched(method: string, path: string, found: Extract<Match, { route: null }>): HttpError {
  if (found.family) return new HttpError(404, `unknown ${found.family.name} ${found.family.given.slice(0, 40)}: one of ${found.family.members.join(', ')}`);
  if (!found.allowed.length) return new HttpError(404, `no route for ${path.slice(0, 200)}`);
  return new HttpError(405, `${method} not allowed on ${path.slice(0, 200)}: use ${found.allowed.join(' or ')}`);
}

// ——— Parsing before the handler ———

/** A request as the router parses it: its matched parameters, the query, the body as sent. */
export interface RawInput {
  readonly params: Readonly<Record<string, string>>;
  readonly query?: URLSearchParams;
  readonly body: string | null;
  readonly caller: Caller;
}

/** How a route's query is read off a URLSearchParams: each field once (the first), or every value (an array field). */
const queryFields = new WeakMap<z.ZodObject, readonly (readonly [string, boolean])[]>();
function fieldsOf(query: z.ZodObject): readonly (readonly [string, boolean])[] {
  let fields = queryFields.get(query);
  if (!fields) {
    fields = Object.entries(query.shape).map(([name, field]) => {
      let def = (field as z.ZodType).def as { type: string; innerType?: z.ZodType };
      while (def.type === 'optional' && def.innerType) def = def.innerType.def;
      return [name, def.type === 'array'] as const;
    });
    queryFields.set(query, fields);
  }
  return fields;
}

/** A query's issue in words: `entity 2: …` for the second value of `entity`. */
function queryIssue(i: z.core.$ZodIssue): string {
  const where = i.path.map((p, k) => (typeof p === 'number' ? ` ${p + 1}` : k === 0 ? String(p) : `.${String(p)}`)).join('');
  return where ? `${where}: ${i.message}` : i.message;
}

/** The body parsed as JSON (bounded: parseJsonBody) and checked by `schema`; HttpError 400 naming what is wrong otherwise. */
export function parseBody<S extends z.ZodType>(schema: S, body: string | null): z.output<S> {
  let json: unknown = {};
  if (body !== null && body.trim() !== '') {
    try {
      json = parseJsonBody(body);
    } catch (err) {
      if (err instanceof JsonBodyError) throw new HttpError(400, err.message);
      throw err;
    }
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success)
    throw new HttpError(400, 'invalid request body', { issues: parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`) });
  return parsed.data;
}

/**
 * The request parsed against `route`'s schemas: each path parameter held to
 * the id rule, the query, the body; HttpError 400 naming the first thing
 * wrong, in that order.
 */
export function parseInput<R extends RouteDef>(route: R, raw: RawInput): Parsed<R> {
  for (const [name, what] of Object.entries(route.params ?? {})) {
    if (!ID_RULE.test(own(raw.params, name) ?? '')) throw new HttpError(400, `${what} in the path: ${ID_MESSAGE}`);
  }
  let query: unknown = {};
  if (route.query) {
    const q = raw.query ?? new URLSearchParams();
    const given: Record<string, unknown> = {};
    for (const [name, many] of fieldsOf(route.query)) {
      if (many) given[name] = q.getAll(name);
      else {
        const v = q.get(name);
        if (v !== null) given[name] = v;
      }
    }
    const parsed = route.query.safeParse(given);
    if (!parsed.success) {
      // The field's own issue before those of its values (a count before a value's length).
      const first = [...parsed.error.issues].sort((a, b) => a.path.length - b.path.length)[0]!;
      throw new HttpError(400, queryIssue(first));
    }
    query = parsed.data;
  }
  const body = route.body ? parseBody(route.body, raw.body) : undefined;
  return { params: raw.params, query, body, caller: raw.caller } as Parsed<R>;
}

/**
 * Each answer given, for whoever observes them (the test harness checks them
 * against the OpenAPI document): published on a diagnostics channel, at no
 * cost while nothing subscribes.
 */
export const ANSWERS_CHANNEL = 'rollout:api.answer';
const answers = channel(ANSWERS_CHANNEL);

/** What is published on ANSWERS_CHANNEL. */
export interface AnswerMessage {
  readonly route: RouteDef;
  readonly res: ApiResponse;
}

export function published(route: RouteDef | null, res: ApiResponse): ApiResponse {
  if (route && answers.hasSubscribers) answers.publish({ route, res } satisfies AnswerMessage);
  return res;
}

/** The handler for `route` in a table of handlers typed by their routes. */
export function handlerOf<Routes extends RouteDef>(handlers: Handlers<Routes>, route: Routes): Handler<Routes> {
  const handler = own(handlers as unknown as Record<string, Handler<Routes>>, route.id);
  if (!handler) throw new Error(`no handler for ${route.id}`);
  return handler;
}
