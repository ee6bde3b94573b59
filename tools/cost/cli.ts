/**
 * npm run cost [-- --store dynamodb|aurora|both] [--dashboard] [--events N] [--spec FILE] [--markdown] [--gates]
 *
 * The stack's monthly cost (estimate.ts), from its template synthesized
 * in-process. Both stores by default, the DynamoDB one first. `--spec` prices
 * a rollout spec's gates (its costliest stage's) for each running rollout in
 * place of the default one threshold gate; `--gates` prints what one gate of
 * each kind costs a month (docs/operating/capacity-and-cost.md#monthly-cost) and nothing else.
 */
import { App } from 'aws-cdk-lib';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isEntryPoint } from '../../infra/entry.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import { DEFAULT_ASSUMPTIONS, type Assumptions } from './assumptions.js';
import { costliestStageGates, gatesCost } from './gates.js';
import { estimateCost } from './estimate.js';
import { PRICE_REGION, PRICES_READ_ON } from './prices.js';
import { details, gateCostTable, jsonLine, markdownTable } from './report.js';
import type { CfnTemplate, CostEstimate } from './template.js';

export interface CliOptions {
  /** Both by default. */
  readonly store: 'dynamodb' | 'aurora' | 'both';
  readonly dashboard: boolean;
  readonly events: number;
  readonly markdown: boolean;
  /** A rollout spec (JSON) whose gates each running rollout reads. */
  readonly spec: string | null;
  readonly gates: boolean;
}

export function parseArgs(argv: readonly string[]): CliOptions {
  let store: CliOptions['store'] = 'both';
  let dashboard = false;
  let markdown = false;
  let events = DEFAULT_ASSUMPTIONS.eventsPerMonth;
  let spec: string | null = null;
  let gates = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`invalid arguments: ${flag}: needs a value`);
      return v;
    };
    if (flag === '--store') {
      const v = value();
      if (v !== 'dynamodb' && v !== 'aurora' && v !== 'both') throw new Error(`invalid arguments: --store: dynamodb, aurora or both, got ${v}`);
      store = v;
    } else if (flag === '--events') {
      const v = value().replace(/[,_]/g, '');
      if (!/^\d+$/.test(v)) throw new Error(`invalid arguments: --events: a whole number of rollout events a month, got ${v}`);
      events = Number(v);
    } else if (flag === '--spec') spec = value();
    else if (flag === '--dashboard') dashboard = true;
    else if (flag === '--markdown') markdown = true;
    else if (flag === '--gates') gates = true;
    else throw new Error(`invalid arguments: unknown option ${arg} (--store dynamodb|aurora|both, --dashboard, --events N, --spec FILE, --markdown, --gates)`);
  }
  return { store, dashboard, events, markdown, spec, gates };
}

/** The assumptions with a spec's gates (its costliest stage's) in place of the default gate; the spec refused naming its field. */
export function assumptionsFor(specJson: unknown, base: Assumptions = DEFAULT_ASSUMPTIONS): Assumptions {
  let spec;
  try {
    spec = parseRolloutSpec(specJson);
  } catch (err) {
    throw new Error(`invalid arguments: --spec: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  return { ...base, gates: costliestStageGates(spec, (gates) => gatesCost(gates, base).usd.total) };
}

/** The template `cdk deploy` would upload, synthesized in-process without bundling (as test/integration/aws-endpoints.test.ts does). */
export async function synthesizeTemplate(o: { readonly store: 'dynamodb' | 'aurora'; readonly dashboard: boolean }): Promise<CfnTemplate> {
  // Imported here: the stack pulls in all of aws-cdk-lib, which estimateCost itself does not need.
  const { ControlPlaneStack } = await import('../../infra/stack.js');
  const outdir = mkdtempSync(join(tmpdir(), 'rollout-cost-'));
  try {
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new ControlPlaneStack(app, 'RolloutControlPlane', { store: o.store, dashboard: o.dashboard });
    return JSON.parse(readFileSync(join(app.synth().directory, stack.templateFile), 'utf8')) as CfnTemplate;
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const o = parseArgs(argv);
  if (o.gates) {
    console.log(gateCostTable(DEFAULT_ASSUMPTIONS));
    return;
  }
  let assumptions: Assumptions = { ...DEFAULT_ASSUMPTIONS, eventsPerMonth: o.events };
  if (o.spec !== null) {
    let text: string;
    try {
      text = readFileSync(o.spec, 'utf8');
    } catch (err) {
      throw new Error(`invalid arguments: --spec: cannot read ${o.spec}: ${(err as Error).message}`, { cause: err });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new Error(`invalid arguments: --spec: ${o.spec} is not JSON`);
    }
    assumptions = assumptionsFor(json, assumptions);
  }
  const stores = o.store === 'both' ? (['dynamodb', 'aurora'] as const) : [o.store];
  const estimates: CostEstimate[] = [];
  for (const store of stores) estimates.push(estimateCost(await synthesizeTemplate({ store, dashboard: o.dashboard }), assumptions));
  console.log(`### Monthly cost (${PRICE_REGION} list prices read ${PRICES_READ_ON}, arm64, no free tier; \`npm run cost\` recomputes it from the template)`);
  for (const estimate of estimates) {
    console.log(`\n${markdownTable(estimate)}`);
    if (estimate.unpriced.length) console.log(`\nNot priced (add them to tools/cost/estimate.ts): ${estimate.unpriced.join(', ')}`);
  }
  // The lines' free tiers, the assumptions and the prices are the same for both stores: printed once.
  if (!o.markdown) console.log(details(estimates));
  console.log('');
  for (const estimate of estimates) console.log(jsonLine(estimate));
}

if (isEntryPoint(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(err instanceof Error && err.message.startsWith('invalid arguments') ? 2 : 1);
  });
}
