import { z } from 'zod';
import type { Scope } from '../auth/scopes.js';
import type { Identity } from '../auth/identity.js';
import { ID_MESSAGE, ID_RULE } from '../ids.js';

/**
 * A route as a typed value: its id is a literal type, and what it takes
 * (path parameters, query, body) and answers (statuses, bodies) are its
 * schemas. The router parses a request against them before the route's
 * handler runs, so a handler is given its input parsed and typed by its route
 * (Parsed<R>) and answers what its route declares (Answer<R>: a declared
 * status, with the body its schema gives that status); a table of handlers
 * (Handlers<Routes>) missing one, or with one of the wrong type, does not
 * compile. The typed client (client/route-call.ts) sends Request<R> and is
 * given Result<R>, read off the same schemas.
 */

type Content = { readonly schema: z.ZodType; readonly type?: 'application/json' } | { readonly type: 'text/html' | 'text/plain'; readonly schema?: undefined };
export interface ResponseDef {
  readonly description: string;
  readonly content?: Content;
  readonly headers?: Readonly<Record<string, string>>;
}

/** What a node adds to a route's handling once its answer is given (implemented by the node: runtimes/node/node-api.ts). */
export type NodeHook = 'firstEvaluation' | 'cancelFollowUp' | 'actuate';

export interface RouteDef<Id extends string = string, Path extends string = string> {
  /** operationId: how the runtimes name the route they implement. */
  readonly id: Id;
  readonly method: 'GET' | 'POST';
  /** OpenAPI's template: /rollouts/{id}. */
  readonly path: Path;
  readonly summary: string;
  readonly tag: 'cluster' | 'rollouts' | 'runs' | 'work' | 'node';
  /** Only a node serves it (npm start, a cluster): the deployed API has none. */
  readonly nodeOnly?: true;
  /** What the caller needs (auth/scopes.ts); null: open. */
  readonly scope: Scope | null;
  /** A further scope the route needs in some states of what it acts on, decided by the handler on the state it acts on: scope → when. */
  readonly scopeWhen?: Readonly<Partial<Record<Scope, string>>>;
  /** The path's parameters, each an id (ID_RULE), by what it names: {id: 'rollout id'}. */
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: z.ZodObject;
  readonly body?: z.ZodType;
  /** The body may be left out (a command's reason). */
  readonly optionalBody?: true;
  readonly responses: Readonly<Record<number, ResponseDef>>;
  /** Routes of one family told apart by their last segment (the commands): a POST to another names them. */
  readonly family?: string;
  /** A write any node takes, leader or not (its handling asks for the lease itself); every other write needs the leader. */
  readonly anyNode?: true;
  /**
   * A POST that writes nothing to the store (it asks the outside world, as a gate test does): any node
   * answers it, outside any transaction, and an Idempotency-Key is not recorded for it.
   */
  readonly storesNothing?: true;
  /** What a node does once it has answered (after the commit, for a write with an Idempotency-Key): see NodeHook. */
  readonly nodeHooks?: { readonly afterCommit?: NodeHook; readonly afterAnswer?: NodeHook };
}

/** The fields whose types a route keeps as its own: its schemas (RouteDef's wider types would blur them). */
type SchemaField = 'query' | 'body' | 'responses';

/** A route, its id, path and schemas kept as literal types (and any field read on a union of routes, as RouteDef has it). */
export function route<const R extends RouteDef>(def: R): R & Omit<RouteDef, keyof R & SchemaField> {
  return def;
}

/** The names in a path template: '/runs/{id}/items' → 'id'. */
export type ParamNames<P extends string> = P extends `${string}{${infer N}}${infer Rest}` ? N | ParamNames<Rest> : never;

