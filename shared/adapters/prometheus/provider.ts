import { mapLimit } from '../../concurrency.js';
import { errorMessage } from '../../log.js';
import { OutboundPolicy, OutboundRefusedError, type Credential } from '../../outbound/policy.js';
import { OperatorSecrets, SecretNotFoundError, type SecretSource } from '../../outbound/secrets.js';
import { DEFAULT_SETTLE_SECONDS, judgedRange, MAX_JUDGED_POINTS, type PrometheusGate } from '../../rollout/gate-spec.js';
import { deadline, type GateContext, type GateProvider } from '../../rollout/gate-reader.js';
import type { ProviderResult } from '../../rollout/gates.js';
import { countGrid, isCountsJudge, type StepCounts } from '../../judge/gate.js';
import { credentialHeaders, scrubbed } from '../http/credentials.js';
import { OutboundHttp, type OutboundClient } from '../http/outbound.js';
import { sigv4Headers } from '../http/sigv4.js';

/**
 * Prometheus gates through the HTTP API's instant query (`POST
 * /api/v1/query`): a Prometheus server, or Amazon Managed Service for
 * Prometheus with SigV4-signed requests. The query is evaluated at the
 * server's own now (no `time` is sent: one clock, the server's), with the
 * gate's timeout passed to the server too, so it stops evaluating when we
 * stop waiting.
 *
 * A tick asks each distinct (address, query, credential) once, at most
 * `concurrency` at a time, each within its gates' shortest timeout.
 *
 * A judged gate (one with a `judge`) is read as two range queries
 * (`/api/v1/query_range`) over the same window, its query's `{{cohort}}` or
 * `{{version}}` filled in once for the canary and once for the baseline.
 *
 * A sequential-rate gate is read as four range queries, requests and errors
 * of each cohort, on a grid of steps fixed at the stage's period start, each
 * step read once it has settled, so every reading sees the steps the last one
 * saw (`{{step}}` is the step as a PromQL duration, for `increase(…[{{step}}])`).
 * A sample-ratio gate is read the same way as two: each cohort's count (`query`).
 *
 * Every request goes through the operator's outbound policy: to an
 * allow-listed origin, with the credential the operator bound to that
 * origin, the answer capped at 64 KiB. Nothing that was sent (a secret, an
 * Authorization header) is kept in the answer or the reason a reading stores.
 */
export interface PrometheusProviderOptions {
  readonly concurrency?: number;
  /** The outbound requests (default: none allowed until the operator allow-lists origins). */
  readonly outbound?: OutboundClient & { readonly policy: OutboundPolicy };
  /** Where the credentials' secrets are read (default: this process's environment and files). */
  readonly secrets?: SecretSource;
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

const keyOf = (g: PrometheusGate) => JSON.stringify([g.address, g.query, g.credential ?? null]);

export class PrometheusProvider implements GateProvider<PrometheusGate> {
  private readonly concurrency: number;
  private readonly outbound: OutboundClient & { readonly policy: OutboundPolicy };
  private readonly secrets: SecretSource;
  private readonly sign: typeof sigv4Headers;

  constructor(o: PrometheusProviderOptions = {}) {
    this.concurrency = o.concurrency ?? 16;
    this.outbound = o.outbound ?? new OutboundHttp(OutboundPolicy.none());
    this.secrets = o.secrets ?? new OperatorSecrets();
    this.sign = o.sign ?? sigv4Headers;
  }

  async read(
    gates: readonly PrometheusGate[],
    o: { readonly now?: number; readonly signal: AbortSignal; readonly contexts?: readonly GateContext[] },
  ): Promise<ProviderResult[]> {
    const plain = gates.filter((g) => !g.judge);
    const byKey = new Map<string, PrometheusGate[]>();
    for (const g of plain) byKey.set(keyOf(g), [...(byKey.get(keyOf(g)) ?? []), g]);
    const distinct = [...byKey.entries()];
    const judged = gates.flatMap((g, i) => (g.judge ? [{ g, context: o.contexts?.[i] }] : []));
    const now = o.now ?? Date.now();
    const [answers, cohorts] = await Promise.all([
      mapLimit(distinct, this.concurrency, async ([, same]) => {
        const got = await this.fetch(same[0]!, Math.min(...same.map((g) => g.timeoutSeconds)), o.signal, 'query', { query: same[0]!.query });
        return 'text' in got ? scrubbed(resultOf(got.text), got.sent) : got;
      }),
      mapLimit(judged, Math.max(1, this.concurrency >> 1), ({ g, context }) => this.cohorts(g, context, now, o.signal)),
    ]);
    const byQuery = new Map(distinct.map(([key], i) => [key, answers[i]!]));
    const byGate = new Map(judged.map(({ g }, i) => [g, cohorts[i]!]));
    return gates.map((g) => byGate.get(g) ?? byQuery.get(keyOf(g))!);
  }

