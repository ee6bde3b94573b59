import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/processes.js';

/**
 * `npm start` as a newcomer runs it (short demo): the rollout completes, the
 * run finishes with a steal and a drained spot interruption, it stops
 * cleanly, and its state is there after a restart.
 */
const root = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'rollout-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function npmStart(args: string[]) {
  // Its own process group, so Ctrl-C can be delivered as a terminal does: to npm and everything under it.
  const child = spawn('npm', ['start', '--silent', '--', '--data-dir', join(dir, 'data'), ...args], {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, FORCE_COLOR: '0' },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  // 'close': npm and everything it started have let go of the output (npm itself dies of a SIGINT, like in a terminal).
  const exit = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  return { child, exit, out: () => out, err: () => err, ctrlC: () => process.kill(-child.pid!, 'SIGINT') };
}

describe('npm start', () => {
  it('runs the demo to the end: the rollout completes, the run finishes with steals and a drain', async () => {
    const port = await freePort();
    const p = npmStart(['--port', String(port), '--demo-bake-seconds', '1', '--demo-items', '150', '--exit-after-demo']);
    const code = await p.exit;
    expect(code, `${p.out()}\n${p.err()}`).toBe(0);
    const out = p.out();
    expect(out).toContain(`on http://127.0.0.1:${port}`);
    const m = out.match(
      /demo complete: rollout (\S+) completed in [\d.]+ s; run (\S+) finished in [\d.]+ s \((\d+) done, (\d+) failed, steals (\d+), drains (\d+)\)/,
    );
    expect(m, out).not.toBeNull();
    const [, , , done, failed, steals, drains] = m!;
    expect(Number(done)).toBe(150);
    expect(Number(failed)).toBe(0);
    expect(Number(steals)).toBeGreaterThanOrEqual(1);
    expect(Number(drains)).toBe(1);
    expect(out.trimEnd().endsWith('stopped')).toBe(true);
  }, 90_000);

  it('keeps its state across a restart and stops cleanly on Ctrl-C', async () => {
    const port = await freePort();
    const p = npmStart(['--port', String(port), '--no-demo']);
    let state: { notes: string[]; rollouts: { id: string; state: string }[]; runs: { id: string; done: boolean; counts: { done: number } }[] } | null = null;
    const deadline = Date.now() + 30_000;
    while (!state && Date.now() < deadline) {
      state = await fetch(`http://127.0.0.1:${port}/ui/state`)
        .then((r) => r.json() as Promise<typeof state>)
        .catch(() => null);
      if (!state) await new Promise((r) => setTimeout(r, 100));
    }
    expect(state, p.err()).not.toBeNull();
    expect(state!.rollouts.some((r) => r.id.startsWith('demo-rollout-') && r.state === 'completed')).toBe(true);
    expect(state!.runs.some((r) => r.id.startsWith('demo-run-') && r.done && r.counts.done === 150)).toBe(true);
    // Its mock workers complete any run with made-up results: said on the page and at start.
    const mocks = /^3 in-process mock workers per open run complete every item with a made-up result after 25 ms \(--workers 0 runs none\)$/m;
    expect(state!.notes).toEqual([expect.stringMatching(mocks)]);
    expect(p.out()).toMatch(mocks);
    // A second control plane on the same directory is refused (PGlite is one process's database).
    const second = npmStart(['--port', String(await freePort()), '--no-demo']);
    expect(await second.exit).toBe(2);
    expect(second.err()).toMatch(/in use by another control plane/);
    p.ctrlC();
    await p.exit;
    expect(p.out()).toMatch(/SIGINT: stopping…\nstopped\n$/);
    expect(existsSync(join(dir, 'data', 'rollout.pid'))).toBe(false);
  }, 60_000);

  it('--workers 0 runs no mock workers, says so at start, and the page has no note of them', async () => {
    const port = await freePort();
    const p = npmStart(['--data-dir', 'memory', '--port', String(port), '--no-demo', '--workers', '0']);
    const url = `http://127.0.0.1:${port}`;
    let created: Response | null = null;
    const deadline = Date.now() + 60_000;
    while (!created && Date.now() < deadline) {
      created = await fetch(`${url}/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'mine', items: [{ n: 1 }] }),
      }).catch(() => null);
      if (!created) await new Promise((r) => setTimeout(r, 100));
    }
    expect(created?.status, p.err()).toBe(201);
    const state = (await (await fetch(`${url}/ui/state`)).json()) as { notes: string[] };
    expect(state.notes).toEqual([]);
    expect(p.out()).toMatch(/^no in-process workers: runs wait for workers of yours$/m);
    p.ctrlC();
    await p.exit;
    expect(p.out()).toMatch(/SIGINT: stopping…\nstopped\n$/);
  }, 60_000);
});
