import { buildSync } from 'esbuild';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { FUNCTIONS, type FunctionName } from '../shared/topology.js';
import { BUNDLE_OPTIONS, bundleDir, packageRoot, WORKER_COMMAND_OPTIONS } from './code.js';
import { isEntryPoint } from './entry.js';

/**
 * `npm run build`'s last step: each function bundled into dist/lambda/<name>/
 * (what RolloutControlPlane deploys when installed as a package; source maps
 * name files and lines, without the sources themselves), and the
 * `rollout` command into dist/worker/rollout.mjs (what a WorkerFleet's
 * instances run).
 */
export function bundleAll(root = packageRoot()): void {
  rmSync(join(root, 'dist', 'lambda'), { recursive: true, force: true });
  for (const [name, spec] of Object.entries(FUNCTIONS) as [FunctionName, (typeof FUNCTIONS)[FunctionName]][]) {
    buildSync({
      ...BUNDLE_OPTIONS,
      external: [...BUNDLE_OPTIONS.external],
      entryPoints: [join(root, spec.entry)],
      outfile: join(bundleDir(root, name), 'index.js'),
      bundle: true,
      platform: 'node',
      sourcesContent: false,
      logLevel: 'warning',
    });
  }
  buildSync({
    ...WORKER_COMMAND_OPTIONS,
    entryPoints: [join(root, 'shared', 'runtimes', 'cli', 'cli.ts')],
    outfile: join(root, 'dist', 'worker', 'rollout.mjs'),
  });
}

if (isEntryPoint(import.meta.url)) bundleAll();
