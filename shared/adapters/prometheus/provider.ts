import { mapLimit } from '../../concurrency.js';
import { errorMessage } from '../../log.js';
import type { PrometheusGate } from '../../rollout/gate-spec.js';
import { deadline, type GateProvider } from '../../rollout/gate-reader.js';
import type { ProviderResult } from '../../rollout/gates.js';
import { sigv4Headers } from '../http/sigv4.js';

/**
 * Prometheus gates through the HTTP API's instant query (`POST
 * /api/v1/query`): a Prometheus server, or Amazon Managed Service for
 * Prometheus with SigV4-signed requests. The query is evaluated at the
 * server's own now (no `time` is sent: one clock, the server's), with the
 * gate's timeout passed to the server too, so it stops evaluating when we
 * stop waiting.
 *
 * A tick asks each distinct (address, query, auth) once, at most
 * `concurrency` at a time, each within its gates' shortest timeout.
 * Credentials come from the environment variables the gate names, never from
 * the spec.
 */
export interface PrometheusProviderOptions {
  readonly concurrency?: number;
  /** Where `passwordEnv` / `tokenEnv` are looked up (default: process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly fetch?: typeof fetch;
  /** SigV4 signing (default: the usual AWS credential chain). */
  readonly sign?: typeof sigv4Headers;
}

/** A request Prometheus answered with something we cannot use, or refused. */
class PrometheusAnswerError extends Error {
  constructor(
    message: string,
    readonly answer: string,
  ) {
    super(message);
  }
}

export class PrometheusProvider implements GateProvider<PrometheusGate> {
  private readonly concurrency: number;
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly fetch: typeof fetch;
  private readonly sign: typeof sigv4Headers;

  constructor(o: PrometheusProviderOptions = {}) {
    this.concurrency = o.concurrency ?? 16;
    this.env = o.env ?? process.env;
    this.fetch = o.fetch ?? fetch;
    this.sign = o.sign ?? sigv4Headers;
  }

  async read(gates: readonly PrometheusGate[], o: { readonly signal: AbortSignal }): Promise<ProviderResult[]> {
    const byKey = new Map<string, PrometheusGate[]>();
    for (const g of gates) {
      const key = JSON.stringify([g.address, g.query, g.auth ?? null]);
      byKey.set(key, [...(byKey.get(key) ?? []), g]);
    }
    const distinct = [...byKey.entries()];
    const answers = await mapLimit(distinct, this.concurrency, ([, same]) => this.query(same[0]!, Math.min(...same.map((g) => g.timeoutSeconds)), o.signal));
    const byQuery = new Map(distinct.map(([key], i) => [key, answers[i]!]));
    return gates.map((g) => byQuery.get(JSON.stringify([g.address, g.query, g.auth ?? null]))!);
  }

  private async query(gate: PrometheusGate, timeoutSeconds: number, signal: AbortSignal): Promise<ProviderResult> {
    try {
      const text = await deadline(timeoutSeconds * 1000, signal, (s) => this.request(gate, timeoutSeconds, s));
      return resultOf(text);
    } catch (err) {
      return { kind: 'error', message: `prometheus ${new URL(gate.address).host}: ${reason(err)}`, answer: err instanceof PrometheusAnswerError ? err.answer : '' };
    }
  }

  private async request(gate: PrometheusGate, timeoutSeconds: number, signal: AbortSignal): Promise<string> {
    const url = new URL(`${gate.address.replace(/\/+$/, '')}/api/v1/query`);
    const body = new URLSearchParams({ query: gate.query, timeout: `${timeoutSeconds}s` }).toString();
    let headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
    const auth = gate.auth;
    if (auth?.type === 'basic') headers.authorization = `Basic ${Buffer.from(`${auth.username}:${this.secret(auth.passwordEnv, gate, 'passwordEnv')}`).toString('base64')}`;
    if (auth?.type === 'bearer') headers.authorization = `Bearer ${this.secret(auth.tokenEnv, gate, 'tokenEnv')}`;
    if (auth?.type === 'sigv4') headers = await this.sign({ service: auth.service, region: auth.region }, { method: 'POST', url, headers, body });
    const res = await this.fetch(url, { method: 'POST', headers, body, signal, redirect: 'error' });
    const text = await res.text();
    if (!res.ok) {
      // Prometheus explains a refusal in JSON ({"status":"error","errorType":…,"error":…}); a proxy may not.
      const why = parseJson(text) as { errorType?: string; error?: string } | undefined;
      throw new PrometheusAnswerError(why?.error ? `HTTP ${res.status} ${why.errorType ?? ''}: ${why.error}`.replace(' :', ':') : `HTTP ${res.status} ${res.statusText}`, text);
    }
    return text;
  }

  private secret(name: string, gate: PrometheusGate, field: string): string {
    const v = this.env[name];
    if (!v) throw new Error(`environment variable ${name} (auth.${field} of gate ${gate.name}) is not set where the promoter runs`);
    return v;
  }
}

interface QueryResponse {
  status?: string;
  error?: string;
  data?: { resultType?: string; result?: unknown };
}

/** What an instant query's answer says, in the terms gates judge (a number, nothing, several, or an error). */
export function resultOf(text: string): ProviderResult {
  const answer = text;
  const body = parseJson(text) as QueryResponse | undefined;
  if (!body || body.status !== 'success' || !body.data) return { kind: 'error', message: `not a query answer${body?.error ? `: ${body.error}` : ''}`, answer };
  const { resultType, result } = body.data;
  // A sample is [time, "value"]; the value is a string so that NaN and ±Inf survive JSON.
  const number = (sample: unknown): ProviderResult =>
    Array.isArray(sample) && typeof sample[1] === 'string' ? { kind: 'number', value: Number(sample[1].replace(/^\+?Inf$/, 'Infinity').replace(/^-Inf$/, '-Infinity')), answer } : { kind: 'error', message: 'a sample without a value', answer };
  if (resultType === 'scalar') return number(result);
  if (resultType === 'vector' && Array.isArray(result)) {
    if (result.length === 0) return { kind: 'empty', answer };
    if (result.length > 1) return { kind: 'several', count: result.length, answer };
    return number((result[0] as { value?: unknown }).value);
  }
  if (resultType === 'matrix') return { kind: 'error', message: 'the query returned a range vector; a gate needs an instant value (drop the [range])', answer };
  return { kind: 'error', message: `a ${String(resultType)} result; a gate needs a scalar or a one-sample vector`, answer };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** An error as a reading keeps it: fetch's "fetch failed" says nothing, its cause (ECONNREFUSED …) does. */
function reason(err: unknown): string {
  const cause = (err as { cause?: unknown }).cause;
  if (err instanceof Error && err.message === 'fetch failed' && cause) {
    const c = cause as { code?: string; message?: string };
    return c.code && !String(c.message).includes(c.code) ? `${c.code}: ${c.message}` : errorMessage(cause);
  }
  return errorMessage(err);
}
