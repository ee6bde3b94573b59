/**
 * The HTTP API's routes on real stores (PostgreSQL, DynamoDB Local): status
 * codes and bodies a client relies on, leadership for commands, idempotent
 * run creation.
 */
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiHandler, AssignmentReads, type ApiDeps, type ApiRequest } from '../../shared/api/handler.js';
import { PROMOTION_LEASE } from '../../shared/lease/names.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { assign, bucketOf, type RolloutTraffic } from '../../shared/rollout/assignment.js';
import { parseTargets } from '../../shared/actuation/targets.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10 } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
  ],
};
const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

describe.each(['postgres', 'dynamodb'] as const)('HTTP API on %s', (name) => {
  let backend: LeaseBackend;
  const clock = new ManualClock(Date.now());
  const sqs = sqsClient();
  let queueUrl: string;
  /** Messages on the work queue (SQS on the test endpoint). */
  const queued = async () => {
    const a = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }));
    return Number(a.Attributes!.ApproximateNumberOfMessages);
  };
  let call: (method: string, path: string, body?: unknown, extra?: Pick<ApiRequest, 'query' | 'headers'>) => ReturnType<ReturnType<typeof apiHandler>>;
  let follower: ReturnType<typeof apiHandler>;
  /** The same API where the operator has declared one target, a Lambda alias named `api`. */
  let withTargets: ReturnType<typeof apiHandler>;
  /** One evaluation by the leader, as a promoter's tick would make it. */
  let evaluate: (id: string) => Promise<unknown>;
  /** Another handler of the leader, over `engine`, reading assignments through `reads`. */
  let leaderOver: (engine: RolloutEngine, reads: AssignmentReads) => ReturnType<typeof apiHandler>;
  /** Another leader handler, with `over` in its dependencies. */
  let leaderWith: (over: Partial<ApiDeps>) => ReturnType<typeof apiHandler>;

  beforeAll(async () => {
    backend = await openBackend(name);
    queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('api') }))).QueueUrl!;
    const engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
    const elector = (holder: string) => new LeaseElector(backend.store, { name: PROMOTION_LEASE, holderId: holder, clock, ...LEASE });
    const deps = {
      engine,
      leases: backend.store,
      ledger: backend.ledger,
      workQueue: () => new SqsWorkQueue(sqs, queueUrl),
      outbound: OutboundPolicy.none(),
      clock,
    };
    const handle = apiHandler({ ...deps, nodeId: 'node-a', leadership: campaignEachTime(elector('node-a')) });
    follower = apiHandler({ ...deps, nodeId: 'node-b', leadership: campaignEachTime(elector('node-b')) });
    withTargets = apiHandler({
      ...deps,
      nodeId: 'node-a',
      leadership: campaignEachTime(elector('node-a')),
      targets: parseTargets({ api: { type: 'lambdaAlias', functionName: 'checkout', alias: 'live' } }),
    });
    const lead = campaignEachTime(elector('node-a'));
    evaluate = async (id) => engine.evaluate(id, (await lead())!);
    leaderWith = (over) => apiHandler({ ...deps, nodeId: 'node-a', leadership: campaignEachTime(elector('node-a')), ...over });
    leaderOver = (e, assignmentReads) => apiHandler({ ...deps, engine: e, nodeId: 'node-a', leadership: campaignEachTime(elector('node-a')), assignmentReads });
    call = (method, path, body, extra) =>
      handle({
        method,
        path,
        body: body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body),
        actor: 'alice',
        ...extra,
      } satisfies ApiRequest);
  });
  afterAll(async () => {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
    await backend?.close();
  });

  it('cluster: no leader yet → 503 "no leader elected"; health answers degraded (no leader) with the store reachable', async () => {
    expect(await call('GET', '/cluster/leader')).toEqual({ status: 503, body: { error: 'no leader elected' } });
    expect(await call('GET', '/cluster/health')).toMatchObject({
      status: 200,
      body: { status: 'degraded', node_id: 'node-a', cluster_ready: false, store: 'reachable' },
    });
    expect(await call('GET', '/cluster/status')).toMatchObject({
      status: 200,
      body: { node_id: 'node-a', state: 'follower', is_leader: false, leader_id: null, leader: null, elector: 'lease' },
    });
  });

  it('rollouts: create (201, then 200 for the same id), get, list; a bad spec is a 400 that names the field', async () => {
    const created = await call('POST', '/rollouts', { id: `ro-${name}`, spec: SPEC });
    expect(created).toMatchObject({ status: 201, body: { id: `ro-${name}`, created: true }, headers: { location: `/rollouts/ro-${name}` } });
    expect((await call('POST', '/rollouts', { id: `ro-${name}`, spec: SPEC })).status).toBe(200);
    expect(await call('GET', `/rollouts/ro-${name}`)).toMatchObject({
      status: 200,
      body: { id: `ro-${name}`, state: 'running', stages: [{ name: 'canary' }, { name: 'all' }] },
    });
    expect(((await call('GET', '/rollouts')).body as { rollouts: { id: string }[] }).rollouts.map((r) => r.id)).toContain(`ro-${name}`);
    const bad = await call('POST', '/rollouts', { spec: { ...SPEC, stages: [{ name: 'x', percent: 50, bakeSeconds: 0, gates: {} }] } });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/the last stage must reach 100/);
    expect(await call('POST', '/rollouts', '{not json')).toMatchObject({
      status: 400,
      body: { error: expect.stringMatching(/^request body is not JSON/) as unknown },
    });
    expect(await call('POST', '/rollouts', { spec: SPEC, colour: 'red' })).toMatchObject({
      status: 400,
      body: { issues: [expect.stringMatching(/colour/) as unknown] },
    });
    expect((await call('GET', '/rollouts/nope')).status).toBe(404);
    // The same id with another spec is refused, not answered as if it were the same rollout.
    const stages = SPEC.stages.map((st) => ({ ...st, bakeSeconds: 30 }));
    expect(await call('POST', '/rollouts', { id: `ro-${name}`, spec: { ...SPEC, stages } })).toMatchObject({
      status: 409,
      body: { error: `rollout ro-${name} already exists with a different spec` },
    });
  });

  it('commands: the leader applies them (recorded with the caller); a follower answers 503 naming the leader; a refused transition is 409', async () => {
    await call('POST', '/rollouts', { id: `cmd-${name}`, spec: SPEC });
    const paused = await call('POST', `/rollouts/cmd-${name}/pause`, { reason: 'investigating' });
    expect(paused).toMatchObject({ status: 200, body: { action: { transition: 'pause', applied: true } } });
    expect(await follower({ method: 'POST', path: `/rollouts/cmd-${name}/resume`, body: null, actor: 'bob' })).toMatchObject({
      status: 503,
      body: { error: 'not the leader: node-a is', leader: { leader_id: 'node-a' } },
    });
    expect((await call('POST', `/rollouts/cmd-${name}/pause`)).status).toBe(409);
    expect(await call('POST', `/rollouts/cmd-${name}/launch`)).toMatchObject({
      status: 404,
      body: { error: expect.stringMatching(/unknown command launch: one of promote, promote-full/) as unknown },
    });
    expect((await call('POST', '/rollouts/unknown-id/abort')).status).toBe(404);
    expect(await call('GET', '/cluster/leader')).toMatchObject({ status: 200, body: { leader_id: 'node-a', term: 0 } });
  });

  it('assignment: which version each entity runs follows the committed state; the ETag changes with it and answers 304 while it does not', async () => {
    const id = `as-${name}`;
    await call('POST', '/rollouts', { id, spec: { ...SPEC, target: { service: 'checkout', version: 'v2', stableVersion: 'v1' } } });
    const ask = (entities: string[], headers?: Record<string, string>) =>
      call('GET', `/rollouts/${id}/assignment`, undefined, {
        query: new URLSearchParams(entities.map((e): [string, string] => ['entity', e])),
        ...(headers ? { headers } : {}),
      });
    const before = await ask(['host-1']);
    expect(before).toMatchObject({
      status: 200,
      body: { rolloutId: id, entity: 'host-1', variant: 'stable', version: 'v1', percent: 0, stage: null, attempt: 1, bucket: bucketOf(id, 'host-1') },
    });
    const etag = before.headers!.etag!;
    expect(before.headers!['cache-control']).toBe('private, max-age=5');
    expect(await ask(['host-1'], { 'if-none-match': etag })).toMatchObject({ status: 304, body: null });
    expect((await call('POST', `/rollouts/${id}/promote-full`)).status).toBe(200);
    const done = await ask(['host-1', 'host-2'], { 'if-none-match': etag });
    expect(done).toMatchObject({
      status: 200,
      body: {
        rolloutId: id,
        assignments: [
          { entity: 'host-1', variant: 'new', version: 'v2', percent: 100, stage: 'all' },
          { entity: 'host-2', variant: 'new', version: 'v2' },
        ],
      },
    });
    expect(done.headers!.etag).not.toBe(etag);
    // Bounded and named: no entity, too many, one too long; an unknown rollout.
    expect(await ask([])).toMatchObject({ status: 400, body: { error: 'entity: give 1 to 100 (?entity=E&entity=F…), got 0' } });
    expect((await ask(Array.from({ length: 101 }, (_, i) => `h${i}`))).status).toBe(400);
    expect(await ask(['ok', 'x'.repeat(257)])).toMatchObject({ status: 400, body: { error: 'entity 2: 1 to 256 characters' } });
    expect((await call('GET', '/rollouts/nope/assignment', undefined, { query: new URLSearchParams('entity=a') })).status).toBe(404);
  });

  it('traffic: the state assignment answers from, cached by the same ETag; a client evaluating it agrees with the server for every entity', async () => {
    const id = `tr-${name}`;
    await call('POST', '/rollouts', { id, spec: { ...SPEC, target: { service: 'checkout', version: 'v2', stableVersion: 'v1' } } });
    expect((await call('GET', `/rollouts/${id}/traffic`)).body).toMatchObject({ percent: 0, stage: null });
    await evaluate(id);
    const first = await call('GET', `/rollouts/${id}/traffic`);
    expect(first).toMatchObject({
      status: 200,
      body: {
        rolloutId: id,
        service: 'checkout',
        newVersion: 'v2',
        stableVersion: 'v1',
        attempt: 1,
        state: 'running',
        percent: 10,
        stage: { index: 0, name: 'canary' },
        final: false,
      },
    });
    expect(await call('GET', `/rollouts/${id}/traffic`, undefined, { headers: { 'if-none-match': first.headers!.etag! } })).toMatchObject({
      status: 304,
      body: null,
    });
    // The same answers, entity by entity, from the state alone.
    const entities = Array.from({ length: 100 }, (_, i) => `host-${i}`);
    const served = await call('GET', `/rollouts/${id}/assignment`, undefined, {
      query: new URLSearchParams(entities.map((e): [string, string] => ['entity', e])),
    });
    const traffic = (await call('GET', `/rollouts/${id}/traffic`)).body as RolloutTraffic;
    expect(entities.map((e) => ({ entity: e, ...assign(traffic, e) }))).toEqual((served.body as { assignments: unknown[] }).assignments);
    expect(new Set(entities.map((e) => assign(traffic, e).variant))).toEqual(new Set(['stable', 'new']));
    expect((await call('POST', `/rollouts/${id}/abort`)).status).toBe(200);
    const aborted = await call('GET', `/rollouts/${id}/traffic`, undefined, { headers: { 'if-none-match': first.headers!.etag! } });
    expect(aborted).toMatchObject({ status: 200, body: { state: 'aborted', percent: 0, stage: null } });
    expect(aborted.headers!.etag).not.toBe(first.headers!.etag);
    expect((await call('GET', '/rollouts/nope/traffic')).status).toBe(404);
  });

  it('targets: a spec may move only what the operator declared, and only as the target can carry it; each refusal names the field', async () => {
    const create = (spec: unknown, handle = withTargets) => handle({ method: 'POST', path: '/rollouts', body: JSON.stringify({ spec }), actor: 'alice' });
    expect(await create({ ...SPEC, actuators: ['web'] })).toMatchObject({
      status: 400,
      body: { issues: ['spec.actuators.0: no target named web is declared (declared: api)'] },
    });
    expect(await create({ ...SPEC, target: { service: 'checkout', version: '$LATEST' }, actuators: ['api'] })).toMatchObject({
      status: 400,
      body: { issues: [expect.stringMatching(/^spec\.target\.version: \$LATEST is not a published version/) as unknown] },
    });
    expect(await create({ ...SPEC, actuators: ['Not A Name'] })).toMatchObject({
      status: 400,
      body: { issues: [expect.stringMatching(/^actuators\.0: a target name/) as unknown] },
    });
    const ok = await create({ ...SPEC, target: { service: 'checkout', version: '7' }, actuators: ['api'] });
    expect(ok.status).toBe(201);
    // Nothing declared on the usual handler: any target is refused.
    expect(await call('POST', '/rollouts', { spec: { ...SPEC, actuators: ['api'] } })).toMatchObject({
      status: 400,
      body: { issues: ['spec.actuators.0: no target named api is declared (none are)'] },
    });
  });

  it('gate namespaces: a cloudwatchMetric gate reading a namespace the operator did not allow is a 400 naming the stage, gate and namespace, and nothing is stored', async () => {
    const limited = leaderWith({ gateNamespaces: ['Shop'] });
    const gate = (name: string, g: Record<string, unknown>) => ({ type: 'cloudwatchMetric', name, comparison: '<=', threshold: 0.01, ...g });
    const withGates = (...providers: unknown[]) => ({ ...SPEC, stages: [SPEC.stages[0], { ...SPEC.stages[1], gates: { minRequests: 10, providers } }] });
    const create = (id: string, spec: unknown) => limited({ method: 'POST', path: '/rollouts', body: JSON.stringify({ id, spec }), actor: 'alice' });
    const refused = await create(
      `ns-rds-${name}`,
      withGates(
        gate('shop-errors', { metric: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' } }),
        gate('db', { metric: { namespace: 'AWS/RDS', metricName: 'CPUUtilization', stat: 'Average' } }),
      ),
    );
    expect(refused).toMatchObject({
      status: 400,
      body: {
        error: expect.stringMatching(/CloudWatch namespaces/) as unknown,
        issues: [
          'spec.stages.1.gates.providers.1.metric.namespace: "AWS/RDS" is not a namespace this deployment\'s gates may read (Shop) (stage "all", gate "db")',
        ],
      },
    });
    const search = await create(
      `ns-search-${name}`,
      withGates(
        gate('any', { expression: "SEARCH('{AWS/RDS} CPUUtilization', 'Average')", metrics: { a: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' } } }),
      ),
    );
    expect(search).toMatchObject({
      status: 400,
      body: {
        issues: [expect.stringMatching(/^spec\.stages\.1\.gates\.providers\.0\.expression: SEARCH reads beyond the gate's own metrics.*gate "any"/) as unknown],
      },
    });
    // Nothing stored for either.
    expect((await call('GET', `/rollouts/ns-rds-${name}`)).status).toBe(404);
    expect((await call('GET', `/rollouts/ns-search-${name}`)).status).toBe(404);
    // The namespace allowed is accepted.
    expect((await create(`ns-shop-${name}`, withGates(gate('shop-errors', { metric: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' } })))).status).toBe(
      201,
    );
  });

  it('assignment reads are served again for their window, one read in flight per rollout; a command through any handler drops them at once', async () => {
    const id = `ar-${name}`;
    await call('POST', '/rollouts', { id, spec: { ...SPEC, target: { service: 'checkout', version: 'v2', stableVersion: 'v1' } } });
    await evaluate(id);
    let loads = 0;
    const store = new Proxy(backend.rollouts, { get: (t, k, r) => (k === 'load' ? (x: string) => (loads++, t.load(x)) : (Reflect.get(t, k, r) as unknown)) });
    const reads = new AssignmentReads(60_000);
    const engine = new RolloutEngine({ store, bus: new InProcessBus(), clock });
    const lead = leaderOver(engine, reads);
    const other = leaderOver(engine, reads);
    const ask = (h: typeof lead, e: string) =>
      h({ method: 'GET', path: `/rollouts/${id}/assignment`, body: null, actor: 'fleet', query: new URLSearchParams({ entity: e }) });
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => ask(i % 2 ? lead : other, `host-${i}`)));
    expect(answers.every((a) => a.status === 200 && (a.body as { percent: number }).percent === 10)).toBe(true);
    expect(loads).toBe(1);
    expect((await other({ method: 'POST', path: `/rollouts/${id}/promote-full`, body: null, actor: 'alice' })).status).toBe(200);
    expect(await ask(lead, 'host-1')).toMatchObject({ status: 200, body: { percent: 100, variant: 'new' } });
  });

  it("assignment with the store failing or silent: every entity is answered from the rollout's last good read, marked stale and not cacheable; with none, the error stands", async () => {
    const id = `st-${name}`;
    await call('POST', '/rollouts', { id, spec: { ...SPEC, target: { service: 'checkout', version: 'v2', stableVersion: 'v1' } } });
    await evaluate(id);
    let mode: 'up' | 'failing' | 'silent' = 'up';
    const store = new Proxy(backend.rollouts, {
      get: (t, k, r) =>
        k === 'load'
          ? (x: string) =>
              mode === 'up' ? t.load(x) : mode === 'failing' ? Promise.reject(new Error('connection refused')) : new Promise<never>(() => undefined)
          : (Reflect.get(t, k, r) as unknown),
    });
    const reads = new AssignmentReads(0, 50);
    const lead = leaderOver(new RolloutEngine({ store, bus: new InProcessBus(), clock }), reads);
    const ask = (e: string, rollout = id) =>
      lead({ method: 'GET', path: `/rollouts/${rollout}/assignment`, body: null, actor: 'fleet', query: new URLSearchParams({ entity: e }) });
    const fresh = await ask('host-1');
    expect(fresh).toMatchObject({ status: 200, body: { entity: 'host-1', percent: 10 }, headers: { etag: expect.any(String) as unknown } });
    expect((fresh.body as { stale?: unknown }).stale).toBeUndefined();
    mode = 'failing';
    expect(await ask('host-2')).toMatchObject({
      status: 200,
      body: { entity: 'host-2', percent: 10, bucket: bucketOf(id, 'host-2'), stale: { reason: 'store unreachable' } },
      headers: { 'x-rollout-stale': 'true', 'cache-control': 'no-store' },
    });
    mode = 'silent';
    const silent = await ask('host-3');
    expect(silent).toMatchObject({ status: 200, body: { entity: 'host-3', stale: { reason: 'store unreachable: no answer within 50 ms' } } });
    expect(silent.headers).not.toHaveProperty('etag');
    expect(await lead({ method: 'GET', path: `/rollouts/${id}/traffic`, body: null, actor: 'fleet' })).toMatchObject({
      status: 200,
      body: { rolloutId: id, percent: 10, stale: { reason: 'store unreachable: no answer within 50 ms' } },
    });
    // A rollout never read well has nothing to answer from.
    mode = 'failing';
    await expect(ask('host-1', `${id}-never`)).rejects.toThrow('connection refused');
    mode = 'up';
    expect((await ask('host-4')).body).not.toHaveProperty('stale');
  });

  it('runs: create enqueues and sends the items; the same request again adds nothing and sends them again (a retry completes a request that failed before sending); status counts', async () => {
    const first = await call('POST', '/runs', { id: `run-${name}`, items: [{ p: 1 }, { p: 2 }, { p: 1 }] });
    expect(first).toMatchObject({ status: 201, body: { id: `run-${name}`, created: true, items: 3, added: 2 } });
    expect(await queued()).toBe(2); // one message per item: the repeated payload is the same item
    expect(await call('POST', '/runs', { id: `run-${name}`, items: [{ p: 2 }, { p: 1 }] })).toMatchObject({ status: 200, body: { created: false, added: 0 } });
    expect(await queued()).toBe(4); // nothing new; both sent again (duplicates are dropped by workers)
    expect(await call('GET', `/runs/run-${name}`)).toMatchObject({
      status: 200,
      body: { counts: { pending: 2, running: 0, done: 0, failed: 0 }, done: false },
    });
    expect(await call('POST', '/runs', { items: [] })).toMatchObject({ status: 400, body: { issues: ['items: at least one item'] } });
    expect((await call('GET', '/runs/none')).status).toBe(404);
  });

  it('runs: cancel is recorded once and shown; the run then takes no more items (409); a run that does not exist is a 404', async () => {
    const id = `cancel-${name}`;
    expect((await call('POST', '/runs', { id, items: [{ c: 1 }, { c: 2 }] })).status).toBe(201);
    const cancelled = await call('POST', `/runs/${id}/cancel`, { reason: 'bad batch' });
    expect(cancelled).toMatchObject({
      status: 200,
      body: { id, first: true, cancelled: { by: 'alice', reason: 'bad batch', at: new Date(clock.now()).toISOString() }, counts: { pending: 2 } },
    });
    expect(await call('POST', `/runs/${id}/cancel`, {})).toMatchObject({ status: 200, body: { first: false, cancelled: { reason: 'bad batch' } } });
    expect(await call('GET', `/runs/${id}`)).toMatchObject({ status: 200, body: { cancelled: { by: 'alice', reason: 'bad batch' } } });
    expect(await call('POST', '/runs', { id, items: [{ c: 3 }] })).toMatchObject({
      status: 409,
      body: { error: `run ${id} was cancelled: it takes no more items`, cancelled: { by: 'alice' } },
    });
    expect(await call('POST', '/runs/none-such/cancel', {})).toMatchObject({ status: 404, body: { error: 'run none-such not found' } });
    expect(await call('POST', `/runs/${id}/cancel`, { reason: 7 })).toMatchObject({ status: 400 });
  });

  it('list: bare, the running rollouts whole; with state, every rollout newest first as rows, paged; a bad state or limit is a 400', async () => {
    const a = (await call('POST', '/rollouts', { spec: SPEC })).body as { id: string };
    const b = (await call('POST', '/rollouts', { spec: SPEC })).body as { id: string };
    expect((await call('POST', `/rollouts/${a.id}/abort`, { reason: 'not needed' })).status).toBe(200);
    const q = (params: Record<string, string>) => ({ query: new URLSearchParams(params) });
    const running = (await call('GET', '/rollouts')).body as { rollouts: { id: string; stages: unknown[] }[] };
    expect(running.rollouts.map((r) => r.id)).toContain(b.id);
    expect(running.rollouts.map((r) => r.id)).not.toContain(a.id);
    const aborted = await call('GET', '/rollouts', undefined, q({ state: 'aborted', limit: '500' }));
    expect(aborted).toMatchObject({
      status: 200,
      body: {
        rollouts: expect.arrayContaining([
          expect.objectContaining({ id: a.id, state: 'aborted', service: 'checkout', newVersion: 'v2', stateReason: 'not needed', stages: 2 }),
        ]) as unknown,
      },
    });
    const everything = (await call('GET', '/rollouts', undefined, q({ state: 'all', limit: '500' }))).body as {
      rollouts: { id: string }[];
      next: string | null;
    };
    expect(everything.rollouts.map((r) => r.id)).toEqual(expect.arrayContaining([a.id, b.id]));
    expect(await call('GET', '/rollouts', undefined, q({ state: 'done' }))).toMatchObject({
      status: 400,
      body: { error: expect.stringMatching(/^state: all or one of running, paused, completed, rolled_back, aborted/) as unknown },
    });
    expect(await call('GET', '/rollouts', undefined, q({ limit: '501' }))).toMatchObject({
      status: 400,
      body: { error: 'limit: a whole number from 1 to 500, got "501"' },
    });
  });

  it('history: every transition of a rollout, oldest first, with who made it, when, under which epoch and why', async () => {
    const { body } = await call('POST', '/rollouts', { spec: SPEC });
    const id = (body as { id: string }).id;
    await evaluate(id);
    expect((await call('POST', `/rollouts/${id}/abort`, { reason: 'bad build' })).status).toBe(200);
    const res = await call('GET', `/rollouts/${id}/history`);
    expect(res.status).toBe(200);
    const history = (res.body as { history: { type: string; actor: string; reason: string | null; seq: number; epoch: number; at: string }[] }).history;
    expect(history.map((h) => h.type)).toEqual(['ai.rollout.stage_activated', 'ai.rollout.aborted']);
    expect(history.at(-1)).toMatchObject({ actor: 'alice', reason: 'bad build', epoch: expect.any(Number) as unknown });
    expect(history.map((h) => h.seq)).toEqual([...history.map((h) => h.seq)].sort((a, b) => a - b));
    expect((await call('GET', '/rollouts/none/history')).status).toBe(404);
  });

  it('runs: items read back page by page with their state; a bad state, limit or cursor is a 400 naming it; an unknown run a 404', async () => {
    const id = `items-${name}`;
    await call('POST', '/runs', { id, items: [{ p: 1 }, { p: 2 }, { p: 3 }] });
    const q = (params: Record<string, string>) => ({ query: new URLSearchParams(params) });
    const first = await call('GET', `/runs/${id}/items`, undefined, q({ limit: '2' }));
    expect(first).toMatchObject({
      status: 200,
      body: { runId: id, items: [{ state: 'pending', payload: expect.anything() as unknown, result: null, error: null, attempts: 0 }, { state: 'pending' }] },
    });
    const next = (first.body as { next: string }).next;
    const second = await call('GET', `/runs/${id}/items`, undefined, q({ limit: '2', cursor: next }));
    const ids = [...(first.body as { items: { id: string }[] }).items, ...(second.body as { items: { id: string }[] }).items].map((i) => i.id);
    expect(new Set(ids).size).toBe(3);
    expect(await call('GET', `/runs/${id}/items`, undefined, q({ state: 'done' }))).toMatchObject({ status: 200, body: { items: [], next: null } });
    expect(await call('GET', `/runs/${id}/items`, undefined, q({ state: 'finished' }))).toMatchObject({
      status: 400,
      body: { error: 'state: one of pending, running, done, failed, got "finished"' },
    });
    expect(await call('GET', `/runs/${id}/items`, undefined, q({ limit: '0' }))).toMatchObject({
      status: 400,
      body: { error: 'limit: a whole number from 1 to 1000, got "0"' },
    });
    expect(await call('GET', `/runs/${id}/items`, undefined, q({ cursor: 'garbage' }))).toMatchObject({
      status: 400,
      body: { error: expect.stringMatching(/^cursor: /) as unknown },
    });
    expect((await call('GET', '/runs/none/items')).status).toBe(404);
    const listed = await call('GET', '/runs', undefined, q({ limit: '500' }));
    expect(listed).toMatchObject({
      status: 200,
      body: { runs: expect.arrayContaining([expect.objectContaining({ id, createdAt: expect.any(String) as unknown })]) as unknown },
    });
    expect(await call('GET', '/runs', undefined, q({ limit: 'lots' }))).toMatchObject({
      status: 400,
      body: { error: 'limit: a whole number from 1 to 500, got "lots"' },
    });
  });

  it('runs: the same id with a different spec is a 409 naming the run (nothing added, nothing sent); without a spec it adds items', async () => {
    const id = `spec-${name}`;
    expect(await call('POST', '/runs', { id, spec: { model: 'a', temperature: 0 }, items: [{ p: 1 }] })).toMatchObject({ status: 201 });
    const before = await queued();
    const other = await call('POST', '/runs', { id, spec: { model: 'b', temperature: 0 }, items: [{ p: 2 }] });
    expect(other).toMatchObject({ status: 409, body: { error: `run ${id} exists with a different spec`, spec: { model: 'a', temperature: 0 } } });
    expect(await queued()).toBe(before);
    expect(await call('GET', `/runs/${id}`)).toMatchObject({ status: 200, body: { spec: { model: 'a', temperature: 0 }, counts: { pending: 1 } } });
    // The same spec (keys in another order), or none: more items for the same run.
    expect(await call('POST', '/runs', { id, spec: { temperature: 0, model: 'a' }, items: [{ p: 2 }] })).toMatchObject({
      status: 200,
      body: { created: false, added: 1 },
    });
    expect(await call('POST', '/runs', { id, items: [{ p: 3 }] })).toMatchObject({ status: 200, body: { created: false, added: 1 } });
    expect(await call('GET', `/runs/${id}`)).toMatchObject({ status: 200, body: { spec: { model: 'a', temperature: 0 }, counts: { pending: 3 } } });
  });

  it('paths: malformed percent-encoding is a 400 naming the segment, on every route that takes an id', async () => {
    for (const [method, path] of [
      ['GET', '/rollouts/%E0'],
      ['POST', '/rollouts/%E0/pause'],
      ['GET', '/runs/%E0%A4'],
    ] as const) {
      const res = await call(method, path);
      expect(res, `${method} ${path}`).toMatchObject({
        status: 400,
        body: { error: expect.stringMatching(/^path segment "%E0(%A4)?" is not valid percent-encoding/) as unknown },
      });
    }
    // Well-formed encoding still decodes, and the id is held to the id rules.
    expect(await call('GET', '/rollouts/no%2Dsuch')).toMatchObject({ status: 404, body: { error: 'rollout no-such not found' } });
    expect(await call('GET', '/rollouts/no%20such')).toMatchObject({
      status: 400,
      body: { error: 'rollout id in the path: letters, digits, _ . : - (at most 128), not . or ..' },
    });
    expect(await call('GET', `/runs/${'x'.repeat(129)}`)).toMatchObject({
      status: 400,
      body: { error: 'run id in the path: letters, digits, _ . : - (at most 128), not . or ..' },
    });
  });

  it('routing: unknown path 404, wrong method 405 naming the allowed ones', async () => {
    expect(await call('GET', '/nowhere')).toMatchObject({ status: 404, body: { error: 'no route for /nowhere' } });
    expect(await call('DELETE', '/rollouts')).toMatchObject({ status: 405, body: { error: 'DELETE not allowed on /rollouts: use GET or POST' } });
  });
});
