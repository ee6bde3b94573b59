/**
 * A worker with no store of its own, serving a run through a node's API
 * (api/routes/work.ts): the node `npm start` runs (PGlite inside its
 * process), with authentication on and a worker credential bound to its
 * runs. The worker is the SDK's (`createWorker({ url })`), the node's
 * coordinator fails what the worker gives up on, and every call outside the
 * credential is refused.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/processes.js';
import { mintToken } from '../../shared/auth/tokens.js';
import { contentId } from '../../shared/ledger/model.js';
import { createWorker } from '../../shared/runtimes/worker/sdk.js';
import { uniqueName } from '../support/backends.js';
import { nodeUnderTest } from '../support/node-under-test.js';
import { until } from '../support/gate.js';
import { forwardHttp } from '../support/http-forward.js';
import { closeNow, listenOnLoopback } from '../support/local-server.js';

const runA = uniqueName('node-work-a');
const runB = uniqueName('node-work-b');
const admin = mintToken('ops', ['read', 'admin']);
const fleetA = mintToken('fleet-a', ['worker'], { runs: [runA], worker: 'host-a-*' });
const reader = mintToken('auditor', ['read']);
const fleet = mintToken('fleet', ['worker']);
const dir = mkdtempSync(join(tmpdir(), 'rollout-node-worker-'));
const tokensFile = join(dir, 'tokens');
writeFileSync(tokensFile, [admin.line, fleetA.line, reader.line, fleet.line, ''].join('\n'));

let target: Awaited<ReturnType<typeof nodeUnderTest>>;

beforeAll(async () => {
  target = await nodeUnderTest({ auth: { tokensFile } });
}, 120_000);
afterAll(async () => {
  await target?.close();
});

async function call(path: string, token: string, body?: unknown, method = body === undefined ? 'GET' : 'POST') {
  const res = await fetch(`${target.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function createRun(id: string, items: unknown[]) {
  const res = await call('/runs', admin.token, { id, items });
  expect(res.status).toBe(201);
}

describe('a worker of a node (no store credentials)', () => {
  it('worker_of_a_node_finishes_a_run: results recorded through the API, a poison item failed by the node after 5 attempts, registered and left', async () => {
    const items = [...Array.from({ length: 30 }, (_, n) => ({ n })), { poison: true }];
    await createRun(runA, items);
    const seen: number[] = [];
    const worker = createWorker({
      runs: [runA],
      url: target.url,
      token: fleetA.token,
      workerId: 'host-a-1',
      instanceId: 'laptop',
      exitWhenDone: true,
      waitSeconds: 1,
      heartbeatMs: 500,
      handler: (item) => {
        const p = item.payload as { n?: number; poison?: boolean };
        if (p.poison) throw new Error('always fails');
        seen.push(p.n!);
        return { square: p.n! * p.n! };
      },
    });
    const summary = await worker.run();
    expect(summary).toMatchObject({ exit: 'done', workerId: 'host-a-1', instanceId: 'laptop', done: 30 });
    expect(new Set(seen).size).toBe(30);
    const page = await call(`/runs/${runA}/items?limit=100`, admin.token);
    const got = page.body.items as { id: string; state: string; result: unknown; error: string | null; attempts: number }[];
    expect(got.filter((i) => i.state === 'done')).toHaveLength(30);
    const poison = got.find((i) => i.id === contentId({ poison: true }))!;
    expect(poison).toMatchObject({ state: 'failed', attempts: 5 });
    expect(poison.error).toMatch(/^poison: delivered 5 times without a result; last error: always fails/);
    expect(got.find((i) => i.id === contentId({ n: 7 }))!.result).toEqual({ square: 49 });
    // It registered through the node, and left when it was done.
    const records = (await target.node.plane.registry.list()).filter((r) => r.runId === runA);
    expect(records).toEqual([expect.objectContaining({ workerId: 'host-a-1', instanceId: 'laptop', state: 'gone' })]);
  }, 300_000);

  it('a_drained_worker_of_a_node_gives_its_items_back: they are Pending again, unrun, and a second worker finishes them', async () => {
    const run = `${runA}-drain`;
    await createRun(
      run,
      Array.from({ length: 6 }, (_, n) => ({ slow: n })),
    );
    let began!: () => void;
    const started = new Promise<void>((r) => (began = r));
    const first = createWorker({
      runs: [run],
      url: target.url,
      token: fleet.token,
      workerId: 'first',
      batch: 6,
      waitSeconds: 1,
      handler: (_item, { signal }) => {
        began();
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('drained'))));
      },
    });
    const running = first.run();
    await started;
    first.drain();
    const drained = await running;
    expect(drained).toMatchObject({ exit: 'drained', done: 0 });
    expect(drained.nacked).toBeGreaterThan(0);
    const second = createWorker({
      runs: [run],
      url: target.url,
      token: fleet.token,
      workerId: 'second',
      exitWhenDone: true,
      waitSeconds: 1,
      handler: () => 'ok',
    });
    expect(await second.run()).toMatchObject({ exit: 'done', done: 6 });
  }, 300_000);
});

describe('a worker that exits when its run is done', () => {
  it('exit_when_done_checks_each_second: a run another worker finishes is seen at the next check, not after the 20 s poll', async () => {
    const run = `${runA}-exit`;
    // One item, held and running (a worker runs its items one at a time): nothing the waiter can claim or steal.
    await createRun(run, [{ e: 1 }]);
    // A proxy in front of the node records what the waiting worker asks for.
    const claims: { workerId: string; waitSeconds: number }[] = [];
    const upstream = new URL(target.url);
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.url?.endsWith('/work/claim')) claims.push(JSON.parse(body.toString()) as { workerId: string; waitSeconds: number });
        forwardHttp(upstream, req.headers, body, req.method ?? 'GET', req.url ?? '/').then(
          (f) => res.writeHead(f.status, f.headers).end(f.body),
          () => res.writeHead(502).end(),
        );
      });
    });
    const proxied = await listenOnLoopback(proxy);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let running = 0;
    let allRunning!: () => void;
    const holding = new Promise<void>((r) => (allRunning = r));
    const stopHolder = new AbortController();
    const holder = createWorker({
      runs: [run],
      url: target.url,
      token: fleet.token,
      workerId: 'holder',
      waitSeconds: 1,
      heartbeatMs: 500,
      handler: async () => {
        if (++running === 1) allRunning();
        await released;
        return 'ok';
      },
    }).run(stopHolder.signal);
    try {
      await holding;
      const waiter = createWorker({
        runs: [run],
        url: proxied,
        token: fleet.token,
        workerId: 'waiter',
        waitSeconds: 20,
        exitWhenDone: true,
        handler: () => 'never',
      });
      const exited = waiter.run();
      await until('the waiter long-polls', () => claims.some((c) => c.workerId === 'waiter' && c.waitSeconds > 0), 120_000);
      release();
      expect(await exited).toMatchObject({ exit: 'done', done: 0 });
      // Every wait it asked for was at most a second, although it was given 20.
      const waits = claims.filter((c) => c.workerId === 'waiter').map((c) => c.waitSeconds);
      expect(Math.max(...waits)).toBe(1);
    } finally {
      release();
      stopHolder.abort();
      expect(await holder).toMatchObject({ done: 1 });
      await closeNow(proxy);
    }
  }, 300_000);
});

describe('what a worker credential may do on a node', () => {
  beforeAll(async () => {
    await createRun(runB, [{ other: 1 }]);
  }, 60_000);

  it('calls_outside_the_binding_are_refused: another run, another worker id, a credential without the worker scope', async () => {
    const claim = { workerId: 'host-a-9', max: 1, waitSeconds: 0 };
    expect(await call(`/runs/${runB}/work/claim`, fleetA.token, claim)).toMatchObject({
      status: 403,
      body: { error: expect.stringMatching(/^fleet-a may not ask work for run ".*": its credential is bound to runs /) as unknown },
    });
    expect(await call(`/runs/${runA}/work/claim`, fleetA.token, { ...claim, workerId: 'ghost' })).toMatchObject({
      status: 403,
      body: { error: 'fleet-a may not ask work as worker "ghost": its credential is bound to worker host-a-*' },
    });
    expect((await call(`/runs/${runA}/work?workerId=host-a-1`, reader.token)).status).toBe(403);
    expect((await call(`/runs/${runB}/work/holders?workerId=host-a-1`, fleetA.token)).status).toBe(403);
    // Nothing of run B was claimed by any of it.
    expect((await call(`/runs/${runB}`, admin.token)).body).toMatchObject({ counts: { pending: 1, running: 0 } });
  }, 60_000);

  it('a_worker_names_its_transitions_only: a coordinator transition, a raw compare-and-swap or two changes of one item are refused', async () => {
    const itemId = contentId({ other: 1 });
    const as = (changes: unknown[]) => call(`/runs/${runB}/work/changes`, fleet.token, { workerId: 'w', changes, answer: 'outcomes' });
    const fail = await as([{ transition: 'fail', itemId, reason: 'x' }]);
    expect(fail.status).toBe(400);
    expect(fail.body).toMatchObject({ error: 'invalid request body', issues: [expect.stringMatching(/^changes\.0\.transition: /)] });
    const raw = await as([{ transition: 'ack', itemId, result: 1, expect: { state: 'pending' }, set: { state: 'done' } }]);
    expect(raw.status).toBe(400);
    const twice = await as([
      { transition: 'heartbeat', itemId },
      { transition: 'start', itemId },
    ]);
    expect(twice).toMatchObject({ status: 400, body: { error: expect.stringContaining(`more than one for item ${itemId}`) as unknown } });
    // An ack of an item this worker does not hold changes nothing.
    expect(await as([{ transition: 'ack', itemId, result: 'forged' }])).toMatchObject({ status: 200, body: { outcomes: [{ ok: false }] } });
    expect((await call(`/runs/${runB}`, admin.token)).body).toMatchObject({ counts: { pending: 1, done: 0 } });
  }, 60_000);

  it('a_worker_fails_at_once_naming_what_is_wrong: a run the credential does not name, a run that does not exist, a node nobody listens on', async () => {
    const base = { url: target.url, token: fleetA.token, workerId: 'host-a-2', handler: () => 1 };
    await expect(createWorker({ ...base, runs: [runB] }).run()).rejects.toThrow(/HTTP 403: fleet-a may not ask work for run/);
    const none = uniqueName('no-such-run');
    await expect(createWorker({ ...base, token: fleet.token, runs: [none] }).run()).rejects.toThrow(`run ${none} does not exist on the node at ${target.url}`);
    const closed = `http://127.0.0.1:${await freePort()}`;
    await expect(createWorker({ ...base, url: closed, runs: [runA] }).run()).rejects.toThrow(`cannot reach ${closed}`);
  }, 60_000);
});
