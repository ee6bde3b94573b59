/**
 * One or more AWS chaos schedules from the command line, without the rest of
 * `npm run chaos` (its `--topology aws` runs the same schedules):
 *
 *   node --import tsx test/chaos/aws/main.ts [--seed S] [--schedule I] [--schedules N]
 *        [--faults N] [--faults-ms MS] [--quiet-ms MS] [--items N] [--runs 1|2]
 *        [--workers N] [--rollouts N] [--variant V] [--out DIR]
 *
 * DynamoDB Local and fauxqs come from AWS_ENDPOINT_URL_DYNAMODB /
 * AWS_ENDPOINT_URL_SQS (`npm run services`), or are started here. Prints each
 * schedule's plan and summary and every violation; writes each history as
 * JSON. Exit 1 on a violation.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { check, report } from '../check.js';
import { runAwsSchedule, stopAwsServices } from './run.js';
import { summary } from './summary.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    schedule: { type: 'string', default: '0' },
    schedules: { type: 'string', default: '1' },
    'faults-ms': { type: 'string' },
    'quiet-ms': { type: 'string' },
    items: { type: 'string' },
    runs: { type: 'string', default: '1' },
    workers: { type: 'string', default: '3' },
    rollouts: { type: 'string' },
    faults: { type: 'string' },
    variant: { type: 'string' },
    out: { type: 'string', default: 'test-results/chaos' },
  },
});
const seed = values.seed ?? String(Math.floor(Math.random() * 1e9));
const first = Number(values.schedule);
const count = Number(values.schedules);
const out = resolve(values.out);
mkdirSync(out, { recursive: true });
const items = values.items ? Number(values.items) : undefined;
const runs = Number(values.runs);

let violations = 0;
try {
  for (let i = first; i < first + count; i++) {
    const began = performance.now();
    const h = await runAwsSchedule({
      seed,
      schedule: i,
      variant: values.variant ?? null,
      ...(values['quiet-ms'] ? { quietMs: Number(values['quiet-ms']) } : {}),
      shape: {
        ...(values['faults-ms'] ? { faultsMs: Number(values['faults-ms']) } : {}),
        ...(items
          ? { runs: Array.from({ length: runs }, (_, i) => ({ items: i ? Math.max(10, Math.round(items / 2)) : items, workers: Number(values.workers) })) }
          : {}),
        ...(values.rollouts ? { rollouts: Number(values.rollouts) } : {}),
        ...(values.faults ? { faultCount: Number(values.faults) } : {}),
      },
      log: (line) => process.stderr.write(`${line}\n`),
    });
    const found = check(h);
    violations += found.length;
    const file = resolve(out, `aws-${seed}-${i}${values.variant ? `-${values.variant}` : ''}.json`);
    writeFileSync(file, JSON.stringify({ history: h, violations: found }));
    console.log(summary(h, found, (performance.now() - began) / 1000));
    for (const v of found.slice(0, 10)) console.log(report(v));
    console.log(`history: ${file}`);
  }
} finally {
  await stopAwsServices();
}
process.exit(violations ? 1 : 0);
