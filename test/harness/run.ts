/**
 * One entry for every test suite and benchmark: starts the services a suite
 * needs, runs it with their endpoints in the environment, and always stops
 * them (also on failure and Ctrl-C).
 *
 *   node --import tsx test/harness/run.ts <all|unit|contract|integration|e2e|security|infra|services|bench NAME|smoke|chaos> [args…]
 *
 * When run as root with `unshare` and `ip` available, and every service is
 * local, the run moves into a fresh loopback-only network namespace first:
 * DynamoDB Local binds all interfaces and cannot be told otherwise.
 * ROLLOUT_TEST_NETNS=off disables that.
 */
import { pathToFileURL } from 'node:url';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { runBench } from './bench-record.js';
import { checkRecorded } from './contract-check.js';
import { ensurePackages, needsOf } from './packages.js';
import { MOTO_INSTALL, motoAvailable, startServices, type ServiceSet } from './services.js';

const root = resolve(import.meta.dirname, '../..');
const bin = (name: string) => resolve(root, 'node_modules/.bin', name);

type Mode = 'all' | 'unit' | 'contract' | 'integration' | 'e2e' | 'security' | 'infra' | 'services' | 'bench' | 'smoke' | 'chaos';
const modes: readonly Mode[] = ['all', 'unit', 'contract', 'integration', 'e2e', 'security', 'infra', 'services', 'bench', 'smoke', 'chaos'];

