/**
 * Preloaded (`--import`) into every process the chaos harness starts:
 * - CHAOS_VARIANT: registers the module-load hooks that apply that broken variant's edits;
 * - CHAOS_TARGET_GATE: a directory; the nemesis' gate in front of target writes (target-gate.ts),
 *   put in by the same hooks;
 * - CHAOS_CLOCK_OFFSET_MS: this process's wall clock runs that far off (Date.now and
 *   new Date()); monotonic timers are untouched, as with a real clock offset;
 * - CHAOS_STALL_DIR: this process records its scheduling stalls there (stalls.ts), named CHAOS_PROCESS.
 */
import fs, { readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { register } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { recordStallsIn } from './stalls.js';
import { gateIn, TARGET_GATE_EDITS } from './target-gate.js';
import { variantNamed, type SourceEdit } from './variants.js';

const root = resolve(import.meta.dirname, '../..');
// First, so the stalls of loading the rest (a cold start on a busy host) are on record too.
const stallDir = process.env.CHAOS_STALL_DIR;
if (stallDir) recordStallsIn(stallDir, process.env.CHAOS_PROCESS ?? `pid-${process.pid}`);
const edits: SourceEdit[] = [];
const gate = process.env.CHAOS_TARGET_GATE;
if (gate) {
  (globalThis as { chaosTargetGate?: (target: string, stamp?: unknown) => Promise<void> }).chaosTargetGate = gateIn(gate);
  edits.push(...TARGET_GATE_EDITS);
}
const variant = process.env.CHAOS_VARIANT;
if (variant) {
  const v = variantNamed(variant);
  // Every edit must apply exactly once, or the variant would silently be the product as it is.
  for (const e of v.edits) {
    const n = readFileSync(resolve(root, e.file), 'utf8').split(e.find).length - 1;
    if (e.last ? n < 1 : n !== 1)
      throw new Error(
        `chaos variant ${v.name}: "${e.find.slice(0, 80)}" found ${n} times in ${e.file}${e.last ? '' : ' (once expected; `last` edits the last of several)'}`,
      );
  }
  edits.push(...v.edits);
}
// Modules are edited as they load; data files a module reads (the PostgreSQL migrations and live
// functions, *.sql) are edited as they are read, through node:fs itself.
const moduleEdits = edits.filter((e) => !e.file.endsWith('.sql'));
const dataEdits = edits.filter((e) => e.file.endsWith('.sql'));
if (moduleEdits.length) register(pathToFileURL(resolve(import.meta.dirname, 'variant-hooks.mjs')), { data: { edits: moduleEdits, root } });
if (dataEdits.length) editDataReads(dataEdits);

function editDataReads(list: readonly SourceEdit[]): void {
  const byPath = new Map<string, SourceEdit[]>();
  for (const e of list) byPath.set(resolve(root, e.file), [...(byPath.get(resolve(root, e.file)) ?? []), e]);
  const real = fs.readFileSync;
  const edited = (path: unknown, ...rest: unknown[]): unknown => {
    const text = (real as (...a: unknown[]) => unknown)(path, ...rest);
    const mine = typeof path === 'string' ? byPath.get(resolve(path)) : undefined;
    if (!mine || typeof text !== 'string') return text;
    return mine.reduce((t, e) => {
      const at = t.lastIndexOf(e.find);
      if (at < 0) throw new Error(`chaos variant: "${e.find.slice(0, 80)}" not found in ${e.file}`);
      return t.slice(0, at) + e.replace + t.slice(at + e.find.length);
    }, text);
  };
  fs.readFileSync = edited as typeof fs.readFileSync;
  // ESM's named imports of node:fs follow the patched function only once synced.
  syncBuiltinESMExports();
}

const offset = Number(process.env.CHAOS_CLOCK_OFFSET_MS ?? 0);
if (offset) {
  const RealDate = Date;
  const now = () => RealDate.now() + offset;
  class OffsetDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(now());
      else super(...(args as [string]));
    }
    static override now(): number {
      return now();
    }
  }
  globalThis.Date = OffsetDate as DateConstructor;
}
