/**
 * An OpenFeature provider (server SDK) that answers "which version does this
 * entity run" in process. A flag key names a rollout, the evaluation
 * context's `targetingKey` is the entity, and the answer is
 * `assign(traffic, entity)` over the rollout's traffic from
 * `GET /rollouts/{id}/traffic`: the rule the server uses, so the same answer
 * `GET /rollouts/{id}/assignment` gives.
 *
 * Each rollout's traffic is cached and revalidated in the background by its
 * ETag (a 304 keeps it), every Cache-Control max-age or `maxAgeMs`. While
 * refreshes fail the last good state is served, marked stale, for
 * `maxStaleMs`; after that evaluations are errors.
 *
 * Each answered evaluation is an exposure (which cohort the entity was told):
 * counted on `rollout.exposures` (OpenTelemetry, attributes rollout, cohort,
 * version), so every process's counts add up in the application's own
 * metrics pipeline and a sample-ratio gate can read the split, and handed to
 * `onExposure`, with the entity, for whatever else wants them.
 *
 * It imports the pure assignment rule and the id rule, nothing else of ours (no store, no
 * AWS SDK): it is what the package exports as `./openfeature`. `@opentelemetry/api` is
 * loaded only if it is installed (an optional peer of the client package).
 */
import {
  ErrorCode,
  GeneralError,
  OpenFeatureEventEmitter,
  ProviderEvents,
  StandardResolutionReasons,
  type EvaluationContext,
  type FlagMetadata,
  type JsonValue,
  type Provider,
  type ResolutionDetails,
} from '@openfeature/server-sdk';
import { createRequire } from 'node:module';
import { assign, type Assignment, type RolloutTraffic } from '../rollout/assignment.js';
import { ID_MESSAGE, ID_RULE } from '../ids.js';

/** The counter exposures are counted on; its Prometheus name is `rollout_exposures_total`. */
export const EXPOSURES_COUNTER = 'rollout.exposures';

/**
 * What `meter` needs: an OpenTelemetry `Meter` has it. Declared here, not imported, so the provider's
 * types name nothing of `@opentelemetry/api` for an application that does not install it.
 */
export interface ExposureMeter {
  createCounter(
    name: string,
    options?: { readonly description?: string; readonly unit?: string },
  ): { add(value: number, attributes?: Readonly<Record<string, string>>): void };
}

/** One evaluation's answer, as an exposure: which cohort the entity was told, and the version. */
export interface Exposure {
  readonly rolloutId: string;
  /** The evaluation context's `targetingKey`. Never a metric attribute: there are as many as entities. */
  readonly entity: string;
  /** `canary`: the new version; `baseline`: the stable one. */
  readonly cohort: 'canary' | 'baseline';
  /** The version it was told to run; null on stable when the spec names no stable version (the caller's default). */
  readonly version: string | null;
  readonly attempt: number;
  /** The stage whose percent is in force (null when none is). */
  readonly stage: string | null;
  readonly percent: number;
  /** Served from a state the server could not confirm on the last refresh. */
  readonly stale: boolean;
}

export interface RolloutProviderOptions {
  /** Where the API is: `https://rollouts.example.com`, or API Gateway's URL with its stage. */
  readonly baseUrl: string;
  /** A bearer credential with the `read` scope (docs/operating/security.md#security-who-may-do-what); a function for one that rotates, such as an OIDC token. */
  readonly token?: string | (() => string | Promise<string>);
  /** The fetch to send requests with (default: the global one): to sign them (SigV4 behind API Gateway), or to go through a proxy. */
  readonly fetch?: typeof fetch;
  /** How often each cached rollout is revalidated; default: the server's Cache-Control max-age (5 s). */
  readonly maxAgeMs?: number;
  /** Limit for one request, its body included; default 2,000. */
  readonly timeoutMs?: number;
  /** How long after the server last confirmed a rollout's state it is still served while refreshes fail; default 10 minutes. */
  readonly maxStaleMs?: number;
  /** Rollouts kept; the least recently evaluated is dropped first. Default 1,000. */
  readonly maxRollouts?: number;
  /** Rollouts fetched by `initialize`, which rejects naming any it could not fetch. */
  readonly preload?: readonly string[];
  /** Milliseconds since the epoch (default `Date.now`): what staleness is measured by. */
  readonly now?: () => number;
  /**
   * Where exposures are counted: the counter `rollout.exposures` (attributes `rollout`, `cohort`,
   * `version`) of this meter. Default: a meter of the global OpenTelemetry meter provider when
   * `@opentelemetry/api` is installed, which counts nothing until the application registers one (and
   * counts from when it does); null: no counter.
   */
  readonly meter?: ExposureMeter | null;
  /**
   * Called with every exposure, synchronously, before the evaluation returns: for an exposure log, or a
   * metrics library other than OpenTelemetry. Keep it cheap; what it throws is ignored.
   */
  readonly onExposure?: (exposure: Exposure) => void;
}

