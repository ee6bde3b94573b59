import { buildSync } from 'esbuild';
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { FUNCTIONS, MIGRATOR, type BundleName, type FunctionSpec } from '../shared/topology.js';
import { BUNDLE_OPTIONS, bundleDir, MIGRATIONS, packageRoot, WORKER_COMMAND_OPTIONS } from './code.js';
import { isEntryPoint } from './entry.js';

/**
 * `npm run build`'s last step: each function (and the Aurora migrator) bundled into dist/lambda/<name>/
 * (what RolloutControlPlane deploys when installed as a package; source maps
 * name files and lines, without the sources themselves), and the
 * `rollout` command into dist/worker/rollout.mjs (what a WorkerFleet's
 * instances run).
 */
export function bundleAll(root = packageRoot()): void {
  rmSync(join(root, 'dist', 'lambda'), { recursive: true, force: true });
  const bundles = [...Object.entries(FUNCTIONS), ['migrator', MIGRATOR]] as [BundleName, FunctionSpec][];
  for (const [name, spec] of bundles) {
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
    // The PostgreSQL migrations are files the schema module reads beside itself (or its bundle).
    cpSync(MIGRATIONS(root), join(bundleDir(root, name), 'migrations'), { recursive: true });
  }
  buildSync({
    ...WORKER_COMMAND_OPTIONS,
    entryPoints: [join(root, 'shared', 'runtimes', 'cli', 'cli.ts')],
    outfile: join(root, 'dist', 'worker', 'rollout.mjs'),
  });
  rmSync(join(root, 'dist', 'worker', 'migrations'), { recursive: true, force: true });
  cpSync(MIGRATIONS(root), join(root, 'dist', 'worker', 'migrations'), { recursive: true });
}

if (isEntryPoint(import.meta.url)) bundleAll();
