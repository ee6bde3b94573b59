/**
 * Requests that try to hold a node, crash it, or make a browser drive it,
 * against a real node over HTTP (authentication off, as `npm start` runs on
 * loopback). Each test sends the attack, checks the refusal, and reads
 * afterwards that nothing changed.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseForFile } from '../support/database.js';
import { eventually } from '../support/gate.js';
import { nodeUnderTest } from '../support/node-under-test.js';

let target: Awaited<ReturnType<typeof nodeUnderTest>>;
const db = databaseForFile('redirects');

beforeAll(async () => {
  target = await nodeUnderTest({ rateLimit: { perAddress: 0, perCredential: 0, burstSeconds: 1 } });
}, 60_000);

afterAll(async () => {
  await target?.close();
});

const spec = (extra: Record<string, unknown> = {}) => ({
  target: { service: 'checkout', version: 'v2', ...extra },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});

/** One request on a raw connection: what the node wrote back, status and all, and whether it then closed. */
function raw(port: number, head: string, body: Buffer | string = ''): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', (err) => (chunks.length ? undefined : reject(err)));
    s.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    });
    // Not ended: a half-closed connection may be dropped before the answer; each request says Connection: close or is refused early.
    s.write(head);
    if (body.length) s.write(body);
  });
}

const port = () => Number(new URL(target.url).port);

async function post(path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(`${target.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: JSON.parse(text) as { error?: string; issues?: string[] } };
}

const exists = async (id: string) => (await fetch(`${target.url}/rollouts/${id}`)).status === 200;

describe('requests that try to hold a node', () => {
  it('200 sockets trickling their headers a line at a time are cut off, and the node answers others meanwhile', async () => {
    const sockets: Socket[] = [];
    const closed: Promise<string>[] = [];
    for (let i = 0; i < 200; i++) {
      const s = connect(port(), '127.0.0.1');
      sockets.push(s);
      let answer = '';
      s.on('data', (c: Buffer) => (answer += c.toString('utf8')));
      s.on('error', () => undefined);
      closed.push(new Promise((r) => s.on('close', () => r(answer))));
      s.write(`GET /rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
    }
    // A header line every second: never idle, never done.
    const trickle = setInterval(() => sockets.forEach((s, i) => s.writable && s.write(`x-slow-${i}: ${Date.now()}\r\n`)), 1_000);
    try {
      const ok = await fetch(`${target.url}/cluster/status`);
      expect(ok.status).toBe(200);
      const answers = await Promise.all(closed);
      // Each was ended by the node (a 408, or the connection dropped), not by the client.
      expect(answers.every((a) => a === '' || a.startsWith('HTTP/1.1 408'))).toBe(true);
    } finally {
      clearInterval(trickle);
      for (const s of sockets) s.destroy();
    }
    expect((await fetch(`${target.url}/cluster/status`)).status).toBe(200);
  }, 60_000);

  it('a body over 1 MiB gets its 413, written, whether declared or streamed; nothing is created', async () => {
    const declared = await raw(
      port(),
      `POST /rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n`,
      '{"id":"big"',
    );
    expect(declared.status).toBe(413);
    expect(declared.text).toContain('request body over 1048576 bytes');
    const big = Buffer.alloc(1_200_000, 0x20);
    const streamed = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${target.url}/rollouts`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.write('{"id":"big2","spec":');
      req.end(big);
    });
    expect(streamed).toBe(413);
    expect(await exists('big')).toBe(false);
    expect(await exists('big2')).toBe(false);
  });
});

describe('requests that come too fast', () => {
  it('one address past its rate is answered 429 with Retry-After, and nothing it sent is applied', async () => {
    const limited = await nodeUnderTest({ rateLimit: { perAddress: 3, perCredential: 0, burstSeconds: 1 } });
    try {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${limited.url}/rollouts`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ id: `fast-${i}`, spec: spec() }),
        });
        statuses.push(res.status);
        if (res.status === 429) retryAfter ??= res.headers.get('retry-after');
      }
      expect(statuses.slice(0, 3)).toEqual([201, 201, 201]);
      expect(statuses).toContain(429);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      const refused = statuses.flatMap((st, i) => (st === 429 ? [`fast-${i}`] : []));
      for (const id of refused) expect(await limited.node.plane.engine.store.load(id)).toBeNull();
    } finally {
      await limited.close();
    }
  });
});

