import { createHash } from 'node:crypto';
import pg from 'pg';
import { z } from 'zod';
import { StepLoop, type StepOutcome } from '../../lease/step-loop.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { parseConfig } from '../../config.js';
import { holderIdSchema, leaseNameSchema } from '../../lease/config.js';
import { PROMOTION_LEASE } from '../../lease/names.js';
import type { ElectorCallbacks, ElectorState, LeaderElector, StopReason, Stopped } from '../../lease/elector.js';
import type { LeaseToken } from '../../lease/record.js';

/**
 * Leader election with a PostgreSQL session advisory lock (Leoflow's ADR 0009):
 * `pg_try_advisory_lock` on a dedicated session; followers retry every 5 s;
 * the leader runs a keepalive every 30 s and steps down the moment its own
 * session dies (connection error/end, or a keepalive that fails or times out).
 *
 * Fencing: on winning the lock the leader bumps the epoch of the lease row of
 * the same name (in `leases`), so writes made through the store's fenced
 * write carry an epoch a later leader invalidates. The keepalive is itself a
 * fenced touch of that row; finding a different holder or epoch there means
 * deposed: it steps down and unlocks, so others can contend.
 *
 * Limits — read before choosing this elector:
 * - It needs a direct, session-preserving connection. Behind a transaction
 *   pooler (PgBouncer in transaction mode, RDS Proxy without pinning) the lock
 *   is taken on whichever server session served the statement and is not
 *   held by "us"; it does not work there. Use LeaseElector instead.
 * - Not for Lambda: a frozen or recycled sandbox loses its session.
 * - Not on PGlite: one session, advisory locks exclude nothing there.
 * - A leader whose process is paused (SIGSTOP) keeps the lock while its TCP
 *   session lives; fencing, not the lock, keeps its late writes out.
 */

const optionsSchema = z.object({
  name: leaseNameSchema.default(PROMOTION_LEASE),
  holderId: holderIdSchema,
  retryIntervalMs: z.number().int().positive().default(5_000),
  keepaliveIntervalMs: z.number().int().positive().default(30_000),
  /** A keepalive with no reply after this long counts as a dead session. */
  keepaliveTimeoutMs: z.number().int().positive().default(5_000),
  hostname: z.string().nullish(),
  apiUrl: z.string().nullish(),
});

export type AdvisoryLockElectorOptions = z.input<typeof optionsSchema> & ElectorCallbacks & { connection: pg.ClientConfig; logger?: Logger };

/** A stable signed 64-bit lock key for a lease name. */
export function advisoryLockKey(name: string): string {
  return createHash('sha256').update(`rollout-lease:${name}`).digest().readBigInt64BE(0).toString();
}

export class AdvisoryLockElector implements LeaderElector {
  readonly holderId: string;
  readonly name: string;
  readonly lockKey: string;
  private readonly opts: z.output<typeof optionsSchema>;
  private readonly logger: Logger;

  /** Tries for the lock and wins, for operators and tests (a follower that tried and lost shows attempts > acquisitions). */
  readonly stats = { attempts: 0, acquisitions: 0 };

  private client: pg.Client | null = null;
  private leading: LeaseToken | null = null;
  private stopped = false;
  private readonly loop = new StepLoop(() => this.tick());

  constructor(private readonly options: AdvisoryLockElectorOptions) {
    const { connection: _c, logger, onStartedLeading: _s, onStoppedLeading: _t, onNewLeader: _n, ...rest } = options;
    this.opts = parseConfig('advisory-lock elector', optionsSchema, rest);
    if (this.opts.keepaliveTimeoutMs > this.opts.keepaliveIntervalMs) {
      throw new Error('invalid advisory-lock elector config: keepaliveTimeoutMs must not exceed keepaliveIntervalMs');
    }
    this.holderId = this.opts.holderId;
    this.name = this.opts.name;
    this.lockKey = advisoryLockKey(this.name);
    this.logger = logger ?? silentLogger;
  }

  get state(): ElectorState {
    if (this.stopped) return 'stopped';
    return this.leading ? 'leader' : 'follower';
  }

  token(): LeaseToken | null {
    return this.leading;
  }

  isLeader(): Promise<boolean> {
    return Promise.resolve(this.leading !== null);
  }

  /** Backend pid of the dedicated session (for operators and tests). */
  get sessionPid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  start(): void {
    if (!this.stopped) this.loop.start();
  }

  async stop(options: { resign?: boolean } = {}): Promise<Stopped> {
    if (this.stopped) return { released: false };
    await this.loop.stop();
    const client = this.client;
    this.client = null;
    let released = false;
    if (client && this.leading && options.resign !== false) {
      // Clear the holder (epoch kept) before unlocking, so no reader sees us as holder after we stop.
      released = await client
        .query(
          'UPDATE leases SET holder = NULL, version = version + 1, renewed_at = now(), expires_at = now() WHERE name = $1 AND holder = $2 AND epoch = $3',
          [this.name, this.holderId, this.leading.epoch],
        )
        .then(
          (r) => (r.rowCount ?? 0) > 0,
          () => false,
        );
      await client.query('SELECT pg_advisory_unlock($1::bigint)', [this.lockKey]).catch(() => undefined);
    }
    if (client) {
      if (options.resign === false) destroy(client);
      else await client.end().catch(() => undefined);
    }
    this.stepDown(options.resign === false ? 'stopped' : 'resigned');
    this.stopped = true;
    return { released };
  }

