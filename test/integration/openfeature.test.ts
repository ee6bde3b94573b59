/**
 * The OpenFeature provider through the real server SDK, against the HTTP API
 * on a real node:http server over PostgreSQL: every entity gets what
 * GET /rollouts/{id}/assignment answers for it, before and after the rollout
 * moves; revalidation by ETag (304s counted at the server); errors answered,
 * never thrown; a server that goes away served from the last good state,
 * then refused.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ErrorCode,
  InMemoryProvider,
  OpenFeature,
  ProviderEvents,
  StandardResolutionReasons,
  type Client,
  type EvaluationDetails,
  type FlagValue,
} from '@openfeature/server-sdk';
import { metrics, type Meter, type MeterProvider } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiHandler, type ApiRequest } from '../../shared/api/handler.js';
import { PROMOTION_LEASE } from '../../shared/lease/names.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { RolloutProvider, type Exposure, type RolloutProviderOptions } from '../../shared/openfeature/provider.js';
import type { Assignment } from '../../shared/rollout/assignment.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { serveApi, type HttpRequest } from '../../shared/runtimes/node/http.js';
import { openBackend, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { until } from '../support/gate.js';

const TOKEN = 'rt_openfeature_reader';
const ENTITIES = Array.from({ length: 1_000 }, (_, i) => `host-${i}`);
const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const specOf = (stableVersion: string | null) => ({
  target: { service: 'checkout', version: 'v2', ...(stableVersion ? { stableVersion } : {}) },
  stages: [
    // Gates no report satisfies: the rollout stays at 10 % until a command moves it.
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10 } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
  ],
});

/**
 * A meter that keeps what is added to each counter, by attributes: what an OpenTelemetry SDK would
 * aggregate and export (no metrics SDK is installed here; the API's Meter is what the provider talks to).
 */
class RecordingMeter {
  readonly counters = new Map<string, { options: unknown; sums: Map<string, number> }>();
  createCounter(name: string, options?: unknown) {
    const c = this.counters.get(name) ?? { options, sums: new Map<string, number>() };
    this.counters.set(name, c);
    return {
      add: (value: number, attributes: Record<string, unknown> = {}) => {
        const key = JSON.stringify(Object.fromEntries(Object.entries(attributes).sort(([a], [b]) => a.localeCompare(b))));
        c.sums.set(key, (c.sums.get(key) ?? 0) + value);
      },
    };
  }
  /** The counter's sums as `{attributes…, value}`, sorted. */
  sums(name: string): Record<string, unknown>[] {
    return [...(this.counters.get(name)?.sums ?? [])]
      .map(([k, value]) => ({ ...(JSON.parse(k) as object), value }))
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  }
}

interface Seen {
  readonly path: string;
  readonly status: number;
  readonly ifNoneMatch: string | undefined;
  readonly authorization: string | undefined;
}
interface Served extends Assignment {
  readonly entity: string;
}

