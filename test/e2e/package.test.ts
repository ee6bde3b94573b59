/**
 * What a new adopter does, offline: the package packed and installed from
 * its tarball into a fresh project; a consumer file using the client, the
 * assignment rule, the OpenFeature provider, the worker SDK and the
 * constructs typechecks against its declarations; the consumer's own CDK app
 * nests RolloutControlPlane and a WorkerFleet in its stack and synthesises; a node started from the installed `rollout` bin; the
 * consumer's own script drives rollouts through the client;
 * `rollout rollouts status` gates a pipeline on how a rollout ended (exit 0
 * completed, 1 rolled back or aborted, 3 still going at --timeout); and the
 * consumer's own handler runs a run's 200 items through the worker SDK, every
 * result read back through the client.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/processes.js';
import { freshDatabase } from '../support/backends.js';
import { packAndInstall, packAndInstallClient, typecheck, type Consumer } from '../support/package-consumer.js';
import { FUNCTIONS } from '../../shared/topology.js';

const dir = mkdtempSync(join(tmpdir(), 'rollout-package-'));
const root = resolve(import.meta.dirname, '../..');
const examples = join(root, 'examples');
/** A budget for a hang: compiling against aws-cdk-lib's declarations, or a synthesis, takes a minute on a busy 2-core machine. */
const ADOPTER_STEP_TIMEOUT = 600_000;
/** The same for packing (a whole build and its bundles), installing and starting a node: three minutes on a busy 2-core machine. */
const PACK_AND_INSTALL_TIMEOUT = 900_000;

const CONSUMER_TS = `
import { ApiError, RolloutClient, assign, parseRolloutSpec, type RolloutJson, type RolloutTraffic } from 'rollout-control-plane';
import { RolloutProvider } from 'rollout-control-plane/openfeature';
import { createWorker, type WorkHandler, type WorkerSummary } from 'rollout-control-plane/worker';

const handler: WorkHandler = async (item, { signal, heartbeat, attempt }) => {
  heartbeat();
  signal.throwIfAborted();
  return { input: item.payload, attempt };
};
export const work = (): Promise<WorkerSummary> => createWorker({ runs: ['nightly'], databaseUrl: process.env.DATABASE_URL, exitWhenDone: true, itemTimeoutMs: 60_000, handler }).run();

import { App, Stack } from 'aws-cdk-lib';
import { Role, AccountRootPrincipal } from 'aws-cdk-lib/aws-iam';
import { RolloutControlPlane, WorkerFleet, type RolloutControlPlaneProps } from 'rollout-control-plane/cdk';

export function platform(app: App): Stack {
  const stack = new Stack(app, 'Platform');
  const props: RolloutControlPlaneProps = { functions: { api: { memoryMb: 1024 } } };
  const plane = new RolloutControlPlane(stack, 'Rollouts', props);
  plane.grantOperate(new Role(stack, 'Oncall', { assumedBy: new AccountRootPrincipal() }));
  new WorkerFleet(stack, 'Workers', { controlPlane: plane, runs: ['nightly'], module: './worker.mjs' });
  return stack;
}

const client = new RolloutClient({ url: process.env.ROLLOUT_URL ?? 'http://127.0.0.1:8000', actor: 'ci' });
const spec = parseRolloutSpec({ target: { service: 'web', version: 'v2', stableVersion: 'v1' }, stages: [{ name: 'canary', percent: 10, bakeSeconds: 0 }, { name: 'all', percent: 100, bakeSeconds: 0 }] });

export async function deploy(): Promise<string> {
  const { id } = await client.createRollout(spec);
  const ended: RolloutJson = await client.waitForRollout(id, { timeoutMs: 60_000, pollMs: 200 });
  const traffic: RolloutTraffic = await client.traffic(id);
  const provider: RolloutProvider = new RolloutProvider({ baseUrl: 'http://127.0.0.1:8000' });
  return \`\${ended.state} \${assign(traffic, 'user-1').variant} \${provider.metadata.name} \${ApiError.name}\`;
}
`;