  /** A session lock is held, not renewed: nothing to count. */
  renewalCounts(): { readonly renewals: number; readonly renewFailures: number } {
    return { renewals: 0, renewFailures: 0 };
  }

  /** A follower tries for the lock now (the leader announced it resigned) instead of at its next retry. */
  tryNow(): void {
    if (!this.leading) this.loop.now();
  }

  /** One step of the loop: keep the lock alive, or try for it; then the delay to the next. */
  private async tick(): Promise<StepOutcome> {
    try {
      if (this.leading) await this.keepalive();
      else await this.tryAcquire();
    } catch (err) {
      this.logger.warn('advisory-lock elector step failed', { lease: this.name, error: errorMessage(err) });
      this.dropSession(err);
      if (!this.leading) return { unanswered: this.opts.retryIntervalMs };
    }
    return this.leading ? this.opts.keepaliveIntervalMs : this.opts.retryIntervalMs;
  }

  private async session(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = new pg.Client({ keepAlive: true, ...this.options.connection });
    // The session's death is the loss of the lock: react at once, not at the next keepalive.
    client.on('error', (err) => this.onSessionLost(client, err));
    client.on('end', () => this.onSessionLost(client, new Error('session ended')));
    await client.connect();
    this.client = client;
    return client;
  }

  private onSessionLost(client: pg.Client, err: unknown): void {
    if (this.client !== client) return;
    this.logger.warn('advisory-lock session lost', { lease: this.name, error: errorMessage(err) });
    this.dropSession(err);
    // Contend again at a follower's pace, not at the next keepalive (a step in flight reschedules itself).
    if (!this.loop.stepping) this.loop.after(this.opts.retryIntervalMs);
  }

  private dropSession(_err: unknown): void {
    const client = this.client;
    this.client = null;
    if (client) destroy(client);
    this.stepDown('lost');
  }

  private async tryAcquire(): Promise<void> {
    const client = await this.session();
    this.stats.attempts++;
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [this.lockKey]);
    if (!rows[0]?.locked) return;
    this.stats.acquisitions++;
    // Won the lock: take the next epoch on the lease row so earlier holders are fenced.
    const { rows: lease } = await client.query<{ epoch: string | number }>(
      `INSERT INTO leases (name, holder, epoch, version, acquired_at, renewed_at, expires_at, hostname, api_url)
       VALUES ($1, $2, 0, 0, now(), now(), now() + make_interval(secs => $3), $4, $5)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = leases.epoch + 1, version = leases.version + 1,
         acquired_at = now(), renewed_at = now(), expires_at = excluded.expires_at,
         hostname = excluded.hostname, api_url = excluded.api_url
       RETURNING epoch`,
      [this.name, this.holderId, this.expirySeconds(), this.opts.hostname ?? null, this.opts.apiUrl ?? null],
    );
    this.leading = { name: this.name, holder: this.holderId, epoch: Number(lease[0]?.epoch) };
    const token = this.leading;
    this.fire(() => this.options.onStartedLeading?.(token));
    this.fire(() => this.options.onNewLeader?.({ holder: token.holder, epoch: token.epoch }));
  }

  private async keepalive(): Promise<void> {
    const client = await this.session();
    const token = this.leading;
    if (!token) return;
    let timeout: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timeout = setTimeout(() => reject(new Error(`keepalive: no reply within ${this.opts.keepaliveTimeoutMs} ms`)), this.opts.keepaliveTimeoutMs);
    });
    try {
      const result = await Promise.race([
        client.query(
          'UPDATE leases SET renewed_at = now(), expires_at = now() + make_interval(secs => $4), version = version + 1 WHERE name = $1 AND holder = $2 AND epoch = $3',
          [this.name, this.holderId, token.epoch, this.expirySeconds()],
        ),
        timedOut,
      ]);
      if (result.rowCount === 0) await this.letGo(client);
    } finally {
      clearTimeout(timeout);
    }
  }

  /**
   * The row moved on without us: give up the lock before saying so. Kept, it
   * would shut every other contender out, and our next try would take it again
   * re-entrantly (held twice, so one unlock no longer frees it) and take the
   * row back with epoch + 1.
   */
  private async letGo(client: pg.Client): Promise<void> {
    try {
      await client.query('SELECT pg_advisory_unlock_all()');
    } catch (err) {
      this.dropSession(err); // a closed session frees it
    }
    this.stepDown('fenced');
  }

  /** Informational expiry on the row: two keepalives. The lock, not this time, decides leadership. */
  private expirySeconds(): number {
    return (2 * this.opts.keepaliveIntervalMs) / 1000;
  }

  private stepDown(reason: StopReason): void {
    const held = this.leading;
    if (!held) return;
    this.leading = null;
    this.fire(() => this.options.onStoppedLeading?.(held, reason));
  }

  private fire(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.error('elector callback threw', { lease: this.name, error: errorMessage(err) });
    }
  }
}

/** Drop the socket without a goodbye: the server ends the session and frees the lock. */
function destroy(client: pg.Client): void {
  const conn = (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection;
  conn?.stream?.destroy();
  client.end().catch(() => undefined);
}
