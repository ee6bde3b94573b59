/** The cost estimate printed: the table of docs/operating/capacity-and-cost.md#monthly-cost, the JSON line, and the free tiers, assumptions and prices behind them. */
import type { Assumptions } from './assumptions.js';
import { EXAMPLE_GATES, gateRead, gatesCost, readEverySeconds } from './gates.js';
import { PRICE_REGION, PRICES, PRICES_READ_ON, type Price } from './prices.js';
import { fmtInt, type CostEstimate } from './template.js';

export function usd(x: number): string {
  if (x === 0) return '—';
  if (x < 0.005) return '< US$ 0.01';
  return `US$ ${x.toFixed(2)}`;
}

/** The table docs/operating/capacity-and-cost.md#monthly-cost holds: one row a line, its basis in parentheses. */
export function markdownTable(e: CostEstimate): string {
  const head = `| ${e.store === 'aurora' ? 'Aurora store' : 'DynamoDB store'} | idle | ${fmtInt(e.assumptions.eventsPerMonth)} rollout events/month |\n|---|---|---|`;
  const rows = e.lines.map((l) => `| ${l.what} (${l.basis.replace(/\|/g, '/')}) | ${usd(l.idle)} | ${usd(l.busy)} |`);
  return [head, ...rows, `| **total** | **${usd(e.idle)}** | **${usd(e.busy)}** |`].join('\n');
}

/** The JSON line the CLI ends with. */
export function jsonLine(e: CostEstimate): string {
  const r = (x: number) => Math.round(x * 100) / 100;
  return JSON.stringify({
    cost: `monthly, ${PRICE_REGION} list prices read ${PRICES_READ_ON}, no free tier`,
    store: e.store,
    idle_usd_month: r(e.idle),
    busy_usd_month: r(e.busy),
    lines: e.lines.map((l) => ({ what: l.what, idle: r(l.idle), busy: r(l.busy), basis: l.basis })),
  });
}

export function details(estimates: readonly CostEstimate[]): string {
  const freeTiers = new Map(estimates.flatMap((e) => e.lines.flatMap((l) => (l.freeTier ? [[l.what, l.freeTier] as const] : []))));
  const out = [
    '',
    '#### Lines',
    ...[...freeTiers].map(([what, free]) => `- ${what}: free tier (not subtracted): ${free}`),
    '',
    '#### Assumptions (what the template cannot say; see DEFAULT_ASSUMPTIONS in tools/cost/assumptions.ts for why each)',
  ];
  for (const [k, v] of Object.entries(estimates[0]!.assumptions)) out.push(`- ${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`);
  out.push('', `#### Prices (${PRICE_REGION}, read ${PRICES_READ_ON})`);
  const price = (p: Price) => (p.usd < 0.001 ? `US$ ${+(p.usd * 1e6).toPrecision(6)} per million (${p.unit})` : `US$ ${+p.usd.toPrecision(6)} per ${p.unit}`);
  for (const [k, p] of Object.entries(PRICES) as [string, Price][]) out.push(`- ${k}: ${price(p)} — ${p.source}`);
  return out.join('\n');
}

/**
 * The table of what one gate costs (docs/operating/capacity-and-cost.md#monthly-cost) a month on one rollout running all
 * month (`npm run cost -- --gates`): its reads and its own gauges.
 */
export function gateCostTable(a: Assumptions): string {
  const head = '| gate | read every | a reading asks | a month | reads | its gauges | total |\n|---|---|---|---|---|---|---|';
  const plural = (n: number, one: string, many: string) => `${fmtInt(n)} ${n === 1 ? one : many}`;
  const rows = EXAMPLE_GATES.map(({ label, gate }) => {
    const r = gateRead(gate, a.judgedStageSeconds);
    const c = gatesCost([gate], a);
    const asks = [
      r.metrics ? plural(r.metrics, 'metric', 'metrics') : '',
      r.describeAlarms ? 'DescribeAlarms' : '',
      r.promQueries ? `${plural(r.promQueries, 'query', 'queries')}, ${plural(r.promPoints, 'point', 'points')}` : '',
    ].filter(Boolean);
    const month = [
      c.metrics ? `${fmtInt(c.metrics)} metrics` : '',
      c.describeAlarms ? `${fmtInt(c.describeAlarms)} requests` : '',
      c.promQueries ? `${fmtInt(c.promQueries)} queries${r.amp ? `, ${fmtInt(c.ampSamples)} samples processed` : ' (not billed by AWS)'}` : '',
    ].filter(Boolean);
    return `| ${label} | ${readEverySeconds(gate)} s | ${asks.join(', ')} | ${month.join(', ')} | ${usd(c.usd.reads)} | ${c.gaugeMetrics} metrics, ${usd(c.usd.gauges)} | ${usd(c.usd.total)} |`;
  });
  return [head, ...rows].join('\n');
}
