/**
 * The PostgreSQL schema as files (shared/adapters/postgres/migrations/):
 * schema.sql is what they make; a database made before they were files, or
 * migrated step by step with rows in it, ends with the same schema; the
 * loader refuses a folder it would misread.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { loadMigrations, migrate, migrationsDir } from '../../shared/adapters/postgres/schema.js';
import { pgSql } from '../../shared/adapters/postgres/sql.js';
import { freshDatabase } from '../support/backends.js';
import { dumpDatabase, freshSchema, REGENERATE, SCHEMA_FILE } from './postgres-schema-dump.js';

const BEFORE_FILES = new URL('./postgres-schema.before-files.sql', import.meta.url);

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function database(): Promise<{ url: string; pool: pg.Pool }> {
  const db = await freshDatabase('schema');
  const pool = new pg.Pool({ connectionString: db.url, max: 1 });
  // Dropping the database ends its sessions; an idle client told so must not fail the run.
  pool.on('error', () => undefined);
  cleanups.push(
    () => db.drop(),
    () => pool.end(),
  );
  return { url: db.url, pool };
}

/** Runs a plain pg_dump's text (one simple-protocol query) on a session of its own: it empties search_path. */
async function restore(url: string, dump: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(dump);
  } finally {
    await client.end();
  }
}

/** schema.sql without its header: what a dump of a migrated database prints. */
function checkedInDump(): string {
  return readFileSync(SCHEMA_FILE, 'utf8').replace(/^(--[^\n]*\n)+\n/, '');
}

/** A dump with each line's leading spaces removed: function bodies made before the files were indented 6 spaces more. */
function unindented(dump: string): string {
  return dump.replace(/^[ \t]+/gm, '');
}

