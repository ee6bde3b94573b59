import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { check } from '../chaos/check.js';
import type { ChaosHistory, ItemTransition, LeaseChange, Stall } from '../chaos/history.js';
import { readStallDir, stalledFor, worstStall } from '../chaos/stalls.js';

/**
 * The checker on a busy machine, on hand-made histories of the local
 * topology: node-1 leads, worker w1 holds item i1 of run r1 (failure timeout
 * 3 s, heartbeats every 0.5 s), the faults heal at 10 s, the quiet period
 * ends at 50 s, and a run must finish within 30 s of the heal. Each process
 * records its own scheduling stalls; a take-back or a late finish is excused
 * only by the stall that explains it.
 */
const TIMEOUT = 3_000;
const HEARTBEAT = 500;
const HEALED = 10_000;

function item(
  seq: number,
  at: number,
  from: ItemTransition['from'],
  to: Partial<ItemTransition['to']> & { state: ItemTransition['to']['state'] },
): ItemTransition {
  return { seq, at, runId: 'r1', itemId: 'i1', from, to: { worker: null, started: false, resultHash: null, error: null, attempts: 1, ...to } };
}

/** w1 gets i1 at 12 s and loses it at `takenAt`; another worker finishes it at `doneAt`. */
function history(
  o: {
    stalls?: Stall[];
    takenAt?: number | null;
    takenWith?: string;
    faults?: ChaosHistory['faults'];
    doneAt?: number;
    leases?: LeaseChange[];
    rolloutRunning?: boolean;
  } = {},
): ChaosHistory {
  const takenAt = o.takenAt === undefined ? 16_000 : o.takenAt;
  const doneAt = o.doneAt ?? 20_000;
  const items: ItemTransition[] = [
    item(1, 11_000, null, { state: 'pending' }),
    item(2, 12_000, { state: 'pending', worker: null, started: false }, { state: 'running', worker: 'w1' }),
    ...(takenAt === null ? [] : [item(3, takenAt, { state: 'running', worker: 'w1', started: false }, { state: 'pending', error: o.takenWith ?? null })]),
    item(4, doneAt, { state: 'running', worker: 'w2', started: true }, { state: 'done', worker: 'w2', started: true, resultHash: 'h' }),
  ];
  return {
    topology: 'local',
    seed: 'hand',
    schedule: 0,
    variant: null,
    epochMs: 0,
    nodes: ['node-1'],
    workers: ['w1', 'w2'],
    ops: [],
    faults: [{ kind: 'kill-follower', target: 'node-2', startAt: 2_000, endAt: HEALED }, ...(o.faults ?? [])],
    processes: [
      { process: 'node-1', role: 'node', from: 0, to: null },
      { process: 'w1', role: 'worker', from: 0, to: null },
      { process: 'w2', role: 'worker', from: 0, to: null },
    ],
    stalls: o.stalls ?? [],
    phases: { faultsUntil: HEALED, healedAt: HEALED, quietUntil: 50_000 },
    bounds: { leaderWithinMs: 4_800, runsFinishWithinMs: 30_000, failureTimeoutMs: TIMEOUT, heartbeatMs: HEARTBEAT },
    store: {
      leaseChanges: o.leases ?? [{ seq: 1, at: 0, name: 'promotion_leader', change: 'insert', holder: 'node-1', epoch: 1, expiresAt: 60_000 }],
      writes: [],
      stageTransitions: [],
      rolloutTransitions: o.rolloutRunning
        ? [{ seq: 1, at: 1_000, rolloutId: 'ro', from: null, to: { state: 'running', attempt: 1, reason: null, by: 'node-1' } }]
        : [],
      itemTransitions: items,
      rollouts: o.rolloutRunning
        ? [
            {
              id: 'ro',
              state: 'running',
              attempt: 1,
              reason: null,
              labels: {},
              stages: [{ attempt: 1, index: 0, name: 'all', phase: 'active', promotedEpoch: null, promotedBy: null, activatedAt: 1_000 }],
            },
          ]
        : [],
      runs: [{ id: 'r1', items: 1 }],
      items: [{ runId: 'r1', id: 'i1', state: 'done', worker: 'w2', resultHash: 'h', error: null, attempts: 1, hasMessage: true }],
      idempotency: [],
      events: [],
    },
  };
}

const stall = (process: string, at: number, ms: number): Stall => ({ process, pid: 1, at, ms });
const named = (h: ChaosHistory, invariant: string) => check(h).filter((v) => v.invariant === invariant);