/** What the provider holds for one rollout (`cached`). */
export interface CachedRollout {
  /** The last state the server answered; null when it never answered one, or said the rollout does not exist. */
  readonly traffic: RolloutTraffic | null;
  readonly etag: string | null;
  /** When the server last answered 200 or 304 for it. */
  readonly confirmedAt: number | null;
  /** How often it is revalidated. */
  readonly maxAgeMs: number;
  /** The last refresh failed and `traffic` is what the server said before. */
  readonly stale: boolean;
  /** Why the last refresh failed. */
  readonly error: { readonly code: ErrorCode; readonly message: string } | null;
}

/** The id rules of the API: a flag key outside them cannot name a rollout, so it is not asked about. */
const DEFAULT_MAX_AGE_MS = 5_000;
/** A server's max-age is held within these, so `max-age=0` is not a busy loop and a long one does not outlive a rollout. */
const MIN_HEADER_MAX_AGE_MS = 1_000;
const MAX_HEADER_MAX_AGE_MS = 3_600_000;
const DEFAULT_TIMEOUT_MS = 2_000;
const DEFAULT_MAX_STALE_MS = 600_000;
const DEFAULT_MAX_ROLLOUTS = 1_000;
/** Revalidations in flight at once, so a thousand due rollouts are not a thousand simultaneous requests. */
const REFRESH_CONCURRENCY = 8;

interface Failure {
  readonly code: ErrorCode;
  readonly message: string;
}

interface Entry {
  readonly id: string;
  traffic: RolloutTraffic | null;
  etag: string | null;
  confirmedAt: number | null;
  intervalMs: number;
  /** When the background refresh (or, without a state, the next evaluation) asks again. */
  dueAt: number;
  /** The last request's failure; with a state, the state is stale. */
  failure: Failure | null;
  inflight: Promise<void> | null;
}

type Outcome =
  | { readonly kind: 'fresh'; readonly traffic: RolloutTraffic; readonly etag: string | null; readonly intervalMs: number }
  | { readonly kind: 'unchanged'; readonly intervalMs: number }
  | { readonly kind: 'failed'; readonly failure: Failure }
  /** The server answered from its own last good read (its store was away): served, but confirmed only as of `asOf`. */
  | { readonly kind: 'stale'; readonly traffic: RolloutTraffic; readonly asOf: number; readonly intervalMs: number; readonly failure: Failure };

export class RolloutProvider implements Provider {
  readonly metadata = { name: 'rollout' } as const;
  readonly runsOn = 'server' as const;
  readonly events = new OpenFeatureEventEmitter();

  private readonly baseUrl: string;
  private readonly token: RolloutProviderOptions['token'];
  private readonly fetch: typeof fetch;
  private readonly maxAgeMs: number | undefined;
  private readonly timeoutMs: number;
  private readonly maxStaleMs: number;
  private readonly maxRollouts: number;
  private readonly preload: readonly string[];
  private readonly now: () => number;
  private readonly exposures: ExposureCounter | null;
  private readonly onExposure: ((exposure: Exposure) => void) | null;

  /** In order of last evaluation, oldest first. */
  private readonly entries = new Map<string, Entry>();
  private readonly staleIds = new Set<string>();
  private reportedStale = false;
  private closed = false;
  /** Aborted by onClose: requests in flight end with it. */
  private lifetime = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private polling = false;

