/**
 * Explores the lease, ledger, promotion, held-view, judged-gate, stretch and alias models exhaustively within a
 * scope, correct and broken, and reports what it found.
 *
 *   node --import tsx test/explore/cli.ts [--scope default|large] [--variant correct|all|NAME]
 *
 * --variant correct runs every model as the product is; a variant NAME
 * runs that variant on every model that can express it; all (the default)
 * runs both. One line per run with its counts, a shortest trace for every
 * violation, and as the last line a JSON summary. Exit 1 when a correct
 * model has a violation or a variant was not caught; 2 on bad arguments.
 */
import { VARIANTS } from './store.js';
import { MODELS, SCOPES, VARIANT_DEPTH, VARIANT_RUNS, runCorrect, runVariant, type RunResult, type ScopeName } from './suite.js';

function usage(why: string): never {
  console.error(
    `${why}\nusage: cli.ts [--scope ${Object.keys(SCOPES).join('|')}] [--variant correct|all|${VARIANTS.filter((v) => v !== 'correct').join('|')}]`,
  );
  process.exit(2);
}

function parseArgs(argv: readonly string[]): { scope: ScopeName; variant: string } {
  let scope: string = 'default';
  let variant = 'all';
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    if (flag === '--scope') scope = value();
    else if (flag === '--variant') variant = value();
    else usage(`unknown argument: ${argv[i]}`);
  }
  if (!(scope in SCOPES)) usage(`unknown scope: ${scope}`);
  if (variant !== 'all' && !(VARIANTS as readonly string[]).includes(variant)) usage(`unknown variant: ${variant}`);
  return { scope: scope as ScopeName, variant };
}

const n = (x: number) => x.toLocaleString('en-US');

function line(name: string, r: RunResult): string {
  const depth = r.exhaustive ? `${r.depth} (whole space)` : r.stopped ? `${r.depth} (stopped: caught)` : `${r.depth} (bound)`;
  const counts = `states ${n(r.states)}, explored ${n(r.explored)}, transitions ${n(r.transitions)}, depth ${depth}, ${(r.ms / 1000).toFixed(1)} s`;
  if (r.variant === 'correct') return `${name.padEnd(10)} ${'correct'.padEnd(24)} ${r.ok ? 'ok' : 'VIOLATED'}: ${r.violations.length} violations; ${counts}`;
  const caught = r.expected.map((inv) => {
    const v = r.violations.find((x) => x.invariant === inv);
    return v ? `${inv} in ${v.trace.length} steps` : `${inv} NOT CAUGHT`;
  });
  return `${name.padEnd(10)} ${r.variant.padEnd(24)} ${r.ok ? 'caught' : 'MISSED'}: ${caught.join(', ')}; ${counts}`;
}

function traces(r: RunResult): string[] {
  return r.violations.map((v) =>
    [
      `  ${r.variant === 'correct' ? 'VIOLATION' : 'counterexample'} of ${v.invariant}: ${v.message}`,
      ...v.trace.map((t, i) => `    ${String(i + 1).padStart(2)}. ${t}`),
    ].join('\n'),
  );
}

const { scope, variant } = parseArgs(process.argv.slice(2));
const s = SCOPES[scope];
console.log(
  `scope ${scope}: lease ${s.lease.nodes} nodes, depth ${s.lease.maxDepth}; ledger ${s.ledger.coordinators} coordinators, ${s.ledger.workers} workers, ` +
    `${s.ledger.items} items, depth ${s.ledger.maxDepth}; promotion ${s.promotion.promoters.join('+')} promoters, depth ${s.promotion.maxDepth}; ` +
    `held ${s.held.promoters.join('+')} promoters, ${s.held.budget.readings} readings, depth ${s.held.maxDepth}; ` +
    `judged ${s.judged.promoters.join('+')} promoters, ${s.judged.budget.readings} gate readings, depth ${s.judged.maxDepth}; stretch ${s.stretch.promoters.join('+')} promoters, ${s.stretch.budget.readings} gate readings, depth ${s.stretch.maxDepth}; alias ${s.alias.leaders} leaders, depth ${s.alias.maxDepth}; ` +
    `variants within depth ${VARIANT_DEPTH}`,
);

const results: { name: string; r: RunResult }[] = [];
const report = (name: string, r: RunResult) => {
  results.push({ name, r });
  console.log(line(name, r));
  for (const t of traces(r)) console.log(t);
};
if (variant === 'all' || variant === 'correct') for (const name of MODELS) report(name, runCorrect(scope, name));
for (const run of VARIANT_RUNS) if (variant === 'all' || variant === run.variant) report(run.model, runVariant(scope, run));

const failed = results.filter(({ r }) => !r.ok);
console.log(
  JSON.stringify({
    scope,
    ok: failed.length === 0,
    models: results.map(({ name, r }) => ({
      name,
      variant: r.variant,
      states: r.states,
      explored: r.explored,
      transitions: r.transitions,
      depth: r.depth,
      exhaustive: r.exhaustive,
      violations: r.violations.length,
      ...(r.variant === 'correct' ? {} : { caught: r.violations.map((v) => ({ invariant: v.invariant, steps: v.trace.length })), expected: r.expected }),
      ms: r.ms,
    })),
  }),
);
process.exitCode = failed.length ? 1 : 0;
