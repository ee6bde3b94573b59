/**
 * A PostgreSQL connection that dies while it is checked out of the pool (in a
 * transaction) makes `pg` emit 'error' on the client as well as reject the
 * query. With no listener that 'error' is an uncaught exception: one dropped
 * connection would take the whole process — a node, its leadership — down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectPostgres, type PostgresHandle } from '../../shared/adapters/postgres/connect.js';
import { postgresSchema } from '../support/backends.js';
import { until } from '../support/gate.js';
import { FaultyProxy } from '../support/tcp-proxy.js';

describe('a PostgreSQL connection lost mid-transaction', () => {
  let schema: Awaited<ReturnType<typeof postgresSchema>>;
  let proxy: FaultyProxy;
  let db: PostgresHandle;
  const uncaught: unknown[] = [];
  const record = (err: unknown) => uncaught.push(err);
  beforeAll(async () => {
    schema = await postgresSchema(2);
    const url = new URL(schema.url);
    proxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
    url.port = String(proxy.port);
    db = await connectPostgres({ connectionString: url.toString(), options: `-c search_path=${schema.schema}`, max: 2 });
    process.prependListener('uncaughtException', record);
  });
  afterAll(async () => {
    process.removeListener('uncaughtException', record);
    await db?.close();
    await proxy?.stop();
    await schema?.close();
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
    expect(await outcome).toMatch(/Connection terminated/);
    // Let every listener of the dead connection run before judging.
    await new Promise((r) => setImmediate(r));
    expect(uncaught).toEqual([]);
    proxy.refuse(false);
    expect((await db.sql.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
