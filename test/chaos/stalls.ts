/**
 * Scheduling stalls, as each process of the chaos harness measures them on
 * itself: an interval timer that notes how late it fired. On a busy machine
 * a process starved of CPU cannot heartbeat or renew on time; the checker
 * reads these records to tell that apart from a process that could have and
 * did not (check.ts).
 *
 * A child process started with CHAOS_STALL_DIR (preload.ts) appends its
 * stalls to `<dir>/stalls-<pid>.jsonl`, named by CHAOS_PROCESS, as they end,
 * so a process killed later has already left them. The harness process keeps
 * its own in memory (StallWatch).
 */
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Stall } from './history.js';

/** How often the timer fires: fine enough to see a missed heartbeat (hundreds of ms) as a stall. */
export const STALL_TICK_MS = 50;
/** Lateness below this is ordinary timer jitter, not recorded. */
export const STALL_MIN_MS = 40;

/** A stall on the real wall clock (performance.timeOrigin + performance.now(), which a clock-offset fault does not move). */
export interface StallLine {
  readonly process: string;
  readonly pid: number;
  readonly at: number;
  readonly ms: number;
}

/**
 * Starts the timer; `record` gets each stall as it ends. The timer keeps no
 * process alive. Returns a stop function.
 *
 * A late tick counts only for the part of it the process did not spend on
 * the CPU itself (process.cpuUsage, every thread): a long synchronous stretch
 * of its own code is the process's doing, not a stall, and stays the
 * checker's business.
 */
export function watchStalls(record: (at: number, ms: number) => void): () => void {
  let last = performance.now();
  let cpu = process.cpuUsage();
  const timer = setInterval(() => {
    const t = performance.now();
    const used = process.cpuUsage(cpu);
    cpu = process.cpuUsage();
    const elapsed = t - last;
    const stalled = Math.min(elapsed - STALL_TICK_MS, elapsed - (used.user + used.system) / 1000);
    if (stalled >= STALL_MIN_MS) record(performance.timeOrigin + t - stalled, Math.round(stalled));
    last = t;
  }, STALL_TICK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** In a child process: its stalls, appended to `<dir>/stalls-<pid>.jsonl` as they end. */
export function recordStallsIn(dir: string, name: string): () => void {
  const file = join(dir, `stalls-${process.pid}.jsonl`);
  return watchStalls((at, ms) => {
    const line: StallLine = { process: name, pid: process.pid, at, ms };
    try {
      appendFileSync(file, `${JSON.stringify(line)}\n`);
    } catch {
      // The directory is gone: the harness has finished with this process.
    }
  });
}

/** Every stall the children left in `dir`, on the real wall clock. */
export function readStallDir(dir: string): StallLine[] {
  const out: StallLine[] = [];
  let files: string[];
  try {
    files = readdirSync(dir).filter((n) => n.startsWith('stalls-'));
  } catch {
    return out;
  }
  for (const f of files) {
    let text = '';
    try {
      text = readFileSync(join(dir, f), 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      // A line cut short by a kill mid-write is skipped.
      if (!line.trim()) continue;
      try {
        out.push(JSON.parse(line) as StallLine);
      } catch {
        continue;
      }
    }
  }
  return out;
}

/** Stalls on the schedule's clock (`epochMs`: the wall clock when it read 0), those that ended after it started. */
export function onScheduleClock(lines: readonly StallLine[], epochMs: number): Stall[] {
  return lines
    .filter((x) => x.at + x.ms >= epochMs)
    .map((x) => ({ process: x.process, pid: x.pid, at: Math.round(x.at - epochMs), ms: x.ms }))
    .sort((a, b) => a.at - b.at);
}

/** The harness process's own stalls, kept in memory while it watches. */
export class StallWatch {
  private readonly lines: StallLine[] = [];
  private readonly stop: () => void;

  constructor(readonly process = 'harness') {
    this.stop = watchStalls((at, ms) => this.lines.push({ process: this.process, pid: globalThis.process.pid, at, ms }));
  }

  /** What it recorded so far, and stops if `done`. */
  read(done = false): StallLine[] {
    if (done) this.stop();
    return [...this.lines];
  }

  close(): void {
    this.stop();
  }
}

type Interval = readonly [number, number];

/** The stretches of [from, to] during which `process` was stalled, merged (a replaced process shares its name). */
export function stalledSpans(stalls: readonly Stall[], process: string, from: number, to: number): Interval[] {
  const own = stalls
    .filter((x) => x.process === process && x.at < to && x.at + x.ms > from)
    .map((x) => [Math.max(from, x.at), Math.min(to, x.at + x.ms)] as const)
    .sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [a, b] of own) {
    const last = out.at(-1);
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** How long `process` was stalled within [from, to] (ms). */
export function stalledFor(stalls: readonly Stall[], process: string, from: number, to: number): number {
  return stalledSpans(stalls, process, from, to).reduce((n, [a, b]) => n + (b - a), 0);
}

/** The most any one of `processes` was stalled within [from, to], and which one; 0 and null when none was. */
export function worstStall(stalls: readonly Stall[], processes: Iterable<string>, from: number, to: number): { ms: number; process: string | null } {
  let worst: { ms: number; process: string | null } = { ms: 0, process: null };
  for (const p of new Set(processes)) {
    const ms = stalledFor(stalls, p, from, to);
    if (ms > worst.ms) worst = { ms, process: p };
  }
  return worst;
}
