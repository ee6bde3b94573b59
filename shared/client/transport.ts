import { randomUUID } from 'node:crypto';
import { send as sendHttp, type ClientAnswer } from '../adapters/http/client.js';
import { SIGNATURE_HEADER, signatureHeader } from '../auth/signature.js';
import type { sigv4Headers } from '../adapters/http/sigv4.js';

/**
 * How the `rollout` command talks to a control plane: a node or any URL over
 * HTTP or HTTPS (with a bearer token when the node asks for one, and the
 * operator's CA when its certificate is not one the system trusts), or the
 * deployed HTTP API with SigV4-signed requests (service `execute-api`,
 * credentials from the usual AWS chain).
 */
export interface Target {
  readonly url: string;
  /** Sign for the deployed API in this region. */
  readonly awsRegion?: string;
  /** Who is acting, for a node with authentication off (with it on, the credential says). */
  readonly actor?: string;
  /** A bearer token: ours (`rt_…`) or an OIDC JWT. */
  readonly token?: string;
  /** PEM of the CA a node's HTTPS certificate chains to. */
  readonly ca?: string | Buffer;
  /** Sign the body as this reporter (Rollout-Signature) instead of sending a token. */
  readonly sign?: { readonly reporter: string; readonly secret: string };
  /** How long a write keeps being retried while the answer is "try again" (default 60 s; 0: sent once). */
  readonly retryWritesForMs?: number;
  /** Abandons a request in flight when it aborts (a worker's long poll when the worker stops). */
  readonly signal?: AbortSignal;
}

/**
 * A write waits this long for its answer. Longer than a proxy's write timeout
 * (nginx waits lease TTL + election interval + 1 s on a silent leader, 36 s
 * with the defaults, before sending the write on), so the answer of the
 * failover is the one we get.
 */
const WRITE_TIMEOUT_MS = 120_000;
const READ_TIMEOUT_MS = 30_000;
/** Long enough for an election with the default timings (TTL 30 s + election interval 5 s). */
const WRITE_RETRY_MS = 60_000;
/** Answers that say "not now": no leader yet (503), a proxy that found no node to take it (502, 504). */
export const TRY_AGAIN: ReadonlySet<number> = new Set([502, 503, 504]);

/** No answer came back: the name did not resolve, the connection was refused or timed out. `code` is the system's (ENOTFOUND, ECONNREFUSED, …). */
export class UnreachableError extends Error {
  override readonly name = 'UnreachableError';
  constructor(
    readonly origin: string,
    readonly code: string | null,
    message: string,
  ) {
    super(`cannot reach ${origin}: ${message}`);
  }
}

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly body: unknown,
    /** From Retry-After, when the answer had one. */
    readonly retryAfterMs: number | null = null,
  ) {
    const b = body as { error?: string; issues?: string[]; reason?: string } | null;
    super(`HTTP ${status}: ${b?.error ?? JSON.stringify(body)}${b?.issues?.length ? `\n  ${b.issues.join('\n  ')}` : ''}`);
  }
}

/**
 * One request. A write carries an Idempotency-Key, kept across every retry:
 * the one a follower's answer leads to (503 naming the leader: sent once
 * more, to the leader), and those of a "try again" (502, 503, 504: an
 * election, a proxy that found no node to take it), sent again after
 * Retry-After (1 s without one) for up to `retryWritesForMs`. So a write is
 * applied at most once whatever path it takes. Reads are not retried: their
 * 503 ("no leader elected") is an answer. The deployed API records no keys,
 * so of its answers only its own "nothing was written, try again" is sent
 * again: a 503 with Retry-After (a store that refused for contention or
 * throttling; an enqueue stored part and is idempotent on content) — a 502 or
 * 504 there may have committed.
 */
