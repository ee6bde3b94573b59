/**
 * npm run bench -- lease [--ops N] [--rounds N] [--groups N] [--backends a,b]
 *
 * Per backend: p50/p99 of acquire, renew and a fenced write, next to a raw
 * single conditional write on the same store in the same run (the floor any
 * lease write sits on); and crash failover: 3 contenders, TTL 2 s, the leader
 * stopped without resigning at a random point of its renew cycle, time until
 * another contender holds the lease. The last line is one JSON object.
 */
import { parseArgs } from 'node:util';
import { LeaseElector } from '../../shared/lease/elector.js';
import type { LeaseStore } from '../../shared/lease/store.js';
import { BACKENDS, openBackend, uniqueName, type BackendName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { percentile, rawConditionalWrite, round3 } from './raw.js';

const { values: args } = parseArgs({
  options: {
    ops: { type: 'string', default: '400' },
    rounds: { type: 'string', default: '8' },
    groups: { type: 'string', default: '6' },
    backends: { type: 'string', default: BACKENDS.join(',') },
  },
});
const OPS = Number(args.ops);
const ROUNDS = Number(args.rounds);
const GROUPS = Number(args.groups);
const TTL_MS = 2_000;
const FAILOVER_TIMINGS = { ttlMs: TTL_MS, renewIntervalMs: 600, retryIntervalMs: 450, clockSkewMs: 50 };
const LATENCY_TIMINGS = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

async function timed(n: number, op: (i: number) => Promise<unknown>, warmup = Math.min(50, n)): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await op(-1 - i);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await op(i);
    out.push(performance.now() - t);
  }
  return out;
}

async function latencies(backend: LeaseBackend) {
  const clock = new ManualClock();
  const acquire = await timed(OPS, () => new LeaseElector(backend.store, { name: uniqueName('acq'), holderId: 'a', clock, ...LATENCY_TIMINGS }).campaign());

  const leader = new LeaseElector(backend.store, { name: uniqueName('renew'), holderId: 'a', clock, ...LATENCY_TIMINGS });
  await leader.campaign();
  const renew = await timed(OPS, async () => {
    clock.advance(LATENCY_TIMINGS.renewIntervalMs);
    const r = await leader.campaign();
    if (!r.leader) throw new Error('renewal lost in an uncontended benchmark');
  });
  const token = leader.token()!;
  const fenced = await timed(OPS, (i) => backend.fencedPut(token, `k${i % 64}`, `v${i}`));

  const raw = await rawConditionalWrite(backend.name);
  const rawSamples = await timed(OPS, raw.op).finally(() => raw.close());
  return { acquire, renew, fenced, raw: rawSamples };
}

/** One failover group: 3 contenders on one lease; crash the leader; time until another leads. */
async function failoverGroup(store: LeaseStore, rounds: number): Promise<number[]> {
  const samples: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const name = uniqueName('failover');
    let onLead: ((holder: string) => void) | undefined;
    const electors = ['x', 'y', 'z'].map(
      (id) =>
        new LeaseElector(store, {
          name,
          holderId: `${id}-${r}`,
          ...FAILOVER_TIMINGS,
          onStartedLeading: (t) => onLead?.(t.holder),
        }),
    );
    const first = new Promise<string>((resolve) => (onLead = resolve));
    for (const e of electors) e.start();
    const leaderId = await first;
    const leader = electors.find((e) => e.holderId === leaderId)!;
    // Crash at a random point of the renew cycle, after followers have seen the lease.
    await new Promise((res) => setTimeout(res, FAILOVER_TIMINGS.retryIntervalMs + Math.random() * FAILOVER_TIMINGS.renewIntervalMs));
    const next = new Promise<number>((resolve) => {
      onLead = (holder) => {
        if (holder !== leaderId) resolve(performance.now());
      };
    });
    const crashedAt = performance.now();
    await leader.stop({ resign: false });
    const tookOver = await Promise.race([
      next,
      new Promise<number>((_, rej) => setTimeout(() => rej(new Error(`no take-over after ${4 * TTL_MS} ms`)), 4 * TTL_MS)),
    ]);
    samples.push(tookOver - crashedAt);
    await Promise.all(electors.map((e) => e.stop()));
  }
  return samples;
}

async function main() {
  const wanted = args.backends.split(',').map((s) => s.trim()) as BackendName[];
  const out: Record<string, Record<string, number>> = {};
  for (const name of wanted) {
    if (!BACKENDS.includes(name)) throw new Error(`unknown backend ${name}; expected one of ${BACKENDS.join(', ')}`);
    const backend = await openBackend(name);
    try {
      const l = await latencies(backend);
      const groups = await Promise.all(Array.from({ length: GROUPS }, () => failoverGroup(backend.store, ROUNDS)));
      const failover = groups.flat();
      const rawP50 = percentile(l.raw, 50);
      const row = {
        acquire_p50_ms: round3(percentile(l.acquire, 50)),
        acquire_p99_ms: round3(percentile(l.acquire, 99)),
        renew_p50_ms: round3(percentile(l.renew, 50)),
        renew_p99_ms: round3(percentile(l.renew, 99)),
        fenced_write_p50_ms: round3(percentile(l.fenced, 50)),
        fenced_write_p99_ms: round3(percentile(l.fenced, 99)),
        raw_conditional_write_p50_ms: round3(rawP50),
        raw_conditional_write_p99_ms: round3(percentile(l.raw, 99)),
        renew_vs_raw_p50: round3(percentile(l.renew, 50) / rawP50),
        fenced_write_vs_raw_p50: round3(percentile(l.fenced, 50) / rawP50),
        failover_p50_ms: Math.round(percentile(failover, 50)),
        failover_p99_ms: Math.round(percentile(failover, 99)),
        failover_max_ms: Math.round(Math.max(...failover)),
        failover_p99_ttl_ratio: round3(percentile(failover, 99) / TTL_MS),
        failover_samples: failover.length,
        ttl_ms: TTL_MS,
      };
      out[name] = row;
      console.log(
        `${name.padEnd(9)} acquire p50 ${row.acquire_p50_ms} ms · renew p50 ${row.renew_p50_ms} ms (${row.renew_vs_raw_p50}× raw) · ` +
          `fenced write p50 ${row.fenced_write_p50_ms} ms (${row.fenced_write_vs_raw_p50}× raw ${row.raw_conditional_write_p50_ms} ms) · ` +
          `failover p50 ${row.failover_p50_ms} / p99 ${row.failover_p99_ms} ms = ${row.failover_p99_ttl_ratio}× TTL (n=${row.failover_samples})`,
      );
    } finally {
      await backend.close();
    }
  }
  console.log(JSON.stringify({ bench: 'lease', ops: OPS, backends: out }));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