/** What the caller is, as the transport in front found it. */
export interface Caller {
  /** Who is calling (the IAM principal behind the request, a node's credential). */
  readonly actor: string;
  /**
   * What the caller was found to hold (a node's credential; on the deployed
   * API, what IAM proved by admitting the route). What a route needs is
   * checked in front; a handler reads this for what depends on the state it
   * acts on (retrying an aborted rollout needs admin). Absent: every scope.
   */
  readonly scopes?: ReadonlySet<Scope>;
  /** Who the guard found the caller to be, with what its credential is bound to. */
  readonly identity?: Identity;
  /** Request headers, names lower-cased (If-None-Match is read). */
  readonly headers?: Readonly<Record<string, string | undefined>>;
  /** Aborted when the client has gone away (a node: the connection closed before the answer). */
  readonly signal?: AbortSignal;
}

/** A request to route R as its handler is given it: parsed against R's schemas. */
export interface Parsed<R extends RouteDef> {
  readonly params: Readonly<Record<ParamNames<R['path']>, string>>;
  readonly query: R['query'] extends z.ZodObject ? z.output<R['query']> : Readonly<Record<string, never>>;
  readonly body: R['body'] extends z.ZodType ? z.output<R['body']> : undefined;
  readonly caller: Caller;
}

/** An answer: a status, a body (JSON, a RawBody, or null for a 304) and headers. */
export interface ApiResponse {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** The statuses route R declares (its own, not RouteDef's index signature). */
export type Status<R extends RouteDef> = keyof { [K in keyof R['responses'] as number extends K ? never : K]: unknown } & number;

/** A body sent as it is, not as JSON (HTML, Prometheus text): a node's RawBody (runtimes/node/http.ts). */
export interface TextBody {
  readonly text: string;
  readonly contentType: string;
}

/** T's own fields, without the `[k: string]: unknown` a loose object adds (a record, which has no others, is kept whole). */
type Known<T> = keyof { [K in keyof T as string extends K ? never : K]: unknown } extends never ? T : { [K in keyof T as string extends K ? never : K]: T[K] };

/** A JSON value with the fields its schema names, at every depth: what a loose object may carry besides is not typed (nor checked). */
export type Named<T> = T extends readonly (infer E)[] ? Named<E>[] : T extends object ? { [K in keyof Known<T>]: Named<Known<T>[K]> } : T;

/** A JSON value read only at every depth: what a handler answers may hold readonly arrays, and so may what a client sends. */
export type ReadonlyDeep<T> = T extends readonly (infer E)[]
  ? readonly ReadonlyDeep<E>[]
  : T extends object
    ? { readonly [K in keyof T]: ReadonlyDeep<T[K]> }
    : T;

/**
 * The body route R declares for status S: its schema's output (what is sent
 * is what the OpenAPI document describes), a TextBody for HTML or text, null
 * where it declares none (a 304).
 */
export type BodyOf<R extends RouteDef, S extends Status<R>> =
  S extends Status<R>
    ? R['responses'][S] extends { readonly content: { readonly schema: infer Z extends z.ZodType } }
      ? Named<z.output<Z>>
      : R['responses'][S] extends { readonly content: { readonly type: 'text/html' | 'text/plain' } }
        ? TextBody
        : null
    : never;

/**
 * What route R's handler answers: one of the statuses R declares, with the
 * body R declares for it (a refusal it does not declare is thrown:
 * HttpError). A body of another shape does not compile.
 */
export type Answer<R extends RouteDef> = {
  readonly [S in Status<R>]: { readonly status: S; readonly body: ReadonlyDeep<BodyOf<R, S>>; readonly headers?: Readonly<Record<string, string>> };
}[Status<R>];

/** The statuses of R that answer what was asked (2xx). */
export type Success<R extends RouteDef> = Extract<Status<R>, 200 | 201 | 202 | 203 | 204 | 206>;

/** What a call of route R resolves to: the body of a success (a refusal is the client's ApiError). */
export type Result<R extends RouteDef> = BodyOf<R, Success<R>>;

/** A request to route R as a client sends it: its path parameters, its query and its body, each as R's schemas take them. */
export type Request<R extends RouteDef> = ([ParamNames<R['path']>] extends [never]
  ? { readonly params?: undefined }
  : { readonly params: Readonly<Record<ParamNames<R['path']>, string>> }) &
  (R['query'] extends z.ZodObject ? { readonly query?: z.input<R['query']> } : { readonly query?: undefined }) &
  (R['body'] extends z.ZodType
    ? R['optionalBody'] extends true
      ? { readonly body?: ReadonlyDeep<z.input<R['body']>> }
      : { readonly body: ReadonlyDeep<z.input<R['body']>> }
    : { readonly body?: undefined });

export type Handler<R extends RouteDef> = (input: Parsed<R>) => Promise<Answer<R>>;

/** A handler for each of `Routes`, by id: one missing, one extra or one of another route's type is a compile error. */
export type Handlers<Routes extends RouteDef> = { readonly [R in Routes as R['id']]: Handler<R> };

/** The routes of `Routes` with id `Id`. */
export type RouteOf<Routes extends RouteDef, Id extends string> = Extract<Routes, { readonly id: Id }>;

/** A request refused with a status and a reason (and fields to add to the body). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

// ——— Pieces the route definitions share ———

export const id = () => z.string().regex(ID_RULE, ID_MESSAGE);
export const iso = () => z.string().describe('ISO 8601');
export const ms = () => z.number().describe('milliseconds since the epoch');
/**
 * A string the document leaves open (`"type": "string"`: a set that may grow
 * without a new version of the API), typed as the values the server sends
 * today; the schema checks a string, as the document says.
 */
export const openString = <T extends string>() => z.string() as unknown as z.ZodType<T, string>;

/** Every refusal: what is wrong in words, and fields that say more (issues, leader, …). */
export const errorBody = z.looseObject({ error: z.string(), issues: z.array(z.string()).optional() }).meta({ id: 'Error' });
export const stale = z.object({ asOf: iso(), reason: z.string() }).describe('present when answered from the last good read because the store did not answer');
/** A read's answer: a node answering from its last good copy adds `stale`. */
export const read = <T extends z.ZodRawShape>(shape: T) => z.looseObject({ ...shape, stale: stale.optional() });

export const json = <S extends z.ZodType, const E extends Omit<ResponseDef, 'description' | 'content'> = object>(
  description: string,
  schema: S,
  extra?: E,
) => ({
  description,
  content: { schema },
  ...((extra ?? {}) as E),
});
export const refused = (description: string) => json(description, errorBody);
export const notLeader = refused('this node does not lead (the body and x-rollout-leader-* headers name who does), or no leader is elected');
/** A node told to redirect writes (--redirect-writes) sends them to the leader. */
export const toLeader = json('a node that does not lead sends the write to the leader (with --redirect-writes)', errorBody, {
  headers: { location: "the same path on the leader's API URL" },
});
export const notFound = refused('no such rollout or run');
export const badRequest = refused('the request is malformed: the body says what is wrong');
export const unreadable = refused('the store cannot be read');

/** A page's `limit`: a whole number within 1–`max` (absent: the route's default, `fallback`). */
export const pageQuery = (max: number, fallback: number) =>
  z
    .string()
    .regex(/^\d+$/, { error: (i) => `a whole number from 1 to ${max}, got "${String(i.input).slice(0, 40)}"` })
    .transform((raw, ctx) => {
      const n = Number(raw);
      if (n >= 1 && n <= max) return n;
      ctx.addIssue({ code: 'custom', message: `a whole number from 1 to ${max}, got "${raw.slice(0, 40)}"` });
      return z.NEVER;
    })
    .optional()
    .describe(`1 to ${max}, default ${fallback}`);

/** A command's or a cancel's body: why, optionally. */
export const commandBody = z.object({ reason: z.string().max(1_000).optional() }).strict();
