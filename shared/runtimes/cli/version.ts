import { readFileSync } from 'node:fs';

/** The package's version, from its package.json (two levels above this file in the sources and in dist/). */
export function packageVersion(): string {
  for (const up of ['../../../package.json', '../../../../package.json']) {
    try {
      const p = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (p.name === 'rollout-control-plane' && p.version) return p.version;
    } catch {
      // not there: the other layout
    }
  }
  return 'unknown';
}
