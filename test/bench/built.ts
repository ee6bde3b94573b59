import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

/**
 * The CLI as a user runs it: the built package (`npm run build`), not the
 * sources through a loader, whose helpers cost a node serving many small
 * requests a third of its throughput. Built once per bench run.
 */
let built: string | undefined;
export function builtCli(): string {
  if (built) return built;
  const r = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm run build failed (exit ${r.status}): ${r.stderr.slice(-2000)}`);
  return (built = join(root, 'dist/shared/runtimes/cli/cli.js'));
}
