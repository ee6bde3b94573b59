import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../errors.js';
import { CredentialsFile, Unauthenticated, type Authenticator, type Credentials, type CredentialsFileOptions, type Identity } from './identity.js';

/**
 * Signed signals, for reporters that cannot hold a token (a metrics pipeline,
 * a webhook relay): the form Stripe and GitHub webhooks use.
 *
 *   Rollout-Signature: k=<reporter>,t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 *
 * A signature older or newer than 5 minutes by our clock is refused, and so
 * is one already seen (each is recorded for the window, in the store, so a
 * replay to another node is caught too). A signed request acts as
 * `signed:<reporter>` with the `signal` scope only. The keys file
 * (`--signal-keys-file`) has one reporter a line: `<reporter> <secret>`,
 * the secret at least 32 characters; a reporter or a secret on two lines is
 * refused, naming both (a shared secret would let one reporter sign as the
 * other). The file is kept current as it changes and on SIGHUP
 * (auth/identity.ts CredentialsFile): a reporter removed is refused within
 * about a second; a file that does not parse leaves the previous keys.
 */
export const SIGNATURE_HEADER = 'rollout-signature';
export const SIGNATURE_WINDOW_SECONDS = 300;

/** Where seen signatures are kept for the window. */
export interface SeenSignatures {
  /** Records `signature`; false when it was already there (a replay). */
  firstSeen(signature: string): Promise<boolean>;
}

const REPORTER = /^[A-Za-z0-9_.:-]{1,64}$/;

export function parseSignalKeys(text: string, file = 'signal keys file'): Map<string, string> {
  const keys = new Map<string, string>();
  const lineOf = new Map<string, number>();
  const bySecret = new Map<string, number>();
  const issues: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const at = `${file} line ${i + 1}`;
    const [reporter, secret, ...rest] = line.split(/\s+/);
    if (!reporter || !secret || rest.length) return void issues.push(`${at}: expected "<reporter> <secret>"`);
    if (!REPORTER.test(reporter)) return void issues.push(`${at}: reporter: letters, digits, _ . : - (at most 64)`);
    if (secret.length < 32) return void issues.push(`${at}: the secret must be at least 32 characters`);
    if (lineOf.has(reporter)) return void issues.push(`${at}: reporter ${reporter} is also on line ${lineOf.get(reporter)} (one line per reporter)`);
    const shared = bySecret.get(secret);
    if (shared !== undefined)
      return void issues.push(`${at}: the same secret as line ${shared} (each reporter its own secret, or one could sign as the other)`);
    keys.set(reporter, secret);
    lineOf.set(reporter, i + 1);
    bySecret.set(secret, i + 1);
  });
  if (issues.length) throw new ConfigError('signal keys', issues);
  return keys;
}

/**
 * The keys of a signal keys file, kept current: a map whose contents are
 * the file's as last loaded (each lookup sees one whole set). `close()`
 * stops watching.
 */
export class SignalKeys implements ReadonlyMap<string, string> {
  private readonly file: CredentialsFile<ReadonlyMap<string, string>>;

  constructor(path: string, o: CredentialsFileOptions = {}) {
    this.file = new CredentialsFile<ReadonlyMap<string, string>>(path, 'signal keys', (text, p) => parseSignalKeys(text, p), {
      ...o,
      count: (keys) => keys.size,
    });
  }

  /** Reads the file again now (what a change or SIGHUP does); true when new keys are in force. */
  reload(): Promise<boolean> {
    return this.file.reload();
  }

  close(): void {
    this.file.close();
  }

  get size(): number {
    return this.file.current.size;
  }
  get(reporter: string): string | undefined {
    return this.file.current.get(reporter);
  }
  has(reporter: string): boolean {
    return this.file.current.has(reporter);
  }
  forEach(f: (secret: string, reporter: string, map: ReadonlyMap<string, string>) => void): void {
    this.file.current.forEach((secret, reporter) => f(secret, reporter, this));
  }
  entries(): MapIterator<[string, string]> {
    return this.file.current.entries();
  }
  keys(): MapIterator<string> {
    return this.file.current.keys();
  }
  values(): MapIterator<string> {
    return this.file.current.values();
  }
  [Symbol.iterator](): MapIterator<[string, string]> {
    return this.file.current[Symbol.iterator]();
  }
}

/** The keys in `path`, kept current (SignalKeys); throws ConfigError when it cannot be read or does not parse now. */
export function readSignalKeys(path: string, o: CredentialsFileOptions = {}): SignalKeys {
  return new SignalKeys(path, o);
}

function mac(secret: string, t: string, body: string): Buffer {
  return createHmac('sha256', secret).update(`${t}.${body}`, 'utf8').digest();
}

/** The header a reporter sends with `body`. */
export function signatureHeader(reporter: string, secret: string, body: string, nowMs = Date.now()): string {
  const t = String(Math.floor(nowMs / 1000));
  return `k=${reporter},t=${t},v1=${mac(secret, t, body).toString('hex')}`;
}

export class SignatureAuthenticator implements Authenticator {
  /** `keys`: fixed, or a file's kept current (readSignalKeys), which `close()` stops watching. */
  constructor(
    private readonly keys: ReadonlyMap<string, string>,
    private readonly seen: SeenSignatures,
    private readonly now: () => number = Date.now,
  ) {}

  /** The keys in `path`, kept current; throws ConfigError when it cannot be read or does not parse now. */
  static fromFile(path: string, seen: SeenSignatures, o: CredentialsFileOptions = {}): SignatureAuthenticator {
    return new SignatureAuthenticator(new SignalKeys(path, o), seen);
  }

  close(): void {
    if (this.keys instanceof SignalKeys) this.keys.close();
  }

  async authenticate(c: Credentials): Promise<Identity | null> {
    if (!c.signature) return null;
    const parts = new Map(c.signature.header.split(',').map((p) => [p.slice(0, p.indexOf('=')).trim(), p.slice(p.indexOf('=') + 1).trim()] as const));
    const k = parts.get('k') ?? '';
    const t = parts.get('t') ?? '';
    const v1 = parts.get('v1') ?? '';
    if (!REPORTER.test(k) || !/^\d{1,12}$/.test(t) || !/^[0-9a-f]{64}$/.test(v1))
      throw new Unauthenticated('Rollout-Signature: expected k=<reporter>,t=<unix seconds>,v1=<64 hex>');
    const secret = this.keys.get(k);
    // An unknown reporter costs the same work as a known one: the answer says no more than "does not verify".
    const expected = mac(secret ?? 'x'.repeat(32), t, c.signature.body);
    if (!timingSafeEqual(expected, Buffer.from(v1, 'hex')) || secret === undefined) throw new Unauthenticated('signature does not verify');
    const skew = Math.abs(this.now() / 1000 - Number(t));
    if (skew > SIGNATURE_WINDOW_SECONDS) throw new Unauthenticated(`signature made ${Math.round(skew)} s from now; at most ${SIGNATURE_WINDOW_SECONDS} s`);
    if (!(await this.seen.firstSeen(v1))) throw new Unauthenticated('signature already used (a replay)');
    return { actor: `signed:${k}`, scopes: new Set(['signal'] as const), via: 'signature' };
  }
}
