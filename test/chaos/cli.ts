/**
 * `npm run chaos -- [options]`: the system attacked as a whole. Real
 * processes, faults from a seeded schedule, a recorded history, and a checker
 * (check.ts) that trusts nothing the system says about itself.
 *
 *   --schedules N        schedules per topology (default 3)
 *   --seed S             the seed (default: random, printed); the same seed replays the same plan
 *   --topology T         local | aws | both (default both)
 *   --variant V[,V…]     run deliberately broken variants (variants.ts), or `all`: each variant
 *                        until the checker catches it, at most N schedules each
 *   --faults K           faults per schedule (default 3); the local topology adds one actuation fault
 *   --items N            work items per run (default 150)
 *   --out DIR            where histories, reports and timelines go (default test-results/chaos)
 *   --from I             first schedule index (replay schedule I of a seed alone: --from I --schedules 1)
 *   --kinds K[,K…]       only these fault kinds (local topology; actuation kinds keep their own rotation)
 *
 * Prints a line per schedule, a report per violation, and as its last line one
 * JSON object: schedules, faults by kind, operations, violations by invariant.
 * Exit 1 on a violation (or, with --variant, on a variant not caught).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { check, countByInvariant, report } from './check.js';
import type { ChaosHistory, FaultKind, Violation } from './history.js';
import { startAwsHarness } from './aws/run.js';
import { ChaosCluster } from './local/cluster.js';
import { LOCAL_FAULTS, runLocalSchedule } from './local/schedule.js';
import { renderTimeline } from './timeline.js';
import { VARIANTS, variantNamed } from './variants.js';

const { values } = parseArgs({
  options: {
    schedules: { type: 'string', default: '3' },
    seed: { type: 'string' },
    topology: { type: 'string', default: 'both' },
    variant: { type: 'string' },
    faults: { type: 'string', default: '3' },
    items: { type: 'string', default: '150' },
    out: { type: 'string', default: 'test-results/chaos' },
    from: { type: 'string', default: '0' },
    kinds: { type: 'string' },
  },
});

function positive(name: string, raw: string | undefined, min = 1): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name}: a whole number ≥ ${min}, got "${raw}"`);
    process.exit(2);
  }
  return n;
}

const schedules = positive('schedules', values.schedules);
const faults = positive('faults', values.faults);
const items = positive('items', values.items, 10);
const from = positive('from', values.from, 0);
const seed = values.seed ?? String(Math.floor(Math.random() * 1e9));
const topology = values.topology;
if (!['local', 'aws', 'both'].includes(topology)) {
  console.error(`--topology: local, aws or both, got "${topology}"`);
  process.exit(2);
}
const variants = values.variant === 'all' ? Object.keys(VARIANTS) : values.variant ? values.variant.split(',').map((v) => variantNamed(v.trim()).name) : [null];
const kinds = values.kinds?.split(',').map((k) => k.trim()) as FaultKind[] | undefined;
for (const k of kinds ?? []) {
  if (!LOCAL_FAULTS.includes(k)) {
    console.error(`--kinds: ${k} is not a fault kind of the local topology (${LOCAL_FAULTS.join(', ')})`);
    process.exit(2);
  }
}
const out = resolve(values.out);
mkdirSync(out, { recursive: true });

const log = (line: string) => process.stderr.write(`${line}\n`);
console.log(
  `chaos: seed ${seed}, ${schedules} schedule(s) per topology from #${from}, topology ${topology}${values.variant ? `, variant ${values.variant}` : ''} (replay: npm run chaos -- --seed ${seed} --topology ${topology} --schedules ${schedules}${from ? ` --from ${from}` : ''}${values.variant ? ` --variant ${values.variant}` : ''})`,
);

interface Tally {
  schedules: number;
  ops: number;
  faults: Record<string, number>;
  violations: Record<string, number>;
  seconds: number;
}
const tally: Record<string, Tally> = {};
const caught: Record<string, { caught: boolean; afterSchedules: number | null; invariants: string[] }> = {};
const caughtKey = (top: string, variant: string) => `${top}:${variant}`;

function save(h: ChaosHistory, violations: readonly Violation[], name: string): string {
  writeFileSync(resolve(out, `${name}.json`), JSON.stringify({ history: h, violations }));
  const page = resolve(out, `${name}.html`);
  writeFileSync(page, renderTimeline(h, violations));
  return page;
}

async function runTopology(top: 'local' | 'aws', variant: string | null): Promise<void> {
  const key = `${top}${variant ? `:${variant}` : ''}`;
  const t: Tally = (tally[key] = { schedules: 0, ops: 0, faults: {}, violations: {}, seconds: 0 });
  const began = performance.now();
  let runOne: (i: number) => Promise<ChaosHistory>;
  let stop: () => Promise<void>;
  if (top === 'local') {
    const cluster = new ChaosCluster({ nodes: 3, variant });
    await cluster.start();
    runOne = (i) => runLocalSchedule(cluster, { seed, schedule: i, variant, faultsPerSchedule: faults, items, log, ...(kinds ? { kinds } : {}) });
    stop = () => cluster.stop();
  } else {
    const harness = await startAwsHarness({ variant, log });
    runOne = (i) => harness.runSchedule({ seed, schedule: i, variant, faultsPerSchedule: faults, items });
    stop = () => harness.stop();
  }
  try {
    for (let i = from; i < from + schedules; i++) {
      const s0 = performance.now();
      const h = await runOne(i);
      const violations = check(h);
      t.schedules++;
      t.ops += h.ops.length;
      for (const f of h.faults) t.faults[f.kind] = (t.faults[f.kind] ?? 0) + 1;
      for (const [inv, n] of Object.entries(countByInvariant(violations))) t.violations[inv] = (t.violations[inv] ?? 0) + n;
      const name = `${top}-${seed}-${i}${variant ? `-${variant}` : ''}`;
      const page = violations.length || i === from ? save(h, violations, name) : null;
      console.log(
        `[${key}] schedule ${i}: ${h.faults.map((f) => f.kind).join(', ')} · ops ${h.ops.length} · ${violations.length ? `${violations.length} VIOLATION(S)` : 'ok'} · ${((performance.now() - s0) / 1000).toFixed(1)} s${page ? ` · ${page}` : ''}`,
      );
      for (const v of violations.slice(0, 5)) console.log(report(v));
      if (violations.length > 5) console.log(`    … and ${violations.length - 5} more in ${name}.json`);
      if (variant) {
        const expected = variantNamed(variant).breaks;
        if (violations.some((v) => v.invariant === expected)) {
          caught[caughtKey(top, variant)] = { caught: true, afterSchedules: i - from + 1, invariants: [...new Set(violations.map((v) => v.invariant))] };
          break;
        }
        caught[caughtKey(top, variant)] = { caught: false, afterSchedules: null, invariants: [...new Set(violations.map((v) => v.invariant))] };
      }
    }
  } finally {
    await stop();
    t.seconds = Math.round((performance.now() - began) / 100) / 10;
  }
}

let failed = false;
try {
  for (const variant of variants) {
    for (const top of topology === 'both' ? (['local', 'aws'] as const) : [topology as 'local' | 'aws']) {
      // Variants that break only the local runtime (nginx, the PostgreSQL-only edits) are not run over AWS.
      if (variant && top === 'aws' && !variantNamed(variant).aws) continue;
      await runTopology(top, variant);
    }
  }
} catch (err) {
  console.error(`chaos: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  failed = true;
}
const violations = Object.values(tally).reduce((n, t) => n + Object.values(t.violations).reduce((a, b) => a + b, 0), 0);
if (variants[0] === null) failed ||= violations > 0;
// A variant is caught when any topology it ran on caught it.
else failed ||= variants.some((v) => !Object.entries(caught).some(([k, c]) => k.endsWith(`:${v}`) && c.caught));
console.log(JSON.stringify({ seed, from, topologies: tally, violations, ...(variants[0] === null ? {} : { variants: caught }), ok: !failed }));
process.exit(failed ? 1 : 0);