/** The same calls, as the JavaScript the consumer runs. */
const CONSUMER_MJS = `
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { ApiError, RolloutClient, assign } from 'rollout-control-plane';
const client = new RolloutClient({ url: process.env.ROLLOUT_URL, actor: 'ci' });
const out = {};
const quick = { target: { service: 'web', version: 'v2', stableVersion: 'v1' }, stages: [{ name: 'canary', percent: 10, bakeSeconds: 0 }, { name: 'all', percent: 100, bakeSeconds: 0 }] };
const slow = { target: { service: 'web', version: 'v3', stableVersion: 'v2' }, stages: [{ name: 'canary', percent: 10, bakeSeconds: 3600 }, { name: 'all', percent: 100, bakeSeconds: 0 }] };
const a = await client.createRollout(quick, { id: 'pkg-completes' });
out.completed = (await client.waitForRollout(a.id, { timeoutMs: 60_000, pollMs: 200 })).state;
out.assigned = assign(await client.traffic(a.id), 'user-1').variant;
await client.createRollout(slow, { id: 'pkg-aborted' });
out.abort = (await client.command('pkg-aborted', 'abort', { reason: 'wrong build' })).applied;
await client.createRollout(slow, { id: 'pkg-stays' });
const made = await client.createRun({ id: 'pkg-run', items: Array.from({ length: 200 }, (_, n) => ({ n })) });
let read = 0;
for await (const item of client.allRunItems(made.id, { pageSize: 64 })) if (item.state === 'pending' || item.state === 'done' || item.state === 'running') read++;
out.items = [made.added, read];
// The contract the node serves is the one the package ships.
const served = await client.openApiDocument();
out.openapi = [served.openapi, JSON.stringify(served) === JSON.stringify(JSON.parse(readFileSync(createRequire(import.meta.url).resolve('rollout-control-plane/openapi.json'), 'utf8'))), (await client.clusterHealth()).status];
try {
  await client.createRollout({ target: { service: 'web' }, stages: [] });
} catch (err) {
  out.refused = err instanceof ApiError ? [err.status, err.body.issues?.length > 0] : String(err);
}
console.log(JSON.stringify(out));
`;

/** The consumer's own CDK app: the control plane and a fleet running its worker module, nested in its own stack. */
const CDK_APP_MJS = `
import { App, Stack } from 'aws-cdk-lib';
import { AccountRootPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { RolloutControlPlane, WorkerFleet } from 'rollout-control-plane/cdk';
import { readdirSync } from 'node:fs';
const app = new App({ outdir: 'cdk.out' });
const stack = new Stack(app, 'Platform', { env: { account: '123456789012', region: 'eu-west-1' } });
const plane = new RolloutControlPlane(stack, 'Rollouts', { functions: { api: { memoryMb: 1024 } } });
plane.grantAdmin(new Role(stack, 'Deployer', { assumedBy: new AccountRootPrincipal() }));
new WorkerFleet(stack, 'Workers', { controlPlane: plane, runs: ['pkg-run'], module: './fleet-worker.mjs', desiredCapacity: 1 });
const assembly = app.synth();
const template = assembly.getStackByName('Platform').template;
const types = Object.values(template.Resources).map((r) => r.Type);
const assets = readdirSync(assembly.directory).filter((d) => d.startsWith('asset.')).map((d) => readdirSync(assembly.directory + '/' + d));
console.log(JSON.stringify({
  functions: types.filter((t) => t === 'AWS::Lambda::Function').length,
  tables: types.filter((t) => t === 'AWS::DynamoDB::Table').length,
  groups: types.filter((t) => t === 'AWS::AutoScaling::AutoScalingGroup').length,
  lambdaBundles: assets.filter((files) => files.includes('index.js')).length,
  fleetFiles: assets.find((files) => files.includes('worker.mjs'))?.sort() ?? null,
}));
`;

/** The consumer's own worker: its handler runs the run's items, in its own process, through the worker SDK. */
const WORKER_MJS = `
import { createWorker } from 'rollout-control-plane/worker';
const summary = await createWorker({
  runs: ['pkg-run'],
  databaseUrl: process.env.DATABASE_URL,
  waitSeconds: 1,
  exitWhenDone: true,
  handler: async (item, { heartbeat }) => {
    heartbeat();
    return { tripled: item.payload.n * 3 };
  },
}).run();
console.log(JSON.stringify(summary));
`;

/**
 * A worker of \`rollout start\` (PGlite inside the node's process): the run
 * is created through the client, and the consumer's handler serves it
 * through the node's API, with no database URL anywhere.
 */
