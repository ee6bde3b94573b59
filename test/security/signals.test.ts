/**
 * Signals that try to pin a gate or pass for someone else, against a real
 * node over HTTP. Reporters here sign their signals (Rollout-Signature) as a
 * metrics pipeline without a token would; the node also accepts tokens.
 */
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signatureHeader } from '../../shared/auth/signature.js';
import { mintToken } from '../../shared/auth/tokens.js';
import { rollout as cli } from '../support/cli.js';
import { eventually, until } from '../support/gate.js';
import { nodeUnderTest } from '../support/node-under-test.js';

const dir = mkdtempSync(join(tmpdir(), 'rollout-signals-'));
const SECRET = 'k'.repeat(16) + 'a-reporter-secret-of-some-length';
const admin = mintToken('alice', ['read', 'admin', 'operate', 'signal']);
writeFileSync(join(dir, 'tokens'), `${admin.line}\n`);
writeFileSync(join(dir, 'signal-keys'), `# reporters\nmetrics-pipeline ${SECRET}\n`);

let target: Awaited<ReturnType<typeof nodeUnderTest>>;

beforeAll(async () => {
  target = await nodeUnderTest({ auth: { tokensFile: join(dir, 'tokens'), signalKeysFile: join(dir, 'signal-keys') } });
}, 60_000);

afterAll(async () => {
  await target?.close();
});

async function call(method: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${target.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> };
}

const asAdmin = { authorization: `Bearer ${admin.token}` };
const state = async (id: string) => (await call('GET', `/rollouts/${id}`, undefined, asAdmin)).body as { state: string; stages: { phase: string }[] };

async function rollout(id: string): Promise<void> {
  const spec = {
    target: { service: 'checkout', version: id },
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { maxErrorRate: 0.05, minRequests: 100 } },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  };
  expect((await call('POST', '/rollouts', { id, spec }, asAdmin)).status).toBe(201);
  await eventually(`${id} has started`, 10_000, async () => (await state(id)).stages[0]?.phase === 'active');
}

const metrics = (rolloutId: string, requests: number, errors: number, observedAt: number) => ({
  type: 'rollout.metrics_reported',
  rolloutId,
  stage: 0,
  requests,
  errors,
  observedAt,
});

describe('a reading stamped ahead cannot pin a gate', () => {
  it('a million good requests stamped 25 s ahead, then a real breach: the breach is judged and the stage rolls back', async () => {
    await rollout('pinned');
    const ahead = await call('POST', '/events', metrics('pinned', 1_000_000, 0, Date.now() + 25_000), asAdmin);
    expect(ahead.status).toBe(202);
    const breach = await call('POST', '/events', metrics('pinned', 1_000, 500, Date.now()), asAdmin);
    expect(breach.status).toBe(202);
    await eventually('the breach rolled the stage back', 10_000, async () => (await state('pinned')).state === 'rolled_back');
  });
});

describe('signed signals', () => {
  const body = (id: string) => JSON.stringify(metrics(id, 200, 0, Date.now()));

  it('a signal signed by a known reporter is accepted once; the same signature again is a replay, refused', async () => {
    await rollout('signed');
    const b = body('signed');
    const header = signatureHeader('metrics-pipeline', SECRET, b);
    expect((await call('POST', '/events', b, { 'rollout-signature': header })).status).toBe(202);
    const again = await call('POST', '/events', b, { 'rollout-signature': header });
    expect(again).toMatchObject({ status: 401, body: { error: 'invalid credentials: signature already used (a replay)' } });
  });

  it('an old signature, a wrong secret, or a changed body is refused, and nothing is stored', async () => {
    const b = body('signed');
    const old = await call('POST', '/events', b, { 'rollout-signature': signatureHeader('metrics-pipeline', SECRET, b, Date.now() - 400_000) });
    expect(old).toMatchObject({
      status: 401,
      body: { error: expect.stringMatching(/^invalid credentials: signature made 40\d s from now; at most 300 s$/) as unknown },
    });
    const wrong = await call('POST', '/events', b, { 'rollout-signature': signatureHeader('metrics-pipeline', 'w'.repeat(40), b) });
    expect(wrong).toMatchObject({ status: 401, body: { error: 'invalid credentials: signature does not verify' } });
    const changed = await call('POST', '/events', JSON.stringify(metrics('signed', 200, 199, Date.now())), {
      'rollout-signature': signatureHeader('metrics-pipeline', SECRET, b),
    });
    expect(changed.status).toBe(401);
    expect((await state('signed')).state).toBe('running');
  });

  it('a signature proves a signal, nothing more: a signed AWS event or write is refused', async () => {
    const forged = JSON.stringify({
      source: 'aws.ec2',
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      detail: { 'instance-id': 'i-0abc', 'instance-action': 'terminate' },
    });
    const r = await call('POST', '/events', forged, { 'rollout-signature': signatureHeader('metrics-pipeline', SECRET, forged) });
    expect(r).toMatchObject({ status: 403, body: { error: 'signed:metrics-pipeline lacks the "forward" scope, which POST /events needs' } });
    const pause = '{}';
    const w = await call('POST', '/rollouts/signed/pause', pause, { 'rollout-signature': signatureHeader('metrics-pipeline', SECRET, pause) });
    expect(w.status).toBe(401);
    expect((await state('signed')).state).toBe('running');
  });

  it('rollout events publish --signer signs what it sends', async () => {
    const args = [
      'events',
      'publish',
      '--url',
      target.url,
      '--type',
      'rollout.metrics_reported',
      '--rollout',
      'signed',
      '--stage',
      '0',
      '--requests',
      '300',
      '--errors',
      '1',
      '--signer',
      'metrics-pipeline',
    ];
    const r = await cli(args, { ROLLOUT_SIGNING_SECRET: SECRET });
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^accepted \(stored\)/);
    const unsigned = await cli(args.slice(0, -2));
    expect(unsigned.code).toBe(1);
    expect(unsigned.err).toMatch(/HTTP 401/);
  });

  it('a reporter added to the keys file is let in, and one removed is refused, without a restart', async () => {
    const keys = join(dir, 'signal-keys');
    const RELAY = 'relay-secret-'.padEnd(40, 'r');
    // As a deploy tool replaces it: a new file renamed over the old.
    const replace = (text: string) => {
      writeFileSync(`${keys}.new`, text);
      renameSync(`${keys}.new`, keys);
    };
    const fromRelay = async () => {
      const b = body('signed');
      return call('POST', '/events', b, { 'rollout-signature': signatureHeader('relay', RELAY, b) });
    };
    replace(`metrics-pipeline ${SECRET}\nrelay ${RELAY}\n`);
    // The node promises 5 s; the wait allows a machine three times slower.
    await until('the new reporter is let in', async () => (await fromRelay()).status === 202, 15_000, 100);
    replace(`metrics-pipeline ${SECRET}\n`);
    await until('the removed reporter is refused', async () => (await fromRelay()).status === 401, 15_000, 100);
    expect((await fromRelay()).body).toEqual({ error: 'invalid credentials: signature does not verify' });
    const b = body('signed');
    expect((await call('POST', '/events', b, { 'rollout-signature': signatureHeader('metrics-pipeline', SECRET, b) })).status).toBe(202);
  });
});
