import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../errors.js';
import type { Logger } from '../log.js';
import { BindingError, runsBinding, unboundWorker, workerBinding } from './bindings.js';
import { CredentialsFile, Unauthenticated, type Authenticator, type Credentials, type CredentialsFileOptions, type Identity } from './identity.js';
import { isScope, SCOPES, type Scope } from './scopes.js';

/**
 * Bearer tokens, kept only as hashes. The tokens file (`--auth-tokens-file`)
 * has one credential a line:
 *
 *   sha256:<64 hex> <actor> <scope,scope…> [runs=<id>,<id>…|runs=*] [worker=<id>|worker=<prefix>*]
 *
 * Blank lines and `#` comments are skipped. A token is 32 random bytes,
 * base64url, prefixed `rt_` (so a leaked one is easy to search for); its
 * SHA-256 is compared with every line's in constant time.
 *
 * `runs=` and `worker=` bind a credential with the `worker` scope
 * (auth/bindings.ts): the runs it may ask work for and the worker id it may
 * ask as. A worker line without `runs=` may ask for any run (as before
 * bindings existed) and is warned about on every load; `runs=*` says so on
 * purpose. On a line without the `worker` scope they are refused: they
 * would bind nothing.
 *
 * A token is listed once: a hash on two lines is refused, naming both. An
 * actor may be on several lines (a new token next to the one it replaces)
 * only if they grant the same scopes and bindings: the actor is what every
 * write records, so what it may do must not depend on which token it used.
 *
 * `TokenAuthenticator.fromFile` keeps the file current (auth/identity.ts
 * CredentialsFile): a line removed stops working within about a second,
 * and a file that does not parse leaves the previous set in force.
 */
export interface TokenEntry {
  readonly hash: Buffer;
  readonly actor: string;
  readonly scopes: ReadonlySet<Scope>;
  /** Runs a worker credential may serve; 'any': unbound (no `runs=`, or `runs=*`). */
  readonly runs: ReadonlySet<string> | 'any';
  /** The worker id (or `prefix*`) it may ask as; null: any. */
  readonly worker: string | null;
  /** Whether `runs=` was given (`runs=*` included): an unbound worker line is warned about. */
  readonly bound: boolean;
  /** Its line in the file (1-based), for messages. */
  readonly line: number;
}

const ACTOR = /^[A-Za-z0-9_.:@/+-]{1,128}$/;
const FORMAT = '"sha256:<hex> <actor> <scope,scope…> [runs=<id>,…|runs=*] [worker=<id>|worker=<prefix>*]"';

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** What a worker credential is bound to when minted: runs (ids, or 'any') and a worker id or `prefix*`. */
export interface TokenBinding {
  readonly runs?: readonly string[] | 'any';
  readonly worker?: string;
}

/** A new random token and the line that lets it in. */
export function mintToken(actor: string, scopes: readonly Scope[], binding: TokenBinding = {}): { token: string; line: string } {
  if (!ACTOR.test(actor)) throw new ConfigError('token', [`actor: letters, digits and _ . : @ / + - (at most 128), got ${JSON.stringify(actor)}`]);
  if (!scopes.length) throw new ConfigError('token', [`scopes: at least one of ${SCOPES.join(', ')}`]);
  const fields = [actor, [...new Set(scopes)].join(',')];
  try {
    if (binding.runs !== undefined) fields.push(`runs=${binding.runs === 'any' ? '*' : [...runsBinding(binding.runs)].join(',')}`);
    if (binding.worker !== undefined) fields.push(`worker=${binding.worker}`);
    // The line is checked as the file would check it: a binding it would refuse is refused now.
    parseBinding(fields.slice(2), new Set(scopes));
  } catch (err) {
    throw err instanceof BindingError ? new ConfigError('token', [err.message]) : err;
  }
  const token = `rt_${randomBytes(32).toString('base64url')}`;
  const line = [`sha256:${hashToken(token).toString('hex')}`, ...fields].join(' ');
  return { token, line };
}

export function parseScopes(text: string, where: string): Scope[] {
  const scopes = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = scopes.filter((s) => !isScope(s));
  if (bad.length || !scopes.length)
    throw new ConfigError(where, [`scopes: ${bad.length ? `unknown ${bad.join(', ')}; ` : ''}one or more of ${SCOPES.join(', ')}, comma-separated`]);
  return scopes as Scope[];
}

/** One line's fields after the scopes: `runs=` and `worker=`, each at most once. */
function parseBinding(fields: readonly string[], scopes: ReadonlySet<Scope>): Pick<TokenEntry, 'runs' | 'worker' | 'bound'> {
  let runs: ReadonlySet<string> | 'any' = 'any';
  let worker: string | null = null;
  const seen = new Set<string>();
  for (const field of fields) {
    const eq = field.indexOf('=');
    const key = eq > 0 ? field.slice(0, eq) : '';
    if (key !== 'runs' && key !== 'worker')
      throw new BindingError(`${JSON.stringify(field.slice(0, 60))}: after the scopes only runs=<id>,… and worker=<id> may follow`);
    if (seen.has(key)) throw new BindingError(`${key}= is given twice`);
    seen.add(key);
    const value = field.slice(eq + 1);
    if (key === 'runs') runs = runsBinding(value.split(','));
    else worker = workerBinding(value);
  }
  if (seen.size && !scopes.has('worker'))
    throw new BindingError(`${[...seen].map((k) => `${k}=`).join(' and ')} bind a worker credential; this line has no worker scope`);
  return { runs, worker, bound: seen.has('runs') };
}

