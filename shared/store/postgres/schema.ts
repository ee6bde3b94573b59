import type { Sql } from './sql.js';

/**
 * Schema migrations, applied in order, each once. Timestamps are timestamptz
 * (readable in psql) written from the lease holder's clock; `version` is what
 * compare-and-swap compares.
 */
export const migrations: readonly { id: number; name: string; sql: string }[] = [
  {
    id: 1,
    name: 'leases',
    sql: `
      CREATE TABLE leases (
        name        text PRIMARY KEY,
        holder      text,
        epoch       bigint NOT NULL CHECK (epoch >= 0),
        version     bigint NOT NULL CHECK (version >= 0),
        acquired_at timestamptz NOT NULL,
        renewed_at  timestamptz NOT NULL,
        expires_at  timestamptz NOT NULL,
        hostname    text,
        api_url     text
      );
      COMMENT ON TABLE leases IS 'Lease rows are never deleted: deleting one resets its epoch and breaks fencing.';
    `,
  },
];

// Any fixed key: serialises concurrent migrators on a server (a no-op on PGlite, which has one session).
const MIGRATION_LOCK = 7_413_026_401;

export async function migrate(sql: Sql): Promise<void> {
  await sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await tx.query<{ id: number }>('SELECT id FROM schema_migrations');
    const applied = new Set(rows.map((r) => Number(r.id)));
    for (const m of migrations) {
      if (applied.has(m.id)) continue;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    }
  });
}
