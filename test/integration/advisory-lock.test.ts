/**
 * The advisory-lock elector (Leoflow's ADR 0009) on a real PostgreSQL server. Each test
 * shows what caused a change (the session's end, a keepalive timeout, a
 * released lock), never how fast it came: an interval that must not explain
 * the change is made far longer than the test.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdvisoryLockElector, type AdvisoryLockElectorOptions } from '../../shared/adapters/postgres/advisory-lock-elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import { silentLogger } from '../../shared/log.js';
import { withFence } from '../../shared/adapters/postgres/fence.js';
import { postgresSchema, uniqueName } from '../support/backends.js';
import { until } from '../support/gate.js';
import { FaultyProxy } from '../support/tcp-proxy.js';

const RETRY_MS = 300;
const KEEPALIVE_MS = 1_000;
const KEEPALIVE_TIMEOUT_MS = 400;
/** Longer than any test: a step that runs this rarely cannot explain what a test sees. */
const NEVER_MS = 600_000;

describe('advisory-lock elector', () => {
  let db: Awaited<ReturnType<typeof postgresSchema>>;
  const running: AdvisoryLockElector[] = [];

  beforeAll(async () => {
    db = await postgresSchema(4);
    await db.sql.query('CREATE TABLE fence_probe (key text PRIMARY KEY, value text NOT NULL)');
  });
  afterEach(async () => {
    for (const e of running.splice(0)) await e.stop();
  });
  afterAll(async () => {
    await db?.close();
  });

  function elector(
    holderId: string,
    name: string,
    events: string[],
    connection = { connectionString: db.url },
    extra: Partial<AdvisoryLockElectorOptions> = {},
  ) {
    const at = new Map<string, number>();
    const e = new AdvisoryLockElector({
      name,
      holderId,
      connection: { ...connection, options: `-c search_path=${db.schema}` },
      retryIntervalMs: RETRY_MS,
      keepaliveIntervalMs: KEEPALIVE_MS,
      keepaliveTimeoutMs: KEEPALIVE_TIMEOUT_MS,
      onStartedLeading: (t) => {
        events.push(`${holderId} started ${t.epoch}`);
        at.set('started', Date.now());
      },
      onStoppedLeading: (t, reason) => {
        events.push(`${holderId} stopped ${t.epoch} ${reason}`);
        at.set('stopped', Date.now());
      },
      ...extra,
    });
    running.push(e);
    return { e, at };
  }

  const put = (token: LeaseToken, value: string) =>
    withFence(db.sql, token, (tx) =>
      tx.query('INSERT INTO fence_probe VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [token.name, value]),
    );

  it('one leader; its session terminated from outside → the loss is seen from the session itself (no keepalive ran), a follower takes over at epoch + 1', async () => {
    const name = uniqueName('adv');
    const events: string[] = [];
    const a = elector('a', name, events, undefined, { keepaliveIntervalMs: NEVER_MS });
    a.e.start();
    await until('a leads', () => a.e.state === 'leader');
    const b = elector('b', name, events);
    b.e.start();
    // b has really tried and lost: its session exists and does not hold the lock.
    await until('b has a session', () => b.e.sessionPid !== null);
    await until(
      'b has made an attempt after a won',
      async () =>
        (await db.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_try_advisory_lock%'`, [b.e.sessionPid])).rows.length > 0,
    );
    expect(b.e.state).toBe('follower');
    const oldToken = a.e.token()!;
    await put(oldToken, 'a');

    const killedAt = Date.now();
    await db.sql.query('SELECT pg_terminate_backend($1)', [a.e.sessionPid]);

    // a's keepalive is due only after the test: the session's own end told it.
    await until('a reports the loss', () => a.at.has('stopped'));
    await until('b leads', () => b.at.has('started'));
    console.log(
      `[advisory-lock] loss seen after ${a.at.get('stopped')! - killedAt} ms, take-over after ${b.at.get('started')! - killedAt} ms (retry ${RETRY_MS} ms)`,
    );

    expect(b.e.token()).toEqual({ name, holder: 'b', epoch: oldToken.epoch + 1 });
    await expect(put(oldToken, 'a-late')).rejects.toBeInstanceOf(FencedError);
    await put(b.e.token()!, 'b');
    expect(events.slice(0, 3)).toEqual(['a started 0', 'a stopped 0 lost', 'b started 1']);
    // a is back as a follower on a new session, not a second leader.
    await until('a reconnects', () => a.e.sessionPid !== null);
    expect(a.e.state).toBe('follower');
  });

  it('a silent partition (no FIN, no replies) is caught by the keepalive timeout', async () => {
    const name = uniqueName('adv');
    const events: string[] = [];
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (m: string, extra?: Record<string, unknown>) => warnings.push(`${m}: ${String(extra?.error)}`) };
    const url = new URL(db.url);
    const proxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
    try {
      url.port = String(proxy.port);
      const a = elector('a', name, events, { connectionString: url.toString() }, { logger });
      a.e.start();
      await until('a leads', () => a.e.state === 'leader');
      const cutAt = Date.now();
      proxy.blackhole(true);
      await until('a steps down', () => a.at.has('stopped'));
      expect(events).toContain('a stopped 0 lost');
      // Nothing closed the socket: the keepalive's timeout is what noticed.
      expect(warnings).toContain(`advisory-lock elector step failed: keepalive: no reply within ${KEEPALIVE_TIMEOUT_MS} ms`);
      console.log(
        `[advisory-lock] silent partition noticed after ${a.at.get('stopped')! - cutAt} ms (keepalive ${KEEPALIVE_MS} ms, timeout ${KEEPALIVE_TIMEOUT_MS} ms)`,
      );
      // Stepping down closed a's socket, so the server ends the session and frees the lock.
      const b = elector('b', name, events);
      b.e.start();
      await until('b leads', () => b.e.state === 'leader');
      expect(b.e.token()?.epoch).toBe(1);
    } finally {
      await proxy.stop();
    }
  });

  it('stop() resigns: the lock is released and the row keeps its epoch', async () => {
    const name = uniqueName('adv');
    const events: string[] = [];
    const a = elector('a', name, events);
    a.e.start();
    await until('a leads', () => a.e.state === 'leader');
    await a.e.stop();
    expect(a.e.state).toBe('stopped');
    const { rows } = await db.sql.query<{ holder: string | null; epoch: string }>('SELECT holder, epoch FROM leases WHERE name = $1', [name]);
    expect(rows[0]).toEqual({ holder: null, epoch: '0' });
    const b = elector('b', name, events);
    b.e.start();
    await until('b leads', () => b.e.state === 'leader');
    expect(b.e.token()?.epoch).toBe(1);
  });

  it('a keepalive that finds the row changed steps down and lets go of the lock: a contender takes over, the old leader does not take the row back', async () => {
    const name = uniqueName('adv');
    const events: string[] = [];
    // a retries rarely: only a released lock lets b in before a's next try.
    const a = elector('a', name, events, undefined, { retryIntervalMs: 600_000 });
    a.e.start();
    await until('a leads', () => a.e.state === 'leader');
    const b = elector('b', name, events);
    b.e.start();
    await until('b has tried and lost', () => b.e.stats.attempts > 0 && b.e.state === 'follower');
    const aPid = a.e.sessionPid;
    // Someone who does not hold the lock takes the row (an operator, a lease elector on the same name).
    await db.sql.query(`UPDATE leases SET holder = 'intruder', epoch = epoch + 1, version = version + 1 WHERE name = $1`, [name]);
    await until('a steps down', () => a.at.has('stopped'));
    expect(events).toContain('a stopped 0 fenced');
    const { rows } = await db.sql.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, [aPid]);
    expect(Number(rows[0]!.n)).toBe(0);
    await until('b leads', () => b.e.state === 'leader');
    expect(b.e.token()?.epoch).toBe(2);
    expect(a.e.state).toBe('follower');
    const { rows: lease } = await db.sql.query<{ holder: string; epoch: string }>('SELECT holder, epoch FROM leases WHERE name = $1', [name]);
    expect(lease[0]).toEqual({ holder: 'b', epoch: '2' });
  });

  it('refuses bad config with the field named', () => {
    expect(() => new AdvisoryLockElector({ holderId: '', connection: {} })).toThrow(/holderId: must not be empty/);
    expect(() => new AdvisoryLockElector({ holderId: 'x', connection: {}, retryIntervalMs: -1 })).toThrow(/retryIntervalMs/);
  });
});