  constructor(options: RolloutProviderOptions) {
    const url = new URL(options.baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`baseUrl: http or https, got ${url.protocol}`);
    const positive = (name: string, v: number | undefined, fallback: number | undefined) => {
      if (v === undefined) return fallback;
      if (!(v > 0)) throw new TypeError(`${name}: a positive number of milliseconds, got ${v}`);
      return v;
    };
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.maxAgeMs = positive('maxAgeMs', options.maxAgeMs, undefined);
    this.timeoutMs = positive('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS)!;
    this.maxStaleMs = positive('maxStaleMs', options.maxStaleMs, DEFAULT_MAX_STALE_MS)!;
    this.maxRollouts = Math.floor(positive('maxRollouts', options.maxRollouts, DEFAULT_MAX_ROLLOUTS)!);
    this.preload = options.preload ?? [];
    this.now = options.now ?? Date.now;
    if (options.meter !== undefined && options.meter !== null && typeof options.meter.createCounter !== 'function')
      throw new TypeError('meter: an OpenTelemetry Meter (anything with createCounter), or null for none');
    if (options.onExposure !== undefined && typeof options.onExposure !== 'function') throw new TypeError('onExposure: a function');
    this.exposures = options.meter === null ? null : options.meter ? fixedCounter(options.meter) : globalCounter();
    this.onExposure = options.onExposure ?? null;
  }

  async initialize(): Promise<void> {
    if (this.closed) {
      this.closed = false;
      this.lifetime = new AbortController();
    }
    if (!this.preload.length) return;
    const entries = this.preload.map((id) => this.entryFor(id));
    await Promise.all(entries.map((e) => this.fetchInto(e)));
    const failed = entries.filter((e) => e.traffic === null);
    if (failed.length) throw new GeneralError(`could not fetch ${failed.map((e) => `${e.id} (${e.failure?.message ?? 'no answer'})`).join(', ')}`);
  }

  /** Requests in flight are aborted, not awaited: a fetch that ignored its signal would hold close up. */
  onClose(): Promise<void> {
    this.closed = true;
    this.lifetime.abort();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
    this.entries.clear();
    this.staleIds.clear();
    this.reportedStale = false;
    return Promise.resolve();
  }

  resolveStringEvaluation(flagKey: string, defaultValue: string, context: EvaluationContext): Promise<ResolutionDetails<string>> {
    // An entity on stable while the spec names no stable version: the caller's default is the version it runs without us.
    return this.resolve(
      flagKey,
      defaultValue,
      context,
      (a) => a.version ?? undefined,
      (t) => t?.stableVersion ?? defaultValue,
    );
  }

  resolveBooleanEvaluation(flagKey: string, defaultValue: boolean, context: EvaluationContext): Promise<ResolutionDetails<boolean>> {
    return this.resolve(
      flagKey,
      defaultValue,
      context,
      (a) => a.variant === 'new',
      () => false,
    );
  }

  resolveObjectEvaluation<T extends JsonValue>(flagKey: string, defaultValue: T, context: EvaluationContext): Promise<ResolutionDetails<T>> {
    return this.resolve(
      flagKey,
      defaultValue,
      context,
      (a) => ({ ...a }) as unknown as T,
      () => defaultValue,
    );
  }

  resolveNumberEvaluation(flagKey: string, defaultValue: number): Promise<ResolutionDetails<number>> {
    return Promise.resolve(
      failed(
        defaultValue,
        ErrorCode.TYPE_MISMATCH,
        `${flagKey}: a rollout answers a string (the version), a boolean (on the new version) or an object (the assignment), not a number`,
      ),
    );
  }

  /** Revalidates one rollout (fetching it if it is not cached) or every cached one, now. Never rejects. */
  async refresh(rolloutId?: string): Promise<void> {
    if (this.closed) return;
    await this.fetchAll(rolloutId === undefined ? [...this.entries.values()] : [this.entryFor(rolloutId)]);
    this.schedule();
  }

  /** What is held for a rollout, if anything. */
  cached(rolloutId: string): CachedRollout | undefined {
    const e = this.entries.get(rolloutId);
    if (!e) return undefined;
    return {
      traffic: e.traffic,
      etag: e.etag,
      confirmedAt: e.confirmedAt,
      maxAgeMs: e.intervalMs,
      stale: e.traffic !== null && e.failure !== null,
      error: e.failure,
    };
  }

  private async resolve<T>(
    flagKey: string,
    defaultValue: T,
    context: EvaluationContext,
    pick: (a: Assignment) => T | undefined,
    fallback: (last: RolloutTraffic | null) => T,
  ): Promise<ResolutionDetails<T>> {
    try {
      if (this.closed) return failed(fallback(null), ErrorCode.GENERAL, 'the rollout provider is closed');
      const entity = context.targetingKey;
      if (typeof entity !== 'string' || entity === '')
        return failed(
          fallback(null),
          ErrorCode.TARGETING_KEY_MISSING,
          `${flagKey}: the evaluation context has no targetingKey (the entity whose version is asked for)`,
        );
      if (!ID_RULE.test(flagKey)) return failed(fallback(null), ErrorCode.FLAG_NOT_FOUND, `${flagKey}: not a rollout id (${ID_MESSAGE})`);
      const entry = this.entryFor(flagKey, true);
      if (entry.traffic === null && (entry.failure === null || this.now() >= entry.dueAt)) await this.fetchInto(entry);
      const traffic = entry.traffic;
      if (traffic === null) {
        const failure = entry.failure ?? { code: ErrorCode.GENERAL, message: 'no answer' };
        return failed(fallback(null), failure.code, `${flagKey}: ${failure.message}`, { rolloutId: flagKey });
      }
      const assignment = assign(traffic, entity);
      const stale = entry.failure !== null;
      const flagMetadata = metadataOf(traffic, assignment, stale);
      // The cohort and version are what the entity was told: absent from an error's metadata, whose value is the caller's default.
      if (entry.failure && this.now() - (entry.confirmedAt ?? -Infinity) > this.maxStaleMs) {
        const age = Math.round((this.now() - entry.confirmedAt!) / 1000);
        return failed(
          fallback(traffic),
          entry.failure.code,
          `${flagKey}: last confirmed ${age} s ago, past the ${Math.round(this.maxStaleMs / 1000)} s a stale state is served: ${entry.failure.message}`,
          flagMetadata,
        );
      }
      const told = this.expose(traffic, assignment, entity, stale);
      const value = pick(assignment);
      const metadata = { ...flagMetadata, ...told };
      if (value === undefined) return { value: defaultValue, variant: assignment.variant, reason: StandardResolutionReasons.DEFAULT, flagMetadata: metadata };
      return { value, variant: assignment.variant, reason: reasonOf(traffic), flagMetadata: metadata };
    } catch (err) {
      return failed(fallback(null), ErrorCode.GENERAL, `${flagKey}: ${messageOf(err)}`);
    }
  }

  /** Counts an answered evaluation and tells `onExposure`; returns the cohort and version for the answer's metadata. */
  private expose(traffic: RolloutTraffic, a: Assignment, entity: string, stale: boolean): { cohort: 'canary' | 'baseline'; version?: string } {
    const cohort = a.variant === 'new' ? 'canary' : 'baseline';
    // A counter that throws (a misbehaving SDK) costs the count, never the answer.
    try {
      this.exposures?.add(traffic.rolloutId, cohort, a.version);
    } catch {
      // nothing to do: the evaluation stands
    }
    if (this.onExposure) {
      try {
        this.onExposure({
          rolloutId: traffic.rolloutId,
          entity,
          cohort,
          version: a.version,
          attempt: a.attempt,
          stage: a.stage,
          percent: a.percent,
          stale,
        });
      } catch {
        // the hook's failure is the application's; the evaluation stands
      }
    }
    return a.version === null ? { cohort } : { cohort, version: a.version };
  }

  /** The rollout's entry, created (the least recently evaluated dropped past the bound) if need be; `touch` marks it evaluated. */
  private entryFor(id: string, touch = false): Entry {
    let entry = this.entries.get(id);
    if (entry) {
      if (touch) {
        this.entries.delete(id);
        this.entries.set(id, entry);
      }
      return entry;
    }
    if (this.entries.size >= this.maxRollouts) {
      const oldest = this.entries.keys().next().value!;
      this.entries.delete(oldest);
      if (this.staleIds.delete(oldest)) this.reportStaleness();
    }
    entry = {
      id,
      traffic: null,
      etag: null,
      confirmedAt: null,
      intervalMs: this.maxAgeMs ?? DEFAULT_MAX_AGE_MS,
      dueAt: -Infinity,
      failure: null,
      inflight: null,
    };
    this.entries.set(id, entry);
    return entry;
  }

  /** One request per rollout at a time: concurrent callers share it. Never rejects. */
  private fetchInto(entry: Entry): Promise<void> {
    entry.inflight ??= this.fetchOnce(entry).finally(() => (entry.inflight = null));
    return entry.inflight;
  }

  private async fetchAll(entries: readonly Entry[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < entries.length) await this.fetchInto(entries[next++]!);
    };
    await Promise.all(Array.from({ length: Math.min(REFRESH_CONCURRENCY, entries.length) }, worker));
  }