describe('PostgreSQL schema as files', () => {
  it('schema.sql is the schema a freshly migrated database has', async () => {
    expect(await freshSchema(), `shared/adapters/postgres/schema.sql is not what the migrations make: run \`${REGENERATE}\` and review the diff`).toBe(
      readFileSync(SCHEMA_FILE, 'utf8'),
    );
  });

  it('a database made before the migrations were files runs only what was added since, and ends with the fresh schema', async () => {
    const { url, pool } = await database();
    await restore(url, readFileSync(BEFORE_FILES, 'utf8'));
    const rows = async () =>
      (await pool.query<{ id: number; name: string; applied_at: Date }>('SELECT id, name, applied_at FROM schema_migrations ORDER BY id')).rows;
    const recorded = await rows();
    expect(recorded).toHaveLength(25);
    const all = loadMigrations();
    // The files keep the ids and names that database recorded, so it finds them applied and a fresh one records the same.
    expect(recorded.map(({ id, name }) => ({ id, name }))).toEqual(all.slice(0, recorded.length).map(({ id, name }) => ({ id, name })));

    await migrate(pgSql(pool));

    const after = await rows();
    expect(after.slice(0, recorded.length), 'a migration recorded before was recorded again').toEqual(recorded);
    expect(after.map((r) => r.id)).toEqual(all.map((m) => m.id));
    // A restored dump prints some constraints as re-parsed; restoring schema.sql too makes the two comparable.
    const fresh = await database();
    await restore(fresh.url, checkedInDump());
    expect(unindented(dumpDatabase(url)), 'a database made before the files differs from a fresh one').toBe(unindented(dumpDatabase(fresh.url)));
  });

  it('a database migrated step by step, rows and all, ends with the fresh schema and its rows carried over', async () => {
    const { url, pool } = await database();
    const sql = pgSql(pool);
    await migrate(sql, { through: 8 });
    expect((await pool.query('SELECT max(id) AS id FROM schema_migrations')).rows[0]).toEqual({ id: 8 });
    await pool.query(`INSERT INTO workers (instance_id, worker_id, provider, run_id, state, registered_at, heartbeat_at)
                      VALUES ('i-1', 'w-1', 'local', NULL, 'active', now(), now())`);

    await migrate(sql, { through: 23 });
    const spec = JSON.stringify({ stages: [{ name: 'canary', gates: { alarms: ['errors'] } }] });
    await pool.query(
      `INSERT INTO rollouts (id, spec, state, attempt, version, created_at, updated_at, last_progress_at)
       VALUES ('r-running', $1, 'running', 1, 1, now(), now(), now()),
              ('r-done', $1, 'completed', 1, 4, now(), '2026-01-01T00:00:00Z', now())`,
      [spec],
    );
    // Migration 22's trigger counts the change in due_mark, which migration 24 carries over.
    await pool.query(`UPDATE rollouts SET version = 2 WHERE id = 'r-running'`);

    await migrate(sql);
    expect(dumpDatabase(url)).toBe(checkedInDump());
    expect((await pool.query('SELECT run_id FROM workers')).rows).toEqual([{ run_id: '' }]);
    const due = async () =>
      (await pool.query('SELECT rollout_id, due_at::text, due_mark::text, ended_at::text FROM rollout_due ORDER BY rollout_id')).rows as unknown[];
    expect(await due()).toEqual([
      { rollout_id: 'r-done', due_at: '999999999999999', due_mark: '0', ended_at: String(Date.parse('2026-01-01T00:00:00Z')) },
      { rollout_id: 'r-running', due_at: '0', due_mark: '1', ended_at: null },
    ]);
    // The triggers now in place are the function files' (rollout_due_on_change marks the narrow table).
    await pool.query(`UPDATE rollout_due SET due_at = 5 WHERE rollout_id = 'r-running'`);
    await pool.query(`UPDATE rollouts SET version = 3 WHERE id = 'r-running'`);
    expect((await due())[1]).toEqual({ rollout_id: 'r-running', due_at: '0', due_mark: '2', ended_at: null });
  });

  it('each live function file is included by exactly one migration, the one that last changed it', () => {
    const all = loadMigrations();
    const files = readdirSync(join(migrationsDir(), 'functions')).map((f) => `functions/${f}`);
    const includers = new Map(files.map((f) => [f, all.filter((m) => m.includes.includes(f)).map((m) => m.file)]));
    for (const [file, by] of includers) expect(by, `${file} is included by ${by.length} migrations (one: the newest that changes it)`).toHaveLength(1);
  });

  describe('the loader refuses a folder it would misread', () => {
    function folder(files: Record<string, string>): string {
      const dir = mkdtempSync(join(tmpdir(), 'migrations-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      mkdirSync(join(dir, 'functions'));
      for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
      return dir;
    }

    it.each([
      ['a file not named NNNN-words.sql', { '0001-one.sql': '-- one\n', '2-two.sql': '-- two\n' }, /2-two\.sql is not named NNNN-words\.sql/],
      ['a gap in the ids', { '0001-one.sql': '-- one\n', '0003-three.sql': '-- three\n' }, /0003-three\.sql .* should be numbered 0002/],
      ['a repeated id', { '0001-one.sql': '-- one\n', '0001-again.sql': '-- again\n' }, /should be numbered 0002/],
      ['no name line', { '0001-one.sql': 'CREATE TABLE t (x int);\n' }, /0001-one\.sql's first line must be '-- <name>'/],
      ['an unknown directive', { '0001-one.sql': '-- one\n--! run functions/f.sql\n' }, /0001-one\.sql: '--! run functions\/f\.sql' is not '--! include/],
      ['an include outside functions/', { '0001-one.sql': '-- one\n--! include ../secret.sql\n' }, /is not '--! include functions\/<name>\.sql'/],
      [
        'a missing include',
        { '0001-one.sql': '-- one\n--! include functions/absent.sql\n' },
        /0001-one\.sql includes functions\/absent\.sql, which cannot be read/,
      ],
    ])('%s', (_what, files, error) => {
      expect(() => loadMigrations(folder(files))).toThrow(error);
    });

    it('an empty or missing folder', () => {
      expect(() => loadMigrations(folder({}))).toThrow(/no NNNN-words\.sql file in/);
      expect(() => loadMigrations(join(tmpdir(), 'no-such-migrations'))).toThrow(
        /cannot read .*no-such-migrations .*must be copied beside the built module or bundle/,
      );
    });

    it('an include is replaced by the file it names', () => {
      const dir = folder({ '0001-one.sql': '-- one\nSELECT 1;\n--! include functions/f.sql\nSELECT 3;\n' });
      writeFileSync(join(dir, 'functions', 'f.sql'), 'SELECT 2;\n');
      expect(loadMigrations(dir)).toEqual([
        { id: 1, name: 'one', file: '0001-one.sql', sql: '-- one\nSELECT 1;\nSELECT 2;\nSELECT 3;\n', includes: ['functions/f.sql'] },
      ]);
    });
  });
});
