/**
 * A node's guard limits cheap reads (a rollout's traffic and assignment,
 * which a fleet polls) apart from every other request, on a fake clock: the
 * defaults carry a fleet of 10,000 processes sharing one read token and
 * refreshing every 5 s, and still slow one client flooding them.
 */
import { describe, expect, it } from 'vitest';
import type { ApiResponse } from '../../shared/api/handler.js';
import { RateLimiter } from '../../shared/auth/rate-limit.js';
import { mintToken, parseTokensFile, TokenAuthenticator } from '../../shared/auth/tokens.js';
import { nodeConfigSchema } from '../../shared/runtimes/node/config.js';
import { CHEAP_READS_DEFAULT, cheapReadLimit, guarded, type GuardOptions } from '../../shared/runtimes/node/guard.js';
import type { HttpRequest } from '../../shared/runtimes/node/http.js';

const fleet = mintToken('fleet', ['read']);
const other = mintToken('dashboard', ['read']);
const admin = mintToken('alice', ['read', 'admin']);
const authenticators = [new TokenAuthenticator(parseTokensFile([fleet.line, other.line, admin.line].join('\n')))];

/** A guard in front of a route that answers 200, on a clock the test moves. */
function guard(rateLimit: GuardOptions['rateLimit'], o: Partial<GuardOptions> = {}) {
  const clock = { ms: 1_000_000 };
  const handle = guarded(() => Promise.resolve<ApiResponse>({ status: 200, body: {} }), {
    authenticators,
    allowedHosts: null,
    rateLimit,
    now: () => clock.ms,
    ...o,
  });
  const send = (method: string, path: string, r: { token?: string; address?: string; headers?: Record<string, string> } = {}) =>
    handle({
      method,
      path,
      body: method === 'GET' ? null : '{}',
      actor: '',
      headers: { host: '127.0.0.1', 'content-type': 'application/json', ...(r.token ? { authorization: `Bearer ${r.token}` } : {}), ...r.headers },
      query: new URLSearchParams(path.endsWith('/assignment') ? 'entity=e' : ''),
      remoteAddress: r.address ?? '10.0.0.1',
      clientCertificate: null,
      secure: false,
    } satisfies HttpRequest);
  return { send, clock };
}

async function statuses(n: number, one: () => Promise<ApiResponse>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await one()).status);
  return out;
}

const count = (xs: readonly number[], x: number) => xs.filter((s) => s === x).length;

const defaults = nodeConfigSchema.parse({ nodeId: 'n', store: { kind: 'pglite', dataDir: null } }).rateLimit;

describe('the default limits', () => {
  it('keep the stricter limits for other requests, and give cheap reads room for 2,000/s with headroom', () => {
    expect(defaults).toEqual({ perAddress: 200, perCredential: 100, burstSeconds: 2 });
    expect([
      cheapReadLimit(defaults.cheapReadsPerAddress, defaults.perAddress),
      cheapReadLimit(defaults.cheapReadsPerCredential, defaults.perCredential),
    ]).toEqual([5_000, 5_000]);
    // A config written before the cheap limits existed keeps its numbers for other requests and gets the cheap defaults.
    const old = nodeConfigSchema.parse({ nodeId: 'n', store: { kind: 'pglite', dataDir: null }, rateLimit: { perAddress: 10, perCredential: 3 } }).rateLimit;
    expect(old).toEqual({ perAddress: 10, perCredential: 3, burstSeconds: 2 });
    expect(() => nodeConfigSchema.parse({ nodeId: 'n', store: { kind: 'pglite', dataDir: null }, rateLimit: { cheapReadsPerAddress: -1 } })).toThrow(
      /cheapReadsPerAddress/,
    );
  });

  it('admit 2,000 traffic and assignment reads a second on one credential from one address for 10 s, with no 429', async () => {
    const { send, clock } = guard(defaults);
    const answers = new Map<number, number>();
    // 10,000 processes behind one proxy, one token, each every 5 s: one request each 0.5 ms.
    for (let i = 0; i < 20_000; i++) {
      clock.ms += 0.5;
      const status = (await send('GET', i % 4 === 0 ? '/rollouts/checkout/assignment' : `/rollouts/r-${i % 7}/traffic`, { token: fleet.token })).status;
      answers.set(status, (answers.get(status) ?? 0) + 1);
    }
    expect(Object.fromEntries(answers)).toEqual({ 200: 20_000 });
  }, 30_000);

  it('slow one address sending 20,000 a second, and leave its other requests their own bucket', async () => {
    const { send, clock } = guard(defaults, { authenticators: [] });
    let admitted = 0;
    let refused = 0;
    for (let i = 0; i < 200_000; i++) {
      clock.ms += 0.05;
      const status = (await send('GET', '/rollouts/r/traffic')).status;
      if (status === 200) admitted++;
      else if (status === 429) refused++;
    }
    // The bucket's 2 s of burst, then 5,000/s: at most 60,000 of 200,000 get through.
    expect(admitted).toBeLessThanOrEqual(2 * 5_000 + 10 * 5_000 + 1);
    expect(admitted).toBeGreaterThanOrEqual(10 * 5_000);
    expect(admitted + refused).toBe(200_000);
    expect((await send('GET', '/rollouts/r/traffic')).status).toBe(429);
    expect((await send('GET', '/rollouts/r')).status).toBe(200);
  }, 30_000);
});

