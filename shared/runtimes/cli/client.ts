import { randomUUID } from 'node:crypto';
import { sigv4Headers } from '../../adapters/http/sigv4.js';

/**
 * How the `rollout` command talks to a control plane: a local node or any
 * URL over plain HTTP, or the deployed HTTP API with SigV4-signed requests
 * (service `execute-api`, credentials from the usual AWS chain).
 */
export interface Target {
  readonly url: string;
  /** Sign for the deployed API in this region. */
  readonly awsRegion?: string;
  readonly actor?: string;
  /** How long a write keeps being retried while the answer is "try again" (default 60 s). */
  readonly retryWritesForMs?: number;
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
const TRY_AGAIN = new Set([502, 503, 504]);

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
 * 503 ("no leader elected") is an answer. Nor are writes to the deployed API,
 * which does not record keys.
 */
export async function call(target: Target, method: string, path: string, body?: unknown, idempotencyKey: string | null = method === 'GET' ? null : randomUUID()): Promise<unknown> {
  // The deployed API keeps no record of keys (API Gateway never retries; a 504 there may have committed): no retries.
  const retries = method !== 'GET' && !target.awsRegion;
  const deadline = Date.now() + (retries ? (target.retryWritesForMs ?? WRITE_RETRY_MS) : 0);
  for (;;) {
    try {
      return await send(target, method, path, body, idempotencyKey);
    } catch (err) {
      if (!(err instanceof ApiError) || !TRY_AGAIN.has(err.status)) throw err;
      const wait = err.retryAfterMs ?? 1_000;
      if (Date.now() + wait > deadline) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

async function send(target: Target, method: string, path: string, body: unknown, idempotencyKey: string | null, followed = false): Promise<unknown> {
  const url = new URL(path, target.url.endsWith('/') ? target.url : `${target.url}/`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  let headers: Record<string, string> = {
    'content-type': 'application/json',
    host: url.host,
    ...(target.actor ? { 'x-rollout-actor': target.actor } : {}),
    ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
  };
  if (target.awsRegion) headers = await sigv4Headers({ service: 'execute-api', region: target.awsRegion }, { method, url, headers, ...(payload !== undefined ? { body: payload } : {}) });
  let res: Response;
  try {
    res = await fetch(url, { method, headers, ...(payload !== undefined ? { body: payload } : {}), signal: AbortSignal.timeout(method === 'GET' ? READ_TIMEOUT_MS : WRITE_TIMEOUT_MS) });
  } catch (err) {
    throw new Error(`cannot reach ${url.origin}: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`);
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  const leaderUrl = res.headers.get('x-rollout-leader-url');
  if (res.status === 503 && leaderUrl && !followed && !target.awsRegion && new URL(leaderUrl).origin !== url.origin && /^https?:$/.test(new URL(leaderUrl).protocol)) {
    return send({ ...target, url: leaderUrl }, method, path, body, idempotencyKey, true);
  }
  if (!res.ok) {
    const retryAfter = res.headers.get('retry-after');
    throw new ApiError(res.status, parsed, retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : null);
  }
  return parsed;
}
