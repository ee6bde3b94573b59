import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';

/**
 * A benchmark's figures as data for the docs: a bench prints its figures as
 * one JSON object on its last JSON line; `npm run bench -- NAME …` keeps the
 * one of a run that succeeded, with the arguments, the commit and the machine
 * it ran on, in docs/data/bench/NAME.json, which the benchmarks page is
 * generated from (tools/docs/reference/benchmarks.ts). Figures are never
 * typed into prose.
 */
export interface BenchRecord {
  readonly bench: string;
  readonly args: readonly string[];
  readonly commit: string;
  /** Uncommitted changes in the tree when it ran. */
  readonly dirty: boolean;
  readonly date: string;
  readonly machine: { readonly cpus: number; readonly model: string; readonly memoryGiB: number; readonly node: string; readonly platform: string };
  readonly figures: Record<string, unknown>;
}

/** The last line of `output` that is a JSON object, or null. */
export function lastFigures(output: string): Record<string, unknown> | null {
  for (const line of output.trim().split('\n').reverse()) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const v = JSON.parse(t) as unknown;
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // Not JSON: a log line that starts with a brace.
    }
  }
  return null;
}

export function benchRecord(root: string, bench: string, args: readonly string[], figures: Record<string, unknown>): BenchRecord {
  const git = (...a: string[]) => spawnSync('git', a, { cwd: root, encoding: 'utf8' }).stdout.trim();
  return {
    bench,
    args,
    commit: git('rev-parse', 'HEAD'),
    dirty: git('status', '--porcelain', '--untracked-files=no') !== '',
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      model: cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
    },
    figures,
  };
}

/** Runs the bench with its output shown as it comes, and writes docs/data/bench/NAME.json when it succeeds with figures. */
export function runBench(root: string, bench: string, file: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], { stdio: ['inherit', 'pipe', 'inherit'], env, cwd: root });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      out += chunk.toString('utf8');
      // Only the tail can hold the last line; a long bench's progress is not kept.
      if (out.length > 1_000_000) out = out.slice(-500_000);
    });
    child.on('error', (err) => {
      console.error(`[harness] ${bench}: ${err.message}`);
      done(1);
    });
    child.on('close', (code, signal) => {
      const status = code ?? (signal ? 1 : 0);
      const figures = status === 0 ? lastFigures(out) : null;
      if (figures) {
        const dir = join(root, 'docs/data/bench');
        mkdirSync(dir, { recursive: true });
        const path = join(dir, `${bench}.json`);
        writeFileSync(path, `${JSON.stringify(benchRecord(root, bench, args, figures), null, 2)}\n`);
        console.log(`[harness] figures of ${bench} written to docs/data/bench/${bench}.json (npm run docs:reference renders them)`);
      } else if (status === 0) console.log(`[harness] ${bench} printed no JSON figures; docs/data/bench left as it was`);
      done(status);
    });
  });
}