describe('OpenFeature provider against the HTTP API on PostgreSQL', () => {
  let backend: LeaseBackend;
  let handle: ReturnType<typeof apiHandler>;
  let server: { url: string; close(): Promise<void> };
  /** Every request the servers answered, in order. */
  const seen: Seen[] = [];
  const recording = async (req: HttpRequest) => {
    const out = await handle(req);
    seen.push({ path: req.path, status: out.status, ifNoneMatch: req.headers['if-none-match'], authorization: req.headers.authorization });
    return out;
  };
  const trafficRequests = (id: string, since = 0) => seen.slice(since).filter((s) => s.path === `/rollouts/${id}/traffic`);
  let evaluate: (id: string) => Promise<unknown>;
  const call = (method: string, path: string, body?: unknown) =>
    handle({ method, path, body: body === undefined ? null : JSON.stringify(body), actor: 'alice' } satisfies ApiRequest);
  /** A rollout created and evaluated once by the leader: its first stage (10 %) active. */
  const rolloutAt10 = async (id: string, stableVersion: string | null = 'v1') => {
    expect((await call('POST', '/rollouts', { id, spec: specOf(stableVersion) })).status).toBe(201);
    await evaluate(id);
  };
  /** What the server answers for each entity, asked 100 at a time. */
  const served = async (id: string): Promise<Map<string, Served>> => {
    const out = new Map<string, Served>();
    for (let i = 0; i < ENTITIES.length; i += 100) {
      const query = new URLSearchParams(ENTITIES.slice(i, i + 100).map((e): [string, string] => ['entity', e]));
      const res = await fetch(`${server.url}/rollouts/${id}/assignment?${query.toString()}`);
      expect(res.status).toBe(200);
      for (const a of ((await res.json()) as { assignments: Served[] }).assignments) out.set(a.entity, a);
    }
    return out;
  };
  let domains = 0;
  /** A provider of its own, registered under a domain of its own, ready. */
  const clientWith = async (options: Partial<RolloutProviderOptions> = {}): Promise<{ provider: RolloutProvider; client: Client; domain: string }> => {
    const provider = new RolloutProvider({ baseUrl: server.url, token: TOKEN, ...options });
    const domain = `openfeature-${++domains}`;
    await OpenFeature.setProviderAndWait(domain, provider);
    return { provider, client: OpenFeature.getClient(domain), domain };
  };
  /** Resolves with the first PROVIDER_CONFIGURATION_CHANGED naming `id`. */
  const changeOf = (client: Client, id: string) =>
    new Promise<string[]>((resolve) =>
      client.addHandler(ProviderEvents.ConfigurationChanged, (d) => void (d?.flagsChanged?.includes(id) && resolve(d.flagsChanged))),
    );
  const all = <T extends FlagValue>(f: (entity: string) => Promise<EvaluationDetails<T>>) => Promise.all(ENTITIES.map(f));

  beforeAll(async () => {
    backend = await openBackend('postgres');
    const clock = new ManualClock(Date.now());
    const engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
    const elector = () => new LeaseElector(backend.store, { name: PROMOTION_LEASE, holderId: 'node-a', clock, ...LEASE });
    handle = apiHandler({
      nodeId: 'node-a',
      engine,
      leadership: campaignEachTime(elector()),
      leases: backend.store,
      ledger: backend.ledger,
      workQueue: () => {
        throw new Error('no runs here');
      },
      outbound: OutboundPolicy.none(),
      clock,
    });
    const lead = campaignEachTime(elector());
    evaluate = async (id) => engine.evaluate(id, (await lead())!);
    server = await serveApi(recording);
  });
  // Each test's providers stop refreshing with it: no test sees another's requests.
  afterEach(() => OpenFeature.close());
  afterAll(async () => {
    await server?.close();
    await backend?.close();
  });

  it('a rollout at 10 %: each of 1,000 entities gets what GET /assignment answers for it, as a string, a boolean and an object; SPLIT; one request', async () => {
    const id = 'of-split';
    await rolloutAt10(id);
    const mark = seen.length;
    const { client } = await clientWith({ maxAgeMs: 600_000 });
    const server10 = await served(id);
    const strings = await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
    const booleans = await all((e) => client.getBooleanDetails(id, false, { targetingKey: e }));
    const objects = await all((e) => client.getObjectDetails(id, {}, { targetingKey: e }));
    ENTITIES.forEach((e, i) => {
      const s = server10.get(e)!;
      expect(strings[i]).toEqual({
        flagKey: id,
        value: s.version,
        variant: s.variant,
        reason: StandardResolutionReasons.SPLIT,
        flagMetadata: {
          rolloutId: id,
          attempt: s.attempt,
          rolloutVersion: expect.any(Number) as unknown,
          state: 'running',
          percent: 10,
          bucket: s.bucket,
          stage: 'canary',
          stale: false,
          cohort: s.variant === 'new' ? 'canary' : 'baseline',
          version: s.version,
        },
      });
      expect(booleans[i]).toMatchObject({ value: s.variant === 'new', variant: s.variant, reason: StandardResolutionReasons.SPLIT });
      expect(objects[i]).toMatchObject({
        value: { version: s.version, variant: s.variant, percent: s.percent, stage: s.stage, attempt: s.attempt, bucket: s.bucket },
        reason: StandardResolutionReasons.SPLIT,
      });
    });
    expect(new Set(strings.map((d) => d.value))).toEqual(new Set(['v1', 'v2']));
    // 3,000 evaluations, one request, with the credential.
    expect(trafficRequests(id, mark)).toEqual([{ path: `/rollouts/${id}/traffic`, status: 200, ifNoneMatch: undefined, authorization: `Bearer ${TOKEN}` }]);
  });

  it("concurrent first evaluations of a rollout share one request; the refresh interval is the server's Cache-Control max-age", async () => {
    const id = 'of-concurrent';
    await rolloutAt10(id);
    const mark = seen.length;
    const { client, provider } = await clientWith();
    const answers = await Promise.all(ENTITIES.slice(0, 50).map((e) => client.getBooleanDetails(id, false, { targetingKey: e })));
    expect(answers.every((a) => a.reason === StandardResolutionReasons.SPLIT)).toBe(true);
    expect(trafficRequests(id, mark)).toHaveLength(1);
    expect(provider.cached(id)).toMatchObject({ maxAgeMs: 5_000, stale: false, etag: expect.stringMatching(/^"1\.\d+"$/) as unknown });
  });

  it('promote-full: revalidated by 304s until it moves; then PROVIDER_CONFIGURATION_CHANGED, and every entity is on the new version (STATIC)', async () => {
    const id = 'of-full';
    await rolloutAt10(id);
    const mark = seen.length;
    const { client } = await clientWith({ maxAgeMs: 20 });
    expect(new Set((await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }))).map((d) => d.reason))).toEqual(
      new Set([StandardResolutionReasons.SPLIT]),
    );
    await until('a revalidation answered 304', () => trafficRequests(id, mark).some((s) => s.status === 304));
    const changed = changeOf(client, id);
    expect((await call('POST', `/rollouts/${id}/promote-full`)).status).toBe(200);
    expect(await changed).toEqual([id]);

    const details = await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
    const server100 = await served(id);
    ENTITIES.forEach((e, i) => {
      expect(server100.get(e)).toMatchObject({ version: 'v2', variant: 'new' });
      expect(details[i]).toMatchObject({
        value: 'v2',
        variant: 'new',
        reason: StandardResolutionReasons.STATIC,
        flagMetadata: { state: 'completed', percent: 100, stage: 'all', stale: false, bucket: server100.get(e)!.bucket },
      });
    });
    expect((await client.getBooleanDetails(id, false, { targetingKey: 'anyone' })).value).toBe(true);
    // Revalidations carried the ETag, and were answered 304 while nothing changed.
    const requests = trafficRequests(id, mark);
    expect(requests[0]).toMatchObject({ status: 200, ifNoneMatch: undefined });
    expect(requests.slice(1).every((r) => r.ifNoneMatch !== undefined)).toBe(true);
    expect(new Set(requests.map((r) => r.status))).toEqual(new Set([200, 304]));
  });

  it('abort: every entity back on the stable version (STATIC), no stage', async () => {
    const id = 'of-abort';
    await rolloutAt10(id);
    const { client } = await clientWith({ maxAgeMs: 20 });
    expect((await client.getStringDetails(id, 'fallback', { targetingKey: 'host-1' })).reason).toBe(StandardResolutionReasons.SPLIT);
    const changed = changeOf(client, id);
    expect((await call('POST', `/rollouts/${id}/abort`)).status).toBe(200);
    await changed;
    const details = await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
    const server0 = await served(id);
    ENTITIES.forEach((e, i) => {
      expect(server0.get(e)).toMatchObject({ version: 'v1', variant: 'stable' });
      expect(details[i]).toMatchObject({
        value: 'v1',
        variant: 'stable',
        reason: StandardResolutionReasons.STATIC,
        flagMetadata: { state: 'aborted', percent: 0, stale: false },
      });
      expect(details[i]!.flagMetadata).not.toHaveProperty('stage');
    });
  });

  it('no stable version in the spec: an entity on stable gets the caller\'s default (DEFAULT, variant "stable"); one on the new version gets it (SPLIT)', async () => {
    const id = 'of-nostable';
    await rolloutAt10(id, null);
    const { client } = await clientWith();
    const details = await all((e) => client.getStringDetails(id, 'v1-as-deployed', { targetingKey: e }));
    const server10 = await served(id);
    ENTITIES.forEach((e, i) => {
      const s = server10.get(e)!;
      if (s.variant === 'new') expect(details[i]).toMatchObject({ value: 'v2', variant: 'new', reason: StandardResolutionReasons.SPLIT });
      else
        expect(details[i]).toMatchObject({
          value: 'v1-as-deployed',
          variant: 'stable',
          reason: StandardResolutionReasons.DEFAULT,
          flagMetadata: { percent: 10, bucket: s.bucket },
        });
      expect(details[i]!.errorCode).toBeUndefined();
    });
    expect(new Set(details.map((d) => d.reason))).toEqual(new Set([StandardResolutionReasons.SPLIT, StandardResolutionReasons.DEFAULT]));
    const stableOne = ENTITIES.find((e) => server10.get(e)!.variant === 'stable')!;
    expect((await client.getObjectDetails(id, {}, { targetingKey: stableOne })).value).toMatchObject({ version: null, variant: 'stable' });
  });

  it('exposures: every answered evaluation counted on rollout.exposures by rollout, cohort and version, and handed to onExposure with its entity; errors are not exposures', async () => {
    const id = 'of-exposures';
    await rolloutAt10(id);
    const meter = new RecordingMeter();
    const told: Exposure[] = [];
    const { client } = await clientWith({ meter: meter as unknown as Meter, onExposure: (e) => told.push(e) });
    const server10 = await served(id);
    const details = await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
    await all((e) => client.getBooleanDetails(id, false, { targetingKey: e }));
    const canary = ENTITIES.filter((e) => server10.get(e)!.variant === 'new').length;
    // Each entity evaluated twice: two exposures each, in its cohort.
    expect(meter.sums('rollout.exposures')).toEqual([
      { cohort: 'baseline', rollout: id, version: 'v1', value: 2 * (ENTITIES.length - canary) },
      { cohort: 'canary', rollout: id, version: 'v2', value: 2 * canary },
    ]);
    expect(meter.counters.get('rollout.exposures')!.options).toMatchObject({ unit: '{exposure}' });
    expect(canary).toBeGreaterThan(50);
    // The answer names the cohort and the version, for the application's own metrics.
    ENTITIES.forEach((e, i) => {
      const s = server10.get(e)!;
      expect(details[i]!.flagMetadata).toMatchObject({ cohort: s.variant === 'new' ? 'canary' : 'baseline', version: s.version });
    });
    expect(told).toHaveLength(2 * ENTITIES.length);
    expect(told[0]).toEqual({
      rolloutId: id,
      entity: ENTITIES[0],
      cohort: server10.get(ENTITIES[0]!)!.variant === 'new' ? 'canary' : 'baseline',
      version: server10.get(ENTITIES[0]!)!.version,
      attempt: 1,
      stage: 'canary',
      percent: 10,
      stale: false,
    });
    // Errors: no exposure, and no cohort in their metadata.
    const before = told.length;
    expect((await client.getStringDetails('of-nobody', 'v1', { targetingKey: 'host-1' })).errorCode).toBe(ErrorCode.FLAG_NOT_FOUND);
    expect((await client.getStringDetails(id, 'v1', {})).errorCode).toBe(ErrorCode.TARGETING_KEY_MISSING);
    expect((await client.getNumberDetails(id, 1, { targetingKey: 'host-1' })).errorCode).toBe(ErrorCode.TYPE_MISMATCH);
    expect(told).toHaveLength(before);
    expect(meter.sums('rollout.exposures').reduce((n, r) => n + (r.value as number), 0)).toBe(2 * ENTITIES.length);
  });

  it('exposures: a hook or a counter that throws costs nothing but itself; without a meter, the global meter provider, registered after the provider was made, counts from then on', async () => {
    const id = 'of-exposures-global';
    await rolloutAt10(id);
    const throwing = {
      createCounter: () => ({
        add: () => {
          throw new Error('broken SDK');
        },
      }),
    };
    const { client: broken } = await clientWith({
      meter: throwing as unknown as Meter,
      onExposure: () => {
        throw new Error('broken hook');
      },
    });
    const answered = await broken.getStringDetails(id, 'fallback', { targetingKey: 'host-1' });
    expect(answered.reason).toBe(StandardResolutionReasons.SPLIT);
    expect(answered.errorCode).toBeUndefined();

    const { client } = await clientWith();
    // No meter provider registered: the API's no-op meter, nothing to see and nothing broken.
    expect((await client.getStringDetails(id, 'fallback', { targetingKey: 'host-1' })).reason).toBe(StandardResolutionReasons.SPLIT);
    const meter = new RecordingMeter();
    const names: string[] = [];
    const registered: MeterProvider = {
      getMeter: (name) => {
        names.push(name);
        return meter as unknown as Meter;
      },
    };
    expect(metrics.setGlobalMeterProvider(registered)).toBe(true);
    try {
      await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
      const server10 = await served(id);
      const canary = ENTITIES.filter((e) => server10.get(e)!.variant === 'new').length;
      expect(meter.sums('rollout.exposures')).toEqual([
        { cohort: 'baseline', rollout: id, version: 'v1', value: ENTITIES.length - canary },
        { cohort: 'canary', rollout: id, version: 'v2', value: canary },
      ]);
      // One meter, asked for once: not one per evaluation.
      expect(names).toEqual(['rollout-control-plane']);
      // meter: null counts nothing, whatever is registered.
      const { client: silent } = await clientWith({ meter: null });
      await silent.getStringDetails(id, 'fallback', { targetingKey: 'host-1' });
      expect(meter.sums('rollout.exposures').reduce((n, r) => n + (r.value as number), 0)).toBe(ENTITIES.length);
    } finally {
      metrics.disable();
    }
  });

  it("errors are answers with the caller's default: unknown rollout FLAG_NOT_FOUND, no targetingKey TARGETING_KEY_MISSING, a number TYPE_MISMATCH", async () => {
    const mark = seen.length;
    const { client, provider } = await clientWith();
    expect(await client.getStringDetails('of-nobody', 'v1', { targetingKey: 'host-1' })).toMatchObject({
      value: 'v1',
      reason: StandardResolutionReasons.ERROR,
      errorCode: ErrorCode.FLAG_NOT_FOUND,
      errorMessage: 'of-nobody: no such rollout (rollout of-nobody not found)',
    });
    expect(await client.getBooleanDetails('of-nobody', false, { targetingKey: 'host-1' })).toMatchObject({ value: false, errorCode: ErrorCode.FLAG_NOT_FOUND });
    // The 404 is remembered for the refresh interval: asked once.
    expect(trafficRequests('of-nobody', mark)).toEqual([expect.objectContaining({ status: 404 })]);
    // Not a rollout id at all: not asked.
    expect(await client.getStringDetails('no such rollout', 'v1', { targetingKey: 'host-1' })).toMatchObject({
      value: 'v1',
      errorCode: ErrorCode.FLAG_NOT_FOUND,
    });
    expect(await client.getStringDetails('of-split', 'v1', {})).toMatchObject({
      value: 'v1',
      reason: StandardResolutionReasons.ERROR,
      errorCode: ErrorCode.TARGETING_KEY_MISSING,
    });
    expect(await client.getNumberDetails('of-split', 7, { targetingKey: 'host-1' })).toMatchObject({
      value: 7,
      reason: StandardResolutionReasons.ERROR,
      errorCode: ErrorCode.TYPE_MISMATCH,
    });
    expect(seen.slice(mark).map((s) => s.path)).toEqual(['/rollouts/of-nobody/traffic']);
    // Asked directly, the provider falls back to stable: false for a boolean.
    expect(await provider.resolveBooleanEvaluation('of-nobody', true, { targetingKey: 'host-1' })).toMatchObject({
      value: false,
      errorCode: ErrorCode.FLAG_NOT_FOUND,
    });
  });

  it('the server goes away: the last good state is served, marked stale (PROVIDER_STALE), until maxStaleMs; then ERROR with the fallback; back, and it is confirmed by a 304 (PROVIDER_READY)', async () => {
    const id = 'of-outage';
    await rolloutAt10(id);
    let down = await serveApi(recording);
    const port = Number(new URL(down.url).port);
    let now = Date.now();
    const { client, provider } = await clientWith({ baseUrl: down.url, maxAgeMs: 600_000, maxStaleMs: 60_000, now: () => now });
    const before = await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
    expect(before.every((d) => d.reason === StandardResolutionReasons.SPLIT && d.flagMetadata.stale === false)).toBe(true);

    const stale = new Promise<void>((resolve) => client.addHandler(ProviderEvents.Stale, () => resolve()));
    await down.close();
    await provider.refresh(id);
    await stale;
    expect(provider.cached(id)).toMatchObject({
      stale: true,
      error: { code: ErrorCode.GENERAL, message: expect.stringMatching(/^request failed: fetch failed: .*ECONNREFUSED/) as unknown },
    });
    now += 60_000;
    const during = await all((e) => client.getStringDetails(id, 'fallback', { targetingKey: e }));
    ENTITIES.forEach((_, i) =>
      expect(during[i]).toMatchObject({
        value: before[i]!.value,
        variant: before[i]!.variant,
        reason: StandardResolutionReasons.SPLIT,
        flagMetadata: { ...before[i]!.flagMetadata, stale: true },
      }),
    );

    now += 1;
    const past = await client.getStringDetails(id, 'fallback', { targetingKey: 'host-1' });
    expect(past).toMatchObject({
      value: 'fallback',
      reason: StandardResolutionReasons.ERROR,
      errorCode: ErrorCode.GENERAL,
      flagMetadata: { rolloutId: id, stale: true },
    });
    // Past the limit the answer is the caller's default: it names no cohort.
    expect(past.flagMetadata).not.toHaveProperty('cohort');
    expect(past.errorMessage).toMatch(/^of-outage: last confirmed 60 s ago, past the 60 s a stale state is served: request failed/);
    // Asked directly, the provider falls back to the last known stable version.
    expect(await provider.resolveStringEvaluation(id, 'fallback', { targetingKey: 'host-1' })).toMatchObject({ value: 'v1', errorCode: ErrorCode.GENERAL });

    const ready = new Promise<void>((resolve) => client.addHandler(ProviderEvents.Ready, () => resolve()));
    down = await serveApi(recording, { port });
    const mark = seen.length;
    await provider.refresh(id);
    await ready;
    expect(trafficRequests(id, mark)).toEqual([expect.objectContaining({ status: 304 })]);
    expect(await client.getStringDetails(id, 'fallback', { targetingKey: 'host-1' })).toMatchObject({
      value: before[1]!.value,
      reason: StandardResolutionReasons.SPLIT,
      flagMetadata: { stale: false },
    });
    await down.close();
  });

  it('a server answering from its own last good read (its store away): served as stale, confirmed only as of then, so maxStaleMs counts from there', async () => {
    const id = 'of-server-stale';
    await rolloutAt10(id);
    const traffic = (await (await fetch(`${server.url}/rollouts/${id}/traffic`)).json()) as Record<string, unknown>;
    let now = Date.now();
    const asOf = now - 50_000;
    const stub: Server = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'application/json', 'x-rollout-stale': 'true', 'cache-control': 'no-store' })
        .end(JSON.stringify({ ...traffic, stale: { asOf: new Date(asOf).toISOString(), reason: 'store unreachable: no answer within 500 ms' } }));
    });
    const url = await new Promise<string>((r) => stub.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(stub.address() as AddressInfo).port}`)));
    try {
      const { client, provider } = await clientWith({ baseUrl: url, maxStaleMs: 60_000, now: () => now });
      const served = await client.getStringDetails(id, 'fallback', { targetingKey: 'host-1' });
      expect(served).toMatchObject({ reason: StandardResolutionReasons.SPLIT, flagMetadata: { rolloutId: id, stale: true } });
      expect(provider.cached(id)).toMatchObject({
        stale: true,
        confirmedAt: asOf,
        error: { message: 'the server answered from its last good read (store unreachable: no answer within 500 ms)' },
      });
      now += 10_001; // 60 s after the server's last good read
      expect(await client.getStringDetails(id, 'fallback', { targetingKey: 'host-1' })).toMatchObject({
        value: 'fallback',
        reason: StandardResolutionReasons.ERROR,
        errorCode: ErrorCode.GENERAL,
      });
    } finally {
      await new Promise((r) => stub.close(r));
    }
  });

  it('a server that never answers: the evaluation is an ERROR (GENERAL) once timeoutMs has passed, not a hang', async () => {
    const hanging: Server = createServer(() => undefined);
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
    try {
      const { client } = await clientWith({ baseUrl: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`, timeoutMs: 200 });
      expect(await client.getBooleanDetails('of-split', false, { targetingKey: 'host-1' })).toMatchObject({
        value: false,
        errorCode: ErrorCode.GENERAL,
        errorMessage: 'of-split: no answer within 200 ms',
      });
    } finally {
      hanging.closeAllConnections();
      await new Promise((r) => hanging.close(r));
    }
  });

  it('at most maxRollouts are kept, the least recently evaluated dropped first; preload fetches at initialize; onClose ends the provider', async () => {
    const mark = seen.length;
    const { client, provider, domain } = await clientWith({ maxRollouts: 2, preload: ['of-split', 'of-concurrent'] });
    expect(provider.cached('of-split')?.traffic).toMatchObject({ percent: 10 });
    await client.getBooleanDetails('of-split', false, { targetingKey: 'host-1' });
    await client.getBooleanDetails('of-nostable', false, { targetingKey: 'host-1' });
    expect([provider.cached('of-split') !== undefined, provider.cached('of-concurrent') !== undefined, provider.cached('of-nostable') !== undefined]).toEqual([
      true,
      false,
      true,
    ]);
    await client.getBooleanDetails('of-concurrent', false, { targetingKey: 'host-1' });
    expect(trafficRequests('of-concurrent', mark)).toHaveLength(2);
    expect(provider.cached('of-split')).toBeUndefined();

    // A preload that cannot be fetched is named by initialize (the SDK rejects setProviderAndWait with it).
    await expect(OpenFeature.setProviderAndWait('openfeature-preload', new RolloutProvider({ baseUrl: server.url, preload: ['of-nobody'] }))).rejects.toThrow(
      /could not fetch of-nobody \(no such rollout/,
    );

    // Replaced, the provider is closed: nothing cached, evaluations are errors.
    await OpenFeature.setProviderAndWait(domain, new InMemoryProvider());
    expect(provider.cached('of-nostable')).toBeUndefined();
    expect(await provider.resolveBooleanEvaluation('of-nostable', true, { targetingKey: 'host-1' })).toMatchObject({
      value: false,
      errorCode: ErrorCode.GENERAL,
      errorMessage: 'the rollout provider is closed',
    });
  });
});
