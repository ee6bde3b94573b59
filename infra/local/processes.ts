/**
 * Child processes of the local runtime's scripts (and the test harness): a
 * throwaway PostgreSQL server on loopback, free ports, readiness waits.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export { collect, exited, freePort, waitFor, type Stopper } from '../../shared/runtimes/node/processes.js';
import { collect, exited, freePort, waitFor, type Stopper } from '../../shared/runtimes/node/processes.js';

// ---------------------------------------------------------------- PostgreSQL

export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const fromConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (fromConfig.status === 0 && existsSync(join(fromConfig.stdout.trim(), 'initdb'))) return fromConfig.stdout.trim();
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0]) return join(root, versions[0], 'bin');
  throw new Error('PostgreSQL server binaries not found: apt-get install postgresql-15 (or set PG_BIN to the directory holding initdb)');
}

/** initdb refuses to run as root: run the server as `postgres` when we are root. */
export function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0)
    throw new Error('running as root but there is no `postgres` user to run the test PostgreSQL as (apt-get install postgresql-15 creates it)');
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
}

/** Whether a PostgreSQL server at `url` accepts a connection and answers a query. */
export async function postgresAnswers(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } finally {
    await c.end().catch(() => undefined);
  }
}

export async function startPostgres(): Promise<{ url: string; stop: Stopper }> {
  const bin = postgresBinDir();
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'rollout-pg-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], {
    encoding: 'utf8',
    ...user,
  });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
  }
  const port = await freePort();
  const server = spawn(
    join(bin, 'postgres'),
    // fsync off: a throwaway cluster; max_connections for 8-way races × several test files.
    [
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=300',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], ...user },
  );
  const log = collect(server);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const stop: Stopper = async () => {
    if (server.exitCode === null) server.kill('SIGQUIT'); // immediate shutdown: nothing here is worth keeping
    await exited(server);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor('PostgreSQL', 30_000, () => postgresAnswers(url), server, log);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}
