/**
 * Preloaded (`--import`) into every process the chaos harness starts:
 * - CHAOS_VARIANT: registers the module-load hooks that apply that broken variant's edits;
 * - CHAOS_CLOCK_OFFSET_MS: this process's wall clock runs that far off (Date.now and
 *   new Date()); monotonic timers are untouched, as with a real clock offset.
 */
import { readFileSync } from 'node:fs';
import { register } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { variantNamed } from './variants.js';

const variant = process.env.CHAOS_VARIANT;
if (variant) {
  const v = variantNamed(variant);
  // Every edit must apply exactly once, or the variant would silently be the product as it is.
  const root = resolve(import.meta.dirname, '../..');
  for (const e of v.edits) {
    const n = readFileSync(resolve(root, e.file), 'utf8').split(e.find).length - 1;
    if (e.last ? n < 1 : n !== 1) throw new Error(`chaos variant ${v.name}: "${e.find.slice(0, 80)}" found ${n} times in ${e.file}${e.last ? '' : ' (once expected; `last` edits the last of several)'}`);
  }
  register(pathToFileURL(resolve(import.meta.dirname, 'variant-hooks.mjs')), { data: { edits: v.edits, root: resolve(import.meta.dirname, '../..') } });
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
