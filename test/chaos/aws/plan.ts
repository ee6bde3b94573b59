/**
 * What one AWS chaos schedule does, decided up front from (seed, schedule)
 * alone: the same pair always gives the same plan — the workload, and every
 * fault with its time, target and parameters. What the system does in answer
 * is not deterministic (processes race); the plan is, so it is printed first.
 */
import { createHash } from 'node:crypto';
import type { FaultKind } from '../history.js';

export interface Rng {
  /** [0, 1) */
  next(): number;
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number;
  pick<T>(xs: readonly T[]): T;
  shuffle<T>(xs: readonly T[]): T[];
}

/** sfc32, seeded from a SHA-256 of the text: small, fast, and the same everywhere. */
export function rng(text: string): Rng {
  const h = createHash('sha256').update(text).digest();
  let a = h.readUInt32LE(0);
  let b = h.readUInt32LE(4);
  let c = h.readUInt32LE(8);
  let d = h.readUInt32LE(12);
  const next = () => {
    a |= 0;
    b |= 0;
    c |= 0;
    d |= 0;
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  const r: Rng = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)]!,
    shuffle: (xs) => {
      const out = [...xs];
      for (let i = out.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [out[i], out[j]] = [out[j]!, out[i]!];
      }
      return out;
    },
  };
  return r;
}

/** The fault kinds this topology injects. */
export const AWS_FAULTS = [
  'invoke-duplicated',
  'invoke-killed',
  'store-throttle',
  'store-conflict',
  'store-delay',
  'queue-redeliver',
  'notice-duplicated',
  'notice-late',
  'kill-worker',
] as const satisfies readonly FaultKind[];
export type AwsFault = (typeof AWS_FAULTS)[number];

export interface Shape {
  /** How long faults are injected while the workload runs. */
  readonly faultsMs: number;
  readonly rollouts: number;
  readonly runs: readonly { readonly items: number; readonly workers: number }[];
  /** Mock backend time per item. */
  readonly itemMs: number;
  /** Share of items whose backend always fails (chosen by payload hash). */
  readonly poisonRate: number;
  /** Faults to inject (default: all of AWS_FAULTS). */
  readonly faults?: readonly AwsFault[];
  /**
   * How many faults a schedule injects. Unset: every kind once, in a seeded order, and more
   * while the phase has room. Set: that many, round-robin over one seeded order of the kinds
   * across schedules (as the local topology does), so a few short schedules cover every kind.
   */
  readonly faultCount?: number;
}

export const DEFAULT_SHAPE: Shape = { faultsMs: 24_000, rollouts: 4, runs: [{ items: 150, workers: 3 }], itemMs: 100, poisonRate: 0.03 };

export interface FaultStep {
  readonly at: number;
  readonly kind: AwsFault;
  /** A stack (`stack-a`), a function (`stack-a/coordinator`), a worker slot (`run-0/worker-1`), or `work-queue`. */
  readonly target: string;
  /** How long a window lasts (throttling, conflicts, a delay, duplicated invocations), or when a killed worker comes back. */
  readonly durationMs: number;
  /** The step's parameters, human-readable. */
  readonly detail: string;
  readonly params: Readonly<Record<string, number | string>>;
}

export interface RolloutPlan {
  readonly key: string;
  /** When it is created through the API, in the faults phase. */
  readonly createAt: number;
  readonly stages: readonly string[];
  /** From this time in the faults phase on, its readings breach the gates (a rollback); null: healthy throughout. */
  readonly breachAfterMs: number | null;
  /** What the checker may expect of it: `promote` (healthy, never paused or aborted), `rollback`, `any`. */
  readonly expect: 'promote' | 'rollback' | 'any';
  /** Manual commands through the API, at times in the faults phase. */
  readonly commands: readonly { readonly at: number; readonly command: 'pause' | 'resume' | 'abort' | 'promote' }[];
}

export interface RunPlan {
  readonly key: string;
  readonly items: number;
  readonly workers: number;
  /** Items whose backend always fails. */
  readonly poison: readonly number[];
}

export interface Plan {
  readonly seed: string;
  readonly schedule: number;
  readonly shape: Shape;
  readonly rollouts: readonly RolloutPlan[];
  readonly runs: readonly RunPlan[];
  readonly faults: readonly FaultStep[];
  /** Salt in every work item's payload, so which items are poison follows the seed. */
  readonly salt: string;
}