const [modeArg, ...rest] = process.argv.slice(2);
if (!modes.includes(modeArg as Mode)) {
  console.error(`usage: run.ts <${modes.join('|')}> [args]\n  got: ${modeArg ?? '(nothing)'}`);
  process.exit(2);
}
const mode = modeArg as Mode;
const needsServices = mode !== 'unit' && mode !== 'infra';
/** Test files that talk to moto (an AWS emulator from PyPI, not a Debian package). */
const MOTO_FILES = [
  'test/infra/deploy.test.ts',
  'test/infra/pattern-differential.test.ts',
  'test/integration/aws-endpoints.test.ts',
  'test/integration/sqs-emulators.test.ts',
  'test/integration/lambda-alias.test.ts',
  'test/integration/alb-weights.test.ts',
  'test/integration/cloudwatch-judged-gates.test.ts',
  'test/contract/actuator.contract.test.ts',
  'test/e2e/actuation.test.ts',
];
/** Benchmarks (`bench NAME`) that talk to moto: started for every bench when installed, but these stop early without it. */
const MOTO_BENCHES = ['actuation'];
const narrowedTo = rest.filter((a) => !a.startsWith('-'));
const needsMoto =
  !process.env.ROLLOUT_MOTO_URL &&
  ((mode === 'bench' && MOTO_BENCHES.includes(rest[0] ?? '')) ||
    ((mode === 'all' || mode === 'infra' || mode === 'integration' || mode === 'contract' || mode === 'e2e') &&
      (narrowedTo.length === 0 || MOTO_FILES.some((f) => narrowedTo.some((p) => f.includes(p.replace(/^\.\//, '').replace(/\/$/, '')))))));

function externalEndpoints(): boolean {
  const e = process.env;
  return Boolean(e.DATABASE_URL || e.AWS_ENDPOINT_URL || e.AWS_ENDPOINT_URL_DYNAMODB || e.AWS_ENDPOINT_URL_SQS || e.ROLLOUT_TEST_AWS === 'account');
}

/** Re-run this same command inside `unshare --net` with loopback up, if that works here. */
async function reexecIsolated(): Promise<number | undefined> {
  if (!needsServices || process.env.ROLLOUT_IN_NETNS || process.env.ROLLOUT_TEST_NETNS === 'off') return undefined;
  if (externalEndpoints()) return undefined; // a given endpoint would be unreachable from inside
  const probe = spawnSync('unshare', ['--net', 'sh', '-c', 'ip link set lo up'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    const why = probe.error ? probe.error.message : probe.stderr.trim() || `exit ${probe.status}`;
    console.warn(
      `[harness] network isolation unavailable (unshare --net: ${why}); services bind on this host's interfaces. Set ROLLOUT_TEST_NETNS=off to silence.`,
    );
    return undefined;
  }
  const argv = [process.execPath, ...process.execArgv, ...process.argv.slice(1)];
  const child = spawn('unshare', ['--net', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', ...argv], {
    stdio: 'inherit',
    env: { ...process.env, ROLLOUT_IN_NETNS: '1' },
  });
  // A signal sent to this process alone (a CI timeout) must still reach the run inside, which owns the services.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => child.kill(sig));
  return new Promise((done) => child.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0))));
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return new Promise((done) => {
    const child = spawn(cmd, args, { stdio: 'inherit', env, cwd: root });
    child.on('exit', (code, signal) => done(code ?? (signal ? 1 : 0)));
    child.on('error', (err) => {
      console.error(`[harness] ${cmd}: ${err.message}`);
      done(1);
    });
  });
}

/**
 * A plain `N passed, N failed` line, read from vitest's JSON report; a file that failed before its tests ran counts too,
 * and so does a run that failed with every test passed (an unhandled error, which vitest reports above).
 */
function closingLine(report: string, code: number): string {
  try {
    const r = JSON.parse(readFileSync(report, 'utf8')) as {
      numPassedTests: number;
      numFailedTests: number;
      numPendingTests: number;
      numFailedTestSuites: number;
    };
    const files = r.numFailedTestSuites ? `; ${r.numFailedTestSuites} file${r.numFailedTestSuites === 1 ? '' : 's'} failed` : '';
    const other = code !== 0 && !r.numFailedTests && !r.numFailedTestSuites ? `; vitest failed (exit ${code}): see its errors above` : '';
    return `tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed${r.numPendingTests ? `, ${r.numPendingTests} skipped` : ''}${files}${other}`;
  } catch {
    return 'tests: no report (vitest did not finish)';
  }
}

/** The Debian packages this run needs, installed (as root) before the run moves into its network namespace. */
function checkPackages(): boolean {
  if (process.env.ROLLOUT_IN_NETNS) return true; // the outer process saw to it
  const e = process.env;
  const awsGiven = e.ROLLOUT_TEST_AWS === 'account' || Boolean(e.AWS_ENDPOINT_URL);
  const services = { postgres: needsServices && !e.DATABASE_URL, dynamodb: needsServices && !e.AWS_ENDPOINT_URL_DYNAMODB && !awsGiven };
  const isolating = needsServices && e.ROLLOUT_TEST_NETNS !== 'off' && !externalEndpoints();
  // A bench's first argument is its name (what it needs); smoke's and chaos's arguments name no files.
  const args = mode === 'bench' ? rest.slice(0, 1) : mode === 'smoke' || mode === 'chaos' ? [] : rest;
  const result = ensurePackages(needsOf(mode, args, services), isolating ? ['unshare', 'ip'] : []);
  if (!result.ok) console.error(result.message);
  return result.ok;
}

async function main(): Promise<number> {
  if (!checkPackages()) return 2;
  if (needsMoto && !motoAvailable()) {
    console.error(
      `[harness] missing moto, the AWS emulator the deployment, pattern and actuator tests and the actuation bench run against; run: ${MOTO_INSTALL}`,
    );
    return 2;
  }
  const isolated = await reexecIsolated();
  if (isolated !== undefined) return isolated;

  const started = Date.now();
  if (mode === 'all') {
    console.log('[harness] lint');
    if ((await run(bin('eslint'), ['.'])) !== 0) return 1;
    console.log('[harness] format (npm run format rewrites)');
    if ((await run(bin('prettier'), ['--check', '--log-level', 'warn', '.'])) !== 0) return 1;
    console.log('[harness] typecheck');
    if ((await run(bin('tsc'), ['-p', 'tsconfig.json', '--noEmit'])) !== 0) return 1;
    // The docs' examples, against the sources (the package test compiles them against the packed package).
    if ((await run(bin('tsc'), ['-p', 'examples/tsconfig.json', '--noEmit'])) !== 0) return 1;
  }

  let services: ServiceSet | undefined;
  // One shutdown, shared by the signal handler and the normal path, so neither exits while the other is still removing files.
  let stopping: Promise<void> | undefined;
  let reportDir: string | undefined;
  const shutdown = () =>
    (stopping ??= (services ? services.stop() : Promise.resolve()).finally(() => {
      if (reportDir) rmSync(reportDir, { recursive: true, force: true });
    }));
  // A terminal's Ctrl-C reaches this process twice (its group, and forwarded by the outer process):
  // every signal after the first must be harmless, or the default action would kill the cleanup.
  let signalled = false;
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      if (signalled) return;
      signalled = true;
      console.error(`[harness] ${sig}: stopping services`);
      void shutdown().finally(() => process.exit(130));
    });
  }

  try {
    if (needsServices || needsMoto) {
      const t0 = Date.now();
      services = await startServices(needsServices ? undefined : { moto: true });
      const where = process.env.ROLLOUT_IN_NETNS ? ' (loopback-only network namespace)' : '';
      console.log(`[harness] services up in ${Date.now() - t0} ms: ${services.started.join(', ') || 'none (all given)'}${where}`);
    }
    const env = { ...process.env, ...services?.env };

    if (mode === 'services') {
      for (const [k, v] of Object.entries(services?.env ?? {})) console.log(`export ${k}=${v}`);
      console.log('[harness] services running; Ctrl-C stops them');
      await new Promise(() => undefined);
    }
    if (mode === 'bench') {
      const [name, ...args] = rest;
      const file = resolve(root, 'test/bench', `${name ?? ''}.ts`);
      if (!name || !existsSync(file)) {
        console.error(`usage: npm run bench -- <name>   (test/bench/<name>.ts; got ${name ?? 'nothing'})`);
        return 2;
      }
      return await runBench(root, name, file, args, env);
    }
    if (mode === 'chaos') return await run(process.execPath, ['--import', 'tsx', resolve(root, 'test/chaos/cli.ts'), ...rest], env);
    if (mode === 'smoke') return await run(process.execPath, ['--import', 'tsx', resolve(root, 'test/smoke/three-node.ts'), ...rest], env);
    // Explicit files or directories narrow the run; otherwise the mode's directory.
    const narrowed = rest.some((a) => !a.startsWith('-'));
    const dirs = mode === 'all' || narrowed ? [] : [`test/${mode}`];
    reportDir = mkdtempSync(join(tmpdir(), 'rollout-vitest-'));
    const report = join(reportDir, 'report.json');
    // Every answer the API gives in the suites is recorded here, and checked against the OpenAPI document after.
    const answers = join(reportDir, 'answers');
    mkdirSync(answers);
    const tested = await run(bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...dirs, ...rest], {
      ...env,
      ROLLOUT_CONTRACT_RECORD: answers,
      // Each process records the answers its router publishes (vitest's workers, and the nodes the suites start).
      NODE_OPTIONS: `${env.NODE_OPTIONS ?? ''} --import ${pathToFileURL(resolve(root, 'test/harness/contract-record.mjs')).href}`.trim(),
    });
    const contract = checkRecorded(answers);
    if (contract.failures.length) console.error(`[harness] answers that do not match the OpenAPI document (openapi.json):\n${contract.failures.join('\n')}`);
    const code = tested || (contract.failures.length ? 1 : 0);
    console.log(`[harness] ${mode}: ${code === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    console.log(`[harness] ${contract.line}`);
    console.log(`${closingLine(report, tested)}${contract.failures.length ? `; ${contract.failures.length} answers not matching the OpenAPI document` : ''}`);
    return code;
  } finally {
    await shutdown();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('[harness]', err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
