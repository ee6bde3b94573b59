/**
 * The `rollout` client commands as processes, against the HTTP API served by
 * a local node adapter (node:http over the same routes as the Lambda) on
 * PostgreSQL: tables for people, JSON for scripts, exit codes for both.
 * Also: a SigV4-signed request carries the execute-api credential scope.
 */
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { guarded } from '../../shared/runtimes/node/guard.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { apiHandler } from '../../shared/api/handler.js';
import { PROMOTION_LEASE } from '../../shared/lease/names.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { InProcessWake } from '../../shared/adapters/postgres/wake.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { openBackend, type LeaseBackend } from '../support/backends.js';
import { rollout } from '../support/cli.js';
import { call } from '../../shared/client/transport.js';
import { RolloutClient } from '../../shared/client/client.js';

const SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10 } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
  ],
};

describe('rollout client commands', () => {
  let backend: LeaseBackend;
  let node: Awaited<ReturnType<typeof serveApi>>;
  const dir = mkdtempSync(join(tmpdir(), 'rollout-cli-'));
  const file = (name: string, content: unknown) => {
    const p = join(dir, name);
    writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
    return p;
  };

  beforeAll(async () => {
    backend = await openBackend('postgres');
    const engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus() });
    const elector = new LeaseElector(backend.store, {
      name: PROMOTION_LEASE,
      holderId: 'node-1',
      ttlMs: 30_000,
      renewIntervalMs: 10_000,
      retryIntervalMs: 5_000,
    });
    // Behind the guard a node serves with authentication off: the actor is the one --actor names.
    node = await serveApi(
      guarded(
        apiHandler({
          nodeId: 'node-1',
          engine,
          leadership: campaignEachTime(elector),
          leases: backend.store,
          ledger: backend.ledger,
          workQueue: () => new LedgerWorkQueue(backend.sql!, new InProcessWake(), 'unused', null),
          outbound: OutboundPolicy.none(),
        }),
        { authenticators: [], allowedHosts: null, rateLimit: { perAddress: 0, perCredential: 0, burstSeconds: 1 } },
      ),
    );
  });
  afterAll(async () => {
    await node?.close();
    await backend?.close();
  });

  it('rollouts: create from a file, list as a table, get, a command; --json for scripts', async () => {
    const created = await rollout(['rollouts', 'create', '--url', node.url, '--file', file('spec.json', SPEC), '--id', 'ro-cli', '--actor', 'alice']);
    expect(created.code, created.err).toBe(0);
    expect(created.out.trim()).toBe('created ro-cli');
    const list = await rollout(['rollouts', 'list', '--url', node.url]);
    expect(list.out).toMatch(/^ID\s+STATE\s+STAGES$/m);
    expect(list.out).toMatch(/^ro-cli\s+running\s+canary:pending all:pending$/m); // the promoters activate the first stage
    const paused = await rollout(['rollouts', 'pause', 'ro-cli', '--url', node.url, '--reason', 'looking', '--actor', 'alice']);
    expect(paused.code, paused.err).toBe(0);
    expect(paused.out).toMatch(/^pause: applied \(ai\.rollout\.\w+\)/);
    const json = await rollout(['rollouts', 'get', 'ro-cli', '--url', node.url, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ id: 'ro-cli', state: 'paused', stateBy: 'alice' });
    const status = await rollout(['status', '--url', node.url]);
    expect(status.out).toMatch(/^node node-1 \(leader\)\nleader node-1 \(epoch 0, lease until /);
  }, 150_000);

  it('runs: create from an array of payloads, status as a table', async () => {
    const created = await rollout(['runs', 'create', '--url', node.url, '--file', file('items.json', [{ n: 1 }, { n: 2 }]), '--id', 'run-cli']);
    expect(created.out.trim()).toBe('created run-cli: 2 items, 2 new');
    const status = await rollout(['runs', 'status', 'run-cli', '--url', node.url]);
    expect(status.out).toMatch(/^run-cli\s+in progress\nPENDING\s+RUNNING\s+DONE\s+FAILED\n2\s+0\s+0\s+0$/m);
  });

  it('runs create: a file of more items than one request takes is sent 10,000 a request, every item stored once; a store that refuses some requests slows the producer, and nothing is lost', async () => {
    const many = Array.from({ length: 25_001 }, (_, n) => ({ n }));
    const created = await rollout([
      'runs',
      'create',
      '--url',
      node.url,
      '--file',
      file('many.json', { items: many, spec: { kind: 'bulk' } }),
      '--id',
      'run-bulk',
    ]);
    expect(created.code, created.err).toBe(0);
    expect(created.out.trim()).toBe('created run-bulk: 25001 items, 25001 new (3 requests)');
    expect(await backend.ledger.counts('run-bulk')).toEqual({ pending: 25_001, running: 0, done: 0, failed: 0 });

    // JSON Lines: read as they are sent, the spec from its own file; a bad line is named, before anything is sent.
    const lines = `${many
      .slice(0, 12_000)
      .map((x) => JSON.stringify(x))
      .join('\n')}\n\n${JSON.stringify({ n: 'last' })}\n`;
    const streamed = await rollout([
      'runs',
      'create',
      '--url',
      node.url,
      '--file',
      file('many.jsonl', lines),
      '--spec',
      file('run-spec.json', { kind: 'lines' }),
      '--shards',
      '2',
      '--id',
      'run-lines',
    ]);
    expect(streamed.code, streamed.err).toBe(0);
    expect(streamed.out.trim()).toBe('created run-lines: 12001 items, 12001 new (2 requests)');
    expect(await backend.ledger.counts('run-lines')).toEqual({ pending: 12_001, running: 0, done: 0, failed: 0 });
    expect((await backend.ledger.getRun('run-lines'))?.spec).toEqual({ kind: 'lines' });
    const bad = await rollout(['runs', 'create', '--url', node.url, '--file', file('bad.jsonl', '{"n":1}\n{"n":2}\n{oops\n'), '--id', 'run-bad-lines']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/bad\.jsonl:3: not JSON/);
    expect(await backend.ledger.getRun('run-bad-lines')).toBeNull();
    const twice = await rollout([
      'runs',
      'create',
      '--url',
      node.url,
      '--file',
      file('with-spec.json', { items: [1], spec: {} }),
      '--spec',
      file('run-spec2.json', {}),
    ]);
    expect(twice.code).toBe(2);
    expect(twice.err).toMatch(/--spec and --shards go with a JSON Lines file/);

    // In front of the node: every third POST answered as a throttled store answers (503, Retry-After), the rest passed on.
    let posts = 0;
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method === 'POST' && ++posts % 3 === 0) {
          res
            .writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' })
            .end(JSON.stringify({ error: 'store throttled: nothing was written, try again later' }));
          return;
        }
        void fetch(`${node.url}${req.url}`, {
          method: req.method!,
          headers: {
            'content-type': 'application/json',
            'x-rollout-actor': 'alice',
            ...(req.headers['idempotency-key'] ? { 'idempotency-key': String(req.headers['idempotency-key']) } : {}),
          },
          ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
        }).then(async (r) => {
          res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text());
        });
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const client = new RolloutClient({ url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` });
      const report = await client.enqueueRun({ id: 'run-paced', items: many.slice(0, 2_000) }, { requestItems: 100 });
      expect(report).toMatchObject({ id: 'run-paced', created: true, items: 2_000, added: 2_000 });
      expect(report.refused).toBeGreaterThan(0);
      expect(report.requests).toBe(20);
      expect(posts).toBe(report.requests + report.refused);
      expect(await backend.ledger.counts('run-paced')).toEqual({ pending: 2_000, running: 0, done: 0, failed: 0 });
    } finally {
      proxy.close();
    }
  }, 120_000);

  it('errors: a refused request exits non-zero with the reason; an unreachable node and a bad file say so', async () => {
    const bad = await rollout(['rollouts', 'create', '--url', node.url, '--file', file('bad.json', { stages: [] })]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/HTTP 400: invalid .*config/);
    const missing = await rollout(['rollouts', 'get', 'nope', '--url', node.url]);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/HTTP 404: rollout nope not found/);
    const down = await rollout(['status', '--url', 'http://127.0.0.1:9']);
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/);
    const notJson = await rollout(['runs', 'create', '--url', node.url, '--file', file('x.json', '{oops')]);
    expect(notJson.code).toBe(2);
    expect(notJson.err).toMatch(/x\.json is not JSON/);
    const empty = await rollout(['runs', 'create', '--url', node.url, '--file', file('empty.json', [])]);
    expect(empty.code).toBe(2);
    expect(empty.err).toMatch(/empty\.json: no items \(a run needs at least one\)/);
    const stray = await rollout(['runs', 'create', '--url', node.url, '--file', file('stray.json', { items: [1], shard: 3 })]);
    expect(stray.code).toBe(2);
    expect(stray.err).toMatch(/stray\.json: unknown field shard \(items, spec, shards, itemsPerSecond, id\)/);
  }, 180_000);

  it('a write answered "try again" (503 during an election, 502/504 from a proxy) is sent again with the same Idempotency-Key; a read is not', async () => {
    const seen: { method: string; key: string | undefined }[] = [];
    const answers = [503, 504, 502, 201];
    const server = createServer((req, res) => {
      seen.push({ method: req.method!, key: req.headers['idempotency-key'] as string | undefined });
      if (req.method === 'GET') {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' }).end(JSON.stringify({ error: 'no leader elected' }));
        return;
      }
      const status = answers.shift()!;
      res
        .writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' })
        .end(JSON.stringify(status === 201 ? { id: 'ro-x', created: true } : { error: 'no leader elected' }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const created = await rollout(['rollouts', 'create', '--url', url, '--file', file('retry.json', SPEC)]);
      expect(created.code, created.err).toBe(0);
      expect(created.out.trim()).toBe('created ro-x');
      expect(seen).toHaveLength(4);
      expect(new Set(seen.map((s) => s.key)).size).toBe(1);
      expect(seen[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
      seen.length = 0;
      const leader = await rollout(['cluster', 'leader', '--url', url]);
      expect(leader.code).toBe(1);
      expect(leader.err).toMatch(/HTTP 503: no leader elected/);
      expect(seen).toEqual([{ method: 'GET', key: undefined }]);
    } finally {
      server.close();
    }
  });

  it('--aws-region signs with SigV4 for execute-api', async () => {
    let auth = '';
    const server = createServer((req, res) => {
      auth = String(req.headers.authorization ?? '');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ leader_id: 'x', term: 3, expires_at: 'soon' }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const out = await rollout(['cluster', 'leader', '--url', url, '--aws-region', 'eu-west-1'], {
        AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
        AWS_SECRET_ACCESS_KEY: 'secret',
      });
      expect(out.code, out.err).toBe(0);
      expect(out.out.trim()).toBe('x (epoch 3, lease until soon)');
      expect(auth).toMatch(
        /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
      );
    } finally {
      server.close();
    }
  });

  it('the deployed API (SigV4): a write answered 503 with Retry-After is sent again; a 504 is not (it may have committed)', async () => {
    const answers = [
      { status: 503, retryAfter: '1' },
      { status: 201, retryAfter: null },
    ];
    let seen = 0;
    const fake = createServer((req, res) => {
      req.resume();
      const a = answers[Math.min(seen++, answers.length - 1)]!;
      res
        .writeHead(a.status, { 'content-type': 'application/json', ...(a.retryAfter ? { 'retry-after': a.retryAfter } : {}) })
        .end(
          JSON.stringify(
            a.status === 201 ? { id: 'r1', created: true, items: 1, added: 1 } : { error: 'store throttled: nothing was written, try again later' },
          ),
        );
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    try {
      await expect(call({ url, awsRegion: 'us-east-1' }, 'POST', '/runs', { id: 'r1', items: [{ a: 1 }] })).resolves.toMatchObject({ id: 'r1' });
      expect(seen).toBe(2);
      answers.splice(0, answers.length, { status: 504, retryAfter: null });
      seen = 0;
      await expect(call({ url, awsRegion: 'us-east-1' }, 'POST', '/runs', { id: 'r1', items: [{ a: 1 }] })).rejects.toMatchObject({ status: 504 });
      expect(seen).toBe(1);
    } finally {
      fake.close();
    }
  });
});