describe('live-worker-keeps-items on a busy machine', () => {
  it('a take-back from a worker that kept heartbeating and was never stalled is flagged', () => {
    const found = named(history(), 'live-worker-keeps-items');
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toBe('item r1/i1 taken back from w1, alive and unfaulted for the failure timeout before');
  });

  it('a take-back from a worker stalled for the failure timeout but two heartbeat intervals is excused, as a pause is', () => {
    // Starved from 14 s to 16 s: 2 s of the 3 s before the take-back; a heartbeat's period and its write take the rest.
    expect(named(history({ stalls: [stall('w1', 14_000, 2_000)] }), 'live-worker-keeps-items')).toEqual([]);
  });

  it('many short stalls add up like one long one', () => {
    const stalls = Array.from({ length: 21 }, (_, i) => stall('w1', 13_000 + i * 140, 100));
    expect(named(history({ stalls }), 'live-worker-keeps-items')).toEqual([]);
  });

  it('a stall of the harness, which carries the heartbeats to the store, excuses it too', () => {
    expect(named(history({ stalls: [stall('harness', 13_000, 3_000)] }), 'live-worker-keeps-items')).toEqual([]);
  });

  it('a stall too short to make the heartbeats late by the failure timeout does not excuse it, and is reported', () => {
    const found = named(history({ stalls: [stall('w1', 14_000, 1_900)] }), 'live-worker-keeps-items');
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toMatch(/stalled 1\.90s of its 3\.00s: heartbeats could be on time/);
    expect(found[0]!.evidence).toContain('14.00s–15.90s w1 stalled 1.90s');
  });

  it("another process's stall, or the worker's own outside the failure timeout, does not excuse it", () => {
    expect(named(history({ stalls: [stall('w2', 13_000, 3_000)] }), 'live-worker-keeps-items')).toHaveLength(1);
    expect(named(history({ stalls: [stall('w1', 9_000, 3_900)] }), 'live-worker-keeps-items')).toHaveLength(1);
  });
});

describe('live-worker-keeps-items and drains', () => {
  // Its notice's fault was over at 8 s (the harness stops waiting for the drain); the drain came at 16 s, on a starved machine.
  const notice = (target: string) => ({ kind: 'notice-duplicated' as const, target, startAt: 5_000, endAt: 8_000, detail: 'spot interruption notice' });

  it('a give-back by a worker that drained on a spot notice sent to it is excused, however late the drain came', () => {
    expect(named(history({ takenWith: 'drained', faults: [notice('w1')] }), 'live-worker-keeps-items')).toEqual([]);
  });

  it("a drain no notice to that worker explains, or a take-back after another worker's notice, is flagged", () => {
    expect(named(history({ takenWith: 'drained' }), 'live-worker-keeps-items')).toHaveLength(1);
    expect(named(history({ takenWith: 'drained', faults: [notice('w2')] }), 'live-worker-keeps-items')).toHaveLength(1);
    expect(named(history({ faults: [notice('w1')] }), 'live-worker-keeps-items')).toHaveLength(1);
  });
});