  private async fetchOnce(entry: Entry): Promise<void> {
    const before = entry.traffic ? JSON.stringify(entry.traffic) : null;
    const outcome = await this.request(entry);
    const now = this.now();
    switch (outcome.kind) {
      case 'fresh':
        entry.traffic = outcome.traffic;
        entry.etag = outcome.etag;
        entry.intervalMs = outcome.intervalMs;
        entry.confirmedAt = now;
        entry.failure = null;
        break;
      case 'unchanged':
        entry.intervalMs = outcome.intervalMs;
        entry.confirmedAt = now;
        entry.failure = null;
        break;
      case 'stale':
        // Never newer than what we hold: the server's copy is as old as its asOf.
        if (entry.confirmedAt === null || outcome.asOf > entry.confirmedAt) {
          entry.traffic = outcome.traffic;
          entry.etag = null;
          entry.confirmedAt = outcome.asOf;
        }
        entry.intervalMs = outcome.intervalMs;
        entry.failure = outcome.failure;
        break;
      case 'failed':
        entry.failure = outcome.failure;
        // The server says there is no such rollout: nothing is left to serve, stale or not.
        if (outcome.failure.code === ErrorCode.FLAG_NOT_FOUND) {
          entry.traffic = null;
          entry.etag = null;
        }
        break;
    }
    entry.dueAt = now + entry.intervalMs;
    // Closed, or dropped from the cache while asking: nobody is told about it.
    if (this.closed || this.entries.get(entry.id) !== entry) return;
    if (entry.traffic && entry.failure) this.staleIds.add(entry.id);
    else this.staleIds.delete(entry.id);
    this.reportStaleness();
    const after = entry.traffic ? JSON.stringify(entry.traffic) : null;
    if (before !== null && after !== before)
      this.events.emit(ProviderEvents.ConfigurationChanged, {
        flagsChanged: [entry.id],
        message: after === null ? `rollout ${entry.id} no longer exists` : `rollout ${entry.id} changed`,
      });
    this.schedule();
  }

