/**
 * Credentials bound to the narrowest thing they may touch, and revoked
 * without a restart: the tokens file's and the signal keys file's format
 * (bindings, duplicates refused naming the lines), the coordinator check a
 * worker credential passes, OIDC binding claims, and the files kept current
 * as they change (watch, periodic check, SIGHUP), a bad file leaving the
 * previous set in force.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OidcAuthenticator } from '../../shared/adapters/oidc/authenticator.js';
import { authorizeWorkerRequest, runsBinding, workerBinding, workerMatches } from '../../shared/auth/bindings.js';
import { Unauthenticated, type Identity } from '../../shared/auth/identity.js';
import { parseSignalKeys, readSignalKeys, SignatureAuthenticator, signatureHeader } from '../../shared/auth/signature.js';
import { mintToken, parseTokensFile, TokenAuthenticator } from '../../shared/auth/tokens.js';
import { ConfigError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { until } from '../support/gate.js';
import { closeNow, listenOnLoopback } from '../support/local-server.js';

const dir = mkdtempSync(join(tmpdir(), 'rollout-credentials-'));
const H = (c: string) => `sha256:${c.repeat(64)}`;
/** How long a change may take to be seen here: the 5 s the node promises, with room for a machine three times slower. */
const SEEN_MS = 15_000;

