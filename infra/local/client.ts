import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { createHash, createHmac, randomUUID } from 'node:crypto';

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
}

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    const b = body as { error?: string; issues?: string[]; reason?: string } | null;
    super(`HTTP ${status}: ${b?.error ?? JSON.stringify(body)}${b?.issues?.length ? `\n  ${b.issues.join('\n  ')}` : ''}`);
  }
}

/** SHA-256 (and HMAC-SHA-256 with a key) in the shape the signer wants. */
type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data): string | Uint8Array => (typeof d === 'string' ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength));

class Sha256 {
  private readonly h;
  constructor(secret?: Data) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Data): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
}

/**
 * One request. A write carries an Idempotency-Key, kept across the retry a
 * follower's answer leads to (503 naming the leader: sent once more, to the
 * leader), so a write is applied at most once whatever path it takes.
 */
export async function call(target: Target, method: string, path: string, body?: unknown, idempotencyKey: string | null = method === 'GET' ? null : randomUUID(), followed = false): Promise<unknown> {
  const url = new URL(path, target.url.endsWith('/') ? target.url : `${target.url}/`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  let headers: Record<string, string> = {
    'content-type': 'application/json',
    host: url.host,
    ...(target.actor ? { 'x-rollout-actor': target.actor } : {}),
    ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
  };
  if (target.awsRegion) {
    const signer = new SignatureV4({ service: 'execute-api', region: target.awsRegion, credentials: defaultProvider(), sha256: Sha256 });
    const signed = await signer.sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      ...(payload !== undefined ? { body: payload } : {}),
    });
    headers = signed.headers;
  }
  let res: Response;
  try {
    res = await fetch(url, { method, headers, ...(payload !== undefined ? { body: payload } : {}), signal: AbortSignal.timeout(30_000) });
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
    return call({ ...target, url: leaderUrl }, method, path, body, idempotencyKey, true);
  }
  if (!res.ok) throw new ApiError(res.status, parsed);
  return parsed;
}
