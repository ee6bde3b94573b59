import { readFileSync, statSync, watch, type FSWatcher, type Stats } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { ConfigError } from '../errors.js';
import { errorMessage, lineLogger, type Logger } from '../log.js';
import type { Scope } from './scopes.js';

/** Who a request comes from, as its credential says: the actor recorded with every write it makes. */
export interface Identity {
  readonly actor: string;
  readonly scopes: ReadonlySet<Scope>;
  /** How it was established. */
  readonly via: 'token' | 'oidc' | 'certificate' | 'signature' | 'none';
  /**
   * The runs a `worker` credential may ask work for (auth/bindings.ts);
   * 'any' or absent: unbound, any run (a credential that names none, a
   * certificate, authentication off).
   */
  readonly runs?: ReadonlySet<string> | 'any';
  /**
   * The worker id it may ask work as: that id, or any id starting with what
   * comes before a trailing `*`; null or absent: any.
   */
  readonly worker?: string | null;
}

/** What a request offers to prove who it is. */
export interface Credentials {
  /** The token after `Authorization: Bearer `. */
  readonly bearer: string | null;
  /** A client certificate the TLS layer verified. */
  readonly certificate: { readonly subject: string } | null;
  /** A signed request: its Rollout-Signature header and the body it signs. */
  readonly signature?: { readonly header: string; readonly body: string } | null;
}

/** No credential the authenticator knows; `challenge` goes in WWW-Authenticate. */
export class Unauthenticated extends Error {
  override readonly name = 'Unauthenticated';
}

/**
 * One way to establish identity. `authenticate` answers the identity, null
 * when the credentials are not of its kind (the next authenticator tries),
 * or throws Unauthenticated when they are of its kind and wrong (an expired
 * JWT, an unknown token): a wrong credential is never passed on.
 */
export interface Authenticator {
  authenticate(c: Credentials): Promise<Identity | null>;
}

/** Tries each authenticator in turn. */
export async function identify(authenticators: readonly Authenticator[], c: Credentials): Promise<Identity | null> {
  for (const a of authenticators) {
    const id = await a.authenticate(c);
    if (id) return id;
  }
  return null;
}

export interface CredentialsFileOptions {
  /** Where a refused reload is said (the previous credentials stay in force). Default: JSON lines on stderr. */
  readonly logger?: Logger;
  /** How often the file's metadata is compared with the last load's, in ms: what catches a change the watch missed. */
  readonly pollMs?: number;
  /** Reload on SIGHUP too (default true). */
  readonly sighup?: boolean;
  /** Watch the file's directory (default true); without it, only the periodic check and SIGHUP see a change. */
  readonly watch?: boolean;
}

/** A node may serve for weeks: a stat a second costs nothing and bounds how long a revoked line keeps working. */
const DEFAULT_POLL_MS = 1_000;
/** An editor's save is several writes: read once they have settled, not in between. */
const SETTLE_MS = 50;

const stderrLogger = lineLogger({ service: 'rollout-auth', write: (line) => process.stderr.write(line) });

/** Every open credentials file, reloaded on SIGHUP: one process listener however many files. */
const hangupListeners = new Set<() => void>();
const onHangup = (): void => hangupListeners.forEach((f) => f());

function stampOf(s: Stats | null): string {
  return s ? `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}` : 'missing';
}

/**
 * A credentials file (tokens, signal keys) kept current while the process
 * runs: read again when it changes (fs.watch on its directory, which sees an
 * atomic rename-replace and a symlink swap as well as a write; a periodic
 * stat for what the watch misses) and on SIGHUP. A new set replaces the old
 * in one assignment: a request sees one or the other, never a mix. A file
 * that cannot be read, does not parse or is empty (a save caught half-way)
 * leaves the previous set in force and says why in the log; to remove every
 * credential, leave only a comment in it.
 *
 * The first read throws ConfigError: a process does not start on a bad file.
 * Nothing here keeps the process alive; `close()` stops watching.
 */
export class CredentialsFile<T> {
  private value: T;
  private text: string;
  private stamp: string;
  private readonly logger: Logger;
  private readonly loaded: (value: T, logger: Logger) => void;
  private readonly count: (value: T) => number | undefined;
  private readonly watcher: FSWatcher | null;
  private readonly poll: NodeJS.Timeout;
  private settle: NodeJS.Timeout | null = null;
  /** Whether an event since the last read named the file itself. */
  private named = false;
  private tail: Promise<unknown> = Promise.resolve();
  private queued: Promise<boolean> | null = null;
  private closed = false;
  private readonly hangup = (): void => {
    this.logger.info(`${this.what}: reloading on SIGHUP`, { file: this.path });
    void this.reload();
  };

