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
 * counts every connection it gets: it must get none. An echo server, allowed
 * too, answers each gate with the secret it was sent, in the encoding the
 * gate's address names (raw, JSON-escaped, percent- or form-encoded, base64,
 * HTML): none may be kept or shown.
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
/** Secrets that every encoding changes: quote, backslash, slash, space, non-ASCII (BMP and astral). */
const QUOTED = `q"uo\\te/sl ash-${randomUUID()}`;
const UNICODE = `ünï€😀/"-${randomUUID()}`;
const QUOTED_ENV = `${ENV}_QUOTED`;
const UNICODE_ENV = `${ENV}_UNICODE`;

let target: Awaited<ReturnType<typeof nodeUnderTest>>;
const servers: Server[] = [];
let trap: TcpServer;
let trapPort: number;
let trapConnections = 0;
let reflector: string;
let big: string;
let redirector: string;
let echo: string;
const reflected: IncomingHttpHeaders[] = [];
/** The secrets the echo server was sent (a bearer token, a basic password). */
const echoed = new Set<string>();

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const jsonEscaped = (s: string) => JSON.stringify(s).slice(1, -1);
/** Each encoding a reply could carry a secret in, as a server would write it. */
const ENCODINGS: Readonly<Record<string, (s: string) => string>> = {
  raw: (s) => s,
  json: jsonEscaped,
  // PHP's json_encode: slashes and non-ASCII escaped.
  'json-php': (s) =>
    jsonEscaped(s)
      .replaceAll('/', '\\/')
      .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
  'json-twice': (s) => jsonEscaped(JSON.stringify(s)),
  url: encodeURIComponent,
  'url-lower': (s) => encodeURIComponent(s).replace(/%[0-9A-F]{2}/g, (p) => p.toLowerCase()),
  form: (s) => new URLSearchParams({ v: s }).toString().slice(2),
  base64: b64,
  base64url: (s) => Buffer.from(s, 'utf8').toString('base64url'),
  'base64-inside': (s) => b64(`token=${s};`),
  html: (s) => s.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;'),
};
/** What must never be kept of `secret`: each encoding of it, and, in JSON text (the API's), each of those escaped again. */
const forms = (secret: string) => [...new Set(Object.values(ENCODINGS).flatMap((e) => [e(secret), jsonEscaped(e(secret))]))];

async function http(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const s = createServer(handler);
  servers.push(s);
  return listenOnLoopback(s);
}