const STAGES = ['canary', 'half', 'all'];
export const FUNCTIONS_UNDER_FIRE = [
  'stack-a/streamingPromoter',
  'stack-a/batchPromoter',
  'stack-a/coordinator',
  'stack-b/batchPromoter',
  'stack-b/coordinator',
] as const;

export function makePlan(seed: string, schedule: number, shape: Shape, leaseTtlMs: number): Plan {
  const r = rng(`aws-chaos:${seed}:${schedule}`);
  const tag = createHash('sha256').update(`${seed}:${schedule}`).digest('hex').slice(0, 6);
  const F = shape.faultsMs;

  const rollouts: RolloutPlan[] = Array.from({ length: shape.rollouts }, (_, i) => {
    // Created one after another over the first two thirds of the phase, so rollouts are in flight while each fault hits.
    const createAt = Math.round((i / Math.max(1, shape.rollouts)) * F * 0.66);
    // The first rollout breaches, the second stays healthy, the rest as the seed says. A breach comes a few seconds
    // in, while a stage bakes: a promoter acting on the healthy reading before it meets one acting on the breach.
    const breachAfterMs = i === 0 || (i > 1 && r.next() < 0.5) ? createAt + r.int(1_500, 5_000) : null;
    const commands: RolloutPlan['commands'][number][] = [];
    const roll = r.next();
    if (roll < 0.35) {
      const at = createAt + r.int(500, 3_000);
      commands.push({ at, command: 'pause' }, { at: at + r.int(1_000, 4_000), command: 'resume' });
    } else if (roll < 0.5) commands.push({ at: createAt + r.int(1_000, 5_000), command: 'abort' });
    else if (roll < 0.7) commands.push({ at: createAt + r.int(500, 4_000), command: 'promote' });
    if (i === 1) commands.splice(0);
    const expect = commands.some((c) => c.command !== 'promote') ? 'any' : breachAfterMs !== null ? 'rollback' : 'promote';
    return { key: `ro-${tag}-${i}`, createAt, stages: STAGES, breachAfterMs, expect, commands };
  });
  const runs: RunPlan[] = shape.runs.map((run, i) => ({
    key: `run-${tag}-${i}`,
    items: run.items,
    workers: run.workers,
    poison: Array.from({ length: run.items }, (_, n) => n).filter(() => r.next() < shape.poisonRate),
  }));

  const kinds = shape.faults ?? AWS_FAULTS;
  let order: AwsFault[];
  if (shape.faultCount !== undefined) {
    const rotation = rng(`aws-chaos-kinds:${seed}`).shuffle(kinds);
    order = Array.from({ length: shape.faultCount }, (_, i) => rotation[(schedule * shape.faultCount! + i) % rotation.length]!);
  } else {
    // Every kind at least once, in a seeded order, then more draws while the phase has room.
    const count = Math.max(kinds.length, Math.floor(F / 2_000));
    order = [...r.shuffle(kinds), ...Array.from({ length: count - kinds.length }, () => r.pick(kinds))];
  }
  const slot = (F - 1_500) / order.length;
  const faults = order.map((kind, i) => step(r, kind, Math.round(500 + i * slot + r.next() * slot * 0.5), runs, leaseTtlMs, F)).sort((a, b) => a.at - b.at);
  return { seed, schedule, shape, rollouts, runs, faults, salt: tag };
}

