import type { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import { applyDatabaseRoles, mayCreateRoles } from './roles.js';
import { migrate } from './schema.js';
import { pgliteSql, pgSql, type Sql } from './sql.js';

export interface PostgresHandle {
  readonly sql: Sql;
  close(): Promise<void>;
}

/**
 * A `pg` pool on DATABASE_URL (or the given config), schema migrated. A
 * session that may create roles (the schema's owner: a superuser locally,
 * the master user on Aurora) also sets up the functions' database roles
 * (roles.ts); a function's own role may not, and only checks the schema.
 */
export async function connectPostgres(config: pg.PoolConfig = { connectionString: process.env.DATABASE_URL }): Promise<PostgresHandle & { pool: pg.Pool }> {
  if (!config.connectionString && !config.host) throw new Error('PostgreSQL: set DATABASE_URL or pass a connection config');
  const pool = new pg.Pool({ max: 10, ...config });
  // An idle client whose server went away emits 'error'; without a listener that kills the process.
  pool.on('error', () => undefined);
  const sql = pgSql(pool);
  try {
    await migrate(sql);
    if (await mayCreateRoles(sql)) await applyDatabaseRoles(sql);
  } catch (err) {
    await pool.end();
    throw err;
  }
  return { sql, pool, close: () => pool.end() };
}

/** Embedded PGlite in `dataDir` (in memory when omitted), schema migrated. One user: no roles. */
export async function openPglite(dataDir?: string): Promise<PostgresHandle & { db: PGlite }> {
  // Loaded on use: the Lambda bundles leave the embedded database (several MB of WebAssembly) out.
  const { PGlite: Embedded } = await import('@electric-sql/pglite');
  const db = dataDir ? await Embedded.create(dataDir) : await Embedded.create();
  const sql = pgliteSql(db);
  await migrate(sql);
  return { sql, db, close: () => db.close() };
}