const NODE_WORKER_MJS = `
import { RolloutClient } from 'rollout-control-plane';
import { createWorker } from 'rollout-control-plane/worker';
const url = process.env.ROLLOUT_URL;
const client = new RolloutClient({ url });
await client.createRun({ id: 'pkg-node-run', items: Array.from({ length: 50 }, (_, n) => ({ n })) });
const summary = await createWorker({
  runs: ['pkg-node-run'],
  url,
  waitSeconds: 1,
  exitWhenDone: true,
  handler: async (item) => ({ doubled: item.payload.n * 2 }),
}).run();
const run = await client.getRun('pkg-node-run');
console.log(JSON.stringify({ exit: summary.exit, done: summary.done, counts: run.counts }));
`;

/** …and every result read back through the client. */
const READ_BACK_MJS = `
import { RolloutClient } from 'rollout-control-plane';
const client = new RolloutClient({ url: process.env.ROLLOUT_URL });
const run = await client.getRun('pkg-run');
let right = 0;
for await (const item of client.allRunItems('pkg-run', { state: 'done', pageSize: 50 })) if (item.result?.tripled === item.payload.n * 3) right++;
console.log(JSON.stringify({ counts: run.counts, done: run.done, right }));
`;

/**
 * An application that only talks to the control plane, with
 * \`rollout-control-plane-client\` alone: the client, the assignment rule and
 * the OpenFeature provider against a node, each answer checked against the
 * others; signing for AWS without its optional peers fails naming them.
 */
const CLIENT_ONLY_MJS = `
import { OpenFeature } from '@openfeature/server-sdk';
import { RolloutClient, assign } from 'rollout-control-plane-client';
import { RolloutProvider } from 'rollout-control-plane-client/openfeature';
const url = process.env.ROLLOUT_URL;
const client = new RolloutClient({ url, actor: 'app' });
const spec = { target: { service: 'shop', version: 'v2', stableVersion: 'v1' }, stages: [{ name: 'canary', percent: 50, bakeSeconds: 3600 }, { name: 'all', percent: 100, bakeSeconds: 0 }] };
const { id } = await client.createRollout(spec, { id: 'pkg-client-only' });
// Its first stage starts as it is created, or at the node's next tick.
let traffic = await client.traffic(id);
for (let n = 0; traffic.percent === 0 && n < 600; n++) {
  await new Promise((r) => setTimeout(r, 100));
  traffic = await client.traffic(id);
}
const users = Array.from({ length: 40 }, (_, n) => 'user-' + n);
await OpenFeature.setProviderAndWait(new RolloutProvider({ baseUrl: url, maxAgeMs: 60_000 }));
const flags = OpenFeature.getClient();
let agree = 0;
for (const u of users) {
  const server = await client.assignment(id, u);
  const local = assign(traffic, u);
  const flag = await flags.getStringValue(id, 'none', { targetingKey: u });
  if (server.version === local.version && flag === local.version) agree++;
}
const versions = new Set(users.map((u) => assign(traffic, u).version));
let signing;
try {
  await new RolloutClient({ url, awsRegion: 'eu-west-1' }).getRollout(id);
  signing = 'signed';
} catch (err) {
  signing = err.message;
}
await OpenFeature.close();
console.log(JSON.stringify({ agree, versions: [...versions].sort(), signing }));
`;

describe('npm pack', () => {
  it('builds first: packed from a checkout that was never built, the tarball holds the built package', () => {
    // The tracked files alone, as a fresh clone has them, beside this checkout's dependencies.
    const copy = mkdtempSync(join(tmpdir(), 'rollout-unbuilt-'));
    try {
      const files = spawnSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).stdout.split('\0').filter(Boolean);
      for (const f of files) cpSync(join(root, f), join(copy, f), { recursive: true });
      symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'));
      const packed = spawnSync('npm', ['pack', '--dry-run', '--json'], { cwd: copy, encoding: 'utf8' });
      expect(packed.status, packed.stderr).toBe(0);
      const pack = (JSON.parse(packed.stdout) as { size: number; unpackedSize: number; files: { path: string }[] }[])[0]!;
      const listed = pack.files.map((f) => f.path);
      // The sizes docs/getting-started/package.md#as-a-package states, as bounds.
      expect(pack.size).toBeLessThan(10_000_000);
      expect(pack.unpackedSize).toBeLessThan(40_000_000);
      expect(listed).toEqual(
        expect.arrayContaining(['dist/shared/index.js', 'dist/shared/index.d.ts', 'dist/shared/runtimes/cli/cli.js', 'dist/infra/cdk.js']),
      );
      // Maps shipped whole or not at all: every map a packed file points to is packed too (the Lambda bundles carry theirs).
      const dangling = listed.flatMap((f) => {
        if (!/\.(m?js|d\.ts)$/.test(f)) return [];
        const map = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(readFileSync(join(copy, f), 'utf8'))?.[1];
        if (!map || map.startsWith('data:')) return [];
        const target = join(f, '..', map);
        return listed.includes(target) ? [] : [`${f} -> ${target}`];
      });
      expect(dangling).toEqual([]);
      expect(listed.some((f) => f.startsWith('dist/lambda/') && f.endsWith('.js.map'))).toBe(true);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  }, 600_000);
});

