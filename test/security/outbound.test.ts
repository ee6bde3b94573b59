/**
 * Attacks through a rollout spec on what the control plane requests on a
 * spec's behalf, against a real node over HTTP. Each test makes the request
 * an attacker would, checks the refusal, and reads afterwards that nothing
 * changed and nothing reached a host it should not have.
 *
 * The node's operator allows three test servers by address (a reflector that
 * echoes every request header back in an error, a server answering 1 MiB, and
 * one answering with a redirect), and allows one origin by name,
 * `http://localhost:<trap port>`, whose name resolves to loopback. The trap
 * counts every connection it gets: it must get none.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GateJson } from '../../shared/api/rollout-json.js';
import { closeNow, listenOnLoopback } from '../support/local-server.js';
import { nodeUnderTest } from '../support/node-under-test.js';
import { eventually } from '../support/gate.js';

const SECRET = `secret-${randomUUID()}`;
const ENV = `ROLLOUT_SECURITY_TOKEN_${randomUUID().replaceAll('-', '').slice(0, 8).toUpperCase()}`;

let target: Awaited<ReturnType<typeof nodeUnderTest>>;
const servers: Server[] = [];
let trap: TcpServer;
let trapPort: number;
let trapConnections = 0;
let reflector: string;
let big: string;
let redirector: string;
const reflected: IncomingHttpHeaders[] = [];

async function http(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const s = createServer(handler);
  servers.push(s);
  return listenOnLoopback(s);
}

beforeAll(async () => {
  process.env[ENV] = SECRET;
  trap = createTcpServer((socket) => {
    trapConnections++;
    socket.destroy();
  });
  await new Promise<void>((r) => trap.listen(0, '127.0.0.1', r));
  trapPort = (trap.address() as { port: number }).port;
  reflector = await http((req, res) => {
    reflected.push(req.headers);
    res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'error', errorType: 'echo', error: JSON.stringify(req.headers) }));
  });
  big = await http((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`{"status":"success","data":{"resultType":"scalar","result":[0,"${'9'.repeat(1_048_576)}"]}}`);
  });
  redirector = await http((_req, res) => res.writeHead(302, { location: `http://127.0.0.1:${trapPort}/api/v1/query` }).end());
  target = await nodeUnderTest({
    tickIntervalSeconds: 0.25,
    outbound: {
      origins: [reflector, big, redirector, `http://localhost:${trapPort}`],
      credentials: {
        reflected: { type: 'bearer', origin: reflector, token: { env: ENV } },
        'by-name': { type: 'bearer', origin: `http://localhost:${trapPort}`, token: { env: ENV } },
      },
    },
  });
}, 60_000);

afterAll(async () => {
  await target?.close();
  for (const s of servers) await closeNow(s);
  await new Promise<void>((r) => (trap ? trap.close(() => r()) : r()));
  delete process.env[ENV];
});

const gate = (g: Record<string, unknown>) => ({ type: 'prometheus', name: 'errors', query: 'sum(rate(errors[1m]))', comparison: '<', threshold: 1, intervalSeconds: 1, ...g });
const spec = (g: Record<string, unknown>) => ({ target: { service: 'checkout', version: 'v2' }, stages: [{ name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [gate(g)] } }, { name: 'all', percent: 100, bakeSeconds: 0 }] });

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${target.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function get(path: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${target.url}${path}`);
  return { status: res.status, text: await res.text() };
}

/** The first reading of the rollout's gate, once the node has taken one. */
async function firstReading(id: string): Promise<{ reading: NonNullable<GateJson['last']>; text: string }> {
  return eventually(`a reading of ${id}'s gate`, 20_000, async () => {
    const { text } = await get(`/rollouts/${id}`);
    const last = (JSON.parse(text) as { gates: GateJson[] }).gates[0]?.last;
    return last ? { reading: last, text } : null;
  });
}

