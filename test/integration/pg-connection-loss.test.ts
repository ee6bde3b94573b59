/**
 * A PostgreSQL connection that dies while it is checked out of the pool (in a
 * transaction) makes `pg` emit 'error' on the client as well as reject the
 * query. With no listener that 'error' is an uncaught exception: one dropped
 * connection would take the whole process — a node, its leadership — down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresHandle } from '../../shared/adapters/postgres/connect.js';
import { proxiedPostgresSchema } from '../support/backends.js';
import { until } from '../support/gate.js';
import type { FaultyProxy } from '../support/tcp-proxy.js';

describe('a PostgreSQL connection lost mid-transaction', () => {
  let setup: Awaited<ReturnType<typeof proxiedPostgresSchema>>;
  let proxy: FaultyProxy;
  let db: PostgresHandle;
  const uncaught: unknown[] = [];
  const record = (err: unknown) => uncaught.push(err);
  beforeAll(async () => {
    setup = await proxiedPostgresSchema(2);
    ({ proxy, db } = setup);
    process.prependListener('uncaughtException', record);
  });
  afterAll(async () => {
    process.removeListener('uncaughtException', record);
    await setup?.close();
  });

  it('rejects the transaction and raises nothing else; the pool serves again once the server is back', async () => {
    let inside = false;
    const tx = db.sql.transaction(async (t) => {
      inside = true;
      await t.query('SELECT pg_sleep(10)');
    });
    const outcome = tx.then(
      () => 'committed',
      (err: unknown) => (err instanceof Error ? err.message : String(err)),
    );
    await until('the transaction is running', () => inside);
    proxy.refuse(true);
    // The proxy closes both sides at once: the client reads either the end of
    // the stream or a reset, depending on which arrives first.
    expect(await outcome).toMatch(/^(Connection terminated unexpectedly|read ECONNRESET)$/);
    // Let every listener of the dead connection run before judging.
    await new Promise((r) => setImmediate(r));
    expect(uncaught).toEqual([]);
    proxy.refuse(false);
    expect((await db.sql.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