  /** PROVIDER_STALE when some rollout is served from a state the server could not confirm, PROVIDER_READY when none is any more. */
  private reportStaleness(): void {
    const stale = this.staleIds.size > 0;
    if (stale === this.reportedStale) return;
    this.reportedStale = stale;
    if (stale) this.events.emit(ProviderEvents.Stale, { message: `serving the last good state of ${[...this.staleIds].join(', ')}: refreshes are failing` });
    else this.events.emit(ProviderEvents.Ready, { message: 'every cached rollout is confirmed again' });
  }

  private async request(entry: Entry): Promise<Outcome> {
    const fail = (code: ErrorCode, message: string): Outcome => ({ kind: 'failed', failure: { code, message } });
    try {
      const headers: Record<string, string> = { accept: 'application/json' };
      const token = typeof this.token === 'function' ? await this.token() : this.token;
      if (token) headers.authorization = `Bearer ${token}`;
      if (entry.traffic && entry.etag) headers['if-none-match'] = entry.etag;
      const timeout = AbortSignal.timeout(this.timeoutMs);
      let res: Response;
      let text: string;
      try {
        // Called on its own, not as a method of the provider: a platform fetch refuses a foreign `this`.
        const send = this.fetch;
        res = await send(`${this.baseUrl}/rollouts/${encodeURIComponent(entry.id)}/traffic`, {
          headers,
          signal: AbortSignal.any([this.lifetime.signal, timeout]),
        });
        text = res.status === 304 ? '' : await res.text();
      } catch (err) {
        if (timeout.aborted) return fail(ErrorCode.GENERAL, `no answer within ${this.timeoutMs} ms`);
        return fail(ErrorCode.GENERAL, `request failed: ${messageOf(err)}`);
      }
      const intervalMs = this.maxAgeMs ?? maxAgeOf(res.headers.get('cache-control'));
      if (res.status === 304) return entry.traffic ? { kind: 'unchanged', intervalMs } : fail(ErrorCode.GENERAL, '304 Not Modified for a rollout not held');
      if (res.status === 404) return fail(ErrorCode.FLAG_NOT_FOUND, `no such rollout (${errorOf(text) ?? 'HTTP 404'})`);
      if (res.status !== 200) return fail(ErrorCode.GENERAL, `HTTP ${res.status}${errorOf(text) ? `: ${errorOf(text)}` : ''}`);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return fail(ErrorCode.PARSE_ERROR, 'the traffic answer is not JSON');
      }
      const traffic = trafficFrom(body, entry.id);
      if (typeof traffic === 'string') return fail(ErrorCode.PARSE_ERROR, `the traffic answer: ${traffic}`);
      const stale = (body as { stale?: { asOf?: unknown; reason?: unknown } }).stale;
      if (stale !== undefined) {
        const asOf = typeof stale.asOf === 'string' ? Date.parse(stale.asOf) : NaN;
        return {
          kind: 'stale',
          traffic,
          asOf: Number.isFinite(asOf) ? asOf : 0,
          intervalMs,
          failure: {
            code: ErrorCode.GENERAL,
            message: `the server answered from its last good read (${typeof stale.reason === 'string' ? stale.reason : 'its store is away'})`,
          },
        };
      }
      return { kind: 'fresh', traffic, etag: res.headers.get('etag'), intervalMs };
    } catch (err) {
      return fail(ErrorCode.GENERAL, messageOf(err));
    }
  }

  /** One timer, at the earliest time a cached state is due; unref'd, so it never keeps a process alive. */
  private schedule(): void {
    // While a round runs, the round schedules the next when it ends.
    if (this.closed || this.polling) return;
    let next = Infinity;
    for (const e of this.entries.values()) if (e.traffic) next = Math.min(next, e.dueAt);
    if (next === Infinity || (this.timer && this.timerAt <= next)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => void this.poll(), Math.min(Math.max(0, next - this.now()), 2 ** 31 - 1));
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    this.timer = null;
    this.timerAt = Infinity;
    this.polling = true;
    const now = this.now();
    try {
      await this.fetchAll([...this.entries.values()].filter((e) => e.traffic && e.dueAt <= now));
    } catch {
      // fetchAll does not reject; a timer's callback must not either.
    } finally {
      this.polling = false;
      this.schedule();
    }
  }
}

