import { createHash } from 'node:crypto';
import type { ApiResponse } from '../../api/handler.js';
import { JsonBodyError, parseJsonBody } from '../../api/json.js';
import { identify, Unauthenticated, type Authenticator, type Identity } from '../../auth/identity.js';
import { RateLimiter } from '../../auth/rate-limit.js';
import { scopeFor, SCOPES, type Scope } from '../../auth/scopes.js';
import { routerOf, ROUTES, TargetError, type Match } from '../../api/contract.js';
import { SIGNATURE_HEADER } from '../../auth/signature.js';
import type { HttpRequest } from './http.js';

/**
 * Who may ask a node what, checked before any route runs (DESIGN.md "Trust
 * boundaries"), in this order:
 *
 *   Host       an allowed name, else 421 (a page on another site that
 *              rebinds its DNS name to 127.0.0.1 reaches no data)
 *   rate       per peer address, then per credential: 429 with Retry-After
 *              naming the limit. Cheap, cacheable reads (a rollout's traffic
 *              and assignment, by the route matched) have buckets and limits
 *              of their own, sized for a fleet that polls them; every other
 *              request has the stricter ones
 *   identity   a bearer token (ours, or an OIDC JWT) or a verified client
 *              certificate, else 401 with WWW-Authenticate; the actor of
 *              every write comes from it, never from a header
 *   browser    a write must say Content-Type: application/json (415), and
 *              one sent from a page of another origin is refused (403): a
 *              form or `text/plain` POST from another site cannot pass
 *   scope      what the route needs (auth/scopes.ts), else 403 naming it
 *
 * With authentication off (loopback, or --insecure-no-auth) every caller has
 * every scope and the actor is `x-rollout-actor` or `local`: the node trusts
 * whoever reaches it, which is why it refuses to bind beyond loopback so.
 * Every answer carries nosniff, no-referrer and a CSP that forbids framing.
 */
export interface GuardOptions {
  /** Empty: authentication is off. */
  readonly authenticators: readonly Authenticator[];
  /** Host names (no port) this node answers to; null: any. */
  readonly allowedHosts: readonly string[] | null;
  /**
   * Requests per second (0: no limit), bursts of `burstSeconds` worth.
   * `perAddress` and `perCredential` hold for every request but the cheap
   * reads (CHEAP_READS), which have their own buckets: `cheapReadsPer*`,
   * or when absent CHEAP_READS_DEFAULT (none when the general limit is none).
   */
  readonly rateLimit: {
    readonly perAddress: number;
    readonly perCredential: number;
    readonly burstSeconds: number;
    readonly cheapReadsPerAddress?: number;
    readonly cheapReadsPerCredential?: number;
  };
  /** Peers whose X-Forwarded-For names the client (the shipped nginx sets it): the address rate-limited is the client's. */
  readonly trustedProxies?: readonly string[];
  /** Extra headers for one route's answer (the status page's CSP). */
  readonly pageHeaders?: Readonly<Record<string, string>>;
  /** Headers on every answer, refusals included (the node's id). */
  readonly answerHeaders?: Readonly<Record<string, string>>;
  readonly now?: () => number;
}

type Handle = (req: HttpRequest) => Promise<ApiResponse>;

const JSON_CSP = "default-src 'none'; frame-ancestors 'none'";
const ALL_SCOPES: ReadonlySet<Scope> = new Set(SCOPES);
const NO_SCOPES: ReadonlySet<Scope> = new Set();
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * Routes a fleet polls (the OpenFeature provider refreshes `/traffic`): small,
 * answered from a kept read, 304 by ETag. The rate is taken before the route
 * runs, so the route decides the class, not whether the answer turns out a 304.
 */
export const CHEAP_READS: ReadonlySet<string> = new Set(['rolloutTraffic', 'rolloutAssignment']);

/** Cheap reads' default per second: a fleet of pollers, well above the general limit. */
export const CHEAP_READS_DEFAULT = 5_000;

