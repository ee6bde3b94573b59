/**
 * npm run bench -- handover [--rounds N] [--baseline-rounds N] [--retry-seconds S]
 *
 * Graceful handover between two cluster nodes on PostgreSQL: the leader
 * stops (resigns, row and epoch kept) and the time until the follower leads
 * is measured. Ours wakes followers with NOTIFY; the baseline is the same
 * nodes with the wake-up off, where the follower finds out at its next retry
 * — what client-go's leaderelection does with ReleaseOnCancel (retryPeriod
 * 2 s by default) and what Leoflow's advisory-lock followers do (5 s).
 * Last line: one JSON object.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { until } from '../support/gate.js';
import { percentile, round3 } from './raw.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    'baseline-rounds': { type: 'string', default: '6' },
    'retry-seconds': { type: 'string', default: '2' },
  },
});
const retry = Number(args['retry-seconds']);
const admin = process.env.DATABASE_URL;
if (!admin) throw new Error('DATABASE_URL is not set (run through npm run bench)');

const dbName = `handover_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
const c = new pg.Client({ connectionString: admin });
await c.connect();
await c.query(`CREATE DATABASE ${dbName}`);
const u = new URL(admin);
u.pathname = `/${dbName}`;
const url = u.toString();

let seq = 0;
async function node(wake: boolean): Promise<ControlPlaneNode> {
  const n = await ControlPlaneNode.open({
    nodeId: `bench-${++seq}`,
    store: { kind: 'postgres', databaseUrl: url },
    port: 1,
    leaseTtlSeconds: 5 * retry,
    heartbeatIntervalSeconds: 1.5 * retry,
    electionIntervalSeconds: retry,
    wakeOnResign: wake,
  });
  await n.start();
  return n;
}

async function series(wake: boolean, rounds: number): Promise<number[]> {
  let leader = await node(wake);
  await until('a first leader', () => leader.state === 'leader', 20_000, 1);
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const follower = await node(wake);
    // A settled follower: it has seen the leader and waits for its next retry.
    await new Promise((r) => setTimeout(r, 50 + Math.random() * retry * 1000));
    if (follower.state !== 'follower') throw new Error(`follower is ${follower.state}`);
    const t0 = performance.now();
    const stopping = leader.stop();
    await until('the follower leads', () => follower.state === 'leader', 5 * retry * 1000 + 5_000, 1);
    samples.push(performance.now() - t0);
    await stopping;
    leader = follower;
  }
  await leader.stop();
  return samples;
}

try {
  const ours = await series(true, Number(args.rounds));
  const baseline = await series(false, Number(args['baseline-rounds']));
  const p = (s: number[], q: number) => round3(percentile(s, q));
  console.log(`notify wake-up   handover p50 ${p(ours, 50)} ms, p99 ${p(ours, 99)} ms (${ours.length} rounds)`);
  console.log(`retry ${retry} s (baseline) handover p50 ${p(baseline, 50)} ms, p99 ${p(baseline, 99)} ms (${baseline.length} rounds)`);
  console.log(
    JSON.stringify({
      bench: 'handover',
      handover_p50_ms: p(ours, 50),
      handover_p99_ms: p(ours, 99),
      baseline_retry_s: retry,
      baseline_p50_ms: p(baseline, 50),
      baseline_p99_ms: p(baseline, 99),
      speedup_p50: round3(percentile(baseline, 50) / percentile(ours, 50)),
      target_ms: 100,
    }),
  );
} finally {
  await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
  await c.end();
}
process.exit(0);