function step(r: Rng, kind: AwsFault, at: number, runs: readonly RunPlan[], ttl: number, phaseMs: number): FaultStep {
  const run = r.int(0, runs.length - 1);
  const worker = `${runs[run]!.key}/w${r.int(0, runs[run]!.workers - 1)}`;
  switch (kind) {
    case 'invoke-duplicated': {
      const d = r.int(2_000, 5_000);
      return { at, kind, target: 'stack-a', durationMs: d, detail: `every invocation of stack-a runs twice at once for ${d} ms`, params: {} };
    }
    case 'invoke-killed': {
      const target = r.pick(FUNCTIONS_UNDER_FIRE);
      const mode = r.pick(['mid-write-commit', 'mid-write-drop', 'timeout'] as const);
      const afterMs = r.int(20, 400);
      return {
        at,
        kind,
        target,
        durationMs: 0,
        detail:
          mode === 'timeout'
            ? `next invocation times out after ${afterMs} ms`
            : `sandbox killed at its next write; the write ${mode === 'mid-write-commit' ? 'commits' : 'is lost'}`,
        params: { mode, afterMs },
      };
    }
    case 'store-throttle': {
      const d = r.int(1_500, 4_000);
      const p = Math.round((0.08 + r.next() * 0.17) * 100) / 100;
      return { at, kind, target: 'store', durationMs: d, detail: `${Math.round(p * 100)}% of requests throttled for ${d} ms`, params: { p } };
    }
    case 'store-conflict': {
      const d = r.int(1_500, 4_000);
      const p = Math.round((0.2 + r.next() * 0.3) * 100) / 100;
      return {
        at,
        kind,
        target: 'store',
        durationMs: d,
        detail: `${Math.round(p * 100)}% of transactions cancelled (TransactionConflict) for ${d} ms`,
        params: { p },
      };
    }
    case 'store-delay': {
      // Leadership moved away and back under a late write: the leading stack's next fenced write is held, the
      // stack is cut off past the lease TTL (the other takes the lease), then the other is (the first takes it
      // back, a higher epoch under the same holder); the held write arrives after both cuts, or with the first.
      // Past the TTL, the skew margin and a schedule period or two: the other stack's next tick finds the lease expired.
      const d = ttl + r.int(3_000, 5_000);
      // Mostly after both cuts: only then does the write meet its own holder again, at a higher epoch.
      const straggler = r.next() < 0.75 ? 'after-both' : 'with-first';
      return {
        // Early enough for both cuts to end inside the faults phase (the heal would cut the second short),
        // late enough for a leader to exist.
        at: Math.max(2_000, Math.min(at, phaseMs - 2 * d - 1_000)),
        kind,
        target: 'leader→store',
        durationMs: d,
        detail: `the leading stack's next fenced write held; that stack cut off ${d} ms (longer than the lease TTL), then the other; the write delivered ${straggler === 'after-both' ? 'after both cuts' : 'with the first cut'}`,
        params: { stack: r.pick(['stack-a', 'stack-b']), straggler },
      };
    }
    case 'queue-redeliver': {
      const n = r.int(3, 8);
      const vis = r.int(1, 2);
      return {
        at,
        kind,
        target: `${runs[run]!.key}/queue`,
        durationMs: vis * 1000,
        detail: `a consumer receives ${n} messages and never deletes them (visibility ${vis} s)`,
        params: { n, vis, run },
      };
    }
    case 'notice-duplicated': {
      const copies = r.int(2, 3);
      return {
        at,
        kind,
        target: worker,
        durationMs: 0,
        detail: `spot interruption notice for the worker's instance, ${copies} copies at once`,
        params: { copies, run },
      };
    }
    case 'notice-late': {
      const ageS = r.int(90, 300);
      return {
        at,
        kind,
        target: worker,
        durationMs: 0,
        detail: `spot notice for an instance whose worker has left, or else one stamped ${ageS} s ago`,
        params: { ageS, run },
      };
    }
    case 'kill-worker': {
      const d = r.int(800, 2_500);
      return { at, kind, target: worker, durationMs: d, detail: `SIGKILL; a new worker process on the same instance after ${d} ms`, params: { run } };
    }
  }
}

export function describePlan(p: Plan): string {
  const lines = [`aws chaos plan seed=${p.seed} schedule=${p.schedule} (salt ${p.salt}), faults for ${p.shape.faultsMs} ms`];
  for (const ro of p.rollouts)
    lines.push(
      `  rollout ${ro.key} @${ro.createAt}: ${ro.breachAfterMs === null ? 'healthy' : `breaching from @${ro.breachAfterMs}`}${ro.commands.map((c) => `, ${c.command} @${c.at}`).join('')} (expect ${ro.expect})`,
    );
  for (const run of p.runs)
    lines.push(`  run ${run.key}: ${run.items} items (poison: ${run.poison.join(', ') || 'none'}), ${run.workers} workers, item ${p.shape.itemMs} ms`);
  for (const f of p.faults) lines.push(`  @${String(f.at).padStart(6)} ${f.kind.padEnd(18)} ${f.target.padEnd(28)} ${f.detail}`);
  return lines.join('\n');
}