  constructor(
    readonly path: string,
    /** What the file is, in log lines and errors ("auth tokens", "signal keys"). */
    private readonly what: string,
    private readonly parse: (text: string, path: string) => T,
    o: CredentialsFileOptions & { readonly loaded?: (value: T, logger: Logger) => void; readonly count?: (value: T) => number } = {},
  ) {
    this.logger = o.logger ?? stderrLogger;
    this.loaded = o.loaded ?? (() => undefined);
    this.count = o.count ?? (() => undefined);
    let text: string;
    try {
      this.stamp = stampOf(statSync(path));
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError(what, [`${path}: cannot be read (${(err as { code?: string }).code ?? String(err)})`]);
    }
    this.value = parse(text, path);
    this.text = text;
    this.loaded(this.value, this.logger);

    const every = Math.max(10, o.pollMs ?? DEFAULT_POLL_MS);
    this.watcher = (o.watch ?? true) ? this.watchDirectory(every) : null;
    this.poll = setInterval(() => void this.check(), every).unref();
    if (o.sighup ?? true) {
      if (!hangupListeners.size) process.on('SIGHUP', onHangup);
      hangupListeners.add(this.hangup);
    }
  }

  /** The set in force now. */
  get current(): T {
    return this.value;
  }

  /**
   * Reads the file again now; true when a new set is in force. Calls made
   * while one is reading share the next read, so the last call always sees
   * the file as it was when it was made.
   */
  reload(): Promise<boolean> {
    if (this.queued) return this.queued;
    const next = this.tail.then(() => {
      this.queued = null;
      return this.load();
    });
    this.queued = next;
    this.tail = next;
    return next;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.poll);
    if (this.settle) clearTimeout(this.settle);
    this.watcher?.close();
    hangupListeners.delete(this.hangup);
    if (!hangupListeners.size) process.off('SIGHUP', onHangup);
  }

  /** Watches the file's directory (not the file: a rename-replace gives the name a new file); null when it cannot be watched. */
  private watchDirectory(every: number): FSWatcher | null {
    const dir = dirname(this.path);
    const name = basename(this.path);
    try {
      // Not persistent: a watch never keeps the process alive.
      const watcher = watch(dir, { persistent: false }, (_event, file) => this.changed(file === name));
      watcher.on('error', (err) => {
        this.logger.warn(`${this.what}: watching ${dir} failed; checking every ${every} ms instead`, { file: this.path, error: errorMessage(err) });
        watcher.close();
      });
      return watcher;
    } catch (err) {
      this.logger.warn(`${this.what}: ${dir} cannot be watched; checking every ${every} ms instead`, { file: this.path, error: errorMessage(err) });
      return null;
    }
  }

  /** Something changed in the directory: read once the writes settle (always when it named our file, else if its metadata moved). */
  private changed(ours: boolean): void {
    if (this.closed) return;
    this.named ||= ours;
    if (this.settle) clearTimeout(this.settle);
    this.settle = setTimeout(() => {
      const named = this.named;
      this.settle = null;
      this.named = false;
      void (named ? this.reload() : this.check());
    }, SETTLE_MS).unref();
  }

  /** Reloads when the file's metadata differs from the last load's (a rename-replace, a write, a symlink swap). */
  private async check(): Promise<void> {
    if (this.closed) return;
    const now = stampOf(await stat(this.path).catch(() => null));
    if (now !== this.stamp) await this.reload();
  }

  /** Never throws: a bad file is logged and the set in force stays. */
  private async load(): Promise<boolean> {
    if (this.closed) return false;
    const keeping = `the previous ${this.what} stay in force`;
    let text: string;
    try {
      // The stat before the read: a write after it moves the metadata again, and the next check reads it.
      this.stamp = stampOf(await stat(this.path));
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      this.stamp = 'missing';
      this.logger.warn(`${this.what}: ${this.path} cannot be read (${(err as { code?: string }).code ?? errorMessage(err)}); ${keeping}`, { file: this.path });
      return false;
    }
    if (text === this.text) return false;
    if (!text.trim()) {
      this.logger.warn(`${this.what}: ${this.path} is empty (a save caught half-way?); ${keeping}. To remove every credential, leave a # comment in it`, {
        file: this.path,
      });
      return false;
    }
    let value: T;
    try {
      value = this.parse(text, this.path);
    } catch (err) {
      const issues = err instanceof ConfigError ? err.issues : [errorMessage(err)];
      this.logger.warn(`${this.what}: ${this.path} was not loaded: ${issues.join('; ')}; ${keeping}`, { file: this.path, issues });
      return false;
    }
    this.value = value;
    this.text = text;
    this.logger.info(`${this.what}: ${this.path} reloaded`, { file: this.path, entries: this.count(value) });
    this.loaded(value, this.logger);
    return true;
  }
}