/** A cheap-read bucket left unset is never tighter than the general one: `--rate-limit 0` turns both off. */
export function cheapReadLimit(given: number | undefined, general: number): number {
  if (given !== undefined) return given;
  return general === 0 ? 0 : Math.max(CHEAP_READS_DEFAULT, general);
}

/** One class of requests' buckets, and what a 429 from each says. */
interface Limits {
  readonly byAddress: RateLimiter | null;
  readonly byCredential: RateLimiter | null;
  readonly what: string;
  readonly addressFlag: string;
  readonly credentialFlag: string;
}

/** The CSP of a page whose inline scripts are allowed by their hashes. */
export function pageCsp(html: string): string {
  const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`);
  return `default-src 'none'; script-src ${scripts.join(' ') || "'none'"}; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

/** A Host header's name: port and IPv6 brackets dropped, lower-cased. */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'));
  const colon = h.lastIndexOf(':');
  return colon > 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
}

export function guarded(inner: Handle, o: GuardOptions): Handle {
  const now = o.now ?? Date.now;
  const r = o.rateLimit;
  const other: Limits = {
    byAddress: RateLimiter.of(r.perAddress, r.burstSeconds, now),
    byCredential: RateLimiter.of(r.perCredential, r.burstSeconds, now),
    what: 'requests',
    addressFlag: '--rate-limit',
    credentialFlag: '--rate-limit-per-credential',
  };
  const cheap: Limits = {
    byAddress: RateLimiter.of(cheapReadLimit(r.cheapReadsPerAddress, r.perAddress), r.burstSeconds, now),
    byCredential: RateLimiter.of(cheapReadLimit(r.cheapReadsPerCredential, r.perCredential), r.burstSeconds, now),
    what: 'traffic and assignment reads',
    addressFlag: '--rate-limit-cheap-reads',
    credentialFlag: '--rate-limit-cheap-reads-per-credential',
  };
  const allowed = o.allowedHosts ? new Set(o.allowedHosts.map(hostName)) : null;
  const authOn = o.authenticators.length > 0;
  const trusted = new Set(o.trustedProxies ?? []);
  const refuse = (status: number, error: string, headers: Record<string, string> = {}): ApiResponse => ({ status, body: { error }, headers });
  const route = routerOf(ROUTES);
  // Built once: every answer carries them, after its own (which may not override them).
  const always = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', ...o.answerHeaders };
  const jsonHeaders = { ...always, 'content-security-policy': JSON_CSP };
  const pageHeaders = { ...always, ...o.pageHeaders };

  async function check(req: HttpRequest, matched: Match): Promise<ApiResponse> {
    const method = req.method.toUpperCase();
    const host = req.headers.host ?? '';
    if (allowed && !allowed.has(hostName(host))) return refuse(421, `host "${host.slice(0, 100)}" is not a name this node answers to (--allowed-hosts)`);
    // Every decision below is made on the route matched, never on the path as spelled.
    const found = matched.route;
    const limits = (method === 'GET' || method === 'HEAD') && found && CHEAP_READS.has(found.id) ? cheap : other;
    const slow = limits.byAddress?.take(clientAddress(req, trusted));
    if (slow) return refuse(429, `too many ${limits.what} from this address (${limits.addressFlag})`, { 'retry-after': String(slow) });
    const event = found?.id === 'postEvent';
    // Open to anyone: what its route says (the page's HTML, health), read only.
    const open = (method === 'GET' || method === 'HEAD') && found?.scope === null;

    let identity: Identity | null = null;
    if (!authOn) identity = { actor: req.headers['x-rollout-actor']?.slice(0, 128) || 'local', scopes: ALL_SCOPES, via: 'none' };
    else if (!open) {
      const authorization = req.headers.authorization ?? '';
      const bearer = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1] ?? null;
      try {
        const signed = req.headers[SIGNATURE_HEADER];
        const signature = signed !== undefined && event ? { header: signed, body: req.body ?? '' } : null;
        identity = await identify(o.authenticators, { bearer, certificate: req.clientCertificate, signature });
      } catch (err) {
        if (!(err instanceof Unauthenticated)) throw err;
        return refuse(401, `invalid credentials: ${err.message}`, { 'www-authenticate': `Bearer realm="rollout", error="invalid_token"` });
      }
      if (!identity)
        return refuse(401, 'credentials required: Authorization: Bearer <token>, a client certificate, or (for POST /events) a Rollout-Signature', {
          'www-authenticate': 'Bearer realm="rollout"',
        });
      const limited = limits.byCredential?.take(identity.actor);
      if (limited) return refuse(429, `too many ${limits.what} from ${identity.actor} (${limits.credentialFlag})`, { 'retry-after': String(limited) });
    }

    if (WRITE_METHODS.has(method)) {
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json') return refuse(415, `a write must be sent as Content-Type: application/json${type ? `, not ${type}` : ''}`);
      const origin = req.headers.origin;
      if (origin !== undefined && !sameOrigin(origin, host)) return refuse(403, `a write from a page of another origin (${origin.slice(0, 100)}) is refused`);
    }

    // The match goes inward with the request (matched once), and so do the scopes: a handler decides what depends on the state it acts on.
    if (open) return inner(inward(req, identity?.actor ?? 'anonymous', identity?.scopes ?? NO_SCOPES, undefined, matched));
    let body: unknown = null;
    if (event && req.body !== null) {
      try {
        body = parseJsonBody(req.body);
      } catch (err) {
        if (!(err instanceof JsonBodyError)) throw err;
        // The route says what is wrong with it; an unreadable body needs no more than `signal`.
      }
    }
    const scope = scopeFor(found, method, body)!;
    if (!identity!.scopes.has(scope)) return refuse(403, `${identity!.actor} lacks the "${scope}" scope, which ${method} ${req.path.slice(0, 200)} needs`);
    return inner(inward(req, identity!.actor, identity!.scopes, identity!, matched));
  }

  return async (req) => {
    let matched: Match;
    try {
      matched = route(req.method, req.path);
    } catch (err) {
      if (!(err instanceof TargetError)) throw err;
      return { status: 400, body: { error: err.message }, headers: { 'cache-control': 'no-store', ...jsonHeaders } };
    }
    const res = await check(req, matched);
    const fixed = matched.route?.id === 'statusPage' && res.status === 200 && o.pageHeaders ? pageHeaders : jsonHeaders;
    // Nothing is cached unless its route says how (assignment and traffic: private, by ETag).
    return { ...res, headers: { 'cache-control': 'no-store', ...res.headers, ...fixed } };
  };
}