  /** A judged gate: each cohort's series over the same range, or why not. */
  private async cohorts(gate: PrometheusGate, context: GateContext | undefined, now: number, signal: AbortSignal): Promise<ProviderResult> {
    if (!context) return { kind: 'error', message: 'a judged gate is read for a rollout: no rollout was given', answer: '' };
    const stable = context.stableVersion;
    if ([gate.query, gate.requestsQuery ?? ''].some((q) => q.includes('{{version}}')) && stable === null) {
      return { kind: 'error', message: 'the rollout names no stableVersion: a {{version}} query cannot find the baseline', answer: '' };
    }
    if (gate.judge && isCountsJudge(gate.judge)) return this.counts(gate, context, now, signal);
    const { windowSeconds, stepSeconds } = judgedRange(gate);
    const end = Math.floor(now / 1000);
    // Never before the stage's period began: older points are another split's.
    const start = Math.min(end, Math.max(end - windowSeconds, Math.ceil((context.periodStart ?? 0) / 1000)));
    const read = async (cohort: 'canary' | 'baseline'): Promise<ProviderResult | readonly (number | null)[]> => {
      const query = cohortQuery(gate.query, cohort, cohort === 'canary' ? context.newVersion : (stable ?? ''));
      const got = await this.fetch(gate, gate.timeoutSeconds, signal, 'query_range', {
        query,
        start: String(start),
        end: String(end),
        step: `${stepSeconds}s`,
      });
      if (!('text' in got)) return { ...got, ...('message' in got ? { message: `${cohort}: ${got.message}` } : {}) };
      const r = rangeResultOf(got.text);
      if (isSeries(r)) return r;
      return scrubbed(
        r.kind === 'several' ? { kind: 'error', message: `the query returned ${r.count} series; a judged gate needs one per cohort`, answer: '' } : r,
        got.sent,
      );
    };
    const [canary, baseline] = await Promise.all([read('canary'), read('baseline')]);
    if (!isSeries(canary)) return canary;
    if (!isSeries(baseline)) return baseline;
    return { kind: 'cohorts', canary, baseline, answer: '' };
  }

  /**
   * A counts gate: each cohort's requests and errors in every whole step since the period began. The
   * grid starts at the period's start, so a step's point is the same at every reading.
   */
  private async counts(gate: PrometheusGate, context: GateContext, now: number, signal: AbortSignal): Promise<ProviderResult> {
    // A sequential-rate gate counts requests (requestsQuery) and errors (query); a sample-ratio gate one count (query).
    const withErrors = gate.requestsQuery !== undefined;
    const requestsQuery = gate.requestsQuery ?? gate.query;
    const { stepSeconds } = judgedRange(gate);
    const { anchor, steps } = countGrid({
      periodStart: context.periodStart ?? now,
      now,
      stepSeconds,
      settleSeconds: gate.settleSeconds ?? DEFAULT_SETTLE_SECONDS,
    });
    const none: StepCounts = { requests: [], errors: [] };
    if (steps === 0) return { kind: 'counts', canary: none, baseline: none, percent: context.stage.percent, answer: '' };
    if (steps > MAX_JUDGED_POINTS) {
      return {
        kind: 'error',
        message: `the stage has run ${steps} steps of ${stepSeconds} s, more than the ${MAX_JUDGED_POINTS} a reading holds: give the gate a longer stepSeconds`,
        answer: '',
      };
    }
    const first = anchor + stepSeconds;
    const read = async (cohort: 'canary' | 'baseline', what: 'requests' | 'errors'): Promise<ProviderResult | readonly (number | null)[]> => {
      const version = cohort === 'canary' ? context.newVersion : (context.stableVersion ?? '');
      const query = cohortQuery(what === 'requests' ? requestsQuery : gate.query, cohort, version).replaceAll('{{step}}', `${stepSeconds}s`);
      const got = await this.fetch(gate, gate.timeoutSeconds, signal, 'query_range', {
        query,
        start: String(first),
        end: String(anchor + steps * stepSeconds),
        step: `${stepSeconds}s`,
      });
      if (!('text' in got)) return { ...got, ...('message' in got ? { message: `${cohort} ${what}: ${got.message}` } : {}) };
      const r = gridResultOf(got.text, first, stepSeconds, steps);
      if (isSeries(r)) return r;
      return scrubbed(
        r.kind === 'several' ? { kind: 'error', message: `the ${what} query returned ${r.count} series; a judged gate needs one per cohort`, answer: '' } : r,
        got.sent,
      );
    };
    const got = await Promise.all(
      withErrors
        ? [read('canary', 'requests'), read('canary', 'errors'), read('baseline', 'requests'), read('baseline', 'errors')]
        : [read('canary', 'requests'), read('baseline', 'requests')],
    );
    const bad = got.find((r) => !isSeries(r));
    if (bad) return bad as ProviderResult;
    const [cn, ce, bn, be] = (withErrors ? got : [got[0], [], got[1], []]) as (readonly (number | null)[])[];
    return { kind: 'counts', canary: { requests: cn!, errors: ce! }, baseline: { requests: bn!, errors: be! }, percent: context.stage.percent, answer: '' };
  }