describe('input that no field accepts', () => {
  it('a 1 MiB body of nested arrays is refused before it is parsed', async () => {
    const r = await post('/rollouts', `${'['.repeat(500_000)}${']'.repeat(500_000)}`);
    expect(r).toMatchObject({ status: 400, body: { error: 'request body nests deeper than 32 levels' } });
    expect((await fetch(`${target.url}/cluster/status`)).status).toBe(200);
  });

  it('NUL and lone surrogates in a string are a 400 naming the field, not a 500', async () => {
    const nul = await post('/rollouts', JSON.stringify({ id: 'nul', spec: spec({ service: 'a\u0000b' }) }));
    expect(nul).toMatchObject({ status: 400, body: { error: 'body.spec.target.service: contains a NUL character' } });
    const lone = await post('/rollouts', `{"id":"lone","spec":${JSON.stringify(spec()).replace('"checkout"', '"\\ud800"')}}`);
    expect(lone).toMatchObject({ status: 400, body: { error: 'body.spec.target.service: contains a lone UTF-16 surrogate (not Unicode text)' } });
    expect(await exists('nul')).toBe(false);
    expect(await exists('lone')).toBe(false);
  });

  it('bytes that are not UTF-8 are a 400', async () => {
    const bytes = Buffer.concat([Buffer.from('{"id":"bad-utf8","spec":{"target":{"service":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}}}')]);
    const r = await post('/rollouts', bytes);
    expect(r).toMatchObject({ status: 400, body: { error: 'request body is not valid UTF-8' } });
    expect(await exists('bad-utf8')).toBe(false);
  });

  it('a spec over 64 KiB, too many labels, and integers beyond their columns are refused naming the field', async () => {
    const huge = await post('/rollouts', JSON.stringify({ id: 'huge', spec: spec({ labels: { note: 'x'.repeat(200) }, extra: 'y'.repeat(70_000) }) }));
    expect(huge.status).toBe(400);
    expect(huge.body.issues?.[0]).toMatch(/^\(root\): \d+ bytes as JSON; at most 65536$/);
    const labels = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`l${i}`, 'v']));
    const many = await post('/rollouts', JSON.stringify({ id: 'labels', spec: spec({ labels }) }));
    expect(many.body.issues).toContain('target.labels: at most 32 labels');
    const bake = await post('/rollouts', JSON.stringify({ id: 'bake', spec: { ...spec(), stages: [{ name: 'all', percent: 100, bakeSeconds: 1e12 }] } }));
    expect(bake.body.issues?.[0]).toMatch(/^stages\.0\.bakeSeconds: /);
    const attempt = await post(
      '/events',
      JSON.stringify({ type: 'rollout.metrics_reported', rolloutId: 'x', attempt: 2 ** 40, stage: 0, requests: 1, errors: 0, observedAt: Date.now() }),
    );
    expect(attempt.status).toBe(400);
    expect(attempt.body.error).toMatch(/attempt: /);
    for (const id of ['huge', 'labels', 'bake']) expect(await exists(id)).toBe(false);
  });

  it('an id in the path is held to the id rules', async () => {
    const r = await fetch(`${target.url}/rollouts/${'a'.repeat(300)}`);
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toBe('rollout id in the path: letters, digits, _ . : - (at most 128), not . or ..');
  });
});

