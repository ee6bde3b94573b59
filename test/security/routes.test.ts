/**
 * Every decision about a request is made on the router's match, never on the
 * path as spelled: against a real node with authentication on, every route
 * of the API is asked under many spellings of its path (a trailing or doubled
 * slash, percent-escapes, dot segments, another case, backslashes…) with
 * tokens of each scope, and each spelling is either refused or decided
 * exactly as the path in its one spelling is. Then the instances found from
 * outside, one test each: the attack, its refusal, and a read afterwards
 * showing nothing changed.
 */
import { request } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';
import { apiLambdaHandler } from '../../functions/api.js';
import type { Runtime } from '../../functions/runtime.js';
import { ROUTES, type RouteDef } from '../../shared/api/contract.js';
import { SCOPES, type Scope } from '../../shared/auth/scopes.js';
import { mintToken } from '../../shared/auth/tokens.js';
import { SPOT_INTERRUPTION } from '../../shared/drain/sources.js';
import { alarmStateChange } from '../support/cloudwatch/events.js';
import { eventually } from '../support/gate.js';
import { nodeUnderTest } from '../support/node-under-test.js';
import { reportUnaddressable } from '../../shared/runtimes/node/node-api.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';

const dir = mkdtempSync(join(tmpdir(), 'rollout-routes-'));
const root = mintToken('root', [...SCOPES]);
const byScope = Object.fromEntries(SCOPES.map((s) => [s, mintToken(`only-${s}`, [s])])) as Record<Scope, ReturnType<typeof mintToken>>;
const operator = mintToken('operator', ['read', 'operate']);
const admin = mintToken('admin', ['read', 'operate', 'admin']);
writeFileSync(join(dir, 'tokens'), [root, operator, admin, ...Object.values(byScope)].map((t) => t.line).join('\n') + '\n');

let target: Awaited<ReturnType<typeof nodeUnderTest>>;
let port: number;

beforeAll(async () => {
  target = await nodeUnderTest({ auth: { tokensFile: join(dir, 'tokens') }, rateLimit: { perAddress: 0, perCredential: 0, burstSeconds: 1 } });
  port = Number(new URL(target.url).port);
}, 60_000);

afterAll(async () => {
  await target?.close();
});

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown> | null;
}

/** One request with its target sent exactly as given (fetch would resolve dot segments and backslashes first). */
function send(method: string, path: string, o: { token?: string; body?: unknown } = {}): Promise<Answer> {
  const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: {
          host: `127.0.0.1:${port}`,
          ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}),
          ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: Record<string, unknown> | null = null;
          if ((res.headers['content-type'] ?? '').startsWith('application/json') && text) body = JSON.parse(text) as Record<string, unknown>;
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const spec = (version: string, gates: Record<string, unknown> = {}) => ({
  target: { service: 'checkout', version },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600, gates },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});
const rollout = async (id: string) =>
  (await send('GET', `/rollouts/${id}`, { token: root.token })).body as { state: string; attempt: number; version: number; stages: { phase: string }[] };

async function started(id: string, gates: Record<string, unknown> = {}): Promise<void> {
  expect((await send('POST', '/rollouts', { token: admin.token, body: { id, spec: spec(id, gates) } })).status).toBe(201);
  await eventually(`${id} has started`, 20_000, async () => (await rollout(id)).stages[0]?.phase === 'active');
}

/** A small seeded generator (mulberry32): the same seed, the same spellings, so a failure is replayed by its seed. */
function generator(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)]! };
}

