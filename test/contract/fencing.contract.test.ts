/**
 * Fenced writes racing a steal. The rule: once the steal has committed, no
 * write carrying the old epoch is accepted. On PostgreSQL the interleavings
 * are forced by holding the lease row's lock with an open transaction; on
 * every backend, a writer hammers while the steal lands.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencedError } from '../../shared/lease/fencing.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { tokenOf, type LeaseToken } from '../../shared/lease/record.js';
import { steal } from '../../shared/lease/transitions.js';
import { withFence } from '../../shared/adapters/postgres/fence.js';
import { PostgresLeaseStore } from '../../shared/adapters/postgres/lease-store.js';
import type { Sql } from '../../shared/adapters/postgres/sql.js';
import { fencedProbePut, forEachBackend, postgresSchema, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { gate, settled, until } from '../support/gate.js';

const TIMINGS = { ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 100 };

forEachBackend('fenced writes racing a steal on %s', (backend) => {
  it('no write with the old epoch is accepted once the steal has committed', async () => {
    const name = uniqueName('fence');
    const clock = new ManualClock();
    const a = new LeaseElector(backend.store, { name, holderId: 'a', clock, ...TIMINGS });
    const b = new LeaseElector(backend.store, { name, holderId: 'b', clock, ...TIMINGS });
    await a.campaign();
    const old = a.token()!;
    clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);

    let stealCommitted = false;
    const outcomes: { startedAfterSteal: boolean; accepted: boolean; i: number }[] = [];
    let stop = false;
    const writer = (async () => {
      for (let i = 0; !stop || i < 5; i++) {
        // PGlite settles queries on microtasks: without a macrotask yield this loop starves every timer.
        await new Promise((r) => setImmediate(r));
        const startedAfterSteal = stealCommitted;
        try {
          await backend.fencedPut(old, 'hammer', `a-${i}`);
          outcomes.push({ startedAfterSteal, accepted: true, i });
        } catch (err) {
          expect(err).toBeInstanceOf(FencedError);
          outcomes.push({ startedAfterSteal, accepted: false, i });
        }
      }
    })();
    await until('the old holder has written', () => outcomes.some((o) => o.accepted));
    expect((await b.campaign()).leader).toBe(true);
    stealCommitted = true;
    const countAtSteal = outcomes.length;
    await until('writes after the steal', () => outcomes.length >= countAtSteal + 5);
    stop = true;
    await writer;

    const after = outcomes.filter((o) => o.startedAfterSteal);
    expect(after.length).toBeGreaterThanOrEqual(5);
    expect(after.every((o) => !o.accepted)).toBe(true);
    // What the store kept is a write that started before the steal.
    const kept = await backend.probe('hammer');
    const keptIndex = Number(kept?.slice(2));
    expect(outcomes.find((o) => o.i === keptIndex)).toMatchObject({ accepted: true, startedAfterSteal: false });
    await backend.fencedPut(b.token()!, 'hammer', 'b');
    expect(await backend.probe('hammer')).toBe('b');
  });
});

describe('forced interleavings on PostgreSQL (lease row locks)', () => {
  let db: Awaited<ReturnType<typeof postgresSchema>>;
  let store: PostgresLeaseStore;
  beforeAll(async () => {
    db = await postgresSchema();
    await db.sql.query('CREATE TABLE fence_probe (key text PRIMARY KEY, value text NOT NULL)');
    store = new PostgresLeaseStore(db.sql);
  });
  afterAll(async () => {
    await db?.close();
  });

  const put = (tx: { query: (t: string, p: unknown[]) => Promise<unknown> }, key: string, value: string) =>
    tx.query('INSERT INTO fence_probe (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]);
  const probe = async (key: string) => (await db.sql.query<{ value: string }>('SELECT value FROM fence_probe WHERE key = $1', [key])).rows[0]?.value ?? null;
  /**
   * Whether a statement like `pattern` is waiting on a lock that the session
   * `blocker` holds — the transaction this test keeps open. Scoped to that
   * backend pid: other files' sessions on the same server wait on locks too,
   * and must not answer for ours.
   */
  const waitingOnLock = async (blocker: number, pattern: string) =>
    (
      await db.sql.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid)) AND query LIKE $2`,
        [blocker, pattern],
      )
    ).rows[0]!.n !== '0';
  const backendPid = async (tx: Sql) => (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

  async function heldLease(name: string, clock: ManualClock) {
    const a = new LeaseElector(store, { name, holderId: 'a', clock, ...TIMINGS });
    await a.campaign();
    clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
    return { token: a.token() ?? tokenOf((await store.read(name))!), row: (await store.read(name))! };
  }

  /**
   * The two PostgreSQL forms of a fenced write: `write` is a fenced write of a
   * probe key; `hold` makes one that has passed its fence and then waits for
   * `release` before its transaction commits (`held` gets its backend pid).
   */
  const FORMS = [
    {
      form: 'transaction (withFence)',
      write: (token: LeaseToken, key: string, value: string) => withFence(db.sql, token, (tx) => put(tx, key, value)),
      hold: (token: LeaseToken, key: string, value: string, held: (pid: number) => void, release: Promise<void>) =>
        withFence(db.sql, token, async (tx) => {
          held(await backendPid(tx));
          await release;
          await put(tx, key, value);
        }),
    },
    {
      form: 'one statement (fenceClauses)',
      write: (token: LeaseToken, key: string, value: string) => fencedProbePut(db.sql, token, key, value),
      hold: (token: LeaseToken, key: string, value: string, held: (pid: number) => void, release: Promise<void>) =>
        db.sql.transaction(async (tx) => {
          await fencedProbePut(tx, token, key, value);
          held(await backendPid(tx));
          await release;
        }),
    },
  ];

  describe.each(FORMS)('$form', ({ write, hold }) => {
    it('a steal in flight (row locked, not yet committed) makes the old holder’s fenced write wait, then fail and write nothing', async () => {
      const name = uniqueName('fence');
      const key = uniqueName('k');
      const clock = new ManualClock();
      const { token, row } = await heldLease(name, clock);
      const release = gate();
      const stealLocked = gate();
      let stealer = 0;

      // The real steal statement, in a transaction the test keeps open.
      const stealing = db.sql.transaction(async (tx) => {
        const outcome = await new PostgresLeaseStore(tx).compareAndSwap(row, steal(row, 'b', clock.now(), TIMINGS.ttlMs));
        expect(outcome.ok).toBe(true);
        stealer = await backendPid(tx);
        stealLocked.open();
        await release.wait;
      });
      await stealLocked.wait;

      const late = write(token, key, 'a-late');
      late.catch(() => undefined); // judged below; keep an early rejection from going unhandled
      try {
        await until('the fenced write waits on the lease row lock the steal holds', () => waitingOnLock(stealer, '%FOR SHARE%'));
        expect(await settled(late)).toBe(false);
      } finally {
        release.open(); // a failed assertion must not leave the transaction open
      }
      await stealing;
      const err = await late.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FencedError);
      expect((err as FencedError).current).toEqual({ holder: 'b', epoch: token.epoch + 1 });
      expect(await probe(key)).toBeNull();
    });

    it('a fenced write in flight holds the row until it commits: the steal waits for it, and every later old-epoch write fails', async () => {
      const name = uniqueName('fence');
      const key = uniqueName('k');
      const clock = new ManualClock();
      const { token, row } = await heldLease(name, clock);
      const release = gate();
      const held = gate();
      let writer = 0;

      const inTime = hold(token, key, 'a-in-time', (pid) => ((writer = pid), held.open()), release.wait);
      await held.wait;

      const stealing = store.compareAndSwap(row, steal(row, 'b', clock.now(), TIMINGS.ttlMs));
      try {
        await until('the steal waits on the lease row lock the fenced write holds', () => waitingOnLock(writer, 'UPDATE leases%'));
        expect(await settled(stealing)).toBe(false);
      } finally {
        release.open();
      }
      await inTime; // it passed its fence before the steal: it commits, and the steal is ordered after it
      expect((await stealing).ok).toBe(true);
      expect(await probe(key)).toBe('a-in-time');

      await expect(write(token, key, 'a-late')).rejects.toBeInstanceOf(FencedError);
      expect(await probe(key)).toBe('a-in-time');
    });
  });

  it('the lock-wait probe answers for waits on its own session’s locks only, not for another session’s', async () => {
    const key = uniqueName('k');
    await put(db.sql, key, 'v');
    const release = gate();
    const locked = gate();
    const idle = gate();
    let holder = 0;
    let bystander = 0;
    // One session locks a row; another waits on it with FOR SHARE (as a parallel file's fenced write would); a third holds nothing.
    const holding = db.sql.transaction(async (tx) => {
      await tx.query('SELECT value FROM fence_probe WHERE key = $1 FOR UPDATE', [key]);
      holder = await backendPid(tx);
      locked.open();
      await release.wait;
    });
    const standing = db.sql.transaction(async (tx) => {
      bystander = await backendPid(tx);
      idle.open();
      await release.wait;
    });
    await Promise.all([locked.wait, idle.wait]);
    const waiter = db.sql.query('SELECT value FROM fence_probe WHERE key = $1 FOR SHARE', [key]);
    try {
      await until('the FOR SHARE reader waits on the row lock', () => waitingOnLock(holder, '%FOR SHARE%'));
      expect(await waitingOnLock(bystander, '%FOR SHARE%')).toBe(false);
    } finally {
      release.open();
    }
    await Promise.all([holding, standing, waiter]);
  });

  it('holder alone is not enough: the same holder at an older epoch is rejected', async () => {
    const name = uniqueName('fence');
    const clock = new ManualClock();
    const a = new LeaseElector(store, { name, holderId: 'a', clock, ...TIMINGS });
    await a.campaign();
    const first = a.token()!;
    await a.resign();
    await a.campaign();
    expect(a.token()!.epoch).toBe(first.epoch + 1);
    await expect(withFence(db.sql, first, (tx) => put(tx, 'k3', 'old'))).rejects.toBeInstanceOf(FencedError);
    await withFence(db.sql, a.token()!, (tx) => put(tx, 'k3', 'new'));
    expect(await probe('k3')).toBe('new');
  });
});
