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

export function packAndInstall(dir: string): Consumer {
  mkdirSync(dir, { recursive: true });
  // Packing builds first (prepack).
  const name = run('npm', ['pack', '--silent', '--pack-destination', dir], root).trim().split('\n').at(-1)!;
  const tarball = join(dir, basename(name));
  const project = join(dir, 'consumer');
  mkdirSync(project, { recursive: true });
  const rel = `file:../${basename(tarball)}`;
  const lock = consumerLock(tarball, rel);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify(
      { name: 'consumer', private: true, type: 'module', dependencies: (lock.packages[''] as { dependencies: Record<string, string> }).dependencies },
      null,
      2,
    ),
  );
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify(lock, null, 2));
  run('npm', ['ci', '--offline', '--ignore-scripts'], project);
  return { dir: project, tarball, bin: join(project, 'node_modules/.bin/rollout') };
}

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

/** The consumer's lockfile: the tarball, every package this repository installs for production (not dev), and the CDK peers with what they need. */
function consumerLock(tarball: string, rel: string): { name: string; lockfileVersion: number; requires: boolean; packages: Record<string, unknown> } {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const self = lock.packages['']!;
  const peers = Object.fromEntries(PEERS.map((n) => [n, String(lock.packages[`node_modules/${n}`]!.version)]));
  const packages: Record<string, unknown> = {
    '': { name: 'consumer', dependencies: { 'rollout-control-plane': rel, ...peers } },
    'node_modules/rollout-control-plane': {
      version: self.version,
      resolved: rel,
      integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
      license: self.license,
      dependencies: self.dependencies,
      bin: self.bin,
      engines: self.engines,
      peerDependencies: self.peerDependencies,
      peerDependenciesMeta: self.peerDependenciesMeta,
    },
  };
  for (const [path, entry] of Object.entries(lock.packages)) if (path && !entry.dev && !entry.link) packages[path] = entry;
  for (const path of closure(lock.packages, PEERS)) {
    const { dev: _dev, devOptional: _devOptional, ...entry } = lock.packages[path]!;
    packages[path] ??= entry;
  }
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
