import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

/** The `rollout` command as a process: exit code, stdout, stderr; `onStderr` and `onStdout` see each so far as it grows. */
export function rollout(
  args: string[],
  env: Record<string, string> = {},
  onStderr?: (soFar: string) => unknown,
  onStdout?: (soFar: string) => unknown,
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'shared/runtimes/cli/cli.ts', ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      void onStdout?.(out);
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
      void onStderr?.(err);
    });
    child.on('exit', (code) => done({ code, out, err }));
  });
}
