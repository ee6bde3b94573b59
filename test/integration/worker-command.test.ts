/**
 * `rollout worker` as real processes on PostgreSQL, the ledger serving as
 * the queue (LISTEN/NOTIFY across processes): three workers finish a run;
 * SIGTERM (how ECS announces a Fargate Spot interruption) drains one and
 * gives everything back; bad flags exit 2 naming the flag.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ledgerSchemaPerSuite, uniqueName } from '../support/backends.js';

const root = resolve(import.meta.dirname, '../..');

interface Proc {
  readonly exit: Promise<number | null>;
  readonly stdout: () => string;
  readonly stderr: () => string;
  kill(signal: NodeJS.Signals): void;
}

function rollout(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', 'shared/runtimes/cli/cli.ts', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { exit: new Promise((r) => child.on('exit', (code) => r(code))), stdout: () => out, stderr: () => err, kill: (s) => child.kill(s) };
}

describe('rollout worker', () => {
  const schema = ledgerSchemaPerSuite();

  async function run(n: number): Promise<string> {
    const runId = uniqueName('run');
    await schema.ledger.createRun(runId, {}, Date.now());
    await schema.ledger.enqueue(
      runId,
      Array.from({ length: n }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    return runId;
  }

  it('three worker processes share a run through the ledger queue and exit when it is done; every item recorded once', async () => {
    const runId = await run(300);
    const procs = ['a', 'b', 'c'].map((w) =>
      rollout(['worker', '--run', runId, '--database-url', schema.url, '--worker-id', w, '--batch', '20', '--wait-seconds', '1', '--exit-when-done', '--json']),
    );
    const codes = await Promise.all(procs.map((p) => p.exit));
    expect(codes, procs.map((p) => p.stderr()).join('\n')).toEqual([0, 0, 0]);
    const summaries = procs.map((p) => JSON.parse(p.stdout().trim().split('\n').at(-1)!) as { exit: string; done: number });
    expect(summaries.every((s) => s.exit === 'done')).toBe(true);
    expect(summaries.reduce((n, s) => n + s.done, 0)).toBe(300);
    // --json logs: each stderr line is the shape every runtime writes, tied to its run.
    const lines = procs.flatMap((p) => p.stderr().trim().split('\n')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.message)).toContain('worker started');
    for (const l of lines) {
      expect(l).toMatchObject({ service: 'rollout-worker', runId });
      expect([
        Object.keys(l).slice(0, 4),
        typeof l.message,
        ['info', 'warn', 'error'].includes(l.level as string),
        new Date(l.time as string).toISOString(),
      ]).toEqual([['time', 'level', 'service', 'message'], 'string', true, l.time]);
    }
    expect(await schema.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 300, failed: 0 });
    const { rows } = await schema.sql.query<{ worker_id: string; state: string }>('SELECT worker_id, state FROM workers ORDER BY worker_id');
    expect(rows.filter((r) => ['a', 'b', 'c'].includes(r.worker_id)).map((r) => r.state)).toEqual(['gone', 'gone', 'gone']); // registered, then deregistered
  });

  it('SIGTERM drains: the running item and the held ones go back to Pending, the worker deregisters and exits 0', async () => {
    const runId = await run(6);
    const p = rollout([
      'worker',
      '--run',
      runId,
      '--database-url',
      schema.url,
      '--worker-id',
      'spot',
      '--batch',
      '6',
      '--mock-duration-ms',
      '60000',
      '--wait-seconds',
      '1',
    ]);
    await expect.poll(async () => (await schema.ledger.running(runId)).some((i) => i.started), { interval: 50, timeout: 30_000 }).toBe(true);
    p.kill('SIGTERM');
    expect(await p.exit, p.stderr()).toBe(0);
    expect(p.stdout()).toMatch(/worker spot on .*: drained; done 0, .*drained 6 items in \d+ ms/);
    expect(await schema.ledger.counts(runId)).toEqual({ pending: 6, running: 0, done: 0, failed: 0 });
  });

  it("--module runs the user's own handler on two runs in one process; its results are kept; a module with no handler, or beside --backend, is refused", async () => {
    const a = await run(20);
    const b = await run(10);
    const dir = mkdtempSync(join(tmpdir(), 'rollout-module-'));
    const file = join(dir, 'my-worker.mjs');
    writeFileSync(
      file,
      `export default async function (item, { runId, attempt, signal, heartbeat }) {
  heartbeat();
  if (signal.aborted) throw new Error('aborted');
  return { squared: item.payload.i * item.payload.i, runId, attempt };
}
`,
    );
    const p = rollout([
      'worker',
      '--run',
      a,
      '--run',
      b,
      '--database-url',
      schema.url,
      '--worker-id',
      'mod',
      '--module',
      file,
      '--wait-seconds',
      '1',
      '--exit-when-done',
      '--json',
    ]);
    expect(await p.exit, p.stderr()).toBe(0);
    const summary = JSON.parse(p.stdout().trim().split('\n').at(-1)!) as { exit: string; done: number; runs: { runId: string; done: number }[] };
    expect(summary).toMatchObject({
      exit: 'done',
      done: 30,
      runs: [
        { runId: a, done: 20 },
        { runId: b, done: 10 },
      ],
    });
    for (const runId of [a, b]) {
      for (const i of (await schema.ledger.items(runId, { limit: 100 })).items)
        expect(i.result).toEqual({ squared: (i.payload as { i: number }).i ** 2, runId, attempt: 1 });
    }
    const none = join(dir, 'nothing.mjs');
    writeFileSync(none, 'export const x = 1;\n');
    const bad = rollout(['worker', '--run', a, '--database-url', schema.url, '--module', none]);
    expect(await bad.exit).toBe(2);
    expect(bad.stderr()).toMatch(/--module: .*nothing\.mjs exports no handler/);
    const both = rollout(['worker', '--run', a, '--database-url', schema.url, '--module', none, '--backend', 'http']);
    expect(await both.exit).toBe(2);
    expect(both.stderr()).toMatch(/--module: runs items itself: leave out --backend http/);
    const stall = rollout(['worker', '--run', a, '--database-url', schema.url, '--stall', '30s']);
    expect(await stall.exit).toBe(2);
    expect(stall.stderr()).toMatch(/--stall: needs --module: only your handler calls heartbeat\(\)/);
  }, 120_000);

  it('a reader that goes away (its stdout and stderr closed) does not crash the worker: it finishes the run and exits 0', async () => {
    const runId = await run(40);
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'shared/runtimes/cli/cli.ts',
        'worker',
        '--run',
        runId,
        '--database-url',
        schema.url,
        '--worker-id',
        'unread',
        '--wait-seconds',
        '1',
        '--exit-when-done',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    // Its logs (stderr) and summary (stdout) then meet a closed pipe.
    child.stdout.destroy();
    child.stderr.destroy();
    expect(await exit).toBe(0);
    expect(await schema.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 40, failed: 0 });
  });

  it('bad flags exit 2 and name the flag; a run that does not exist exits 1', async () => {
    const noRun = rollout(['worker', '--database-url', schema.url]);
    expect(await noRun.exit).toBe(2);
    expect(noRun.stderr()).toMatch(/required option '--run <id...>' not specified/);
    const badBatch = rollout(['worker', '--run', 'r', '--database-url', schema.url, '--batch', 'ten']);
    expect(await badBatch.exit).toBe(2);
    expect(badBatch.stderr()).toMatch(/--batch must be a whole number, got "ten"/);
    const badChunk = rollout(['worker', '--run', 'r', '--database-url', schema.url, '--chunk-budget-ms', '0']);
    expect(await badChunk.exit).toBe(2);
    expect(badChunk.stderr()).toMatch(/invalid worker config: --chunk-budget-ms: Too small/);
    const badQueue = rollout(['worker', '--run', 'r', '--store', 'dynamodb', '--table', 't'], { DATABASE_URL: '' });
    expect(await badQueue.exit).toBe(2);
    expect(badQueue.stderr()).toMatch(/--queue: the ledger-backed queue needs --store postgres/);
    const missing = rollout(['worker', '--run', 'no-such-run', '--database-url', schema.url]);
    expect(await missing.exit).toBe(1);
    expect(missing.stderr()).toMatch(/run no-such-run does not exist in the postgres store/);
  }, 150_000);
});
