/**
 * Who may do what on a node with authentication on, attacked over HTTP: one
 * test per attack, with the refusal and a read afterwards showing nothing
 * changed. The node accepts tokens from a tokens file (hashes only) and JWTs
 * from an OIDC issuer this file starts, whose keys it rotates.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintToken } from '../../shared/auth/tokens.js';
import { until } from '../support/gate.js';
import { closeNow, listenOnLoopback } from '../support/local-server.js';
import { nodeUnderTest } from '../support/node-under-test.js';

const dir = mkdtempSync(join(tmpdir(), 'rollout-identity-'));
const admin = mintToken('alice', ['read', 'admin', 'operate']);
const reader = mintToken('auditor', ['read']);
const signaller = mintToken('metrics-pipeline', ['signal']);
const worker = mintToken('fleet', ['worker']);
const runAdmin = mintToken('run-admin', ['read', 'admin']);
const fleetA = mintToken('fleet-a', ['worker'], { runs: ['run-a'], worker: 'host-a-*' });
const limited = mintToken('chatty', ['read']);
const tokensFile = join(dir, 'tokens');
writeFileSync(tokensFile, ['# who may do what', admin.line, reader.line, signaller.line, worker.line, fleetA.line, runAdmin.line, limited.line, ''].join('\n'));

const AUDIENCE = 'rollout-control-plane';
interface Key {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}
async function newKey(): Promise<Key> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const kid = randomUUID();
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}

let issuer: string;
let issuerServer: Server;
let published: Key[] = [];
let jwksFetches = 0;
let target: Awaited<ReturnType<typeof nodeUnderTest>>;

async function jwt(key: Key, claims: Record<string, unknown>, o: { audience?: string; expiresIn?: string | number; issuer?: string } = {}): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: key.kid })
    .setIssuer(o.issuer ?? issuer)
    .setAudience(o.audience ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(o.expiresIn ?? '5m')
    .sign(key.privateKey);
}

beforeAll(async () => {
  published = [await newKey()];
  issuerServer = createServer((req, res) => {
    if (req.url === '/.well-known/openid-configuration')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
    if (req.url === '/jwks') {
      jwksFetches++;
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: published.map((k) => k.jwk) }));
    }
    res.writeHead(404).end();
  });
  issuer = await listenOnLoopback(issuerServer);
  target = await nodeUnderTest({
    auth: {
      tokensFile,
      oidc: {
        issuer,
        audience: AUDIENCE,
        scopesClaim: 'groups',
        scopeMap: { 'platform-team': ['read', 'operate'], viewers: ['read'] },
        jwksCooldownSeconds: 0,
      },
    },
    rateLimit: { perAddress: 0, perCredential: 5, burstSeconds: 1 },
  });
}, 60_000);

afterAll(async () => {
  await target?.close();
  await closeNow(issuerServer);
});

const spec = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

async function call(method: string, path: string, o: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${target.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...o.headers },
    ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as Record<string, unknown> };
}

describe('identity and scopes', () => {
  it('a request without credentials is 401 with WWW-Authenticate, and creates nothing', async () => {
    const r = await call('POST', '/rollouts', { body: { id: 'anon', spec } });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer realm="rollout"');
    expect((await call('GET', '/rollouts/anon', { token: admin.token })).status).toBe(404);
    expect((await call('GET', '/rollouts')).status).toBe(401);
  });

  it('an unknown token is 401 invalid_token; the page and the health check stay open', async () => {
    const r = await call('GET', '/rollouts', { token: `rt_${'A'.repeat(43)}` });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(r.body.error).toBe('invalid credentials: unknown token');
    expect((await fetch(`${target.url}/`)).status).toBe(200);
    expect((await fetch(`${target.url}/cluster/health`)).status).toBe(200);
  });

  it('a read-only credential cannot write: 403 naming the scope it lacks', async () => {
    const r = await call('POST', '/rollouts', { token: reader.token, body: { id: 'by-reader', spec } });
    expect(r).toMatchObject({ status: 403, body: { error: 'auditor lacks the "admin" scope, which POST /rollouts needs' } });
    expect((await call('GET', '/rollouts/by-reader', { token: reader.token })).status).toBe(404);
  });

  it("the actor of a write is the credential's, whatever x-rollout-actor says", async () => {
    const r = await call('POST', '/rollouts', { token: admin.token, body: { id: 'owned', spec }, headers: { 'x-rollout-actor': 'mallory' } });
    expect(r.status).toBe(201);
    const paused = await call('POST', '/rollouts/owned/pause', { token: admin.token, body: { reason: 'look' }, headers: { 'x-rollout-actor': 'mallory' } });
    expect(paused.status).toBe(200);
    const got = await call('GET', '/rollouts/owned', { token: reader.token });
    expect(got.body).toMatchObject({ stateBy: 'alice' });
    expect(JSON.stringify(got.body)).not.toContain('mallory');
  });

  it('a signal needs signal; an AWS-shaped event needs forward; a steal request needs worker', async () => {
    const metrics = { type: 'rollout.metrics_reported', rolloutId: 'owned', stage: 0, requests: 10, errors: 0, observedAt: Date.now() };
    expect((await call('POST', '/events', { token: admin.token, body: metrics })).status).toBe(403);
    expect((await call('POST', '/events', { token: signaller.token, body: metrics })).status).toBe(202);
    const forged = {
      source: 'aws.ec2',
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      detail: { 'instance-id': 'i-0abc', 'instance-action': 'terminate' },
    };
    const r = await call('POST', '/events', { token: signaller.token, body: forged });
    expect(r).toMatchObject({ status: 403, body: { error: 'metrics-pipeline lacks the "forward" scope, which POST /events needs' } });
    expect((await call('POST', '/coordinator', { token: admin.token, body: { action: 'steal', runId: 'r', workerId: 'w' } })).status).toBe(403);
    expect((await call('POST', '/coordinator', { token: worker.token, body: { action: 'steal', runId: 'r', workerId: 'w' } })).status).not.toBe(403);
  });

  it('a worker credential bound to run A cannot steal, scan or act as another worker: 403, and run B is as it was', async () => {
    await call('POST', '/runs', { token: runAdmin.token, body: { id: 'run-b', spec: {}, items: [{ n: 1 }, { n: 2 }, { n: 3 }] } });
    const before = await call('GET', '/runs/run-b/items', { token: runAdmin.token });
    expect(before.status).toBe(200);
    const refused = [
      [{ action: 'steal', runId: 'run-b', workerId: 'host-a-1' }, 'fleet-a may not ask work for run "run-b": its credential is bound to runs run-a'],
      [{ action: 'steal', runId: 'run-a', workerId: 'ghost' }, /ghost/],
      [{ action: 'scan', runId: 'run-b' }, /"scan" is the control plane's/],
      [{ action: 'scan-all' }, /"scan-all" is the control plane's/],
    ] as const;
    for (const [body, error] of refused) {
      const r = await call('POST', '/coordinator', { token: fleetA.token, body });
      expect(r.status, JSON.stringify(body)).toBe(403);
      expect(r.body.error).toMatch(error);
    }
    expect((await call('GET', '/runs/run-b/items', { token: runAdmin.token })).body).toEqual(before.body);
    // Its own run, as its own worker: past the binding (what the coordinator answers is its own).
    expect((await call('POST', '/coordinator', { token: fleetA.token, body: { action: 'steal', runId: 'run-a', workerId: 'host-a-1' } })).status).not.toBe(403);
  });

  it('one credential past its rate is answered 429 with Retry-After; another credential is not held up', async () => {
    const answers = [];
    for (let i = 0; i < 8; i++) answers.push((await call('GET', '/cluster/status', { token: limited.token })).status);
    expect(answers.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(answers).toContain(429);
    const r = await call('GET', '/cluster/status', { token: limited.token });
    if (r.status === 429) expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await call('GET', '/cluster/status', { token: reader.token })).status).toBe(200);
  });

  it('a line added to the tokens file is let in, and a line removed is refused, without a restart', async () => {
    const contractor = mintToken('contractor', ['read']);
    const before = readFileSync(tokensFile, 'utf8');
    // As a deploy tool replaces it: a new file renamed over the old.
    const replace = (text: string) => {
      writeFileSync(`${tokensFile}.new`, text);
      renameSync(`${tokensFile}.new`, tokensFile);
    };
    const read = () => call('GET', '/rollouts', { token: contractor.token });
    replace(`${before}${contractor.line}\n`);
    // The node promises 5 s; the wait allows a machine three times slower (and the credential's rate limit).
    await until('the new line lets its token in', async () => (await read()).status === 200, 15_000, 250);
    replace(before);
    await until('the removed line is refused', async () => (await read()).status === 401, 15_000, 250);
    expect((await read()).body).toEqual({ error: 'invalid credentials: unknown token' });
    expect((await call('GET', '/rollouts', { token: reader.token })).status).toBe(200);
  });

  it('the tokens file holds only hashes: no token appears in it', () => {
    const text = readFileSync(tokensFile, 'utf8');
    for (const t of [admin, reader, signaller, worker]) expect(text).not.toContain(t.token);
    expect(text).toMatch(/^sha256:[0-9a-f]{64} alice read,admin,operate$/m);
  });
});

describe('OIDC', () => {
  it('a JWT from the issuer is accepted: the actor is its subject, scopes come from its groups', async () => {
    const token = await jwt(published[0]!, { sub: 'bob@example.com', groups: ['platform-team'] });
    const r = await call('POST', '/rollouts/owned/resume', { token, body: {} });
    expect(r.status).toBe(200);
    expect((await call('GET', '/rollouts/owned', { token })).body).toMatchObject({ state: 'running', stateBy: 'bob@example.com' });
    const viewer = await jwt(published[0]!, { sub: 'carol', groups: ['viewers'] });
    expect((await call('POST', '/rollouts/owned/pause', { token: viewer, body: {} })).status).toBe(403);
    // Operating rollouts is not cancelling runs: that is admin's, as aborting a rollout is.
    expect(await call('POST', '/runs/any/cancel', { token, body: {} })).toMatchObject({
      status: 403,
      body: { error: 'bob@example.com lacks the "admin" scope, which POST /runs/any/cancel needs' },
    });
  });

  it('an expired token, one for another audience, or from another issuer is 401', async () => {
    const key = published[0]!;
    const expired = await jwt(key, { sub: 'bob', groups: ['platform-team'] }, { expiresIn: Math.floor(Date.now() / 1000) - 600 });
    const r1 = await call('GET', '/rollouts', { token: expired });
    expect(r1).toMatchObject({ status: 401, body: { error: 'invalid credentials: token expired' } });
    const r2 = await call('GET', '/rollouts', { token: await jwt(key, { sub: 'bob' }, { audience: 'another-service' }) });
    expect(r2).toMatchObject({ status: 401, body: { error: expect.stringMatching(/token claim aud is not acceptable/) as unknown } });
    const r3 = await call('GET', '/rollouts', { token: await jwt(key, { sub: 'bob' }, { issuer: 'https://evil.example' }) });
    expect(r3).toMatchObject({ status: 401, body: { error: expect.stringMatching(/token claim iss is not acceptable/) as unknown } });
    // Signed by a key the issuer never published.
    const r4 = await call('GET', '/rollouts', { token: await jwt(await newKey(), { sub: 'bob', groups: ['viewers'] }) });
    expect(r4).toMatchObject({ status: 401, body: { error: 'invalid credentials: token signed with a key the issuer does not publish' } });
  });

  it('the issuer rotates its keys: tokens of the new key are accepted, those of the retired key refused', async () => {
    const old = published[0]!;
    const before = jwksFetches;
    const fresh = await newKey();
    published = [fresh];
    const r = await call('GET', '/rollouts', { token: await jwt(fresh, { sub: 'dave', groups: ['viewers'] }) });
    expect(r.status).toBe(200);
    expect(jwksFetches).toBeGreaterThan(before);
    const stale = await call('GET', '/rollouts', { token: await jwt(old, { sub: 'dave', groups: ['viewers'] }) });
    expect(stale.status).toBe(401);
  });
});

describe('a node that would be open to the network', () => {
  const cli = resolve(import.meta.dirname, '../../shared/runtimes/cli/cli.ts');
  it('rollout serve --host 0.0.0.0 without authentication exits 2 with one line naming the flags', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', cli, 'serve', '--node-id', 'open', '--host', '0.0.0.0', '--database-url', 'postgres://unused'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/0\.0\.0\.0 is reachable beyond this machine and no authentication is set: pass --auth-tokens-file or --oidc-issuer/);
  });

  it('rollout auth token prints a token and the line that lets it in', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', cli, 'auth', 'token', '--actor', 'ci', '--scopes', 'read,operate', '--json'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const { token, line } = JSON.parse(r.stdout) as { token: string; line: string };
    expect(token).toMatch(/^rt_[A-Za-z0-9_-]{43}$/);
    expect(line).toMatch(/^sha256:[0-9a-f]{64} ci read,operate$/);
    const bad = spawnSync(process.execPath, ['--import', 'tsx', cli, 'auth', 'token', '--actor', 'ci', '--scopes', 'read,root'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/unknown root/);
  });
});