describe('cheap reads and other requests, each against its own limit', () => {
  const small = { perAddress: 0, perCredential: 5, burstSeconds: 1, cheapReadsPerAddress: 0, cheapReadsPerCredential: 50 };

  it('cheap reads past the other limit all pass; other reads past theirs are 429 with Retry-After naming the limit', async () => {
    const { send } = guard(small);
    expect(await statuses(20, () => send('GET', '/rollouts/r/traffic', { token: fleet.token }))).toEqual(Array<number>(20).fill(200));
    expect(await statuses(20, () => send('GET', '/rollouts/r/assignment', { token: fleet.token }))).toEqual(Array<number>(20).fill(200));
    expect(await statuses(8, () => send('GET', '/rollouts/r', { token: fleet.token }))).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    const refused = await send('GET', '/rollouts/r/history', { token: fleet.token });
    expect(refused).toMatchObject({ status: 429, body: { error: 'too many requests from fleet (--rate-limit-per-credential)' } });
    expect(Number(refused.headers?.['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  it('cheap reads past the cheap limit are 429 too, naming the cheap limit', async () => {
    const { send, clock } = guard(small);
    const answers = await statuses(60, () => send('GET', '/rollouts/r/traffic', { token: fleet.token }));
    expect(answers.slice(0, 50)).toEqual(Array<number>(50).fill(200));
    expect(answers.slice(50)).toEqual(Array<number>(10).fill(429));
    const refused = await send('HEAD', '/rollouts/r/assignment', { token: fleet.token });
    expect(refused).toMatchObject({
      status: 429,
      body: { error: 'too many traffic and assignment reads from fleet (--rate-limit-cheap-reads-per-credential)' },
    });
    expect(refused.headers?.['retry-after']).toBe('1');
    // Its other requests are not held up by its cheap ones.
    expect((await send('GET', '/rollouts/r', { token: fleet.token })).status).toBe(200);
    // A second later the bucket holds another 50.
    clock.ms += 1_000;
    expect(await statuses(50, () => send('GET', '/rollouts/r/traffic', { token: fleet.token }))).toEqual(Array<number>(50).fill(200));
  });

  it("the class is the matched route's, not the path's look: a write or an unmatched path near /traffic pays the other limit", async () => {
    const { send } = guard(small);
    const near = await statuses(6, () => send('GET', '/rollouts/r/traffic/more', { token: fleet.token }));
    expect(near.at(-1)).toBe(429);
    expect((await send('GET', '/rollouts/r/traffic', { token: fleet.token })).status).toBe(200);
    const writes = await statuses(6, () => send('POST', '/rollouts/r/traffic', { token: admin.token }));
    expect(writes.at(-1)).toBe(429);
  });

  it("one credential's flood holds up neither class of another credential from the same address", async () => {
    const { send } = guard(small);
    await statuses(60, () => send('GET', '/rollouts/r/traffic', { token: fleet.token }));
    await statuses(10, () => send('GET', '/rollouts/r', { token: fleet.token }));
    expect((await send('GET', '/rollouts/r/traffic', { token: fleet.token })).status).toBe(429);
    expect((await send('GET', '/rollouts/r', { token: fleet.token })).status).toBe(429);
    expect((await send('GET', '/rollouts/r/traffic', { token: other.token })).status).toBe(200);
    expect((await send('GET', '/rollouts/r', { token: other.token })).status).toBe(200);
  });

  it('with authentication off, each address is limited in each class; behind a trusted proxy, each client', async () => {
    const { send } = guard(
      { perAddress: 5, perCredential: 5, burstSeconds: 1, cheapReadsPerAddress: 50, cheapReadsPerCredential: 50 },
      { authenticators: [], trustedProxies: ['10.0.0.9'] },
    );
    expect(await statuses(20, () => send('GET', '/rollouts/r/traffic'))).toEqual(Array<number>(20).fill(200));
    expect(await statuses(7, () => send('GET', '/rollouts/r'))).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect((await send('GET', '/rollouts/r')).body).toEqual({ error: 'too many requests from this address (--rate-limit)' });
    const cheap = await statuses(40, () => send('GET', '/rollouts/r/traffic'));
    expect(count(cheap, 200)).toBe(30);
    expect((await send('GET', '/rollouts/r/traffic')).body).toEqual({
      error: 'too many traffic and assignment reads from this address (--rate-limit-cheap-reads)',
    });
    expect((await send('GET', '/rollouts/r', { address: '10.0.0.2' })).status).toBe(200);
    // Two clients behind the proxy: one's flood leaves the other its bucket.
    const viaProxy = (client: string) => send('GET', '/rollouts/r', { address: '10.0.0.9', headers: { 'x-forwarded-for': client } });
    expect(await statuses(6, () => viaProxy('192.0.2.1'))).toEqual([200, 200, 200, 200, 200, 429]);
    expect((await viaProxy('192.0.2.2')).status).toBe(200);
  });

  it('an absent cheap limit is never tighter than the other: none when that is none, else at least the default', async () => {
    expect(cheapReadLimit(undefined, 0)).toBe(0);
    expect(cheapReadLimit(undefined, 3)).toBe(CHEAP_READS_DEFAULT);
    expect(cheapReadLimit(undefined, 20_000)).toBe(20_000);
    expect(cheapReadLimit(7, 0)).toBe(7);
    // `--rate-limit 0 --rate-limit-per-credential 0` (what the benches pass): nothing is refused, cheap reads included.
    const off = guard({ perAddress: 0, perCredential: 0, burstSeconds: 1 });
    const flood = await statuses(12_000, () => off.send('GET', '/rollouts/r/assignment', { token: fleet.token }));
    expect(count(flood, 200)).toBe(12_000);
    // A general limit without cheap ones: cheap reads get the default, in their own buckets.
    const { send } = guard({ perAddress: 0, perCredential: 3, burstSeconds: 1 });
    expect(await statuses(4, () => send('GET', '/rollouts/r', { token: fleet.token }))).toEqual([200, 200, 200, 429]);
    expect(count(await statuses(CHEAP_READS_DEFAULT + 1, () => send('GET', '/rollouts/r/traffic', { token: fleet.token })), 429)).toBe(1);
  }, 30_000);
});

describe('a token bucket', () => {
  it('refuses a rate or burst it cannot keep, naming it', () => {
    expect(() => new RateLimiter(0, 1)).toThrow('a rate limit needs a positive number of requests per second, not 0');
    expect(() => new RateLimiter(5, 0.5)).toThrow("a rate limit's burst must be at least 1 request, not 0.5");
    expect(() => RateLimiter.of(5, 0)).toThrow("a rate limit's burst must be a positive number of seconds, not 0");
    expect(RateLimiter.of(0, 2)).toBeNull();
  });
});
