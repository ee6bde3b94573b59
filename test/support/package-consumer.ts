import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';

/**
 * A fresh project that depends on the package as a user's would: the
 * package built and packed (`npm run build`, `npm pack`), then installed from
 * the tarball with `npm ci`. Offline: the consumer's lockfile pins the
 * package's dependencies to the versions this repository's lockfile holds
 * (what was tested here, and what `npm ci` of this repository put in npm's
 * cache), so nothing is fetched. The consumer deploys with the constructs
 * and uses the OpenFeature provider too: aws-cdk-lib, constructs, esbuild and
 * the OpenFeature SDK are installed beside it.
 */
const root = resolve(import.meta.dirname, '../..');

function run(cmd: string, args: readonly string[], cwd: string): string {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' },
  });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}): exit ${r.status}\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-4000)}`);
  return r.stdout;
}

export interface Consumer {
  readonly dir: string;
  readonly tarball: string;
  /** The installed package's `rollout` bin. */
  readonly bin: string;
}

/** Packs the package in `from` (its prepack builds it first) into `dir`; the tarball's path. */
function pack(from: string, dir: string): string {
  const name = run('npm', ['pack', '--silent', '--pack-destination', dir], from).trim().split('\n').at(-1)!;
  return join(dir, basename(name));
}

/** Installs `lock` (offline) as the project `name` in `dir`. */
function install(dir: string, name: string, lock: ConsumerLock): string {
  const project = join(dir, name);
  mkdirSync(project, { recursive: true });
  const { dependencies } = lock.packages[''] as { dependencies: Record<string, string> };
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name, private: true, type: 'module', dependencies }, null, 2));
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify({ ...lock, name, packages: { ...lock.packages, '': { name, dependencies } } }, null, 2));
  run('npm', ['ci', '--offline', '--ignore-scripts'], project);
  return project;
}

export function packAndInstall(dir: string): Consumer {
  mkdirSync(dir, { recursive: true });
  const tarball = pack(root, dir);
  const project = install(dir, 'consumer', consumerLock(tarball, `file:../${basename(tarball)}`));
  return { dir: project, tarball, bin: join(project, 'node_modules/.bin/rollout') };
}

/** What a client-only user installs beside `rollout-control-plane-client`: the OpenFeature SDK, for its provider. */
const CLIENT_PEERS = ['@openfeature/server-sdk', '@openfeature/core'];

/**
 * A fresh project with `rollout-control-plane-client` alone (and the
 * OpenFeature SDK), packed from packages/client: what an application that only
 * talks to the control plane installs.
 */
export function packAndInstallClient(dir: string): Omit<Consumer, 'bin'> {
  mkdirSync(dir, { recursive: true });
  const tarball = pack(join(root, 'packages/client'), dir);
  const rel = `file:../${basename(tarball)}`;
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const self = JSON.parse(readFileSync(join(root, 'packages/client/package.json'), 'utf8')) as LockEntry & { name: string; version: string };
  const packages: Record<string, unknown> = {
    '': { dependencies: { [self.name]: rel, ...versions(lock.packages, CLIENT_PEERS) } },
    [`node_modules/${self.name}`]: entryOf(self, tarball, rel),
  };
  for (const path of closure(lock.packages, [...Object.keys(self.dependencies ?? {}), ...CLIENT_PEERS])) packages[path] ??= withoutDev(lock.packages[path]!);
  const project = install(dir, 'client-consumer', { name: 'client-consumer', lockfileVersion: 3, requires: true, packages });
  return { dir: project, tarball };
}

const versions = (packages: Record<string, LockEntry>, names: readonly string[]): Record<string, string> =>
  Object.fromEntries(names.map((n) => [n, String(packages[`node_modules/${n}`]!.version)]));

const withoutDev = ({ dev: _dev, devOptional: _devOptional, ...entry }: LockEntry): LockEntry => entry;

/** A packed package's lock entry, from its package.json and its tarball. */
const entryOf = (self: LockEntry, tarball: string, rel: string): Record<string, unknown> => ({
  version: self.version,
  resolved: rel,
  integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
  license: self.license,
  dependencies: self.dependencies,
  ...(self.bin ? { bin: self.bin } : {}),
  engines: self.engines,
  peerDependencies: self.peerDependencies,
  peerDependenciesMeta: self.peerDependenciesMeta,
});

/**
 * What this consumer installs beside the package: its optional peers, as one
 * who deploys with the constructs (esbuild for a fleet with a module of
 * theirs) and uses the OpenFeature provider would.
 */
const PEERS = ['aws-cdk-lib', 'constructs', 'esbuild', '@openfeature/server-sdk', '@openfeature/core'];

type LockEntry = Record<string, unknown> & {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  dev?: boolean;
  link?: boolean;
};

/** `names` and everything they need, as node would resolve it in this repository's tree (bundled dependencies included). */
function closure(packages: Record<string, LockEntry>, names: readonly string[]): Set<string> {
  const out = new Set<string>();
  const resolveFrom = (from: string, name: string): string | null => {
    for (let dir = from; ; dir = dir.includes('/node_modules/') ? dir.slice(0, dir.lastIndexOf('/node_modules/')) : '') {
      const path = `${dir ? `${dir}/` : ''}node_modules/${name}`;
      if (packages[path]) return path;
      if (!dir) return null;
    }
  };
  const visit = (path: string) => {
    if (out.has(path)) return;
    out.add(path);
    for (const p of Object.keys(packages)) if (p.startsWith(`${path}/node_modules/`) && packages[p]!.inBundle) out.add(p);
    const e = packages[path]!;
    for (const dep of [...Object.keys(e.dependencies ?? {}), ...Object.keys(e.optionalDependencies ?? {})]) {
      const found = resolveFrom(path, dep);
      if (found) visit(found);
    }
  };
  for (const n of names) visit(`node_modules/${n}`);
  return out;
}

interface ConsumerLock {
  readonly name: string;
  readonly lockfileVersion: number;
  readonly requires: boolean;
  readonly packages: Record<string, unknown>;
}

/** The consumer's lockfile: the tarball, every package this repository installs for production (not dev), and the CDK peers with what they need. */
function consumerLock(tarball: string, rel: string): ConsumerLock {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const packages: Record<string, unknown> = {
    '': { dependencies: { 'rollout-control-plane': rel, ...versions(lock.packages, PEERS) } },
    'node_modules/rollout-control-plane': entryOf(lock.packages['']!, tarball, rel),
  };
  for (const [path, entry] of Object.entries(lock.packages)) if (path && !entry.dev && !entry.link) packages[path] = entry;
  for (const path of closure(lock.packages, PEERS)) packages[path] ??= withoutDev(lock.packages[path]!);
  return { name: 'consumer', lockfileVersion: 3, requires: true, packages };
}

/** Typechecks `files` in the consumer with this repository's TypeScript, libraries' declarations included. */
export function typecheck(project: string, files: readonly string[]): void {
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
      },
      files,
    }),
  );
  run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project);
}