describe('a web page driving a node on this machine', () => {
  it('a text/plain POST (a form, or fetch without a preflight) is refused 415, and the rollout stays as it was', async () => {
    expect((await post('/rollouts', JSON.stringify({ id: 'victim', spec: spec() }))).status).toBe(201);
    await eventually(
      'the rollout has started',
      10_000,
      async () => ((await (await fetch(`${target.url}/rollouts/victim`)).json()) as { stages: { phase: string }[] }).stages[0]?.phase === 'active',
    );
    const r = await fetch(`${target.url}/rollouts/victim/pause`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', origin: 'https://evil.example' },
      body: '{}',
    });
    expect(r.status).toBe(415);
    expect(((await (await fetch(`${target.url}/rollouts/victim`)).json()) as { state: string }).state).toBe('running');
  });

  it('a JSON POST from a page of another origin is refused 403', async () => {
    const r = await post('/rollouts/victim/pause', '{}', { origin: 'https://evil.example' });
    expect(r).toMatchObject({ status: 403, body: { error: 'a write from a page of another origin (https://evil.example) is refused' } });
    expect(((await (await fetch(`${target.url}/rollouts/victim`)).json()) as { state: string }).state).toBe('running');
    // The node's own page may write.
    const own = await post('/rollouts/victim/pause', '{}', { origin: target.url });
    expect(own.status).toBe(200);
  });

  it('a request for another host name (DNS rebinding) is refused 421', async () => {
    const r = await raw(port(), 'GET /rollouts HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n');
    expect(r.status).toBe(421);
    expect(r.text).not.toContain('victim');
  });

  it('the page forbids framing and sniffing; every answer says nosniff', async () => {
    const page = await fetch(`${target.url}/`);
    expect(page.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    const api = await fetch(`${target.url}/rollouts`);
    expect(api.headers.get('x-content-type-options')).toBe('nosniff');
    expect(api.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
  });
});

describe('what an answer may say', () => {
  it('a store error is answered without its text', async () => {
    const broken = await nodeUnderTest();
    try {
      await broken.node.plane.stores.close(); // the embedded database goes away under the node
      const r = await fetch(`${broken.url}/cluster/events`);
      const text = await r.text();
      expect(r.status).toBe(503);
      expect(JSON.parse(text)).toMatchObject({ error: 'store unreachable' });
      expect(text).not.toMatch(/pglite|closed|sql/i);
    } finally {
      await broken.close().catch(() => undefined);
    }
  });

  it("a follower told to redirect writes sends them to the leader's origin with the path only", async () => {
    const leader = await nodeUnderTest({
      nodeId: 'leader',
      store: { kind: 'postgres', databaseUrl: db.url },
      elector: 'lease',
      leaseTtlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      electionIntervalSeconds: 5,
    });
    const follower = await nodeUnderTest({
      nodeId: 'follower',
      store: { kind: 'postgres', databaseUrl: db.url },
      elector: 'lease',
      leaseTtlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      electionIntervalSeconds: 5,
      redirectWrites: true,
    });
    try {
      await eventually('a leader', 15_000, () => leader.node.state === 'leader');
      await eventually('the follower sees it', 15_000, async () => (await follower.node.refreshLeader())?.id === 'leader');
      // A path that would name another host is not a path: refused before any redirect is written.
      const r = await raw(
        Number(new URL(follower.url).port),
        'POST //evil.example/rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n',
        '{}',
      );
      expect(r.status, r.text).toBe(400);
      expect(r.text).not.toMatch(/\r\nlocation:/i);
      const ok = await raw(
        Number(new URL(follower.url).port),
        'POST /rollouts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n',
        '{}',
      );
      expect(ok.status, ok.text).toBe(307);
      const location = /\r\nlocation: (\S+)\r\n/i.exec(ok.text)?.[1] ?? '';
      expect(new URL(location).origin).toBe(new URL(leader.url).origin);
      expect(new URL(location).pathname).toBe('/rollouts');
    } finally {
      await follower.close();
      await leader.close();
    }
  });
});
