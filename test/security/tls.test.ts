/**
 * A node serving HTTPS itself, asking for client certificates: a caller with
 * a certificate of the operator's CA acts as `cert:<CN>` with the scopes the
 * operator gives certificates; one without, or with a certificate of another
 * CA, is refused. Certificates from Debian's openssl, made for this file.
 */
import { request } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeUnderTest } from '../support/node-under-test.js';
import { testCertificates, type TestCertificates } from '../support/tls.js';

let certs: TestCertificates;
let other: TestCertificates;
let target: Awaited<ReturnType<typeof nodeUnderTest>>;

beforeAll(async () => {
  certs = testCertificates();
  other = testCertificates();
  target = await nodeUnderTest({
    tls: { certFile: certs.certFile, keyFile: certs.keyFile, clientCaFile: certs.caFile },
    auth: { certificateScopes: ['read', 'admin'] },
  });
}, 60_000);

afterAll(async () => {
  await target?.close();
});

function call(
  method: string,
  path: string,
  o: { cert?: { cert: Buffer; key: Buffer }; body?: unknown } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${target.url}${path}`,
      {
        method,
        ca: certs.ca,
        headers: { 'content-type': 'application/json', ...(payload ? { 'content-length': String(Buffer.byteLength(payload)) } : {}) },
        ...(o.cert ? { cert: o.cert.cert, key: o.cert.key } : {}),
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: (text ? JSON.parse(text) : null) as Record<string, unknown> }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const spec = { target: { service: 'checkout', version: 'v2' }, stages: [{ name: 'all', percent: 100, bakeSeconds: 3_600 }] };

describe('client certificates', () => {
  it('the node serves HTTPS: its URL says so, and a certificate of its CA is accepted as cert:<CN>', async () => {
    expect(target.url).toMatch(/^https:\/\//);
    const deployer = certs.client('deploy-bot');
    const created = await call('POST', '/rollouts', { cert: deployer, body: { id: 'by-cert', spec } });
    expect(created.status).toBe(201);
    const paused = await call('POST', '/rollouts/by-cert/pause', { cert: deployer, body: {} });
    expect(paused).toMatchObject({ status: 403, body: { error: 'cert:deploy-bot lacks the "operate" scope, which POST /rollouts/by-cert/pause needs' } });
    expect((await call('GET', '/rollouts/by-cert', { cert: deployer })).body).toMatchObject({ state: 'running', stateBy: 'cert:deploy-bot' });
  });

  it('no certificate, or one another CA signed, is 401, and creates nothing', async () => {
    expect((await call('POST', '/rollouts', { body: { id: 'no-cert', spec } })).status).toBe(401);
    const stranger = other.client('deploy-bot');
    expect((await call('POST', '/rollouts', { cert: stranger, body: { id: 'other-ca', spec } })).status).toBe(401);
    const reader = certs.client('reader');
    expect((await call('GET', '/rollouts/no-cert', { cert: reader })).status).toBe(404);
    expect((await call('GET', '/rollouts/other-ca', { cert: reader })).status).toBe(404);
  });
});
