import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { Unauthenticated, type Authenticator, type Credentials, type Identity } from './identity.js';
import { isScope, SCOPES, type Scope } from './scopes.js';

/**
 * Bearer tokens, kept only as hashes. The tokens file (`--auth-tokens-file`)
 * has one credential a line:
 *
 *   sha256:<64 hex> <actor> <scope,scope…>
 *
 * Blank lines and `#` comments are skipped. A token is 32 random bytes,
 * base64url, prefixed `rt_` (so a leaked one is easy to search for); its
 * SHA-256 is compared with every line's in constant time.
 */
export interface TokenEntry {
  readonly hash: Buffer;
  readonly actor: string;
  readonly scopes: ReadonlySet<Scope>;
}

const ACTOR = /^[A-Za-z0-9_.:@/+-]{1,128}$/;

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** A new random token and the line that lets it in. */
export function mintToken(actor: string, scopes: readonly Scope[]): { token: string; line: string } {
  if (!ACTOR.test(actor)) throw new ConfigError('token', [`actor: letters, digits and _ . : @ / + - (at most 128), got ${JSON.stringify(actor)}`]);
  if (!scopes.length) throw new ConfigError('token', [`scopes: at least one of ${SCOPES.join(', ')}`]);
  const token = `rt_${randomBytes(32).toString('base64url')}`;
  return { token, line: `sha256:${hashToken(token).toString('hex')} ${actor} ${[...new Set(scopes)].join(',')}` };
}

export function parseScopes(text: string, where: string): Scope[] {
  const scopes = text.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = scopes.filter((s) => !isScope(s));
  if (bad.length || !scopes.length) throw new ConfigError(where, [`scopes: ${bad.length ? `unknown ${bad.join(', ')}; ` : ''}one or more of ${SCOPES.join(', ')}, comma-separated`]);
  return scopes as Scope[];
}

export function parseTokensFile(text: string, file = 'tokens file'): TokenEntry[] {
  const out: TokenEntry[] = [];
  const issues: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const at = `${file} line ${i + 1}`;
    const parts = line.split(/\s+/);
    if (parts.length !== 3) return void issues.push(`${at}: expected "sha256:<hex> <actor> <scope,scope…>", got ${parts.length} fields`);
    const [hash, actor, scopes] = parts as [string, string, string];
    if (!/^sha256:[0-9a-f]{64}$/.test(hash)) return void issues.push(`${at}: the first field must be sha256:<64 lower-case hex> (a token's hash, never the token)`);
    if (!ACTOR.test(actor)) return void issues.push(`${at}: actor: letters, digits and _ . : @ / + - (at most 128)`);
    try {
      out.push({ hash: Buffer.from(hash.slice(7), 'hex'), actor, scopes: new Set(parseScopes(scopes, at)) });
    } catch (err) {
      issues.push(err instanceof ConfigError ? err.issues.map((x) => `${at}: ${x}`).join('; ') : String(err));
    }
  });
  if (issues.length) throw new ConfigError('auth tokens', issues);
  return out;
}

export class TokenAuthenticator implements Authenticator {
  constructor(private readonly entries: readonly TokenEntry[]) {}

  static fromFile(path: string): TokenAuthenticator {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError('auth tokens', [`${path}: cannot be read (${(err as { code?: string }).code ?? String(err)})`]);
    }
    return new TokenAuthenticator(parseTokensFile(text, path));
  }

  /** Only our own tokens (`rt_…`); a JWT is the OIDC authenticator's. */
  authenticate(c: Credentials): Promise<Identity | null> {
    const token = c.bearer;
    if (token === null || !token.startsWith('rt_')) return Promise.resolve(null);
    const hash = hashToken(token);
    let found: TokenEntry | null = null;
    // Every line is compared, whichever matches: the time taken says nothing about which.
    for (const e of this.entries) if (timingSafeEqual(e.hash, hash) && found === null) found = e;
    if (!found) return Promise.reject(new Unauthenticated('unknown token'));
    return Promise.resolve({ actor: found.actor, scopes: found.scopes, via: 'token' });
  }
}