/** The issues a parse refuses with (ConfigError), or [] when it parses. */
function issuesOf(f: () => unknown): readonly string[] {
  try {
    f();
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
}

function recordingLogger(): Logger & { lines: { level: string; message: string }[] } {
  const lines: { level: string; message: string }[] = [];
  const at = (level: string) => (message: string) => void lines.push({ level, message });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** Replaces `path` as a deploy tool would: a new file renamed over it. */
function replace(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

describe('the tokens file', () => {
  it('a line of three fields is unbound, as before bindings: any run, any worker', () => {
    const [e] = parseTokensFile(`${H('a')} fleet worker\n`);
    expect(e).toMatchObject({ actor: 'fleet', runs: 'any', worker: null, bound: false, line: 1 });
  });

  it('runs= and worker= bind a worker line; runs=* is any run, said on purpose', () => {
    const [a, b] = parseTokensFile(
      `# fleet\n${H('a')} fleet-a worker runs=nightly-1,nightly-2 worker=host-a-*\n\n${H('b')} fleet-b worker,read worker=host-b runs=*\n`,
    );
    expect(a).toMatchObject({ actor: 'fleet-a', worker: 'host-a-*', bound: true, line: 2 });
    expect([...(a!.runs as ReadonlySet<string>)]).toEqual(['nightly-1', 'nightly-2']);
    expect(b).toMatchObject({ actor: 'fleet-b', runs: 'any', worker: 'host-b', bound: true, line: 4 });
  });

  it('a malformed binding is refused naming its line and what is wrong', () => {
    const file = [
      `${H('1')} a worker runs=`,
      `${H('2')} b worker runs=r1,*`,
      `${H('3')} c worker runs=r/1`,
      `${H('4')} d worker worker=host*a`,
      `${H('5')} e worker runs=r1 runs=r2`,
      `${H('6')} f worker color=blue`,
      `${H('7')} g read,operate runs=r1`,
      `${H('8')} h worker worker=`,
    ].join('\n');
    const issues = issuesOf(() => parseTokensFile(file, 'tokens'));
    expect(issues).toEqual([
      'tokens line 1: runs: "" is not a run id (letters, digits, _ . : -, at most 128)',
      'tokens line 2: runs: * means any run and stands alone',
      'tokens line 3: runs: "r/1" is not a run id (letters, digits, _ . : -, at most 128)',
      'tokens line 4: worker: a worker id (letters, digits and _ . : @ / + -, at most 128), a prefix of one ending in *, or * for any, got "host*a"',
      'tokens line 5: runs= is given twice',
      'tokens line 6: "color=blue": after the scopes only runs=<id>,… and worker=<id> may follow',
      'tokens line 7: runs= bind a worker credential; this line has no worker scope',
      'tokens line 8: worker: a worker id (letters, digits and _ . : @ / + -, at most 128), a prefix of one ending in *, or * for any, got ""',
    ]);
  });

  it('the same hash on two lines is refused, naming both', () => {
    const issues = issuesOf(() => parseTokensFile(`${H('a')} alice read\n# another\n${H('a')} bob admin\n`, 'tokens'));
    expect(issues).toEqual(['tokens line 3: the same token as line 1 (one line per token: remove one of them)']);
  });

  it('an actor on two lines that grant differently is refused naming both; granting the same (a token next to its replacement) is not', () => {
    const scopes = issuesOf(() => parseTokensFile(`${H('a')} ci read\n${H('b')} ci read,admin\n`, 'tokens'));
    expect(scopes).toEqual([
      "tokens line 2: actor ci is also on line 1 with other scopes or bindings (an actor's lines must grant the same: give each credential its own actor)",
    ]);
    const runs = issuesOf(() => parseTokensFile(`${H('a')} fleet worker runs=r1\n${H('b')} fleet worker runs=r2\n`, 'tokens'));
    expect(runs).toEqual([
      "tokens line 2: actor fleet is also on line 1 with other scopes or bindings (an actor's lines must grant the same: give each credential its own actor)",
    ]);
    // The same grant in another order is the same grant.
    expect(parseTokensFile(`${H('a')} fleet worker,read runs=r1,r2 worker=w\n${H('b')} fleet read,worker worker=w runs=r2,r1\n`)).toHaveLength(2);
  });

  it('a minted worker token carries its binding in its line; a binding the file would refuse is refused when minting', () => {
    const { line } = mintToken('fleet', ['worker'], { runs: ['r1'], worker: 'host-a-*' });
    expect(line).toMatch(/^sha256:[0-9a-f]{64} fleet worker runs=r1 worker=host-a-\*$/);
    expect(parseTokensFile(line)[0]).toMatchObject({ worker: 'host-a-*', bound: true });
    expect(() => mintToken('fleet', ['worker'], { runs: ['bad id'] })).toThrow(/runs: "bad id" is not a run id/);
    expect(() => mintToken('ci', ['read'], { runs: 'any' })).toThrow(/runs= bind a worker credential; this line has no worker scope/);
  });

  it("a token's identity carries its binding", async () => {
    const t = mintToken('fleet', ['worker'], { runs: ['r1'], worker: 'w1' });
    const id = await new TokenAuthenticator(parseTokensFile(t.line)).authenticate({ bearer: t.token, certificate: null });
    expect(id).toMatchObject({ actor: 'fleet', via: 'token', worker: 'w1' });
    expect([...(id!.runs as ReadonlySet<string>)]).toEqual(['r1']);
  });
});

describe('the signal keys file', () => {
  const S1 = 'a'.repeat(40);
  const S2 = 'b'.repeat(40);
  it('a reporter on two lines is refused naming both', () => {
    expect(issuesOf(() => parseSignalKeys(`p1 ${S1}\n\np1 ${S2}\n`, 'keys'))).toEqual(['keys line 3: reporter p1 is also on line 1 (one line per reporter)']);
  });
  it('two reporters with one secret are refused naming both lines: one could sign as the other', () => {
    expect(issuesOf(() => parseSignalKeys(`p1 ${S1}\np2 ${S1}\n`, 'keys'))).toEqual([
      'keys line 2: the same secret as line 1 (each reporter its own secret, or one could sign as the other)',
    ]);
  });
});

describe('authorizeWorkerRequest', () => {
  const bound: Identity = { actor: 'fleet-a', scopes: new Set(['worker']), via: 'token', runs: new Set(['r1', 'r2']), worker: 'host-a-*' };
  const steal = (runId: unknown, workerId: unknown) => ({ action: 'steal', runId, workerId });

  it('a bound credential may ask work for its runs, as a worker its binding names', () => {
    expect(authorizeWorkerRequest(bound, steal('r1', 'host-a-1234'))).toBeNull();
    expect(authorizeWorkerRequest(bound, steal('r2', 'host-a-'))).toBeNull();
  });

  it('another run is refused naming the run and the binding', () => {
    expect(authorizeWorkerRequest(bound, steal('r3', 'host-a-1'))).toBe('fleet-a may not ask work for run "r3": its credential is bound to runs r1, r2');
  });

  it('a worker id its binding does not name (a made-up one) is refused naming both', () => {
    expect(authorizeWorkerRequest(bound, steal('r1', 'ghost'))).toBe('fleet-a may not ask work as worker "ghost": its credential is bound to worker host-a-*');
    const exact: Identity = { ...bound, runs: 'any', worker: 'host-b' };
    expect(authorizeWorkerRequest(exact, steal('r9', 'host-b'))).toBeNull();
    expect(authorizeWorkerRequest(exact, steal('r9', 'host-b2'))).toMatch(/may not ask work as worker "host-b2"/);
  });

  it("scan, scan-all and any other action are the control plane's: refused to a worker credential, bound or not", () => {
    const unbound: Identity = { actor: 'fleet', scopes: new Set(['worker']), via: 'token' };
    for (const who of [bound, unbound]) {
      expect(authorizeWorkerRequest(who, { action: 'scan', runId: 'r1' })).toBe(
        `${who.actor} may only ask the coordinator for work ("steal"); "scan" is the control plane's and needs the admin scope`,
      );
      expect(authorizeWorkerRequest(who, { action: 'scan-all' })).toMatch(/"scan-all" is the control plane's/);
      expect(authorizeWorkerRequest(who, { action: 'retention', days: 0 })).toMatch(/"retention" is the control plane's/);
      expect(authorizeWorkerRequest(who, [])).toMatch(/a request without an action is the control plane's/);
    }
    const admin: Identity = { actor: 'ops', scopes: new Set(['worker', 'admin']), via: 'token' };
    expect(authorizeWorkerRequest(admin, { action: 'scan-all' })).toBeNull();
  });

  it('an unbound credential (no runs=, a certificate, authentication off) may ask for any run as any worker', () => {
    expect(
      authorizeWorkerRequest({ actor: 'fleet', scopes: new Set(['worker']), via: 'token', runs: 'any', worker: null }, steal('any-run', 'any-worker')),
    ).toBeNull();
    expect(authorizeWorkerRequest({ actor: 'cert:w', scopes: new Set(['worker']), via: 'certificate' }, steal('any-run', 'any-worker'))).toBeNull();
  });

  it('a credential bound to no run may ask for none', () => {
    expect(authorizeWorkerRequest({ ...bound, runs: new Set() }, steal('r1', 'host-a-1'))).toBe(
      'fleet-a may not ask work for run "r1": its credential is bound to runs none',
    );
  });

  it("a steal whose fields are not strings is left to the route's parse (400 naming the field)", () => {
    expect(authorizeWorkerRequest(bound, steal(7, 'host-a-1'))).toBeNull();
  });

  it("the attack as found: a worker token of one run moves another run's items to a worker that does not exist", async () => {
    const t = mintToken('fleet-a', ['worker'], { runs: ['run-a'], worker: 'host-a-*' });
    const id = (await new TokenAuthenticator(parseTokensFile(t.line)).authenticate({ bearer: t.token, certificate: null }))!;
    expect(authorizeWorkerRequest(id, { action: 'steal', runId: 'run-b', workerId: 'made-up' })).toMatch(/^fleet-a may not ask work for run "run-b"/);
    expect(authorizeWorkerRequest(id, { action: 'steal', runId: 'run-a', workerId: 'made-up' })).toMatch(/^fleet-a may not ask work as worker "made-up"/);
  });

  it('binding helpers: * alone is any; a prefix ends in *', () => {
    expect(runsBinding(['*'])).toBe('any');
    expect(workerBinding('*')).toBeNull();
    expect(workerMatches('w-*', 'w-1')).toBe(true);
    expect(workerMatches('w-*', 'x-1')).toBe(false);
    expect(workerMatches('w', 'w-1')).toBe(false);
  });
});

describe('OIDC binding claims', () => {
  interface Key {
    readonly privateKey: CryptoKey;
    readonly jwk: JWK;
  }
  let issuerServer: Server;
  let issuer: string;
  let key: Key;
  const AUDIENCE = 'rollout';

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    key = { privateKey, jwk: { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' } };
    issuerServer = createServer((req, res) => {
      if (req.url === '/jwks') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [key.jwk] }));
      res.writeHead(404).end();
    });
    issuer = await listenOnLoopback(issuerServer);
  });
  afterAll(() => closeNow(issuerServer));

  const jwt = (claims: Record<string, unknown>) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(issuer)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key.privateKey);
  const oidc = (extra: Record<string, string> = {}) => new OidcAuthenticator({ issuer, audience: AUDIENCE, jwksUrl: `${issuer}/jwks`, ...extra });
  const identityOf = async (a: OidcAuthenticator, claims: Record<string, unknown>) => (await a.authenticate({ bearer: await jwt(claims), certificate: null }))!;

  it('rollout_runs and rollout_worker bind the token; without them it is unbound', async () => {
    const a = oidc();
    const id = await identityOf(a, { sub: 'fleet', scope: 'worker', rollout_runs: ['r1', 'r2'], rollout_worker: 'host-a-*' });
    expect([...(id.runs as ReadonlySet<string>)]).toEqual(['r1', 'r2']);
    expect(id.worker).toBe('host-a-*');
    expect(authorizeWorkerRequest(id, { action: 'steal', runId: 'r3', workerId: 'host-a-1' })).toMatch(/may not ask work for run "r3"/);
    expect(await identityOf(a, { sub: 'fleet', scope: 'worker', rollout_runs: 'r1 r2' })).toMatchObject({ worker: null });
    expect(await identityOf(a, { sub: 'fleet', scope: 'worker' })).toMatchObject({ runs: 'any', worker: null });
    expect(await identityOf(a, { sub: 'fleet', scope: 'worker', rollout_runs: '*' })).toMatchObject({ runs: 'any' });
    // Present and empty binds to no run: never read as unbound.
    expect((await identityOf(a, { sub: 'fleet', scope: 'worker', rollout_runs: [] })).runs).toEqual(new Set());
  });

  it('the claim names are configurable', async () => {
    const id = await identityOf(oidc({ runsClaim: 'https://rollout/runs', workerClaim: 'wid' }), {
      sub: 'fleet',
      scope: 'worker',
      'https://rollout/runs': ['r9'],
      wid: 'w9',
      rollout_runs: ['r1'],
    });
    expect([...(id.runs as ReadonlySet<string>)]).toEqual(['r9']);
    expect(id.worker).toBe('w9');
  });

  it('a malformed binding claim refuses the token naming the claim', async () => {
    const a = oidc();
    await expect(a.authenticate({ bearer: await jwt({ sub: 'fleet', scope: 'worker', rollout_runs: 7 }), certificate: null })).rejects.toThrow(
      new Unauthenticated('token claim rollout_runs is not acceptable (runs: an array of run ids or a space-separated string)'),
    );
    await expect(a.authenticate({ bearer: await jwt({ sub: 'fleet', scope: 'worker', rollout_runs: ['r 1/'] }), certificate: null })).rejects.toThrow(
      /token claim rollout_runs is not acceptable \(runs: "r 1\/" is not a run id/,
    );
    await expect(a.authenticate({ bearer: await jwt({ sub: 'fleet', scope: 'worker', rollout_worker: ['w'] }), certificate: null })).rejects.toThrow(
      'token claim rollout_worker is not acceptable (worker: a string)',
    );
  });
});

describe('the tokens file kept current', () => {
  const open: { close(): void }[] = [];
  afterEach(() => open.splice(0).forEach((a) => a.close()));

  const accepts = async (a: TokenAuthenticator, token: string) => (await a.authenticate({ bearer: token, certificate: null }).catch(() => null)) !== null;
  let n = 0;
  const fileWith = (...lines: string[]) => {
    const path = join(mkdtempSync(join(dir, `tokens-${++n}-`)), 'tokens');
    writeFileSync(path, `${lines.join('\n')}\n`);
    return path;
  };
  const authenticator = (path: string, o: Parameters<typeof TokenAuthenticator.fromFile>[1] = {}) => {
    const a = TokenAuthenticator.fromFile(path, o);
    open.push(a);
    return a;
  };

  it('a line added works and a line removed stops working, without a restart (the directory watch)', async () => {
    const alice = mintToken('alice', ['read']);
    const bob = mintToken('bob', ['read']);
    const path = fileWith(alice.line);
    // The periodic check out of the way: the watch alone must see an editor's write and a rename-replace.
    const a = authenticator(path, { pollMs: 3_600_000, sighup: false, logger: recordingLogger() });
    expect(await accepts(a, alice.token)).toBe(true);
    writeFileSync(path, `${alice.line}\n${bob.line}\n`);
    await until('bob is let in', () => accepts(a, bob.token), SEEN_MS);
    replace(path, `${bob.line}\n`);
    await until('alice is refused', async () => !(await accepts(a, alice.token)), SEEN_MS);
    expect(await accepts(a, bob.token)).toBe(true);
  });

  it('without the watch, the periodic check sees the change', async () => {
    const alice = mintToken('alice', ['read']);
    const bob = mintToken('bob', ['read']);
    const path = fileWith(alice.line, bob.line);
    const a = authenticator(path, { watch: false, sighup: false, logger: recordingLogger() });
    expect(await accepts(a, alice.token)).toBe(true);
    replace(path, `${bob.line}\n`);
    await until('alice is refused', async () => !(await accepts(a, alice.token)), SEEN_MS);
    expect(await accepts(a, bob.token)).toBe(true);
  });

  it('on SIGHUP the file is read again', async () => {
    const alice = mintToken('alice', ['read']);
    const path = fileWith(alice.line);
    const a = authenticator(path, { watch: false, pollMs: 3_600_000, logger: recordingLogger() });
    writeFileSync(path, '# nobody\n');
    expect(await accepts(a, alice.token)).toBe(true);
    process.kill(process.pid, 'SIGHUP');
    await until('alice is refused', async () => !(await accepts(a, alice.token)), SEEN_MS);
  });

  it('close() stops listening for SIGHUP', () => {
    // None of ours is open here (each test closes its own): one listener however many files.
    const before = process.listenerCount('SIGHUP');
    const a = TokenAuthenticator.fromFile(fileWith(mintToken('alice', ['read']).line), { logger: recordingLogger() });
    const b = TokenAuthenticator.fromFile(fileWith(mintToken('bob', ['read']).line), { logger: recordingLogger() });
    expect(process.listenerCount('SIGHUP')).toBe(before + 1);
    a.close();
    b.close();
    expect(process.listenerCount('SIGHUP')).toBe(before);
  });

  it('a file that does not parse leaves the previous set in force and says why', async () => {
    const alice = mintToken('alice', ['read']);
    const path = fileWith(alice.line);
    const logger = recordingLogger();
    const a = authenticator(path, { logger, sighup: false });
    writeFileSync(path, `${alice.line}\n${alice.line.replace('alice', 'mallory')}\n`);
    expect(await a.reload()).toBe(false);
    expect(await accepts(a, alice.token)).toBe(true);
    expect(logger.lines).toContainEqual({
      level: 'warn',
      message: `auth tokens: ${path} was not loaded: ${path} line 2: the same token as line 1 (one line per token: remove one of them); the previous auth tokens stay in force`,
    });
    // A change seen by itself is judged the same.
    replace(path, 'not-a-line\n');
    await until('the bad file is reported', () => logger.lines.some((l) => l.level === 'warn' && l.message.includes(`${path} line 1: expected`)), SEEN_MS);
    expect(await accepts(a, alice.token)).toBe(true);
  });

  it('a file that cannot be read, or is empty, leaves the previous set in force and says why', async () => {
    const alice = mintToken('alice', ['read']);
    const path = fileWith(alice.line);
    const logger = recordingLogger();
    const a = authenticator(path, { logger, sighup: false, watch: false, pollMs: 3_600_000 });
    writeFileSync(path, '');
    expect(await a.reload()).toBe(false);
    expect(logger.lines.at(-1)?.message).toMatch(/is empty \(a save caught half-way\?\); the previous auth tokens stay in force/);
    rmSync(path);
    expect(await a.reload()).toBe(false);
    expect(logger.lines.at(-1)?.message).toBe(`auth tokens: ${path} cannot be read (ENOENT); the previous auth tokens stay in force`);
    expect(await accepts(a, alice.token)).toBe(true);
    // Back, with nobody in it: only a comment removes every credential.
    writeFileSync(path, '# nobody\n');
    expect(await a.reload()).toBe(true);
    expect(await accepts(a, alice.token)).toBe(false);
  });

  it('a worker line bound to no run is warned about on every load', async () => {
    const path = fileWith(`${H('a')} fleet worker`, `${H('b')} fleet-a worker runs=r1`, `${H('c')} fleet-any worker runs=*`);
    const logger = recordingLogger();
    const a = authenticator(path, { logger, sighup: false, watch: false, pollMs: 3_600_000 });
    const unbound = `${path} line 1: fleet has the worker scope and no runs= binding, so it may ask work for any run; add runs=<id>,… (runs=* to mean any run on purpose) and worker=<id>`;
    expect(logger.lines.filter((l) => l.level === 'warn').map((l) => l.message)).toEqual([unbound]);
    writeFileSync(path, `# reordered\n${H('b')} fleet-a worker runs=r1\n${H('a')} fleet worker\n`);
    expect(await a.reload()).toBe(true);
    expect(logger.lines.at(-1)?.message).toBe(unbound.replace('line 1', 'line 3'));
  });

  it('a file that is bad at start is refused: the process does not start on it', () => {
    expect(() => TokenAuthenticator.fromFile(fileWith(`${H('a')} a read`, `${H('a')} b read`))).toThrow(/line 2: the same token as line 1/);
    expect(() => TokenAuthenticator.fromFile(join(dir, 'absent'))).toThrow(/cannot be read \(ENOENT\)/);
  });

  it('watching keeps no process alive', () => {
    const path = fileWith(mintToken('alice', ['read']).line);
    const script = `import { TokenAuthenticator } from ${JSON.stringify(resolve(import.meta.dirname, '../../shared/auth/tokens.ts'))}; TokenAuthenticator.fromFile(${JSON.stringify(path)}); console.log('loaded');`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
    expect(r.signal, 'the process had to be killed: something kept it alive').toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('loaded\n');
  });
});

describe('the signal keys file kept current', () => {
  const SECRET = 'r'.repeat(40);
  it('a reporter removed is refused without a restart; a bad file keeps the keys in force', async () => {
    const path = join(mkdtempSync(join(dir, 'keys-')), 'keys');
    writeFileSync(path, `pipeline ${SECRET}\n`);
    const logger = recordingLogger();
    const keys = readSignalKeys(path, { logger, sighup: false });
    let seen = 0;
    const a = new SignatureAuthenticator(keys, { firstSeen: () => Promise.resolve(++seen > 0) });
    try {
      const signed = async () => {
        const body = JSON.stringify({ n: seen });
        return (
          (await a
            .authenticate({ bearer: null, certificate: null, signature: { header: signatureHeader('pipeline', SECRET, body), body } })
            .catch(() => null)) !== null
        );
      };
      expect(await signed()).toBe(true);
      writeFileSync(path, `pipeline ${SECRET}\nother ${SECRET}\n`);
      expect(await keys.reload()).toBe(false);
      expect(logger.lines.at(-1)?.message).toMatch(/line 2: the same secret as line 1/);
      expect(await signed()).toBe(true);
      replace(path, `other ${'o'.repeat(40)}\n`);
      await until('the removed reporter is refused', async () => !(await signed()), SEEN_MS);
      expect(keys.has('other')).toBe(true);
    } finally {
      a.close();
    }
  });
});