describe('outbound requests on a spec’s behalf', () => {
  it('a spec naming an environment variable to send is refused at creation, and nothing is stored or sent', async () => {
    const r = await post('/rollouts', { id: 'steal-env', spec: spec({ address: `http://127.0.0.1:${trapPort}`, auth: { type: 'basic', username: 'x', passwordEnv: ENV } }) });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toMatch(/auth: a spec no longer names secrets or environment variables/);
    expect((await get('/rollouts/steal-env')).status).toBe(404);
    expect(trapConnections).toBe(0);
  });

  it('a spec naming a host the operator did not allow is refused at creation, naming the field', async () => {
    const r = await post('/rollouts', { id: 'any-host', spec: spec({ address: `http://127.0.0.1:${trapPort}` }) });
    expect(r.status).toBe(400);
    expect(r.body.issues).toEqual([expect.stringMatching(new RegExp(`^spec\\.stages\\.0\\.gates\\.providers\\.0\\.address: http://127\\.0\\.0\\.1:${trapPort} is not an allowed origin`))]);
    expect((await get('/rollouts/any-host')).status).toBe(404);
    expect(trapConnections).toBe(0);
  });

  it('a credential the operator bound to one origin is refused for another', async () => {
    const r = await post('/rollouts', { id: 'cred-elsewhere', spec: spec({ address: big, credential: 'reflected' }) });
    expect(r.status).toBe(400);
    expect(r.body.issues).toEqual([expect.stringMatching(/^spec\.stages\.0\.gates\.providers\.0\.credential: credential "reflected" is bound to http:\/\/127\.0\.0\.1:\d+, not http:\/\/127\.0\.0\.1:\d+$/)]);
    expect((await get('/rollouts/cred-elsewhere')).status).toBe(404);
  });

  it('an allowed name that resolves to loopback is never connected to: the gate is inconclusive and says why', async () => {
    const r = await post('/rollouts', { id: 'rebind', spec: spec({ address: `http://localhost:${trapPort}`, credential: 'by-name' }) });
    expect(r.status).toBe(201);
    const { reading } = await firstReading('rebind');
    expect(reading.outcome).toBe('inconclusive');
    expect(reading.reason).toMatch(/localhost resolved to (127\.0\.0\.1|::1), a loopback address; allow-list the address itself to reach it/);
    expect(trapConnections).toBe(0);
  });

  it('an answer that echoes what was sent keeps no secret: the reading and the API show it redacted', async () => {
    const r = await post('/rollouts', { id: 'echo', spec: spec({ address: reflector, credential: 'reflected' }) });
    expect(r.status).toBe(201);
    const { reading, text } = await firstReading('echo');
    // The operator's origin got its credential, as configured…
    expect(reflected.at(-1)?.authorization).toBe(`Bearer ${SECRET}`);
    // …and nothing we keep or show repeats it.
    expect(reading.outcome).toBe('inconclusive');
    expect(reading.reason).toContain('[redacted]');
    expect(text).not.toContain(SECRET);
    expect((await get('/ui/state')).text).not.toContain(SECRET);
  });

  it('an answer over 64 KiB is cut off, and what is kept of it is bounded', async () => {
    const r = await post('/rollouts', { id: 'huge', spec: spec({ address: big }) });
    expect(r.status).toBe(201);
    const { reading } = await firstReading('huge');
    expect(reading.outcome).toBe('inconclusive');
    expect(reading.reason).toMatch(/answer over 65536 bytes/);
    expect(reading.answer.length).toBeLessThanOrEqual(1_000);
  });

  it('a redirect is not followed: the gate is inconclusive and the host it pointed at hears nothing', async () => {
    const r = await post('/rollouts', { id: 'redirect', spec: spec({ address: redirector }) });
    expect(r.status).toBe(201);
    const { reading } = await firstReading('redirect');
    expect(reading.outcome).toBe('inconclusive');
    expect(reading.reason).toMatch(/HTTP 302/);
    expect(trapConnections).toBe(0);
  });
});
