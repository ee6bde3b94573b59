/**
 * `rollout-control-plane-client` (packages/client) is the main package's
 * client built alone: the same version, the same pinned dependencies, the
 * same Node versions, and only what the client's files import. The packed
 * package is installed and run by test/e2e/package.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
type Pkg = {
  version: string;
  engines: Record<string, string>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  exports: Record<string, string | Record<string, string>>;
};
const json = (p: string) => JSON.parse(readFileSync(join(root, p), 'utf8')) as Pkg;
const main = json('package.json');
const client = json('packages/client/package.json');
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> };

describe('rollout-control-plane-client', () => {
  it("has the main package's version and Node versions, and pins its dependencies as the main package does", () => {
    expect(client.version).toBe(main.version);
    expect(client.engines).toEqual(main.engines);
    for (const [name, range] of Object.entries(client.dependencies ?? {})) expect([name, range]).toEqual([name, main.dependencies?.[name]]);
  });

  it('has every peer optional, at a range the version this repository tests satisfies', () => {
    for (const [name, range] of Object.entries(client.peerDependencies ?? {})) {
      expect(client.peerDependenciesMeta?.[name]?.optional, name).toBe(true);
      const tested = lock.packages[`node_modules/${name}`]?.version;
      expect(range, name).toMatch(/^\^\d+\.\d+\.\d+$/);
      const [maj, min, pat] = range.slice(1).split('.').map(Number) as [number, number, number];
      const [tMaj, tMin, tPat] = tested!.split('.').map(Number) as [number, number, number];
      expect(tMaj === maj && (tMin > min || (tMin === min && tPat >= pat)), `${name} ${tested} within ${range}`).toBe(true);
    }
  });

  it('exports what its tsconfig builds: each entry a file of src/, as JavaScript with its declarations', () => {
    const tsconfig = JSON.parse(readFileSync(join(root, 'packages/client/tsconfig.json'), 'utf8')) as { files: string[] };
    const entries = Object.entries(client.exports).filter(([k]) => k !== './package.json');
    expect(entries.map(([k]) => k).sort()).toEqual(['.', './openfeature']);
    const built = entries.flatMap(([, v]) => Object.values(v as Record<string, string>));
    const sources = tsconfig.files.map((f) => f.replace(/\.ts$/, ''));
    for (const target of built) {
      const stem = target.replace(/^\.\/dist\/packages\/client\//, '').replace(/\.(d\.ts|js)$/, '');
      expect(sources, target).toContain(stem);
    }
  });
});
