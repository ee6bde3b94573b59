import pg from 'pg';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { own } from '../../own.js';

/**
 * How a worker waiting on the ledger-backed queue learns that a run has new
 * Pending items, instead of polling: LISTEN/NOTIFY across processes on
 * PostgreSQL, a plain signal inside one process (PGlite, tests).
 */
export interface Armed {
  /** Resolves on a wake-up for the armed run, after `ms`, or when `signal` aborts — whichever comes first. */
  wait(ms: number, signal?: AbortSignal): Promise<void>;
  cancel(): void;
}

export interface WakeSource {
  /** Arm before looking, so a wake-up between the look and the wait is not missed. */
  arm(runId: string): Armed;
  notify(runId: string): Promise<void>;
  close(): Promise<void>;
}

/** Waiters per run; a wake-up releases all of them (each then competes with SKIP LOCKED). */
class Waiters {
  private readonly byRun = new Map<string, Set<() => void>>();

  arm(runId: string): Armed {
    let woken = false;
    let release: (() => void) | null = null;
    const fire = () => {
      woken = true;
      release?.();
    };
    const set = this.byRun.get(runId) ?? new Set();
    set.add(fire);
    this.byRun.set(runId, set);
    const cancel = () => {
      set.delete(fire);
      if (!set.size) this.byRun.delete(runId);
    };
    return {
      cancel,
      wait: (ms, signal) =>
        new Promise<void>((resolve) => {
          if (woken || signal?.aborted || ms <= 0) {
            cancel();
            resolve();
            return;
          }
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            cancel();
            resolve();
          };
          const timer = setTimeout(done, ms);
          signal?.addEventListener('abort', done, { once: true });
          release = done;
        }),
    };
  }

  wake(runId: string): void {
    for (const fire of [...(this.byRun.get(runId) ?? [])]) fire();
  }

  wakeAll(): void {
    for (const runId of [...this.byRun.keys()]) this.wake(runId);
  }
}

/** One process: PGlite, the single-node runtime, tests. */
export class InProcessWake implements WakeSource {
  private readonly waiters = new Waiters();

  arm(runId: string): Armed {
    return this.waiters.arm(runId);
  }

  notify(runId: string): Promise<void> {
    this.waiters.wake(runId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

export const WAKE_CHANNEL = 'rollout_work';

/**
 * LISTEN/NOTIFY on one dedicated connection per process. If that connection
 * drops, waiters fall back to their timeout (no wake-up is needed for
 * correctness, only for latency) while it reconnects with backoff.
 */
export class PgNotifyWake implements WakeSource {
  private readonly waiters = new Waiters();
  private client: pg.Client | null = null;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;

  private constructor(
    private readonly config: pg.ClientConfig,
    private readonly logger: Logger,
    /** Further channels to listen on over the same connection (a node's leadership wake-up); after a reconnect each hears '' (notices may have been missed). */
    private readonly channels: Readonly<Record<string, (payload: string) => void>>,
  ) {}

  static async open(
    config: pg.ClientConfig = { connectionString: process.env.DATABASE_URL },
    logger: Logger = silentLogger,
    channels: Readonly<Record<string, (payload: string) => void>> = {},
  ): Promise<PgNotifyWake> {
    for (const c of Object.keys(channels)) if (!/^[a-z_][a-z0-9_]*$/.test(c)) throw new Error(`invalid channel name ${c}: lower-case letters, digits and _`);
    const wake = new PgNotifyWake(config, logger, channels);
    await wake.connect();
    return wake;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    client.on('notification', (n) => {
      if (n.channel === WAKE_CHANNEL && n.payload) this.waiters.wake(n.payload);
      else own(this.channels, n.channel)?.(n.payload ?? '');
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await client.query(`LISTEN ${WAKE_CHANNEL}`);
    for (const channel of Object.keys(this.channels)) await client.query(`LISTEN ${channel}`);
    this.client = client;
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client || this.closed) return;
    this.client = null;
    this.logger.warn('work wake-up connection lost; waiters fall back to their timeout', { error: err.message });
    client.end().catch(() => undefined);
    const retry = (delay: number) => {
      this.retryTimer = setTimeout(() => {
        this.connect().then(
          () => this.missedWhileDown(),
          (e: unknown) => {
            this.logger.warn('work wake-up reconnect failed', { error: errorMessage(e) });
            if (!this.closed) retry(Math.min(delay * 2, 30_000));
          },
        );
      }, delay);
    };
    retry(500);
  }

  /** Notices sent while the connection was down are lost: every waiter looks again, every channel hears an empty payload. */
  private missedWhileDown(): void {
    if (this.closed) return;
    this.logger.info('work wake-up connection restored');
    this.waiters.wakeAll();
    for (const on of Object.values(this.channels)) on('');
  }

  arm(runId: string): Armed {
    return this.waiters.arm(runId);
  }

  /** NOTIFY on one of the further channels, over the listening connection (no pool or new connection needed). */
  async publish(channel: string, payload: string): Promise<void> {
    if (!Object.hasOwn(this.channels, channel)) throw new Error(`not a channel of this wake-up: ${channel}`);
    const client = this.client;
    if (!client) throw new Error('work wake-up connection is down');
    await client.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  async notify(runId: string): Promise<void> {
    // Through the listening connection when it is up; it is also delivered to this process.
    const client = this.client;
    if (client) await client.query('SELECT pg_notify($1, $2)', [WAKE_CHANNEL, runId]);
    else this.waiters.wake(runId);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