/** What a line grants, to compare an actor's lines. */
function grantOf(e: Pick<TokenEntry, 'scopes' | 'runs' | 'worker'>): string {
  return JSON.stringify([[...e.scopes].sort(), e.runs === 'any' ? '*' : [...e.runs].sort(), e.worker]);
}

export function parseTokensFile(text: string, file = 'tokens file'): TokenEntry[] {
  const out: TokenEntry[] = [];
  const issues: string[] = [];
  const byHash = new Map<string, number>();
  const byActor = new Map<string, { line: number; grant: string }>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const n = i + 1;
    const at = `${file} line ${n}`;
    const parts = line.split(/\s+/);
    if (parts.length < 3) return void issues.push(`${at}: expected ${FORMAT}, got ${parts.length} field${parts.length === 1 ? '' : 's'}`);
    const [hash, actor, scopeList, ...rest] = parts as [string, string, string, ...string[]];
    if (!/^sha256:[0-9a-f]{64}$/.test(hash))
      return void issues.push(`${at}: the first field must be sha256:<64 lower-case hex> (a token's hash, never the token)`);
    if (!ACTOR.test(actor)) return void issues.push(`${at}: actor: letters, digits and _ . : @ / + - (at most 128)`);
    let entry: TokenEntry;
    try {
      const scopes = new Set(parseScopes(scopeList, at));
      entry = { hash: Buffer.from(hash.slice(7), 'hex'), actor, scopes, ...parseBinding(rest, scopes), line: n };
    } catch (err) {
      if (err instanceof ConfigError) return void issues.push(err.issues.map((x) => `${at}: ${x}`).join('; '));
      if (err instanceof BindingError) return void issues.push(`${at}: ${err.message}`);
      throw err;
    }
    const sameHash = byHash.get(hash);
    if (sameHash !== undefined) return void issues.push(`${at}: the same token as line ${sameHash} (one line per token: remove one of them)`);
    byHash.set(hash, n);
    const grant = grantOf(entry);
    const sameActor = byActor.get(actor);
    if (sameActor && sameActor.grant !== grant)
      return void issues.push(
        `${at}: actor ${actor} is also on line ${sameActor.line} with other scopes or bindings (an actor's lines must grant the same: give each credential its own actor)`,
      );
    if (!sameActor) byActor.set(actor, { line: n, grant });
    out.push(entry);
  });
  if (issues.length) throw new ConfigError('auth tokens', issues);
  return out;
}

/** Worker lines bound to no run: said on every load, so the operator binds them. */
function warnUnbound(entries: readonly TokenEntry[], logger: Logger, file: string): void {
  for (const e of entries) {
    if (unboundWorker(e) && !e.bound)
      logger.warn(
        `${file} line ${e.line}: ${e.actor} has the worker scope and no runs= binding, so it may ask work for any run; add runs=<id>,… (runs=* to mean any run on purpose) and worker=<id>`,
        { file, actor: e.actor, line: e.line },
      );
  }
}

export class TokenAuthenticator implements Authenticator {
  private readonly file: CredentialsFile<readonly TokenEntry[]> | null;
  private readonly fixed: readonly TokenEntry[];

  constructor(entries: readonly TokenEntry[] | CredentialsFile<readonly TokenEntry[]>) {
    this.file = entries instanceof CredentialsFile ? entries : null;
    this.fixed = entries instanceof CredentialsFile ? [] : entries;
  }

  /**
   * The tokens in `path`, kept current as it changes and on SIGHUP; throws
   * ConfigError when it cannot be read or does not parse now. `close()`
   * stops watching.
   */
  static fromFile(path: string, o: CredentialsFileOptions = {}): TokenAuthenticator {
    return new TokenAuthenticator(
      new CredentialsFile<readonly TokenEntry[]>(path, 'auth tokens', (text, p) => parseTokensFile(text, p), {
        ...o,
        count: (entries) => entries.length,
        loaded: (entries, logger) => warnUnbound(entries, logger, path),
      }),
    );
  }

  /** Reads the file again now (what a change or SIGHUP does); true when a new set is in force. */
  reload(): Promise<boolean> {
    return this.file ? this.file.reload() : Promise.resolve(false);
  }

  close(): void {
    this.file?.close();
  }

  /** Only our own tokens (`rt_…`); a JWT is the OIDC authenticator's. */
  authenticate(c: Credentials): Promise<Identity | null> {
    const token = c.bearer;
    if (token === null || !token.startsWith('rt_')) return Promise.resolve(null);
    // One set for the whole request: a reload swaps it between requests, never during one.
    const entries = this.file ? this.file.current : this.fixed;
    const hash = hashToken(token);
    let found: TokenEntry | null = null;
    // Every line is compared, whichever matches: the time taken says nothing about which.
    for (const e of entries) if (timingSafeEqual(e.hash, hash) && found === null) found = e;
    if (!found) return Promise.reject(new Unauthenticated('unknown token'));
    return Promise.resolve({ actor: found.actor, scopes: found.scopes, via: 'token', runs: found.runs, worker: found.worker });
  }
}
