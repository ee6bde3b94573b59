import type { PGlite, Transaction } from '@electric-sql/pglite';
import type pg from 'pg';

/**
 * The one SQL port both PostgreSQL drivers satisfy, so the same statements
 * run on a server (`pg`, the Aurora path) and embedded (PGlite).
 */
export interface Sql {
  /**
   * `name`: run it as a named prepared statement, parsed and planned once per
   * connection instead of on every call (for the hot statements; PGlite, in
   * process, ignores it). One name is one text for the life of the process.
   */
  query<R extends object = Record<string, unknown>>(text: string, params?: readonly unknown[], name?: string): Promise<{ rows: R[] }>;
  /** Runs a script of several statements, no parameters (migrations). */
  exec(script: string): Promise<void>;
  /** Runs `fn` in one transaction (READ COMMITTED); inside a transaction it just runs `fn`. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
}

/** int8/bigint: `pg` returns strings, PGlite numbers. Both become a checked JS number. */
export function toInt(value: unknown, column = 'value'): number {
  const n = typeof value === 'number' ? value : typeof value === 'bigint' ? Number(value) : Number.parseInt(String(value), 10);
  if (!Number.isSafeInteger(n)) throw new Error(`${column}: expected a safe integer, got ${String(value)}`);
  return n;
}

/** timestamptz: both drivers give a Date; tolerate strings from other paths. */
export function toMillis(value: unknown, column = 'value'): number {
  const ms = typeof value === 'number' ? value : value instanceof Date ? value.getTime() : new Date(String(value)).getTime();
  if (Number.isNaN(ms)) throw new Error(`${column}: expected a timestamp, got ${String(value)}`);
  return ms;
}

function inTransaction(query: Sql['query'], exec: Sql['exec']): Sql {
  const tx: Sql = { query, exec, transaction: (fn) => fn(tx) };
  return tx;
}

export function pgSql(pool: pg.Pool): Sql {
  return {
    // A config object costs pg a copy of it: only a named statement needs one.
    query: async (text, params, name) => (name ? pool.query({ name, text, values: params as unknown[] }) : pool.query(text, params as unknown[])),
    exec: async (script) => {
      await pool.query(script);
    },
    async transaction(fn) {
      const client = await pool.connect();
      // A connection that dies while checked out rejects its query and also emits 'error' on the
      // client; unheard, that 'error' is an uncaught exception that ends the process.
      const lost = () => undefined;
      client.on('error', lost);
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await fn(
          inTransaction(
            async (text, params, name) => (name ? client.query({ name, text, values: params as unknown[] }) : client.query(text, params as unknown[])),
            async (script) => {
              await client.query(script);
            },
          ),
        );
        await client.query('COMMIT');
        return result;
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch {
          broken = true; // connection is gone; do not return it to the pool
        }
        throw err;
      } finally {
        client.removeListener('error', lost);
        client.release(broken);
      }
    },
  };
}

export function pgliteSql(db: PGlite | Transaction): Sql {
  const query: Sql['query'] = async (text, params) => db.query(text, params as unknown[]);
  const exec: Sql['exec'] = async (script) => {
    await db.exec(script);
  };
  if (!('transaction' in db)) return inTransaction(query, exec);
  return {
    query,
    exec,
    transaction: (fn) => db.transaction((tx) => fn(pgliteSql(tx))),
  };
}
