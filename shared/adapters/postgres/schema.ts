import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './sql.js';

/**
 * Schema migrations, one file each in migrations/, applied in order, each
 * once. A file is `NNNN-words.sql`: NNNN is its id, its first line
 * `-- <name>` is the name schema_migrations records. A line
 * `--! include functions/<name>.sql` stands for that file: the current
 * definition of a live function (CREATE OR REPLACE), included by the one
 * migration that last changed it, so a database migrated step by step runs
 * the same statements as a fresh one. Timestamps are timestamptz (readable
 * in psql) written from the lease holder's clock; `version` is what
 * compare-and-swap compares.
 */
export interface Migration {
  readonly id: number;
  readonly name: string;
  /** The file's name within the migrations folder. */
  readonly file: string;
  /** What is run: the file's text with each include replaced by the file it names. */
  readonly sql: string;
  /** The function files it includes, as written (`functions/<name>.sql`). */
  readonly includes: readonly string[];
}

const FILE = /^(\d{4})-[a-z0-9][a-z0-9-]*\.sql$/;
const INCLUDE = /^--!\s*include\s+(\S+)\s*$/;

/**
 * The migrations folder: beside this module (run from source, or built by
 * tsc into dist/ with the folder copied), or beside a bundle, which has the
 * folder copied next to it. A CommonJS bundle has an empty import.meta but has __dirname.
 */
export function migrationsDir(): string {
  const url = (import.meta as { url?: string }).url;
  const here = url ? dirname(fileURLToPath(url)) : __dirname;
  return join(here, 'migrations');
}

const listings = new Map<string, readonly { id: number; file: string }[]>();

/** The migration files' ids and names, in order, from the folder's listing only (no file is opened; read once per folder). */
export function migrationFiles(dir = migrationsDir()): readonly { id: number; file: string }[] {
  const known = listings.get(dir);
  if (known) return known;
  let entries: string[];
  try {
    entries = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name);
  } catch (err) {
    throw new Error(
      `PostgreSQL migrations: cannot read ${dir} (${(err as Error).message}); the folder shared/adapters/postgres/migrations must be copied beside the built module or bundle`,
      { cause: err },
    );
  }
  const files = entries
    .filter((f) => f.endsWith('.sql'))
    .map((file) => {
      const m = FILE.exec(file);
      if (!m) throw new Error(`PostgreSQL migrations: ${join(dir, file)} is not named NNNN-words.sql (four digits, then lower-case words joined by '-')`);
      return { id: Number(m[1]), file };
    })
    .sort((a, b) => a.id - b.id);
  if (files.length === 0) throw new Error(`PostgreSQL migrations: no NNNN-words.sql file in ${dir}`);
  files.forEach((f, i) => {
    // A gap or a repeated id is two changes numbered apart (or alike): each database would run a different history.
    if (f.id !== i + 1)
      throw new Error(
        `PostgreSQL migrations: ${f.file} in ${dir} should be numbered ${String(i + 1).padStart(4, '0')} (ids run 1, 2, 3… with no gap or repeat)`,
      );
  });
  listings.set(dir, files);
  return files;
}

/** Every migration, read and its includes resolved. */
export function loadMigrations(dir = migrationsDir()): readonly Migration[] {
  return migrationFiles(dir).map(({ id, file }) => {
    const text = readFileSync(join(dir, file), 'utf8');
    const first = text.split('\n', 1)[0]!;
    const name = /^-- (\S.*)$/.exec(first)?.[1]?.trim();
    if (!name) throw new Error(`PostgreSQL migrations: ${file}'s first line must be '-- <name>' (the name schema_migrations records), not '${first}'`);
    const includes: string[] = [];
    const sql = text
      .split('\n')
      .map((line) => {
        if (!line.startsWith('--!')) return line;
        const target = INCLUDE.exec(line)?.[1];
        if (!target || !/^functions\/[a-z0-9_]+\.sql$/.test(target))
          throw new Error(`PostgreSQL migrations: ${file}: '${line}' is not '--! include functions/<name>.sql'`);
        includes.push(target);
        try {
          return readFileSync(join(dir, target), 'utf8').replace(/\n$/, '');
        } catch (err) {
          throw new Error(`PostgreSQL migrations: ${file} includes ${target}, which cannot be read (${(err as Error).message})`, { cause: err });
        }
      })
      .join('\n');
    return { id, name, file, sql, includes };
  });
}

let loaded: readonly Migration[] | undefined;

/**
 * The migrations in migrationsDir() as an array, read on first use: a
 * runtime that never opens PostgreSQL (a Lambda on DynamoDB) never needs the files.
 */
export const migrations: readonly Migration[] = new Proxy([] as Migration[], {
  get: (_target, key): unknown => Reflect.get((loaded ??= loadMigrations()), key) as unknown,
  has: (_target, key) => Reflect.has((loaded ??= loadMigrations()), key),
});

// Any fixed key: serialises concurrent migrators on a server (a no-op on PGlite, which has one session).
const MIGRATION_LOCK = 7_413_026_401;

/**
 * Applies the migrations not yet recorded in schema_migrations, in order, in
 * one transaction. `through`: stop after that id (tests upgrade a database
 * made by an older set).
 */
export async function migrate(sql: Sql, options: { through?: number } = {}): Promise<void> {
  // A current schema is the common case (every Lambda invocation on Aurora opens the database): the folder's listing and
  // one small read, no transaction and no lock. Anything else, a missing table included, takes the locked path below.
  const files = migrationFiles();
  const latest = Math.min(files[files.length - 1]!.id, options.through ?? Infinity);
  const current = await sql.query<{ id: unknown }>('SELECT max(id) AS id FROM schema_migrations').then(
    (r) => Number(r.rows[0]?.id ?? 0),
    () => 0,
  );
  if (current >= latest) return;
  await sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await tx.query<{ id: number }>('SELECT id FROM schema_migrations');
    const applied = new Set(rows.map((r) => Number(r.id)));
    for (const m of migrations) {
      if (m.id > latest) break;
      if (applied.has(m.id)) continue;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    }
  });
}