describe('runs-finish: the bound stretched by the stalls of the window', () => {
  const late = HEALED + 30_720;

  it('a run finishing 0.72 s past the bound with no stall is flagged, with the bound it used', () => {
    const found = named(history({ takenAt: null, doneAt: late }), 'runs-finish');
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toBe('run r1 finished 30.72s after the faults healed (bound 30.00s)');
  });

  it('a stall of a worker of the run longer than the overrun excuses it', () => {
    expect(named(history({ takenAt: null, doneAt: late, stalls: [stall('w2', 20_000, 4_200)] }), 'runs-finish')).toEqual([]);
  });

  it('a shorter stall extends the bound by itself only, and the message reports it', () => {
    const found = named(history({ takenAt: null, doneAt: late, stalls: [stall('node-1', 20_000, 300), stall('node-1', 25_000, 200)] }), 'runs-finish');
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toBe('run r1 finished 30.72s after the faults healed (bound 30.00s + 0.5s stalled by node-1)');
  });

  it('the bound stretches by the most stalled process, not the sum of all', () => {
    const stalls = [stall('node-1', 20_000, 400), stall('w2', 21_000, 400), stall('harness', 22_000, 400)];
    const found = named(history({ takenAt: null, doneAt: late, stalls }), 'runs-finish');
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toMatch(/\(bound 30\.00s \+ 0\.4s stalled by /);
  });

  it('stalls before the heal, or of a process the run does not wait on, do not count', () => {
    const stalls = [stall('w2', 5_000, 4_000), stall('node-9', 20_000, 4_000)];
    expect(named(history({ takenAt: null, doneAt: late, stalls }), 'runs-finish')).toHaveLength(1);
  });
});

describe('leader-after-heal: the bound stretched by the control plane’s stalls', () => {
  // node-1's lease lapses at 12 s; a rollout is running; node-1 takes it again at `back`.
  const leases = (back: number): LeaseChange[] => [
    { seq: 1, at: 0, name: 'promotion_leader', change: 'insert', holder: 'node-1', epoch: 1, expiresAt: 7_000 },
    { seq: 2, at: back, name: 'promotion_leader', change: 'update', holder: 'node-1', epoch: 2, expiresAt: 60_000 },
  ];

  it('no leader within the bound and no stall is flagged with the plain bound', () => {
    const found = named(history({ takenAt: null, rolloutRunning: true, leases: leases(20_000) }), 'leader-after-heal');
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toMatch(/no live leader within 4\.80s \(lease holder/);
  });

  it('a node stalled long enough in that window excuses it; a shorter stall is reported in the bound', () => {
    // Leaderless from 12 s (the lapse plus the clock slack) until 20 s: 8 s against a 4.8 s bound.
    expect(
      named(history({ takenAt: null, rolloutRunning: true, leases: leases(20_000), stalls: [stall('node-1', 12_500, 4_000)] }), 'leader-after-heal'),
    ).toEqual([]);
    const found = named(
      history({ takenAt: null, rolloutRunning: true, leases: leases(20_000), stalls: [stall('node-1', 12_500, 1_000)] }),
      'leader-after-heal',
    );
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toMatch(/no live leader within 4\.80s \+ 1\.0s stalled by node-1 \(lease holder/);
  });
});

describe('stall arithmetic', () => {
  it('clips to the window and merges overlaps of one process', () => {
    const stalls = [stall('a', 0, 1_000), stall('a', 500, 1_000), stall('a', 5_000, 100), stall('b', 0, 3_000)];
    expect(stalledFor(stalls, 'a', 200, 10_000)).toBe(1_400);
    expect(worstStall(stalls, ['a', 'b'], 0, 10_000)).toEqual({ ms: 3_000, process: 'b' });
    expect(worstStall(stalls, ['c'], 0, 10_000)).toEqual({ ms: 0, process: null });
  });
});

describe('a process records its own stalls', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /**
   * A child with the recorder on; it says "ready" once the recorder runs, then either idles or spins
   * `spinMs` and says `spun <from> <to> <cpu>`: the spin's wall-clock span and the CPU time it got,
   * once the recorder has had a tick after it.
   */
  function child(dir: string, spinMs = 0) {
    const recorder = resolve(import.meta.dirname, '../chaos/stalls.ts');
    const code = `import { recordStallsIn } from ${JSON.stringify(recorder)}; recordStallsIn(${JSON.stringify(dir)}, 'probe'); const wall = () => performance.timeOrigin + performance.now(); setTimeout(() => { console.log('ready'); const from = wall(); const cpu = process.cpuUsage(); const until = Date.now() + ${spinMs}; while (Date.now() < until); const used = process.cpuUsage(cpu); const to = wall(); setTimeout(() => console.log('spun', from, to, (used.user + used.system) / 1000), 200); }, 100); setInterval(() => undefined, 1000);`;
    const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const said = (word: string) =>
      new Promise<string>((ok, fail) => {
        const look = () => {
          const line = out.split('\n').find((l) => l.startsWith(word));
          if (line !== undefined) ok(line);
          return line !== undefined;
        };
        if (look()) return;
        proc.stdout.on('data', look);
        proc.once('exit', () => fail(new Error(`the child exited before it said ${word}`)));
      });
    return { proc, said };
  }

  it('a SIGSTOP (what CPU starvation looks like from inside) is recorded as a stall of about its length', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stalls-test-'));
    dirs.push(dir);
    const { proc, said } = child(dir);
    await said('ready');
    proc.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 800));
    proc.kill('SIGCONT');
    // The stall is written when the process runs again: wait for its line.
    for (let i = 0; i < 200 && !readStallDir(dir).some((x) => x.ms >= 700); i++) await new Promise((r) => setTimeout(r, 50));
    proc.kill('SIGKILL');
    const stalls = readStallDir(dir);
    expect(stalls.every((x) => x.process === 'probe' && x.pid === proc.pid)).toBe(true);
    expect(Math.max(...stalls.map((x) => x.ms))).toBeGreaterThanOrEqual(700);
  }, 60_000);

  it('a long synchronous stretch of its own code is not a stall: it had the CPU', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stalls-test-'));
    dirs.push(dir);
    const { proc, said } = child(dir, 1_500);
    const [from, to, cpu] = (await said('spun')).split(' ').slice(1).map(Number) as [number, number, number];
    proc.kill('SIGKILL');
    // What it recorded while it spun: on an idle host nothing; on a loaded one, only the time it waited for a core.
    const stalled = readStallDir(dir).reduce((n, x) => n + Math.max(0, Math.min(to, x.at + x.ms) - Math.max(from, x.at)), 0);
    expect(to - from).toBeGreaterThanOrEqual(1_490);
    expect(stalled).toBeLessThanOrEqual(to - from - cpu + 150);
  }, 60_000);
});