export async function call(
  target: Target,
  method: string,
  path: string,
  body?: unknown,
  idempotencyKey: string | null = method === 'GET' ? null : randomUUID(),
): Promise<unknown> {
  // retryWritesForMs 0: sent once (the bulk producer resends and paces itself).
  const retryMs = method === 'GET' ? 0 : (target.retryWritesForMs ?? WRITE_RETRY_MS);
  const retries = retryMs > 0;
  const deadline = Date.now() + retryMs;
  for (;;) {
    try {
      return await send(target, method, path, body, idempotencyKey);
    } catch (err) {
      if (!(err instanceof ApiError) || !TRY_AGAIN.has(err.status)) throw err;
      if (target.awsRegion && !(err.status === 503 && err.retryAfterMs !== null)) throw err;
      const wait = err.retryAfterMs ?? 1_000;
      if (!retries || Date.now() + wait > deadline) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/**
 * Loaded on use: a client of a node never loads the AWS SDK's credential
 * chain, and `rollout-control-plane-client` has it as optional peers.
 */
async function loadSigv4(): Promise<{ sigv4Headers: typeof sigv4Headers }> {
  try {
    return await import('../adapters/http/sigv4.js');
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw err;
    throw new Error(
      `signing for the deployed API (awsRegion) needs @aws-sdk/credential-provider-node and @smithy/signature-v4 installed beside the client: ${(err as Error).message}`,
      { cause: err },
    );
  }
}

async function send(target: Target, method: string, path: string, body: unknown, idempotencyKey: string | null, followed = false): Promise<unknown> {
  const url = new URL(path, target.url.endsWith('/') ? target.url : `${target.url}/`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  let headers: Record<string, string> = {
    'content-type': 'application/json',
    host: url.host,
    ...(target.actor ? { 'x-rollout-actor': target.actor } : {}),
    ...(target.token ? { authorization: `Bearer ${target.token}` } : {}),
    ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    // Made at each send: a retry after a few seconds carries a fresh time, and a new signature the node has not seen.
    ...(target.sign && payload !== undefined ? { [SIGNATURE_HEADER]: signatureHeader(target.sign.reporter, target.sign.secret, payload) } : {}),
  };
  if (target.awsRegion) {
    const { sigv4Headers } = await loadSigv4();
    headers = await sigv4Headers(
      { service: 'execute-api', region: target.awsRegion },
      { method, url, headers, ...(payload !== undefined ? { body: payload } : {}) },
    );
  }
  if (target.token && url.protocol === 'http:' && !isLoopbackHost(url.hostname)) warnCleartext(url);
  let res: ClientAnswer;
  try {
    res = await sendHttp(url, {
      method,
      headers,
      ...(payload !== undefined ? { body: payload } : {}),
      timeoutMs: method === 'GET' ? READ_TIMEOUT_MS : WRITE_TIMEOUT_MS,
      ...(target.ca ? { tls: { ca: target.ca } } : {}),
      ...(target.signal ? { signal: target.signal } : {}),
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new UnreachableError(
      url.origin,
      typeof code === 'string' ? code : null,
      err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err),
    );
  }
  const text = res.text;
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  const leaderUrl = res.header('x-rollout-leader-url');
  // Followed once, and only to the same scheme: a token meant for HTTPS is never sent in the clear because a node said so.
  if (res.status === 503 && leaderUrl && !followed && !target.awsRegion && followable(leaderUrl, url)) {
    return send({ ...target, url: leaderUrl }, method, path, body, idempotencyKey, true);
  }
  if (res.status < 200 || res.status >= 300) {
    const retryAfter = res.header('retry-after');
    throw new ApiError(res.status, parsed, retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : null);
  }
  return parsed;
}

function followable(leaderUrl: string, from: URL): boolean {
  try {
    const to = new URL(leaderUrl);
    return to.origin !== from.origin && to.protocol === from.protocol && /^https?:$/.test(to.protocol);
  } catch {
    return false;
  }
}

function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1');
  return h === 'localhost' || h === '::1' || /^127\./.test(h);
}

let warned = false;
/** A token sent over plain HTTP beyond this machine can be read on the way: said once, on stderr. */
function warnCleartext(url: URL): void {
  if (warned) return;
  warned = true;
  process.stderr.write(`rollout: warning: sending a token over plain HTTP to ${url.host}; use https:// (the shipped nginx configuration terminates TLS)\n`);
}