/** Counts exposures on a counter; the attributes are bounded (rollout, cohort, version), never the entity. */
interface ExposureCounter {
  add(rollout: string, cohort: 'canary' | 'baseline', version: string | null): void;
}

const EXPOSURES_OPTIONS = { description: 'Evaluations answered by the rollout provider, by rollout, cohort and version', unit: '{exposure}' };

function counting(counter: ReturnType<ExposureMeter['createCounter']>): ExposureCounter['add'] {
  return (rollout, cohort, version) => counter.add(1, version === null ? { rollout, cohort } : { rollout, cohort, version });
}

function fixedCounter(meter: ExposureMeter): ExposureCounter {
  return { add: counting(meter.createCounter(EXPOSURES_COUNTER, EXPOSURES_OPTIONS)) };
}

/** What the provider uses of `@opentelemetry/api`. */
interface OtelApi {
  readonly metrics: { getMeterProvider(): { getMeter(name: string): ExposureMeter } };
}

/**
 * The global meter provider's counter, or null when `@opentelemetry/api` is not installed. Loaded with
 * require, not import: synchronous (no exposure before it is lost) and no top-level await, which would
 * keep CommonJS from requiring this module. The global provider is looked up at each count, since an
 * application often registers its SDK after constructing the provider, and the API hands out no proxy.
 */