/** How many kinds of mutation respell() knows. */
const KINDS = 11;
const hex = (c: string, upper: boolean) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`;

/**
 * Another spelling of `path` (segments after the leading slash; `fixed[i]`:
 * whether segment i is the route's own, not a parameter): one to three
 * mutations, each one a client, proxy or URL parser might read as the same path.
 */
function respell(rng: ReturnType<typeof generator>, segments: readonly string[], fixed: readonly boolean[], only?: number): string {
  let segs = [...segments];
  let fix = [...fixed];
  let prefix = '';
  let suffix = '';
  let joiner = '/';
  const mutations = only === undefined ? 1 + rng.int(3) : 1;
  for (let m = 0; m < mutations; m++) {
    const at = rng.int(segs.length);
    switch (only ?? rng.int(KINDS)) {
      case 0: // a trailing slash, or two
        suffix += rng.pick(['/', '//']);
        break;
      case 1: // a doubled slash before a segment
        segs = segs.map((s, i) => (i === at ? `/${s}` : s));
        break;
      case 2: // a leading double slash (a network-path reference to a parser)
        prefix = '/';
        break;
      case 3: {
        // one character of a segment percent-encoded (fixed part or parameter)
        const s = segs[at]!;
        if (!s.length || s.includes('%')) break;
        const i = rng.int(s.length);
        segs[at] = s.slice(0, i) + hex(s[i]!, rng.int(2) === 0) + s.slice(i + 1);
        break;
      }
      case 4: // two segments joined by an encoded slash
        if (at + 1 < segs.length) {
          segs.splice(at, 2, `${segs[at]}${rng.pick(['%2F', '%2f'])}${segs[at + 1]}`);
          fix.splice(at, 2, false);
        }
        break;
      case 5: // a dot segment
        segs.splice(at, 0, rng.pick(['.', '%2e', '%2E']));
        fix.splice(at, 0, true);
        break;
      case 6: // a segment and a parent segment
        segs.splice(at, 0, rng.pick(['x', 'rollouts', 'runs', 'events']), rng.pick(['..', '%2e%2e', '.%2E', '%2E.']));
        fix.splice(at, 0, true, true);
        break;
      case 7: {
        // another case in the route's own part (a parameter in another case is another id)
        const owned = segs.map((_, i) => i).filter((i) => fix[i] && /[a-z]/.test(segs[i]!));
        if (!owned.length) break;
        const i = rng.pick(owned);
        segs[i] = rng.int(2) ? segs[i]!.toUpperCase() : segs[i]!.replace(/[a-z]/, (c) => c.toUpperCase());
        break;
      }
      case 8: // backslashes for slashes (WHATWG URL reads them as slashes)
        joiner = rng.pick(['\\', '/\\']);
        break;
      case 9: // an overlong or stray escape
        segs[at] = `${segs[at]}${rng.pick(['%C0%AE', '%', '%2', '%zz', ';x=1'])}`;
        break;
      case 10: // a fragment, or an empty query
        suffix += rng.pick(['#x', '?', '?#']);
        break;
    }
  }
  fix = fix.slice(0, segs.length);
  return `${prefix}/${segs.join(joiner)}${suffix}`;
}

/** `path` with one to three characters of its parameter percent-escaped: the same id, spelled otherwise. */
function escapeParam(rng: ReturnType<typeof generator>, segments: readonly string[], fixed: readonly boolean[]): string {
  const segs = [...segments];
  const at = fixed.indexOf(false);
  const chars = [...segs[at]!];
  for (let k = 1 + rng.int(3); k > 0; k--) {
    const i = rng.int(chars.length);
    if (!chars[i]!.startsWith('%')) chars[i] = hex(chars[i]!, rng.int(2) === 0);
  }
  segs[at] = chars.join('');
  return `/${segs.join('/')}`;
}

/** How an answer decided: refused before any route ran (the target, no route, no credential or scope), or decided with this status. */
function outcome(a: Answer): 'refused' | number {
  const error = typeof a.body?.error === 'string' ? a.body.error : '';
  if (a.status === 401 || a.status === 403) return 'refused';
  // The target (or an id a spelling made of it) refused before any lookup.
  if (a.status === 400 && /^(path |request target |a request target |path segment |rollout id in the path|run id in the path)/.test(error)) return 'refused';
  if ((a.status === 404 && /^(no route for|unknown command)/.test(error)) || a.status === 405) return 'refused';
  return a.status;
}

/** What each route is sent: a body its handler refuses after the scope is judged (so no spelling changes anything), for each scope it may need. */
function bodies(r: RouteDef): unknown[] {
  if (r.method === 'GET') return [undefined];
  if (r.id === 'postEvent')
    return [
      { type: 'rollout.nothing' },
      { source: 'aws.ec2', 'detail-type': SPOT_INTERRUPTION, detail: {} },
      { source: 'aws.cloudwatch', 'detail-type': 'CloudWatch Alarm State Change', detail: {} },
    ];
  return [{ unexpected: true }];
}

describe('every route, every spelling', () => {
  it('each spelling of each route is refused, or decided as its one spelling is, for tokens of each scope; and nothing changes', async () => {
    await started('prop-ro');
    expect((await send('POST', '/runs', { token: admin.token, body: { id: 'prop-run', spec: { kind: 'noop' }, items: [{ n: 1 }] } })).status).toBe(201);
    const before = await rollout('prop-ro');
    const seed = Number(process.env.ROUTES_SEED ?? 20_261_206);
    const rng = generator(seed);
    // Half the requests carry every scope: those reach the handlers, where a spelling decided otherwise would show.
    const tokens: (string | undefined)[] = [
      undefined,
      root.token,
      ...Object.values(byScope).map((t) => t.token),
      ...Array<string>(SCOPES.length).fill(root.token),
    ];
    const canonical = new Map<string, Answer>();
    const failures: string[] = [];
    let decided = 0;
    let refused = 0;
    for (const r of ROUTES) {
      const id = r.tag === 'runs' ? 'prop-run' : 'prop-ro';
      const path = r.path.replace('{id}', id);
      const segments = path === '/' ? [''] : path.slice(1).split('/');
      const fixed =
        r.path === '/'
          ? [true]
          : r.path
              .slice(1)
              .split('/')
              .map((s) => !s.startsWith('{'));
      const query = r.id === 'rolloutAssignment' ? '?entity=u-1' : '';
      for (const body of bodies(r)) {
        // Each kind of mutation alone, with each token; then mixtures, and escapes within the id alone, with tokens drawn at random.
        const asked: [string, string | undefined][] = [];
        for (let kind = 0; kind < KINDS; kind++)
          for (const token of tokens.slice(0, SCOPES.length + 2)) asked.push([respell(rng, segments, fixed, kind), token]);
        for (let n = 0; n < 12; n++)
          asked.push([n % 2 && fixed.includes(false) ? escapeParam(rng, segments, fixed) : respell(rng, segments, fixed), rng.pick(tokens)]);
        for (const [spelling, token] of asked) {
          const spelled = spelling + query;
          const key = `${r.id} ${JSON.stringify(body)} ${token ?? ''}`;
          let want = canonical.get(key);
          if (!want) canonical.set(key, (want = await send(r.method, path + query, { token, body })));
          const got = await send(r.method, spelled, { token, body });
          const how = outcome(got);
          if (how === 'refused') {
            refused++;
            continue;
          }
          decided++;
          // Decided past the router: as the one spelling is, status and all (a scope refused there is refused here).
          if (outcome(want) !== how)
            failures.push(
              `seed ${seed}: ${r.method} ${spelled} (${r.id}, token ${token ? tokens.indexOf(token) : 'none'}): ${got.status} ${JSON.stringify(got.body).slice(0, 160)}; ${path + query} answered ${want.status}`,
            );
        }
      }
    }
    expect(failures).toEqual([]);
    // The generator made both kinds: spellings read as the same path (an escaped character of an id) and spellings refused.
    expect(decided).toBeGreaterThan(40);
    expect(refused).toBeGreaterThan(1_000);
    const after = await rollout('prop-ro');
    expect([after.state, after.attempt, after.version]).toEqual([before.state, before.attempt, before.version]);
    expect(
      ((await send('GET', '/rollouts?state=all&limit=500', { token: root.token })).body as { rollouts: { id: string }[] }).rollouts.map((x) => x.id),
    ).toEqual(['prop-ro']);
  }, 180_000);
});

describe('the instances found from outside', () => {
  const signaller = () => byScope.signal.token;

  it('an AWS alarm change sent to /events/ or /events// with a signal token is refused, and the rollout gated on the alarm runs on', async () => {
    await started('gated', { alarms: ['svc-5xx'] });
    const envelope = alarmStateChange('svc-5xx', 'ALARM', new Date().toISOString().replace('Z', '+0000'));
    for (const path of ['/events/', '/events//', '//events', '/events/.', '/%65vents']) {
      const r = await send('POST', path, { token: signaller(), body: envelope });
      expect(outcome(r), `${path}: ${r.status} ${JSON.stringify(r.body)}`).toBe('refused');
      expect(r.status, path).not.toBe(202);
    }
    expect(await send('POST', '/events', { token: signaller(), body: envelope })).toMatchObject({
      status: 403,
      body: { error: 'only-signal lacks the "forward" scope, which POST /events needs' },
    });
    expect((await rollout('gated')).state).toBe('running');
    // The same envelope with forward, on /events, is acted on: what the refusals above kept from happening.
    expect((await send('POST', '/events', { token: byScope.forward.token, body: envelope })).status).toBe(202);
    await eventually('the alarm rolled the stage back', 20_000, async () => (await rollout('gated')).state === 'rolled_back');
  }, 60_000);

  it('a Spot interruption sent to /events// with a signal token is refused, and the worker on that instance is not drained', async () => {
    const key = { instanceId: 'i-0123456789abcdef7', runId: 'drained-run', workerId: 'w-1' };
    await target.node.plane.registry.register({ ...key, provider: 'aws' }, Date.now());
    const notice = {
      source: 'aws.ec2',
      'detail-type': SPOT_INTERRUPTION,
      time: new Date().toISOString(),
      detail: { 'instance-id': key.instanceId, 'instance-action': 'terminate' },
    };
    const state = async () => (await target.node.plane.registry.list()).find((w) => w.workerId === key.workerId)?.state;
    for (const path of ['/events//', '/events/', '/events/%2e']) {
      const r = await send('POST', path, { token: signaller(), body: notice });
      expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBe(400);
    }
    expect((await send('POST', '/events', { token: signaller(), body: notice })).status).toBe(403);
    expect(await state()).toBe('active');
    const forwarded = await send('POST', '/events', { token: byScope.forward.token, body: notice });
    expect(forwarded.status, JSON.stringify(forwarded.body)).toBe(202);
    expect(await state()).toBe('draining');
  }, 60_000);

  it('an anonymous GET // is a 400 naming the empty segment, not a 500', async () => {
    const r = await send('GET', '//');
    expect(r).toMatchObject({ status: 400, body: { error: expect.stringMatching(/empty segment/) as unknown } });
    for (const path of ['//cluster/health', '/cluster//health', '/./', '/..', '/%2e%2e/', '\\', '*']) expect((await send('GET', path)).status, path).toBe(400);
    // The node still answers.
    expect((await send('GET', '/cluster/health')).status).toBe(200);
  });

  it('a rollout or run with the id . or .. is refused at creation, naming the id; none is stored', async () => {
    for (const id of ['.', '..']) {
      const ro = await send('POST', '/rollouts', { token: admin.token, body: { id, spec: spec('dots') } });
      expect(ro).toMatchObject({ status: 400, body: { issues: [expect.stringMatching(/^id: .*not \. or \.\./) as unknown] } });
      const run = await send('POST', '/runs', { token: admin.token, body: { id, spec: {}, items: [1] } });
      expect(run).toMatchObject({ status: 400, body: { issues: [expect.stringMatching(/^id: .*not \. or \.\./) as unknown] } });
      expect(await target.node.plane.engine.store.load(id)).toBeNull();
      expect(await target.node.plane.stores.ledger.getRun(id)).toBeNull();
    }
    expect(await reportUnaddressable(target.node)).toEqual([]);
    // A store written before the rule (here, around the API): the node names what no path reaches.
    await target.node.plane.engine.store.create('..', parseRolloutSpec(spec('legacy')), Date.now(), 'legacy');
    expect(await reportUnaddressable(target.node)).toEqual([{ kind: 'rollout', id: '..' }]);
    // Ids of dots that are not dot segments are ids like any other, and reached by their path.
    expect((await send('POST', '/rollouts', { token: admin.token, body: { id: '...', spec: spec('three-dots') } })).status).toBe(201);
    expect((await send('GET', '/rollouts/...', { token: root.token })).status).toBe(200);
  });
});

describe('an abort is final for operate', () => {
  it('retrying an aborted rollout with operate is 403 naming admin, and promote-full after it moves nothing; admin may retry', async () => {
    await started('aborted');
    expect((await send('POST', '/rollouts/aborted/abort', { token: admin.token, body: { reason: 'bad build' } })).status).toBe(200);
    const retried = await send('POST', '/rollouts/aborted/retry', { token: operator.token, body: {} });
    expect(retried).toMatchObject({
      status: 403,
      body: { error: 'operator lacks the "admin" scope, which retrying an aborted rollout needs (aborted was aborted)' },
    });
    expect((await send('POST', '/rollouts/aborted/promote-full', { token: operator.token, body: {} })).status).toBe(409);
    const still = await rollout('aborted');
    expect([still.state, still.attempt]).toEqual(['aborted', 1]);
    const traffic = (await send('GET', '/rollouts/aborted/traffic', { token: root.token })).body as { percent: number };
    expect(traffic.percent).toBe(0);
    // An admin undoes an admin's abort.
    expect((await send('POST', '/rollouts/aborted/retry', { token: admin.token, body: {} })).status).toBe(200);
    expect(await rollout('aborted')).toMatchObject({ state: 'running', attempt: 2 });
  }, 60_000);

  it("retrying a rolled-back rollout stays operate's", async () => {
    await started('rolled', { maxErrorRate: 0.05, minRequests: 100 });
    const breach = { type: 'rollout.metrics_reported', rolloutId: 'rolled', stage: 0, requests: 1_000, errors: 500, observedAt: Date.now() };
    expect((await send('POST', '/events', { token: byScope.signal.token, body: breach })).status).toBe(202);
    await eventually('the breach rolled the stage back', 20_000, async () => (await rollout('rolled')).state === 'rolled_back');
    expect((await send('POST', '/rollouts/rolled/retry', { token: operator.token, body: {} })).status).toBe(200);
    expect(await rollout('rolled')).toMatchObject({ state: 'running', attempt: 2 });
  }, 60_000);
});

describe('the deployed API (IAM proves the route, no more)', () => {
  const quiet = { addMetric: () => undefined, hasStoredMetrics: () => false, publishStoredMetrics: () => undefined } as never;
  const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;
  /** A request as API Gateway hands it over once IAM let the caller in, answered by the API function over the node's own store. */
  const lambda = (method: string, rawPath: string, body?: unknown) =>
    apiLambdaHandler(
      () => Promise.resolve(target.node.plane as unknown as Runtime),
      {
        workQueue: () => {
          throw new Error('no runs here');
        },
      },
      silent,
      quiet,
    )({
      version: '2.0',
      routeKey: `${method} /{proxy+}`,
      rawPath,
      rawQueryString: '',
      headers: { 'content-type': 'application/json' },
      isBase64Encoded: false,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      requestContext: {
        http: { method, path: rawPath, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' },
        requestId: 'req-1',
        authorizer: { iam: { userArn: 'arn:aws:iam::000000000000:role/deployer' } },
      },
    } as unknown as APIGatewayProxyEventV2WithIAMAuthorizer);

  it('a retry of an aborted rollout is refused (403 naming admin: an operator and an admin pass IAM alike); another spelling is a 400', async () => {
    await started('aws-aborted');
    expect((await lambda('POST', '/rollouts/aws-aborted/abort', {})).statusCode).toBe(200);
    const retried = await lambda('POST', '/rollouts/aws-aborted/retry', {});
    expect(retried.statusCode, retried.body).toBe(403);
    expect(JSON.parse(retried.body!)).toMatchObject({
      error: expect.stringMatching(/lacks the "admin" scope, which retrying an aborted rollout needs/) as unknown,
    });
    expect((await rollout('aws-aborted')).state).toBe('aborted');
    for (const path of ['/rollouts/aws-aborted/retry/', '/rollouts//aws-aborted/retry', '/rollouts/aws-aborted/./retry', '//'])
      expect((await lambda('POST', path, {})).statusCode, path).toBe(400);
    expect((await rollout('aws-aborted')).state).toBe('aborted');
    expect((await lambda('GET', '/rollouts/aws-aborted')).statusCode).toBe(200);
  }, 60_000);
});