beforeAll(async () => {
  process.env[ENV] = SECRET;
  process.env[QUOTED_ENV] = QUOTED;
  process.env[UNICODE_ENV] = UNICODE;
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
  // /<encoding>/<json|text>/api/v1/query: the secret sent, in that encoding, in a Prometheus error (JSON) or a proxy's page (text).
  echo = await http((req, res) => {
    const [, encoding = '', mode] = (req.url ?? '').split('/');
    const auth = req.headers.authorization ?? '';
    const secret = auth.startsWith('Basic ')
      ? Buffer.from(auth.slice(6), 'base64')
          .toString('utf8')
          .replace(/^[^:]*:/, '')
      : auth.replace(/^Bearer /, '');
    echoed.add(secret);
    const form = (ENCODINGS[encoding] ?? ((s: string) => s))(secret);
    if (mode === 'text') res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' }).end(`upstream refused ${form} (${auth})`);
    else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'error', errorType: 'echo', error: `refused ${form}` }));
  });
  target = await nodeUnderTest({
    tickIntervalSeconds: 0.25,
    outbound: {
      origins: [reflector, big, redirector, echo, `http://localhost:${trapPort}`],
      credentials: {
        reflected: { type: 'bearer', origin: reflector, token: { env: ENV } },
        'echo-bearer': { type: 'bearer', origin: echo, token: { env: QUOTED_ENV } },
        'echo-basic': { type: 'basic', origin: echo, username: 'rollout', password: { env: UNICODE_ENV } },
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
  delete process.env[QUOTED_ENV];
  delete process.env[UNICODE_ENV];
});

const gate = (g: Record<string, unknown>) => ({
  type: 'prometheus',
  name: 'errors',
  query: 'sum(rate(errors[1m]))',
  comparison: '<',
  threshold: 1,
  intervalSeconds: 1,
  ...g,
});
const spec = (g: Record<string, unknown>) => ({
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [gate(g)] } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});

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
    const r = await post('/rollouts', {
      id: 'steal-env',
      spec: spec({ address: `http://127.0.0.1:${trapPort}`, auth: { type: 'basic', username: 'x', passwordEnv: ENV } }),
    });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toMatch(/auth: a spec no longer names secrets or environment variables/);
    expect((await get('/rollouts/steal-env')).status).toBe(404);
    expect(trapConnections).toBe(0);
  });

  it('a spec naming a host the operator did not allow is refused at creation, naming the field', async () => {
    const r = await post('/rollouts', { id: 'any-host', spec: spec({ address: `http://127.0.0.1:${trapPort}` }) });
    expect(r.status).toBe(400);
    expect(r.body.issues).toEqual([
      expect.stringMatching(new RegExp(`^spec\\.stages\\.0\\.gates\\.providers\\.0\\.address: http://127\\.0\\.0\\.1:${trapPort} is not an allowed origin`)),
    ]);
    expect((await get('/rollouts/any-host')).status).toBe(404);
    expect(trapConnections).toBe(0);
  });

  it('a credential the operator bound to one origin is refused for another', async () => {
    const r = await post('/rollouts', { id: 'cred-elsewhere', spec: spec({ address: big, credential: 'reflected' }) });
    expect(r.status).toBe(400);
    expect(r.body.issues).toEqual([
      expect.stringMatching(
        /^spec\.stages\.0\.gates\.providers\.0\.credential: credential "reflected" is bound to http:\/\/127\.0\.0\.1:\d+, not http:\/\/127\.0\.0\.1:\d+$/,
      ),
    ]);
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

  it.each([
    { credential: 'echo-bearer', secret: () => QUOTED, header: () => `Bearer ${QUOTED}` },
    { credential: 'echo-basic', secret: () => UNICODE, header: () => `Basic ${b64(`rollout:${UNICODE}`)}` },
  ])(
    'an answer that echoes the secret in any encoding keeps none of them: $credential',
    async ({ credential, secret, header }) => {
      const encodings = Object.keys(ENCODINGS);
      const ids: { id: string; gates: number }[] = [];
      // A stage reads at most 10 gates: one rollout per reply kind and half of the encodings.
      for (const mode of ['json', 'text']) {
        for (const half of [encodings.slice(0, 6), encodings.slice(6)]) {
          const id = `echo-${credential}-${mode}-${half[0]}`;
          const gates = half.map((e) => gate({ name: `echo-${e}`, address: `${echo}/${e}/${mode}`, credential }));
          const r = await post('/rollouts', {
            id,
            spec: {
              target: { service: 'checkout', version: 'v2' },
              stages: [
                { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: gates } },
                { name: 'all', percent: 100, bakeSeconds: 0 },
              ],
            },
          });
          expect(r.status).toBe(201);
          ids.push({ id, gates: gates.length });
        }
      }
      const secrets = [secret(), header().replace(/^(Basic|Bearer) /, '')];
      const never = secrets.flatMap(forms);
      for (const { id, gates } of ids) {
        const stored = await eventually(`a reading of every gate of ${id}`, 30_000, async () => {
          const readings = await target.node.plane.engine.store.gateReadings(id, { perGate: 1 });
          return new Set(readings.map((r) => r.gate)).size === gates ? readings : null;
        });
        for (const reading of stored) {
          // The echo reached the answer, cut where the secret was.
          expect(reading.answer, reading.gate).toContain('[redacted]');
          for (const field of [reading.answer, reading.reason ?? ''])
            expect(
              never.filter((f) => field.includes(f)),
              `${id} ${reading.gate}`,
            ).toEqual([]);
        }
        const shown = (await get(`/rollouts/${id}`)).text;
        expect(
          never.filter((f) => shown.includes(f)),
          `GET /rollouts/${id}`,
        ).toEqual([]);
      }
      // The origin got the secret itself: what was checked is what a reply could echo.
      expect(echoed.has(secret())).toBe(true);
    },
    120_000,
  );

  it('a redirect is not followed: the gate is inconclusive and the host it pointed at hears nothing', async () => {
    const r = await post('/rollouts', { id: 'redirect', spec: spec({ address: redirector }) });
    expect(r.status).toBe(201);
    const { reading } = await firstReading('redirect');
    expect(reading.outcome).toBe('inconclusive');
    expect(reading.reason).toMatch(/HTTP 302/);
    expect(trapConnections).toBe(0);
  });
});