  /** The answer's text, with what was sent (to scrub from anything kept), or the error as a result. */
  private async fetch(
    gate: PrometheusGate,
    timeoutSeconds: number,
    signal: AbortSignal,
    path: 'query' | 'query_range',
    params: Record<string, string>,
  ): Promise<{ text: string; sent: readonly string[] } | ProviderResult> {
    const sent: string[] = [];
    try {
      const text = await deadline(timeoutSeconds * 1000, signal, (s) => this.request(gate, path, params, timeoutSeconds, s, sent));
      return { text, sent };
    } catch (err) {
      return scrubbed(
        { kind: 'error', message: `prometheus ${new URL(gate.address).host}: ${reason(err)}`, answer: err instanceof PrometheusAnswerError ? err.answer : '' },
        sent,
      );
    }
  }

  /** `sent` collects what must never be kept: the secrets and header values this request carried. */
  private async request(
    gate: PrometheusGate,
    path: 'query' | 'query_range',
    params: Record<string, string>,
    timeoutSeconds: number,
    signal: AbortSignal,
    sent: string[],
  ): Promise<string> {
    const url = `${gate.address.replace(/\/+$/, '')}/api/v1/${path}`;
    const policy = this.outbound.policy;
    // Checked again at every read: the operator's list may have changed since the spec was accepted.
    const refused =
      policy.refuseUrl(url, `gate ${gate.name} address`) ??
      (gate.credential === undefined ? null : policy.refuseCredential(gate.credential, url, `gate ${gate.name} credential`));
    if (refused) throw new OutboundRefusedError(refused);
    const body = new URLSearchParams({ ...params, timeout: `${timeoutSeconds}s` }).toString();
    const cred = gate.credential === undefined ? null : policy.credential(gate.credential);
    const headers = await this.authorized(cred, url, body, { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, sent);
    const res = await this.outbound.request({ url, method: 'POST', headers, body, signal });
    if (res.status === 401 || res.status === 403) this.forget(cred);
    if (res.status < 200 || res.status >= 300) {
      // Prometheus explains a refusal in JSON ({"status":"error","errorType":…,"error":…}); a proxy may not.
      const why = parseJson(res.text) as { errorType?: string; error?: string } | undefined;
      throw new PrometheusAnswerError(
        why?.error ? `HTTP ${res.status} ${why.errorType ?? ''}: ${why.error}`.replace(' :', ':') : `HTTP ${res.status} ${res.statusText}`,
        res.text,
      );
    }
    return res.text;
  }

  private authorized(cred: Credential | null, url: string, body: string, headers: Record<string, string>, sent: string[]): Promise<Record<string, string>> {
    return credentialHeaders(
      cred,
      {
        secrets: this.secrets,
        body,
        headers,
        now: Date.now(),
        accepts: ['basic', 'bearer', 'sigv4'],
        refusal: 'an hmac credential signs webhook hooks; a Prometheus gate takes a basic, bearer or sigv4 one',
        sigv4: (region, h) => this.sign({ service: 'aps', region }, { method: 'POST', url: new URL(url), headers: h, body }),
      },
      sent,
    );
  }

  private forget(cred: Credential | null): void {
    if (cred?.type === 'basic') this.secrets.forget(cred.password);
    if (cred?.type === 'bearer') this.secrets.forget(cred.token);
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
    Array.isArray(sample) && typeof sample[1] === 'string'
      ? { kind: 'number', value: Number(sample[1].replace(/^\+?Inf$/, 'Infinity').replace(/^-Inf$/, '-Infinity')), answer }
      : { kind: 'error', message: 'a sample without a value', answer };
  if (resultType === 'scalar') return number(result);
  if (resultType === 'vector' && Array.isArray(result)) {
    if (result.length === 0) return { kind: 'empty', answer };
    if (result.length > 1) return { kind: 'several', count: result.length, answer };
    return number((result[0] as { value?: unknown }).value);
  }
  if (resultType === 'matrix') return { kind: 'error', message: 'the query returned a range vector; a gate needs an instant value (drop the [range])', answer };
  return { kind: 'error', message: `a ${String(resultType)} result; a gate needs a scalar or a one-sample vector`, answer };
}

/** What a range query's answer says: one series, oldest point first (NaN and ±Inf points missing: null; no series: none), or why not. */
export function rangeResultOf(text: string): readonly (number | null)[] | ProviderResult {
  const answer = '';
  const body = parseJson(text) as QueryResponse | undefined;
  if (!body || body.status !== 'success' || !body.data) return { kind: 'error', message: `not a query answer${body?.error ? `: ${body.error}` : ''}`, answer };
  const { resultType, result } = body.data;
  if (resultType !== 'matrix' || !Array.isArray(result)) return { kind: 'error', message: `a ${String(resultType)} result from a range query`, answer };
  if (result.length === 0) return [];
  if (result.length > 1) return { kind: 'several', count: result.length, answer };
  const points = (result[0] as { values?: unknown }).values;
  if (!Array.isArray(points)) return { kind: 'error', message: 'a series without values', answer };
  return points.map((p) => {
    const v = Array.isArray(p) && typeof p[1] === 'string' ? Number(p[1]) : NaN;
    return Number.isFinite(v) ? v : null;
  });
}

/**
 * A range answer laid on a grid of `count` steps from `first` (seconds): the point at each step, null
 * where the series has none. No series at all is every step empty (nothing was counted).
 */
export function gridResultOf(text: string, first: number, step: number, count: number): readonly (number | null)[] | ProviderResult {
  const body = parseJson(text) as QueryResponse | undefined;
  if (!body || body.status !== 'success' || !body.data)
    return { kind: 'error', message: `not a query answer${body?.error ? `: ${body.error}` : ''}`, answer: '' };
  const { resultType, result } = body.data;
  if (resultType !== 'matrix' || !Array.isArray(result)) return { kind: 'error', message: `a ${String(resultType)} result from a range query`, answer: '' };
  if (result.length > 1) return { kind: 'several', count: result.length, answer: '' };
  const grid: (number | null)[] = Array.from({ length: count }, () => null);
  const points = result.length ? (result[0] as { values?: unknown }).values : [];
  if (!Array.isArray(points)) return { kind: 'error', message: 'a series without values', answer: '' };
  for (const p of points) {
    if (!Array.isArray(p) || typeof p[0] !== 'number' || typeof p[1] !== 'string') continue;
    const i = Math.round((p[0] - first) / step);
    const v = Number(p[1]);
    if (i >= 0 && i < count && Number.isFinite(v)) grid[i] = v;
  }
  return grid;
}

const isSeries = (r: readonly (number | null)[] | ProviderResult): r is readonly (number | null)[] => Array.isArray(r);

/** The query with its cohort named: `{{cohort}}` as canary or baseline, `{{version}}` as the version it runs (as a PromQL string's content). */
export function cohortQuery(query: string, cohort: 'canary' | 'baseline', version: string): string {
  const quoted = version.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  return query.replaceAll('{{cohort}}', cohort).replaceAll('{{version}}', quoted);
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
  if (err instanceof SecretNotFoundError) return `credential: ${err.message}`;
  const cause = (err as { cause?: unknown }).cause;
  if (err instanceof Error && err.message === 'fetch failed' && cause) {
    const c = cause as { code?: string; message?: string };
    return c.code && !String(c.message).includes(c.code) ? `${c.code}: ${c.message}` : errorMessage(cause);
  }
  return errorMessage(err);
}