/** Every field of a request, none optional: a field added to HttpRequest and not carried inward is a compile error. */
type EveryField = { [K in RequestField]: HttpRequest[K] };
type RequestField = keyof HttpRequest;

/**
 * The request as it goes inward: who asked, what they hold, the match. Built
 * field by field: a spread of the request with fields overridden costs a cheap
 * read more than the rest of the guard together.
 */
function inward(req: HttpRequest, actor: string, scopes: ReadonlySet<Scope>, identity: Identity | undefined, route: Match): HttpRequest {
  const whole: EveryField = {
    method: req.method,
    path: req.path,
    body: req.body,
    query: req.query,
    headers: req.headers,
    remoteAddress: req.remoteAddress,
    clientCertificate: req.clientCertificate,
    secure: req.secure,
    signal: req.signal,
    actor,
    scopes,
    identity,
    route,
  };
  return whole;
}

/** The client's address: the peer's, or what a trusted proxy says it forwarded for (the last hop it added). */
function clientAddress(req: HttpRequest, trusted: ReadonlySet<string>): string {
  const peer = req.remoteAddress.replace(/^::ffff:/, '');
  const forwarded = req.headers['x-forwarded-for'];
  if (!forwarded || !trusted.has(peer)) return peer;
  return forwarded.split(',').at(-1)!.trim().slice(0, 64) || peer;
}

function sameOrigin(origin: string, host: string): boolean {
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}