describe('the package, as an adopter installs it', () => {
  let consumer: Consumer;
  let node: ChildProcess | undefined;
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let url: string;
  let log = '';

  beforeAll(async () => {
    consumer = packAndInstall(dir);
    db = await freshDatabase('package');
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    node = spawn(consumer.bin, ['serve', '--node-id', 'pkg', '--port', String(port), '--database-url', db.url, '--tick-interval', '1'], {
      cwd: consumer.dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise<void>((ready, fail) => {
      node!.once('exit', (code) => fail(new Error(`the installed rollout bin exited with ${code}:\n${log}`)));
      const keep = (b: Buffer) => {
        log += b.toString();
        if (log.includes('"event":"serving"')) ready();
      };
      node!.stdout!.on('data', keep);
      node!.stderr!.on('data', (b: Buffer) => (log += b.toString()));
    });
  }, PACK_AND_INSTALL_TIMEOUT);

  afterAll(async () => {
    if (node && node.exitCode === null) {
      const exited = new Promise((r) => node!.once('exit', r));
      node.kill('SIGTERM');
      await exited;
    }
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const rollout = (...args: string[]) => spawnSync(consumer.bin, ['rollouts', ...args, '--url', url], { cwd: consumer.dir, encoding: 'utf8' });

  it(
    'installs with its bin and its declarations: a consumer using the client, assign, the OpenFeature provider, the worker SDK and the constructs typechecks',
    () => {
      expect(spawnSync(consumer.bin, ['--version'], { encoding: 'utf8' }).stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
      writeFileSync(join(consumer.dir, 'consumer.ts'), CONSUMER_TS);
      expect(() => typecheck(consumer.dir, ['consumer.ts'])).not.toThrow();
    },
    ADOPTER_STEP_TIMEOUT,
  );

  it(
    "the docs' examples compile, strict, against the installed package (an ESM project)",
    () => {
      // client-only.ts imports rollout-control-plane-client: compiled against that package, below.
      const files = readdirSync(examples).filter((f) => f.endsWith('.ts') && f !== 'client-only.ts');
      expect(files).toEqual(expect.arrayContaining(['cdk-app.ts', 'client.ts', 'quick-start.ts', 'worker.ts', 'own-worker.ts', 'openfeature.ts']));
      mkdirSync(join(consumer.dir, 'examples'));
      for (const f of files) cpSync(join(examples, f), join(consumer.dir, 'examples', f));
      expect(() =>
        typecheck(
          consumer.dir,
          files.map((f) => `examples/${f}`),
        ),
      ).not.toThrow();
    },
    ADOPTER_STEP_TIMEOUT,
  );

  it(
    "a CommonJS project laid out as `cdk init app --language typescript` makes it: its tsc passes, every entry point loads with require(), and the docs' CDK app synthesises under tsx",
    () => {
      const cjs = join(dir, 'cdk-init');
      mkdirSync(join(cjs, 'bin'), { recursive: true });
      symlinkSync(join(consumer.dir, 'node_modules'), join(cjs, 'node_modules'));
      // The template's own files: no "type" (CommonJS), its tsconfig (jest's types left out: its test runner is not installed here).
      const template = join(root, 'node_modules/aws-cdk/lib/init-templates/app/typescript');
      writeFileSync(join(cjs, 'package.json'), JSON.stringify({ name: 'platform', version: '0.1.0', bin: { platform: 'bin/platform.js' } }));
      const tsconfig = JSON.parse(readFileSync(join(template, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown> };
      tsconfig.compilerOptions.types = ['node'];
      tsconfig.compilerOptions.typeRoots = [join(root, 'node_modules/@types')];
      writeFileSync(join(cjs, 'tsconfig.json'), JSON.stringify(tsconfig));
      cpSync(join(examples, 'cdk-app.ts'), join(cjs, 'bin/platform.ts'));
      cpSync(join(examples, 'worker.ts'), join(cjs, 'worker.ts'));
      const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: cjs, encoding: 'utf8' });
      expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0);

      writeFileSync(
        join(cjs, 'load.js'),
        `const entries = ['rollout-control-plane', 'rollout-control-plane/worker', 'rollout-control-plane/openfeature', 'rollout-control-plane/cdk'];
console.log(JSON.stringify(Object.fromEntries(entries.map((e) => [e, Object.keys(require(e)).sort()]))));`,
      );
      const loaded = spawnSync(process.execPath, ['load.js'], { cwd: cjs, encoding: 'utf8' });
      expect(loaded.status, loaded.stderr).toBe(0);
      const exports = JSON.parse(loaded.stdout.trim().split('\n').at(-1)!) as Record<string, string[]>;
      expect(exports['rollout-control-plane']).toEqual(expect.arrayContaining(['RolloutClient', 'assign', 'parseRolloutSpec', 'ApiError']));
      expect(exports['rollout-control-plane/worker']).toContain('createWorker');
      expect(exports['rollout-control-plane/openfeature']).toContain('RolloutProvider');
      expect(exports['rollout-control-plane/cdk']).toEqual(expect.arrayContaining(['RolloutControlPlane', 'WorkerFleet']));

      // What the template's cdk.json runs ("npx tsx bin/<name>.ts"), with the CLI's environment.
      const out = join(cjs, 'cdk.out');
      const synth = spawnSync(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), 'bin/platform.ts'], {
        cwd: cjs,
        encoding: 'utf8',
        env: { ...process.env, CDK_OUTDIR: out, CDK_DEFAULT_ACCOUNT: '123456789012', CDK_DEFAULT_REGION: 'eu-west-1', CDK_DISABLE_VERSION_CHECK: '1' },
      });
      expect(synth.status, synth.stdout + synth.stderr).toBe(0);
      const stack = JSON.parse(readFileSync(join(out, 'Platform.template.json'), 'utf8')) as {
        Resources: Record<string, { Type: string }>;
        Outputs: Record<string, { Description?: string; Value: unknown }>;
      };
      const types = Object.values(stack.Resources).map((r) => r.Type);
      expect(types.filter((t) => t === 'AWS::AutoScaling::AutoScalingGroup').length).toBe(1);
      expect(types.filter((t) => t === 'AWS::Lambda::Function').length).toBeGreaterThanOrEqual(Object.keys(FUNCTIONS).length);
      // apiUrlOutput: true
      expect(Object.values(stack.Outputs).filter((o) => o.Description === "The control plane's HTTP API").length).toBe(1);
    },
    ADOPTER_STEP_TIMEOUT,
  );

  it(
    "synthesises the consumer's own app: RolloutControlPlane and a WorkerFleet with its worker module, nested in its stack, from the installed package",
    () => {
      writeFileSync(join(consumer.dir, 'fleet-worker.mjs'), 'export default async (item) => ({ seen: item.payload });\n');
      writeFileSync(join(consumer.dir, 'cdk-app.mjs'), CDK_APP_MJS);
      const r = spawnSync(process.execPath, ['cdk-app.mjs'], { cwd: consumer.dir, encoding: 'utf8', env: { ...process.env, CDK_DISABLE_VERSION_CHECK: '1' } });
      expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
        functions: number;
        tables: number;
        groups: number;
        lambdaBundles: number;
        fleetFiles: string[] | null;
      };
      expect(out).toMatchObject({ tables: 1, groups: 1, fleetFiles: ['rollout.mjs', 'worker.mjs'] });
      // The package's prebuilt bundles, one per function of the topology (plus CDK's own helpers, if any).
      expect(out.lambdaBundles).toBeGreaterThanOrEqual(Object.keys(FUNCTIONS).length);
      expect(out.functions).toBeGreaterThanOrEqual(Object.keys(FUNCTIONS).length);
    },
    ADOPTER_STEP_TIMEOUT,
  );

  it(
    "drives rollouts through the client from the consumer's own script; `rollouts status` exits 0 completed, 1 aborted, 3 at --timeout, 1 at once when unreachable",
    async () => {
      writeFileSync(join(consumer.dir, 'deploy.mjs'), CONSUMER_MJS);
      const r = spawnSync(process.execPath, ['deploy.mjs'], { cwd: consumer.dir, encoding: 'utf8', env: { ...process.env, ROLLOUT_URL: url } });
      expect(r.status, `${r.stdout}\n${r.stderr}\n${log}`).toBe(0);
      expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toEqual({
        completed: 'completed',
        assigned: 'new',
        abort: true,
        items: [200, 200],
        openapi: ['3.1.0', true, 'healthy'],
        refused: [400, true],
      });

      const completed = rollout('status', 'pkg-completes', '--timeout', '60s');
      expect(completed.status, completed.stderr).toBe(0);
      expect(completed.stdout).toMatch(/^pkg-completes {2}completed/);
      const aborted = rollout('status', 'pkg-aborted', '--timeout', '60s');
      expect(aborted.status, aborted.stderr).toBe(1);
      expect(aborted.stdout).toMatch(/pkg-aborted {2}aborted {2}\(wrong build\)/);
      const stays = rollout('status', 'pkg-stays', '--timeout', '1s', '--poll', '200ms');
      expect(stays.status, stays.stderr).toBe(3);
      expect(stays.stdout).toMatch(/pkg-stays {2}running: not ended after 1 s/);
      const history = rollout('history', 'pkg-aborted');
      expect(history.status, history.stderr).toBe(0);
      expect(history.stdout).toMatch(/aborted .* ci .*wrong build/);
      const watched = rollout('get', 'pkg-completes', '--watch', '--poll', '200ms');
      expect(watched.status, watched.stderr).toBe(0);
      expect(watched.stdout).toMatch(/pkg-completes {2}completed/);
      const missing = rollout('status', 'no-such-rollout', '--timeout', '5s');
      expect(missing.status).toBe(1);
      expect(missing.stderr).toMatch(/HTTP 404/);
      // A mistyped URL fails the gate at once, whatever the --timeout, naming what it could not reach.
      const nowhere = `http://127.0.0.1:${await freePort()}`;
      const unreachable = spawnSync(consumer.bin, ['rollouts', 'status', 'pkg-completes', '--timeout', '10m', '--url', nowhere], {
        cwd: consumer.dir,
        encoding: 'utf8',
        timeout: 300_000,
      });
      expect(unreachable.status, unreachable.stderr).toBe(1);
      expect(unreachable.stderr).toMatch(new RegExp(`cannot reach ${nowhere.replaceAll('.', '\\.')}`));
    },
    ADOPTER_STEP_TIMEOUT,
  );

  it(
    "runs the consumer's own handler on a run of `rollout start` (PGlite, no mock workers) through the node's API, with no database credentials",
    async () => {
      const port = await freePort();
      const local = spawn(consumer.bin, ['start', '--no-demo', '--workers', '0', '--data-dir', 'memory', '--port', String(port)], {
        cwd: consumer.dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      try {
        await new Promise<void>((ready, fail) => {
          local.once('exit', (code) => fail(new Error(`rollout start exited with ${code}:\n${out}`)));
          local.stdout.on('data', (b: Buffer) => {
            out += b.toString();
            if (out.includes('status page http://')) ready();
          });
          local.stderr.on('data', (b: Buffer) => (out += b.toString()));
        });
        expect(out).toMatch(/no in-process workers: runs wait for workers of yours/);
        writeFileSync(join(consumer.dir, 'node-worker.mjs'), NODE_WORKER_MJS);
        const env: NodeJS.ProcessEnv = { ...process.env, ROLLOUT_URL: `http://127.0.0.1:${port}` };
        delete env.DATABASE_URL;
        const worked = spawnSync(process.execPath, ['node-worker.mjs'], { cwd: consumer.dir, encoding: 'utf8', env });
        expect(worked.status, `${worked.stdout}\n${worked.stderr}\n${out}`).toBe(0);
        expect(JSON.parse(worked.stdout.trim().split('\n').at(-1)!)).toEqual({
          exit: 'done',
          done: 50,
          counts: { pending: 0, running: 0, done: 50, failed: 0 },
        });
      } finally {
        const exited = new Promise((r) => local.once('exit', r));
        if (local.exitCode === null) local.kill('SIGTERM');
        await exited;
      }
    },
    ADOPTER_STEP_TIMEOUT,
  );

  it(
    "runs the consumer's own handler on the run of 200 items through the worker SDK, and reads every result back through the client",
    () => {
      writeFileSync(join(consumer.dir, 'worker.mjs'), WORKER_MJS);
      const worked = spawnSync(process.execPath, ['worker.mjs'], { cwd: consumer.dir, encoding: 'utf8', env: { ...process.env, DATABASE_URL: db.url } });
      expect(worked.status, `${worked.stdout}\n${worked.stderr}`).toBe(0);
      expect(JSON.parse(worked.stdout.trim().split('\n').at(-1)!)).toMatchObject({ exit: 'done', done: 200, failedAttempts: 0 });
      writeFileSync(join(consumer.dir, 'read-back.mjs'), READ_BACK_MJS);
      const read = spawnSync(process.execPath, ['read-back.mjs'], { cwd: consumer.dir, encoding: 'utf8', env: { ...process.env, ROLLOUT_URL: url } });
      expect(read.status, `${read.stdout}\n${read.stderr}`).toBe(0);
      expect(JSON.parse(read.stdout.trim().split('\n').at(-1)!)).toEqual({ counts: { pending: 0, running: 0, done: 200, failed: 0 }, done: true, right: 200 });
    },
    ADOPTER_STEP_TIMEOUT,
  );
  it(
    'the client alone: `rollout-control-plane-client` installs under 15 MB with the OpenFeature SDK, typechecks, loads from CommonJS and ESM, and answers as the node does',
    () => {
      const client = packAndInstallClient(join(dir, 'client'));
      const installed = readdirSync(join(client.dir, 'node_modules'), { recursive: true }).length;
      const kib = Number(spawnSync('du', ['-sk', 'node_modules'], { cwd: client.dir, encoding: 'utf8' }).stdout.split('\t')[0]);
      // The figure docs/getting-started/package.md#as-a-package states, as a bound: on disk, in blocks, not the files' sizes.
      expect(installed).toBeGreaterThan(0);
      expect(kib * 1024).toBeLessThan(15_000_000);
      // Nothing of the server came with it.
      const top = readdirSync(join(client.dir, 'node_modules')).filter((d) => !d.startsWith('.'));
      expect(top.sort()).toEqual(['@openfeature', 'rollout-control-plane-client', 'zod']);

      cpSync(join(examples, 'client-only.ts'), join(client.dir, 'client-only.ts'));
      expect(() => typecheck(client.dir, ['client-only.ts'])).not.toThrow();

      writeFileSync(
        join(client.dir, 'load.cjs'),
        `const entries = ['rollout-control-plane-client', 'rollout-control-plane-client/openfeature'];
console.log(JSON.stringify(Object.fromEntries(entries.map((e) => [e, Object.keys(require(e)).sort()]))));`,
      );
      const loaded = spawnSync(process.execPath, ['load.cjs'], { cwd: client.dir, encoding: 'utf8' });
      expect(loaded.status, loaded.stderr).toBe(0);
      const exports = JSON.parse(loaded.stdout.trim().split('\n').at(-1)!) as Record<string, string[]>;
      // The same names as the full package's main entry.
      const full = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', "console.log(JSON.stringify(Object.keys(await import('rollout-control-plane')).sort()))"],
        {
          cwd: consumer.dir,
          encoding: 'utf8',
        },
      );
      expect(exports['rollout-control-plane-client']).toEqual(JSON.parse(full.stdout.trim()));
      expect(exports['rollout-control-plane-client/openfeature']).toContain('RolloutProvider');

      writeFileSync(join(client.dir, 'app.mjs'), CLIENT_ONLY_MJS);
      const r = spawnSync(process.execPath, ['app.mjs'], { cwd: client.dir, encoding: 'utf8', env: { ...process.env, ROLLOUT_URL: url } });
      expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { agree: number; versions: string[]; signing: string };
      expect(out.agree).toBe(40);
      expect(out.versions).toEqual(['v1', 'v2']);
      expect(out.signing).toMatch(/needs @aws-sdk\/credential-provider-node and @smithy\/signature-v4 installed/);
    },
    PACK_AND_INSTALL_TIMEOUT,
  );
});
