/** The cost estimate printed: README's table, the JSON line, and the free tiers, assumptions and prices behind them. */
import { PRICE_REGION, PRICES, PRICES_READ_ON, type Price } from './prices.js';
import { fmtInt, type CostEstimate } from './template.js';

export function usd(x: number): string {
  if (x === 0) return '—';
  if (x < 0.005) return '< US$ 0.01';
  return `US$ ${x.toFixed(2)}`;
}

/** The table README's "Monthly cost" section holds: one row a line, its basis in parentheses. */
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
  for (const [k, v] of Object.entries(estimates[0]!.assumptions)) out.push(`- ${k}: ${v}`);
  out.push('', `#### Prices (${PRICE_REGION}, read ${PRICES_READ_ON})`);
  const price = (p: Price) => (p.usd < 0.001 ? `US$ ${+(p.usd * 1e6).toPrecision(6)} per million (${p.unit})` : `US$ ${+p.usd.toPrecision(6)} per ${p.unit}`);
  for (const [k, p] of Object.entries(PRICES) as [string, Price][]) out.push(`- ${k}: ${price(p)} — ${p.source}`);
  return out.join('\n');
}
