import type { Request, Result, RouteDef } from '../api/route.js';
import { own } from '../own.js';
import { call, type Target } from './transport.js';

/**
 * A call of one route, typed by the route: what it is sent (path parameters,
 * query, body) and what it resolves to are its schemas' types, so a route
 * the client does not follow is a compile error. The route gives the method
 * and the path; the transport (transport.ts) keeps the Idempotency-Key,
 * follows the leader and retries.
 */

/** The request target for `req` on `route`: each path parameter percent-encoded in its place, then the query (an array field once per value). */
export function targetOf<R extends RouteDef>(route: R, req: Request<R>): string {
  const params = (req.params ?? {}) as Readonly<Record<string, string>>;
  const path = route.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(String(own(params, name))));
  const query = Object.entries((req.query ?? {}) as Readonly<Record<string, unknown>>).flatMap(([name, value]) =>
    value === undefined ? [] : (Array.isArray(value) ? value : [value]).map((v) => `${encodeURIComponent(name)}=${encodeURIComponent(String(v))}`),
  );
  return query.length ? `${path}?${query.join('&')}` : path;
}

/** `route` called on `target` with `req`; a write carries `idempotencyKey` (default: a new one, kept across its retries). */
export function callRoute<R extends RouteDef>(target: Target, route: R, req: Request<R>, idempotencyKey?: string): Promise<Result<R>> {
  const path = targetOf(route, req);
  if (route.method === 'GET') return call(target, 'GET', path) as Promise<Result<R>>;
  return (idempotencyKey === undefined ? call(target, 'POST', path, req.body) : call(target, 'POST', path, req.body, idempotencyKey)) as Promise<Result<R>>;
}
