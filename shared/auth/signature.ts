import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { Unauthenticated, type Authenticator, type Credentials, type Identity } from './identity.js';

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
 * the secret at least 32 characters.
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
  const issues: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const at = `${file} line ${i + 1}`;
    const [reporter, secret, ...rest] = line.split(/\s+/);
    if (!reporter || !secret || rest.length) return void issues.push(`${at}: expected "<reporter> <secret>"`);
    if (!REPORTER.test(reporter)) return void issues.push(`${at}: reporter: letters, digits, _ . : - (at most 64)`);
    if (secret.length < 32) return void issues.push(`${at}: the secret must be at least 32 characters`);
    if (keys.has(reporter)) return void issues.push(`${at}: reporter ${reporter} appears twice`);
    keys.set(reporter, secret);
  });
  if (issues.length) throw new ConfigError('signal keys', issues);
  return keys;
}

export function readSignalKeys(path: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError('signal keys', [`${path}: cannot be read (${(err as { code?: string }).code ?? String(err)})`]);
  }
  return parseSignalKeys(text, path);
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
  constructor(
    private readonly keys: ReadonlyMap<string, string>,
    private readonly seen: SeenSignatures,
    private readonly now: () => number = Date.now,
  ) {}

  async authenticate(c: Credentials): Promise<Identity | null> {
    if (!c.signature) return null;
    const parts = new Map(c.signature.header.split(',').map((p) => [p.slice(0, p.indexOf('=')).trim(), p.slice(p.indexOf('=') + 1).trim()] as const));
    const k = parts.get('k') ?? '';
    const t = parts.get('t') ?? '';
    const v1 = parts.get('v1') ?? '';
    if (!REPORTER.test(k) || !/^\d{1,12}$/.test(t) || !/^[0-9a-f]{64}$/.test(v1)) throw new Unauthenticated('Rollout-Signature: expected k=<reporter>,t=<unix seconds>,v1=<64 hex>');
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
