import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Code, Function as LambdaFunctionResource, type FunctionProps } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Construct } from 'constructs';
import type { BuildOptions } from 'esbuild';
import type { BundleName, FunctionSpec } from '../shared/topology.js';

/**
 * Where the functions' code comes from. In this repository (the sources are
 * there), each function is bundled at synth from its entry by the local
 * esbuild, as NodejsFunction does. Installed as a package, the functions
 * were bundled by `npm run build` into `dist/lambda/<name>/` (infra/bundle.ts)
 * with the same options, and are shipped as they are: a user's synth needs
 * neither our sources nor esbuild.
 */

/** The package's root: the nearest directory up from here whose package.json is ours. */
export function packageRoot(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'rollout-control-plane') return dir;
    if (dirname(dir) === dir) throw new Error(`rollout-control-plane: no package.json of ours above ${from}`);
  }
}

/** What both ways of building a function share: esbuild's options, the same at synth and at build. */
export const BUNDLE_OPTIONS = {
  format: 'cjs',
  target: 'node22',
  minify: true,
  sourcemap: true,
  external: ['@electric-sql/pglite', 'pg-native'],
  // The schema module finds its migrations by import.meta.url, or by __dirname in a CommonJS bundle.
  logOverride: { 'empty-import-meta': 'silent' },
} as const;

/** The PostgreSQL migrations, copied beside every bundle that may migrate (shared/adapters/postgres/schema.ts reads them there). */
export const MIGRATIONS = (root: string) => join(root, 'shared', 'adapters', 'postgres', 'migrations');

/** The `rollout` command (and a user's worker module) as one ESM file each, for a worker instance. */
export const WORKER_COMMAND_OPTIONS: BuildOptions = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  minify: true,
  external: [...BUNDLE_OPTIONS.external],
  // Some bundled CommonJS dependencies call require(): give ESM one.
  banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  logLevel: 'warning',
};

/** Where `npm run build` puts one function's bundle. */
export function bundleDir(root: string, name: BundleName): string {
  return join(root, 'dist', 'lambda', name);
}

export function functionOf(
  scope: Construct,
  id: string,
  name: BundleName,
  spec: FunctionSpec,
  props: Omit<FunctionProps, 'code' | 'handler'>,
): LambdaFunctionResource {
  const root = packageRoot();
  const entry = join(root, spec.entry);
  if (existsSync(entry)) {
    return new NodejsFunction(scope, id, {
      ...props,
      entry,
      handler: 'handler',
      projectRoot: root,
      depsLockFilePath: join(root, 'package-lock.json'),
      // The SDK is bundled (the versions tested are the versions run); PGlite is never used in Lambda.
      bundling: {
        format: OutputFormat.CJS,
        target: BUNDLE_OPTIONS.target,
        minify: BUNDLE_OPTIONS.minify,
        sourceMap: BUNDLE_OPTIONS.sourcemap,
        externalModules: [...BUNDLE_OPTIONS.external],
        esbuildArgs: { '--log-override:empty-import-meta': 'silent' },
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (inputDir: string, outputDir: string) => [`cp -R "${MIGRATIONS(inputDir)}" "${join(outputDir, 'migrations')}"`],
        },
      },
    });
  }
  const dir = bundleDir(root, name);
  if (!existsSync(join(dir, 'index.js')))
    throw new Error(`rollout-control-plane: the ${name} function's bundle is missing (${dir}): the package was built without it; run npm run build`);
  return new LambdaFunctionResource(scope, id, { ...props, code: Code.fromAsset(dir), handler: 'index.handler' });
}
