/**
 * The advisory-lock elector (seed 004) on a real PostgreSQL server. Intervals
 * are shortened so the bounds stay meaningful: loss is reported within one
 * keepalive, take-over happens within one follower retry interval.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AdvisoryLockElector, type AdvisoryLockElectorOptions } from '../../shared/lease/advisory-lock-elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import { withFence } from '../../shared/store/postgres/fence.js';
import { postgresSchema, uniqueName } from '../support/backends.js';
import { until } from '../support/gate.js';
import { FaultyProxy } from '../support/tcp-proxy.js';

const RETRY_MS = 300;
const KEEPALIVE_MS = 1_000;
const KEEPALIVE_TIMEOUT_MS = 400;
// Scheduling slack on a shared 2-core machine.
const SLACK_MS = 400;

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

  function elector(holderId: string, name: string, events: string[], connection = { connectionString: db.url }, extra: Partial<AdvisoryLockElectorOptions> = {}) {
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
    withFence(db.sql, token, (tx) => tx.query('INSERT INTO fence_probe VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [token.name, value]));

  it('one leader; its session terminated from outside → loss within one keepalive, take-over within one retry', async () => {
    const name = uniqueName('adv');
    const events: string[] = [];
    const a = elector('a', name, events);
    a.e.start();
    await until('a leads', () => a.e.state === 'leader');
    const b = elector('b', name, events);
    b.e.start();
    // b has really tried and lost: its session exists and does not hold the lock.
    await until('b has a session', () => b.e.sessionPid !== null);
    await until('b has made an attempt after a won', async () => (await db.sql.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_try_advisory_lock%'`, [b.e.sessionPid])).rows.length > 0);
    expect(b.e.state).toBe('follower');
    const oldToken = a.e.token()!;
    await put(oldToken, 'a');

    const killedAt = Date.now();
    await db.sql.query('SELECT pg_terminate_backend($1)', [a.e.sessionPid]);

    await until('a reports the loss', () => a.at.has('stopped'), KEEPALIVE_MS);
    expect(a.at.get('stopped')! - killedAt).toBeLessThan(KEEPALIVE_MS);
    await until('b leads', () => b.at.has('started'), RETRY_MS + SLACK_MS);
    expect(b.at.get('started')! - killedAt).toBeLessThanOrEqual(RETRY_MS + SLACK_MS);

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
    const url = new URL(db.url);
    const proxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
    try {
      url.port = String(proxy.port);
      const a = elector('a', name, events, { connectionString: url.toString() });
      a.e.start();
      await until('a leads', () => a.e.state === 'leader');
      const cutAt = Date.now();
      proxy.blackhole(true);
      await until('a steps down', () => a.at.has('stopped'), KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS + SLACK_MS);
      expect(a.at.get('stopped')! - cutAt).toBeLessThanOrEqual(KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS + SLACK_MS);
      // Stepping down closed a's socket, so the server ends the session and frees the lock.
      const b = elector('b', name, events);
      b.e.start();
      await until('b leads', () => b.e.state === 'leader', 5_000);
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
    await until('b leads', () => b.e.state === 'leader', RETRY_MS + SLACK_MS);
    expect(b.e.token()?.epoch).toBe(1);
  });

  it('refuses bad config with the field named', () => {
    expect(() => new AdvisoryLockElector({ holderId: '', connection: {} })).toThrow(/holderId: must not be empty/);
    expect(() => new AdvisoryLockElector({ holderId: 'x', connection: {}, retryIntervalMs: -1 })).toThrow(/retryIntervalMs/);
  });
});
