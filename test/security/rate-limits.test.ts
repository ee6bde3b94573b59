/**
 * Rate limits on a real node, over HTTP: a rollout's traffic and assignment
 * (what a fleet polls) are limited apart from every other request, so a
 * fleet's polling passes where the stricter limit would refuse it, while a
 * client past either limit is answered 429 with Retry-After naming it.
 *
 * The sustained rates are low and the bursts long (5 other requests, 50
 * cheap reads, refilled at 0.1/s and 1/s) so what refills while a test runs
 * is far less than what it sends past the limit.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintToken } from '../../shared/auth/tokens.js';
import { nodeUnderTest } from '../support/node-under-test.js';

const dir = mkdtempSync(join(tmpdir(), 'rollout-rate-limits-'));
const admin = mintToken('alice', ['read', 'admin']);
const fleet = mintToken('fleet', ['read']);
const dashboard = mintToken('dashboard', ['read']);
const tokensFile = join(dir, 'tokens');
writeFileSync(tokensFile, [admin.line, fleet.line, dashboard.line, ''].join('\n'));

const spec = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

let withAuth: Awaited<ReturnType<typeof nodeUnderTest>>;
let withoutAuth: Awaited<ReturnType<typeof nodeUnderTest>>;

beforeAll(async () => {
  withAuth = await nodeUnderTest({
    auth: { tokensFile },
    rateLimit: { perAddress: 0, perCredential: 0.1, burstSeconds: 50, cheapReadsPerAddress: 0, cheapReadsPerCredential: 1 },
  });
  withoutAuth = await nodeUnderTest({
    rateLimit: { perAddress: 0.1, perCredential: 0, burstSeconds: 50, cheapReadsPerAddress: 1, cheapReadsPerCredential: 0 },
  });
}, 60_000);

afterAll(async () => {
  await withAuth?.close();
  await withoutAuth?.close();
});

async function call(url: string, method: string, path: string, o: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...o.headers },
    ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as Record<string, unknown> | null };
}

async function statuses(n: number, one: () => Promise<{ status: number }>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await one()).status);
  return out;
}

describe('rate limits, per credential', () => {
  it('traffic reads (304s among them) past the other limit all pass; other reads past it are 429 with Retry-After naming it', async () => {
    expect((await call(withAuth.url, 'POST', '/rollouts', { token: admin.token, body: { id: 'polled', spec } })).status).toBe(201);
    const first = await call(withAuth.url, 'GET', '/rollouts/polled/traffic', { token: fleet.token });
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag')!;
    expect(etag).toBeTruthy();
    // As the fleet's providers poll: mostly with the ETag they hold.
    const polls = await statuses(19, () => call(withAuth.url, 'GET', '/rollouts/polled/traffic', { token: fleet.token, headers: { 'if-none-match': etag } }));
    expect(polls).toEqual(Array<number>(19).fill(304));
    expect((await call(withAuth.url, 'GET', '/rollouts/polled/assignment?entity=user-1', { token: fleet.token })).status).toBe(200);

    const reads = await statuses(8, () => call(withAuth.url, 'GET', '/rollouts/polled', { token: fleet.token }));
    expect(reads.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(reads).toContain(429);
    const refused = await call(withAuth.url, 'GET', '/rollouts/polled/history', { token: fleet.token });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ error: 'too many requests from fleet (--rate-limit-per-credential)' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Its polling goes on while its other reads wait.
    expect((await call(withAuth.url, 'GET', '/rollouts/polled/traffic', { token: fleet.token, headers: { 'if-none-match': etag } })).status).toBe(304);
  }, 60_000);

  it('traffic reads past the cheap limit are 429 with Retry-After naming it; another credential is held up in neither class', async () => {
    // 21 of the fleet's 50 were spent above; these spend the rest and go on past it.
    const polls = await statuses(40, () => call(withAuth.url, 'GET', '/rollouts/polled/traffic', { token: fleet.token }));
    expect(polls).toContain(429);
    const refused = await call(withAuth.url, 'GET', '/rollouts/polled/assignment?entity=user-1', { token: fleet.token });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ error: 'too many traffic and assignment reads from fleet (--rate-limit-cheap-reads-per-credential)' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    expect((await call(withAuth.url, 'GET', '/rollouts/polled/traffic', { token: dashboard.token })).status).toBe(200);
    expect((await call(withAuth.url, 'GET', '/rollouts/polled', { token: dashboard.token })).status).toBe(200);
  }, 60_000);
});

describe('rate limits with authentication off: per address', () => {
  it('traffic reads past the other limit pass; other reads past it, and traffic reads past the cheap limit, are 429', async () => {
    // The write spends one of the address's 5 other requests.
    expect((await call(withoutAuth.url, 'POST', '/rollouts', { body: { id: 'polled', spec } })).status).toBe(201);
    expect(await statuses(20, () => call(withoutAuth.url, 'GET', '/rollouts/polled/traffic'))).toEqual(Array<number>(20).fill(200));

    const reads = await statuses(7, () => call(withoutAuth.url, 'GET', '/rollouts/polled'));
    expect(reads.slice(0, 4)).toEqual([200, 200, 200, 200]);
    expect(reads).toContain(429);
    const refused = await call(withoutAuth.url, 'GET', '/rollouts');
    expect(refused.body).toEqual({ error: 'too many requests from this address (--rate-limit)' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    const polls = await statuses(40, () => call(withoutAuth.url, 'GET', '/rollouts/polled/traffic'));
    expect(polls.slice(0, 20)).toEqual(Array<number>(20).fill(200));
    expect(polls).toContain(429);
    const cheap = await call(withoutAuth.url, 'GET', '/rollouts/polled/traffic');
    expect(cheap.body).toEqual({ error: 'too many traffic and assignment reads from this address (--rate-limit-cheap-reads)' });
    expect(Number(cheap.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
