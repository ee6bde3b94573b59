/**
 * Child processes a runtime starts and waits for (nginx for the demo and the
 * nginx actuator's tests, the local cluster's nodes): free ports, readiness
 * waits, their output.
 */
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export type Stopper = () => Promise<void>;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export async function waitFor(what: string, timeoutMs: number, probe: () => Promise<boolean>, child?: ChildProcess, log?: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode} before it was ready\n${log?.() ?? ''}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms\n${log?.() ?? ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function collect(child: ChildProcess): () => string {
  let out = '';
  const add = (b: Buffer) => {
    out = (out + b.toString()).slice(-8000);
  };
  child.stdout?.on('data', add);
  child.stderr?.on('data', add);
  return () => out;
}

export function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}
