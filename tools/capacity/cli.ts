/**
 * npm run capacity -- --items N --rate R [--workers N] [--item-kb 1] [--item-seconds S]
 *                     [--heartbeat-seconds H] [--share 0.5] [--json]
 *
 * The capacity plan of a work run (plan.ts): per path, the shards, the
 * table-level totals against the quotas, SQS, Lambda, workers, cost and the
 * limits. Plain text, then one JSON object on the last line (`--json`: only
 * that line).
 */
import { isEntryPoint } from '../../infra/entry.js';
import { parseArgs } from 'node:util';
import { planCapacity } from './plan.js';
import { formatPlan, planJson } from './plan-report.js';
import { PLAN_DEFAULTS, type PlanInput } from './plan-types.js';

export function parsePlanArgs(argv: readonly string[]): { input: PlanInput; json: boolean } {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      items: { type: 'string' },
      rate: { type: 'string' },
      workers: { type: 'string' },
      'item-kb': { type: 'string' },
      'item-seconds': { type: 'string' },
      'heartbeat-seconds': { type: 'string' },
      share: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const num = (flag: string, v: string | undefined, fallback?: number): number => {
    if (v === undefined) {
      if (fallback === undefined) throw new Error(`invalid arguments: --${flag} is required`);
      return fallback;
    }
    const n = Number(v.replace(/[,_]/g, ''));
    if (!Number.isFinite(n) || n < 0) throw new Error(`invalid arguments: --${flag}: a non-negative number, got ${v}`);
    return n;
  };
  const input: PlanInput = {
    items: num('items', values.items),
    rate: num('rate', values.rate),
    ...(values.workers !== undefined ? { workers: num('workers', values.workers) } : {}),
    itemKb: num('item-kb', values['item-kb'], PLAN_DEFAULTS.itemKb),
    itemSeconds: num('item-seconds', values['item-seconds'], PLAN_DEFAULTS.itemSeconds),
    heartbeatSeconds: num('heartbeat-seconds', values['heartbeat-seconds'], PLAN_DEFAULTS.heartbeatSeconds),
    share: num('share', values.share, PLAN_DEFAULTS.share),
  };
  return { input, json: values.json };
}

function main(argv: readonly string[]): void {
  const { input, json } = parsePlanArgs(argv);
  const plan = planCapacity(input);
  if (!json) console.log(formatPlan(plan));
  console.log(JSON.stringify(planJson(plan)));
}

if (isEntryPoint(import.meta.url)) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    const usage =
      err instanceof Error && (/invalid (arguments|plan input)/.test(err.message) || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true);
    process.exit(usage ? 2 : 1);
  }
}
