/**
 * A fault point in front of every nginx target write, for the nemesis: the
 * harness's load hook (variant-hooks.mjs, as for the broken variants) puts a
 * call to `chaosTargetGate(target)` at the start of NginxActuator.write, in
 * the processes it starts, and preload.ts installs the gate when
 * CHAOS_TARGET_GATE names a directory. With no control file there the gate
 * returns at once: the code runs as shipped.
 *
 * The control file (`<dir>/control`, JSON) says one of:
 * - `{ "delayMs": N }`: every write waits N ms before it starts (before the
 *   actuator re-reads the target's stamp);
 * - `{ "hold": { "pid": P, "target": T } }`: process P's write to T waits,
 *   its marker `<dir>/held-<P>` naming the target, until the control file
 *   says otherwise (at most HOLD_MAX_MS).
 *
 * The gate sits before the re-read on purpose: it delays a write as a whole,
 * which is what the re-read is there to catch. As a write leaves the gate it
 * is logged (`<dir>/checks-<pid>.jsonl`: real wall-clock ms, target, stamp),
 * so the checker knows when its re-read began.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { appendFile, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TargetStamp } from './history.js';
import type { SourceEdit } from './variants.js';

/** The edit that puts the gate in: applied to every process the harness starts with CHAOS_TARGET_GATE set. */
export const TARGET_GATE_EDITS: readonly SourceEdit[] = [
  {
    file: 'shared/adapters/actuators/nginx/actuator.ts',
    find: '  async write(desired: Desired, stamp: Stamp, _observed?: Observed): Promise<Observed> {\n    const before = await this.current();',
    replace:
      '  async write(desired: Desired, stamp: Stamp, _observed?: Observed): Promise<Observed> {\n    await (globalThis as { chaosTargetGate?: (target: string, stamp: Stamp) => Promise<void> }).chaosTargetGate?.(this.target, stamp);\n    const before = await this.current();',
  },
];

/** A held write is let go after this long whatever the control file says, so a harness that died cannot wedge a node. */
const HOLD_MAX_MS = 30_000;

type Control = { delayMs?: number; hold?: { pid: number; target: string } };

/** A write leaving the gate: its stamp re-read comes next. `at` is real wall-clock ms (not the process's Date, which a clock-offset fault moves). */
export interface GateCheck {
  readonly at: number;
  readonly pid: number;
  readonly target: string;
  readonly stamp: TargetStamp;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function control(dir: string): Promise<Control | null> {
  try {
    return JSON.parse(await readFile(join(dir, 'control'), 'utf8')) as Control;
  } catch {
    return null;
  }
}

/** The gate itself, as preload.ts installs it in a node. With CHAOS_LOG_DIR set, each write is traced on stderr as it starts. */
export function gateIn(dir: string): (target: string, stamp?: unknown) => Promise<void> {
  const trace = Boolean(process.env.CHAOS_LOG_DIR);
  const checked = async (target: string, stamp: unknown) => {
    const s = stamp as TargetStamp;
    const line: GateCheck = {
      at: performance.timeOrigin + performance.now(),
      pid: process.pid,
      target,
      stamp: { rolloutId: s.rolloutId, attempt: s.attempt, stage: s.stage, epoch: s.epoch, percent: s.percent, final: s.final },
    };
    await appendFile(join(dir, `checks-${process.pid}.jsonl`), `${JSON.stringify(line)}\n`);
  };
  return async (target, stamp) => {
    if (trace) process.stderr.write(`${JSON.stringify({ chaos: 'target-write', at: new Date().toISOString(), pid: process.pid, target, stamp })}\n`);
    const c = await control(dir);
    if (c?.delayMs) await sleep(c.delayMs);
    const holds = (x: Control | null) => x?.hold?.pid === process.pid && x.hold.target === target;
    if (holds(c)) {
      const marker = join(dir, `held-${process.pid}`);
      await writeFile(marker, target);
      const until = performance.now() + HOLD_MAX_MS;
      while (performance.now() < until && holds(await control(dir))) await sleep(20);
      await rm(marker, { force: true });
    }
    await checked(target, stamp);
  };
}

/** The nemesis' side. */
export class TargetGate {
  constructor(readonly dir: string) {}

  private set(c: Control | null): void {
    if (c === null) rmSync(join(this.dir, 'control'), { force: true });
    else writeFileSync(join(this.dir, 'control'), JSON.stringify(c));
  }

  delay(ms: number): void {
    this.set({ delayMs: ms });
  }

  hold(pid: number, target: string): void {
    this.set({ hold: { pid, target } });
  }

  /** Let every held write go and delay nothing. */
  clear(): void {
    this.set(null);
  }

  /** Every write that left the gate since the last `clearChecks`. */
  checks(): GateCheck[] {
    const out: GateCheck[] = [];
    for (const f of readdirSync(this.dir).filter((n) => n.startsWith('checks-'))) {
      for (const line of readFileSync(join(this.dir, f), 'utf8').split('\n')) if (line.trim()) out.push(JSON.parse(line) as GateCheck);
    }
    return out.sort((a, b) => a.at - b.at);
  }

  clearChecks(): void {
    for (const f of readdirSync(this.dir).filter((n) => n.startsWith('checks-'))) rmSync(join(this.dir, f), { force: true });
  }

  /** Whether process `pid` is waiting in the gate now. */
  held(pid: number): boolean {
    try {
      readFileSync(join(this.dir, `held-${pid}`));
      return true;
    } catch {
      return false;
    }
  }
}