function globalCounter(): ExposureCounter | null {
  let api: OtelApi;
  try {
    api = createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
  } catch {
    return null;
  }
  let provider: unknown = null;
  let add: ExposureCounter['add'] = () => {};
  return {
    add(rollout, cohort, version) {
      const current = api.metrics.getMeterProvider();
      if (current !== provider) {
        provider = current;
        add = counting(current.getMeter('rollout-control-plane').createCounter(EXPOSURES_COUNTER, EXPOSURES_OPTIONS));
      }
      add(rollout, cohort, version);
    },
  };
}

function failed<T>(value: T, errorCode: ErrorCode, errorMessage: string, flagMetadata?: FlagMetadata): ResolutionDetails<T> {
  return { value, reason: StandardResolutionReasons.ERROR, errorCode, errorMessage, ...(flagMetadata ? { flagMetadata } : {}) };
}

/** SPLIT while the rollout splits its traffic; STATIC when everyone gets the same answer. */
function reasonOf(t: RolloutTraffic): typeof StandardResolutionReasons.SPLIT | typeof StandardResolutionReasons.STATIC {
  return !t.final && t.percent > 0 && t.percent < 100 ? StandardResolutionReasons.SPLIT : StandardResolutionReasons.STATIC;
}

function metadataOf(t: RolloutTraffic, a: Assignment, stale: boolean): FlagMetadata {
  return {
    rolloutId: t.rolloutId,
    attempt: t.attempt,
    rolloutVersion: t.version,
    state: t.state,
    percent: t.percent,
    bucket: a.bucket,
    stale,
    ...(a.stage === null ? {} : { stage: a.stage }),
  };
}

function maxAgeOf(cacheControl: string | null): number {
  const m = cacheControl?.match(/(?:^|[,\s])max-age\s*=\s*"?(\d+)"?/i);
  if (!m) return DEFAULT_MAX_AGE_MS;
  return Math.min(MAX_HEADER_MAX_AGE_MS, Math.max(MIN_HEADER_MAX_AGE_MS, Number(m[1]) * 1000));
}

/** The `error` of an error body (`{"error": …}`), cut short. */
function errorOf(text: string): string | null {
  try {
    const e = (JSON.parse(text) as { error?: unknown }).error;
    return typeof e === 'string' ? e.slice(0, 200) : null;
  } catch {
    return null;
  }
}

function messageOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // fetch's own message is "fetch failed"; why it failed (ECONNREFUSED…) is its cause.
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

/** The traffic answer checked field by field (a proxy's page or another service's JSON is not a state), or what is wrong with it. */
function trafficFrom(body: unknown, id: string): RolloutTraffic | string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'not an object';
  const b = body as Record<string, unknown>;
  const isString = (v: unknown): v is string => typeof v === 'string';
  const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
  const stage = b.stage as { index?: unknown; name?: unknown } | null | undefined;
  const checks: [string, boolean][] = [
    ['rolloutId', b.rolloutId === id],
    ['version', isCount(b.version)],
    ['state', isString(b.state)],
    ['service', isString(b.service)],
    ['newVersion', isString(b.newVersion)],
    ['stableVersion', b.stableVersion === null || isString(b.stableVersion)],
    ['attempt', isCount(b.attempt)],
    ['percent', typeof b.percent === 'number' && b.percent >= 0 && b.percent <= 100],
    ['stage', stage === null || (typeof stage === 'object' && stage !== undefined && isCount(stage.index) && isString(stage.name))],
    ['final', typeof b.final === 'boolean'],
  ];
  const bad = checks.find(([, ok]) => !ok);
  if (bad) return `${bad[0]} is missing or not what a rollout's traffic holds`;
  return {
    rolloutId: id,
    version: b.version as number,
    state: b.state as RolloutTraffic['state'],
    service: b.service as string,
    newVersion: b.newVersion as string,
    stableVersion: b.stableVersion as string | null,
    attempt: b.attempt as number,
    percent: b.percent as number,
    stage: stage ? { index: stage.index as number, name: stage.name as string } : null,
    final: b.final as boolean,
  };
}
