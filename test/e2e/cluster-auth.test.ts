/**
 * The local cluster as it would be exposed: three `rollout serve` nodes with
 * authentication on (a tokens file and an OIDC issuer this file starts),
 * behind nginx terminating TLS with the shipped configuration. The CLI, a
 * worker process and the status page (headless Chromium) each do their work
 * through it with a credential, and are refused without one.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type LocalCluster } from '../../infra/local/cluster.js';
import { mintToken } from '../../shared/auth/tokens.js';
import { rollout } from '../support/cli.js';
import { closeNow, listenOnLoopback } from '../support/local-server.js';
import { testCertificates, type TestCertificates } from '../support/tls.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const shots = resolve(import.meta.dirname, '../../test-results');
const dir = mkdtempSync(join(tmpdir(), 'rollout-cluster-auth-'));
const admin = mintToken('release-bot', ['read', 'admin', 'operate']);
const reader = mintToken('dashboard', ['read']);
const worker = mintToken('fleet', ['worker']);
const bound = mintToken('fleet-b', ['worker'], { runs: ['bound-run'], worker: 'w-bound' });
const signaller = mintToken('metrics', ['signal']);
writeFileSync(join(dir, 'tokens'), [admin.line, reader.line, worker.line, bound.line, signaller.line, ''].join('\n'));

let certs: TestCertificates;
let cluster: LocalCluster;
let issuer: string;
let issuerServer: Server;
let signJwt: (claims: Record<string, unknown>) => Promise<string>;
let browser: Browser;

beforeAll(async () => {
  certs = testCertificates();
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  issuerServer = createServer((req, res) => {
    if (req.url === '/.well-known/openid-configuration')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer, jwks_uri: `${issuer}/keys` }));
    if (req.url === '/keys') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    res.writeHead(404).end();
  });
  issuer = await listenOnLoopback(issuerServer);
  signJwt = (claims) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(issuer)
      .setAudience('rollout')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(privateKey);
  cluster = await startCluster({
    nodes: 3,
    tls: { certFile: certs.certFile, keyFile: certs.keyFile, ca: certs.ca },
    env: {
      CLUSTER_LEASE_TTL: '4',
      CLUSTER_HEARTBEAT_INTERVAL: '1.5',
      CLUSTER_ELECTION_INTERVAL: '1',
      CLUSTER_ELECTION_TIMEOUT: '4',
      ROLLOUT_AUTH_TOKENS_FILE: join(dir, 'tokens'),
      ROLLOUT_OIDC_ISSUER: issuer,
      ROLLOUT_OIDC_AUDIENCE: 'rollout',
    },
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await cluster?.stop();
  await closeNow(issuerServer);
});

const over = () => ['--url', cluster.url, '--ca-file', certs.caFile];

/** One request through nginx, as sent: the path is not normalised on the way (fetch would resolve it). */
function send(method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const url = new URL(cluster.url);
  return new Promise((done, fail) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = httpsRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        ca: certs.ca,
        headers: {
          authorization: `Bearer ${token}`,
          ...(text ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) } : {}),
        },
      },
      (res) => {
        let out = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (out += c));
        res.on('end', () => done({ status: res.statusCode ?? 0, body: out.startsWith('{') ? (JSON.parse(out) as Record<string, unknown>) : null }));
      },
    );
    req.on('error', fail);
    req.end(text);
  });
}
const spec = {
  target: { service: 'checkout', version: 'v7' },
  stages: [
    { name: 'canary', percent: 5, bakeSeconds: 3_600 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

describe('the cluster behind nginx with TLS and authentication', () => {
  it('the CLI works over HTTPS with a token, and is refused without one', async () => {
    const file = join(dir, 'spec.json');
    writeFileSync(file, JSON.stringify(spec));
    const refused = await rollout(['rollouts', 'create', ...over(), '--file', file, '--id', 'cli-ro']);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/HTTP 401: credentials required/);
    const created = await rollout(['rollouts', 'create', ...over(), '--file', file, '--id', 'cli-ro', '--token', admin.token]);
    expect(created.code, created.err).toBe(0);
    expect(created.out.trim()).toBe('created cli-ro');
    const denied = await rollout(['rollouts', 'pause', 'cli-ro', ...over(), '--token', reader.token]);
    expect(denied.code).toBe(1);
    expect(denied.err).toMatch(/HTTP 403: dashboard lacks the "operate" scope/);
    const paused = await rollout(['rollouts', 'pause', 'cli-ro', ...over(), '--reason', 'checking', '--token', admin.token]);
    expect(paused.code, paused.err).toBe(0);
    const got = await rollout(['rollouts', 'get', 'cli-ro', ...over(), '--json'], { ROLLOUT_TOKEN: reader.token });
    expect(got.code, got.err).toBe(0);
    expect(JSON.parse(got.out)).toMatchObject({ id: 'cli-ro', state: 'paused', stateBy: 'release-bot' });
  }, 150_000);

  it('the CLI works with an OIDC token from the issuer: the actor is its subject', async () => {
    const token = await signJwt({ sub: 'erin@example.com', scope: 'read operate' });
    const resumed = await rollout(['rollouts', 'resume', 'cli-ro', ...over(), '--token', token]);
    expect(resumed.code, resumed.err).toBe(0);
    const got = await rollout(['rollouts', 'get', 'cli-ro', ...over(), '--json', '--token', token]);
    expect(JSON.parse(got.out)).toMatchObject({ state: 'running', stateBy: 'erin@example.com' });
  }, 60_000);

  it('a worker process asks the coordinator through nginx with its worker token and finishes the run', async () => {
    const items = join(dir, 'items.json');
    writeFileSync(items, JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ n: i }))));
    const created = await rollout(['runs', 'create', ...over(), '--file', items, '--id', 'auth-run', '--token', admin.token]);
    expect(created.code, created.err).toBe(0);
    const w = await rollout(
      [
        'worker',
        '--run',
        'auth-run',
        '--store',
        'postgres',
        '--queue',
        'ledger',
        '--coordinator',
        `${cluster.url}/coordinator`,
        '--ca-file',
        certs.caFile,
        '--worker-id',
        'w-auth',
        '--mock-duration-ms',
        '5',
        '--wait-seconds',
        '1',
        '--exit-when-done',
      ],
      { DATABASE_URL: cluster.databaseUrl, ROLLOUT_TOKEN: worker.token },
    );
    expect(w.code, w.err).toBe(0);
    expect(w.out).toMatch(/worker w-auth on .*: done; done 20/);
    // Its steal requests went through: none was refused.
    expect(w.err).not.toMatch(/HTTP 40[13]/);
    const status = await rollout(['runs', 'status', 'auth-run', ...over(), '--json', '--token', reader.token]);
    expect(JSON.parse(status.out)).toMatchObject({ done: true, counts: { done: 20, failed: 0 } });
    // The same worker with no token: it still runs what the ledger gives it, and its steal requests are refused.
    const again = await rollout(['runs', 'create', ...over(), '--file', items, '--id', 'auth-run-2', '--token', admin.token]);
    expect(again.code, again.err).toBe(0);
    const anonymous = await rollout(
      [
        'worker',
        '--run',
        'auth-run-2',
        '--store',
        'postgres',
        '--queue',
        'ledger',
        '--coordinator',
        `${cluster.url}/coordinator`,
        '--ca-file',
        certs.caFile,
        '--worker-id',
        'w-anon',
        '--mock-duration-ms',
        '5',
        '--wait-seconds',
        '1',
        '--exit-when-done',
      ],
      { DATABASE_URL: cluster.databaseUrl },
    );
    expect(anonymous.err).toMatch(/HTTP 401/);
    // And with an OIDC token that carries the worker scope.
    const third = await rollout(['runs', 'create', ...over(), '--file', items, '--id', 'auth-run-3', '--token', admin.token]);
    expect(third.code, third.err).toBe(0);
    const byJwt = await rollout(
      [
        'worker',
        '--run',
        'auth-run-3',
        '--store',
        'postgres',
        '--queue',
        'ledger',
        '--coordinator',
        `${cluster.url}/coordinator`,
        '--ca-file',
        certs.caFile,
        '--worker-id',
        'w-jwt',
        '--mock-duration-ms',
        '5',
        '--wait-seconds',
        '1',
        '--exit-when-done',
      ],
      { DATABASE_URL: cluster.databaseUrl, ROLLOUT_TOKEN: await signJwt({ sub: 'fleet@example.com', scope: 'worker' }) },
    );
    expect(byJwt.code, byJwt.err).toBe(0);
    expect(byJwt.err).not.toMatch(/HTTP 40[13]/);
  }, 120_000);

  it('through nginx, a worker token bound to one run serves it, and is refused another run and another worker id; nothing of the other run moves', async () => {
    const items = join(dir, 'items.json');
    for (const id of ['bound-run', 'other-run'])
      expect((await rollout(['runs', 'create', ...over(), '--file', items, '--id', id, '--token', admin.token])).code).toBe(0);
    const other = await send('GET', '/runs/other-run/items', reader.token);
    for (const body of [
      { action: 'steal', runId: 'other-run', workerId: 'w-bound' },
      { action: 'steal', runId: 'bound-run', workerId: 'w-else' },
      { action: 'scan-all' },
    ]) {
      const r = await send('POST', '/coordinator', bound.token, body);
      expect(r.status, JSON.stringify(body)).toBe(403);
    }
    expect(await send('GET', '/runs/other-run/items', reader.token)).toEqual(other);
    const w = await rollout(
      [
        'worker',
        '--run',
        'bound-run',
        '--store',
        'postgres',
        '--queue',
        'ledger',
        '--coordinator',
        `${cluster.url}/coordinator`,
        '--ca-file',
        certs.caFile,
        '--worker-id',
        'w-bound',
        '--mock-duration-ms',
        '5',
        '--wait-seconds',
        '1',
        '--exit-when-done',
      ],
      { DATABASE_URL: cluster.databaseUrl, ROLLOUT_TOKEN: bound.token },
    );
    expect(w.code, w.err).toBe(0);
    expect(w.err).not.toMatch(/HTTP 40[13]/);
  }, 120_000);

  it('through nginx, an AWS envelope sent with a signal token to another spelling of /events is refused, as /events itself is', async () => {
    const forged = {
      source: 'aws.ec2',
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      detail: { 'instance-id': 'i-0abc', 'instance-action': 'terminate' },
    };
    for (const path of ['/events', '/events/', '/events//', '/%65vents', '/./events']) {
      const r = await send('POST', path, signaller.token, forged);
      expect([400, 403, 404], `${path}: ${JSON.stringify(r.body)}`).toContain(r.status);
    }
  }, 60_000);

  it('the status page asks for a token, then shows the cluster and its rollouts with a read token', async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    // Chromium is not told of the test CA: the page, not the certificate chain, is what is tested here.
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(cluster.url);
    await page.locator('#signin').waitFor({ state: 'visible' });
    await page.fill('#token', reader.token);
    await page.click('#signin button');
    await page.locator('#rollouts').getByText('cli-ro').first().waitFor();
    expect(await page.locator('#signin').isHidden()).toBe(true);
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: resolve(shots, 'status-page-signed-in.png'), fullPage: true });
    await context.close();
    // The same with an OIDC token, in a fresh tab (sessionStorage is per tab).
    const second = await browser.newContext({ ignoreHTTPSErrors: true });
    const tab = await second.newPage();
    await tab.goto(cluster.url);
    await tab.locator('#signin').waitFor({ state: 'visible' });
    await tab.fill('#token', await signJwt({ sub: 'viewer@example.com', scope: 'read' }));
    await tab.click('#signin button');
    await tab.locator('#rollouts').getByText('cli-ro').first().waitFor();
    await second.close();
  }, 60_000);
});
