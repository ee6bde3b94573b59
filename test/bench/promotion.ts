/**
 * npm run bench -- promotion [--samples N] [--warmup N] [--rollouts N] [--backends postgres,dynamodb,pglite] [--emulate-conflicts]
 *                            [--parts promoter,node-metrics,due,judge] [--due-rollouts N] [--due N]
 *
 * Part `promoter`, per backend: inbound metrics event → stage promoted and its event published
 * on the bus (StreamingPromoter path), p50/p99, with 1 and with 100 rollouts
 * receiving events at once; one raw conditional write on the same store in
 * the same run, taken alternately with the 1-rollout events (the ratios'
 * baseline) and also alone, back to back; and BatchPromoter ticks over 1,000 running rollouts (nothing
 * due, and every rollout promoting one stage; the all-due tick also a promotion, in ms and against the
 * raw write alone's steady p50: `batch_tick_1000_all_due_per_promotion_vs_raw_alone_p50`). The all-due
 * tick's promotion and the 100-rollout events' are broken down on both stores: round trips a promotion by
 * kind — on PostgreSQL statements (`batch_tick_1000_all_due_statements_<kind>`: the function called, or
 * verb and table; BEGIN and COMMIT as `begin_commit`), on DynamoDB requests (`…_requests_<kind>`: the
 * command and table, counted by a middleware on the store's client; `<kind>_items`: the items those
 * requests carried) — with their total (`…_statements_per_promotion`, `…_requests_per_promotion`) and this
 * process's CPU a promotion (`…_cpu_ms_per_promotion`); prefixes `batch_tick_1000_all_due` and
 * `event_to_promotion_100_rollouts`. Last line: one JSON object.
 *
 * `held_view_share`: of the 1-rollout metrics events, those the leader wrote
 * with their decision in one round trip on its held view (one statement on
 * PostgreSQL, one transaction on DynamoDB).
 *
 * DynamoDB rows also count transaction conflicts (writes DynamoDB refused
 * because another transaction was on one of their items), the retries they
 * cost and the writes given up. DynamoDB Local never raises a conflict, so
 * against it these are 0 unless `--emulate-conflicts` sends DynamoDB's
 * requests through a proxy that applies DynamoDB's conflict rules (its own
 * hop adds to every DynamoDB figure of the run).
 *
 * Part `due`, per backend: a BatchPromoter tick over `--due-rollouts` (10,000)
 * running rollouts of which `--due` (100) are due (a reading stored for each:
 * each promotes a stage), a tick with none due, and a CloudWatch alarm's
 * change for an alarm no rollout watches: how long it takes and how many
 * rollouts it read (by the store's own calls, counted in this process).
 *
 * Part `judge`: what one gate reading's judgement costs, in this process (no
 * store, no provider): a threshold gate's one number, beside a mann-whitney
 * gate on 10,000 points a side and on 1,000-point series, and a relative gate
 * on 1,000-point series (the most a judged Prometheus reading holds). The
 * median of many judgements, in ms.
 *
 * Part `node-metrics` (test/support/node-metrics-cost.ts): what a node's
 * /metrics costs its event → promotion path. Nodes on PostgreSQL served over
 * HTTP, two without metrics, two with them scraped every second, one scraped
 * every 100 ms; events posted to `/events`, the nodes taking blocks in turn;
 * `--samples` events a node after `--warmup`. `metrics_cost_p50` = with /
 * without − 1 (p50s); `noise_floor_p50`, one node without metrics against
 * the other, is what a cost of nothing measures in the same run.
 */
import { parseArgs } from 'node:util';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, leadershipOf, RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { conflictStats } from '../../shared/adapters/dynamodb/conflicts.js';
import { openBackend, type BackendName, type LeaseBackend } from '../support/backends.js';
import { ContentionProxy, dynamoEndpoint } from '../support/dynamodb-contention.js';
import { rawConditionalWrite, percentile, round3 } from './raw.js';
import { sqlCensus } from './sql-census.js';
import { dynamoCensus } from './dynamo-census.js';
import { GateReader } from '../../shared/rollout/gate-reader.js';
import { providerGatesSchema } from '../../shared/rollout/gate-spec.js';
import { judge } from '../../shared/rollout/gates.js';
import { defaultGateProviders } from '../../shared/compose/gates.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { BATCH_TICK_SECONDS } from '../../shared/topology.js';
import { startExporter, startPrometheus, waitForSeries, type PrometheusServer } from '../support/prometheus.js';
import { nodeMetricsCost } from '../support/node-metrics-cost.js';

const { values: args } = parseArgs({
  options: {
    // p99 of 300 samples is the 3rd slowest, of 1,000 the 10th: steadier, for the raw write and the event path alike.
    samples: { type: 'string', default: '1000' },
    // Where the steady window starts, for the raw write and the event path alike: both keep getting faster in a
    // fresh process for about a thousand operations (compiled code, the server's caches, DynamoDB Local's JIT).
    warmup: { type: 'string', default: '1000' },
    rollouts: { type: 'string', default: '1000' },
    backends: { type: 'string', default: 'postgres,dynamodb' },
    'emulate-conflicts': { type: 'boolean', default: false },
    parts: { type: 'string', default: 'promoter,due,node-metrics,judge' },
    'due-rollouts': { type: 'string', default: '10000' },
    due: { type: 'string', default: '100' },
  },
});
const PARTS = ['promoter', 'due', 'node-metrics', 'judge'] as const;
const parts = new Set(args.parts.split(',').map((s) => s.trim()));
const unknownParts = [...parts].filter((p) => !(PARTS as readonly string[]).includes(p));
if (unknownParts.length) {
  console.error(`--parts: ${unknownParts.join(', ')} unknown (parts: ${PARTS.join(', ')})`);
  process.exit(2);
}
const SAMPLES = Number(args.samples);
const WARMUP = Number(args.warmup);
/**
 * The 1-rollout figures come from two windows of `SAMPLES` operations each:
 * after EARLY operations (the bench's warm-up from the start, so its figures
 * compare with every earlier run's) and after WARMUP (a long-running node).
 */
const EARLY = 50;
const STAGES = 4;
const TICK_ROLLOUTS = Number(args.rollouts);

/** Every stage waits for 10 requests, no bake: each metrics report for the active stage promotes it. */
const chain = (stages: number) => ({
  target: { service: 'bench', version: 'v2' },
  stages: Array.from({ length: stages }, (_, i) => ({
    name: `s${i}`,
    percent: i === stages - 1 ? 100 : Math.round(((i + 1) * 100) / stages),
    bakeSeconds: 0,
    gates: { minRequests: 10, maxErrorRate: 0.5 },
  })),
});

async function setup(backend: LeaseBackend) {
  const bus = new InProcessBus();
  const engine = new RolloutEngine({ store: backend.rollouts, bus });
  const elector = new LeaseElector(backend.store, {
    name: 'promotion_leader',
    holderId: 'bench',
    ttlMs: 600_000,
    renewIntervalMs: 200_000,
    retryIntervalMs: 5_000,
  });
  await elector.campaign();
  // A running elector's cached view, as on a long-running node; a Lambda would campaign per invocation.
  const streaming = new StreamingPromoter(engine, leadershipOf(elector));
  return { bus, engine, elector, streaming };
}

/**
 * Latency of metrics event → stage_promoted on the bus, with `parallel`
 * rollouts receiving events at once. Rollouts have 4 stages (a common shape,
 * e.g. 5/25/50/100); fresh ones start until enough samples are taken.
 */
async function eventToPromotion(
  backend: LeaseBackend,
  parallel: number,
  samples: number,
  before?: () => Promise<void>,
  breakdown = false,
): Promise<{ samples: number[]; held: number; events: number; perPromotion: PerPromotion | null }> {
  const { bus, engine, streaming } = await setup(backend);
  // Counted over the metrics events alone (not the rollouts' creation and activation between them).
  const census = breakdown ? promotionCensus(backend) : null;
  // How many events went in one write on the leader's held view (PostgreSQL), against all metrics events.
  const counts = { held: 0, events: 0 };
  const store = backend.rollouts;
  const withReading = store.recordMetricsAndApply?.bind(store);
  if (withReading) store.recordMetricsAndApply = (...a) => (counts.held++, withReading(...a));
  // The sample ends when stage_promoted reaches the bus, not when the handler has also re-read and marked it published.
  const waiting = new Map<string, (at: number) => void>();
  bus.subscribe((e) => {
    const d = e.detail as { rolloutId: string; stage?: { index: number } };
    if (e.detailType === 'ai.rollout.stage_promoted') waiting.get(`${d.rolloutId}/${d.stage?.index}`)?.(performance.now());
  });
  const out: number[] = [];
  let observedAt = Date.now();
  while (out.length < samples) {
    const ids: string[] = [];
    for (let i = 0; i < parallel; i++) {
      const { id } = await createRollout(engine, { spec: chain(STAGES), actor: 'bench' });
      await streaming.handle({ type: 'rollout.created', rolloutId: id });
      ids.push(id);
    }
    for (let stage = 0; stage < STAGES; stage++) {
      // Newer than the last report, and not before the stage became active (a reading from before is ignored).
      observedAt = Math.max(observedAt + 1, Date.now());
      await before?.();
      const events = () =>
        Promise.all(
          ids.map(async (rolloutId) => {
            const key = `${rolloutId}/${stage}`;
            const promoted = new Promise<number>((r) => waiting.set(key, r));
            const t = performance.now();
            counts.events++;
            await streaming.handle({ type: 'rollout.metrics_reported', rolloutId, stage, requests: 100, errors: 0, p99LatencyMs: null, observedAt });
            out.push((await promoted) - t);
            waiting.delete(key);
          }),
        );
      await (census ? census.window(events) : events());
    }
  }
  if (withReading) store.recordMetricsAndApply = withReading;
  return { samples: out, ...counts, perPromotion: census?.per(out.length) ?? null };
}

/**
 * What one promotion cost: round trips by kind (PostgreSQL: statements, through a census of the store's
 * Sql; DynamoDB: requests, through a middleware on the store's client) and CPU in this process, each
 * over the promotions.
 */
interface PerPromotion {
  /** `statements` (PostgreSQL) or `requests` (DynamoDB). */
  readonly unit: 'statements' | 'requests';
  readonly kinds: Readonly<Record<string, number>>;
  readonly total: number;
  readonly cpuMs: number;
}

/** Counts a backend's round trips by kind and this process's CPU, over the windows it is told of. */
function promotionCensus(backend: LeaseBackend) {
  const census = backend.sql
    ? { unit: 'statements' as const, ...sqlCensus(backend.sql) }
    : backend.dynamo
      ? { unit: 'requests' as const, ...dynamoCensus(backend.dynamo.doc, { [backend.dynamo.table]: 'table' }) }
      : null;
  if (!census) return null;
  const counts: Record<string, number> = {};
  let cpuMicros = 0;
  return {
    /** Counts what `work` sends (the census's own cost is a counter per round trip). */
    async window<T>(work: () => Promise<T>): Promise<T> {
      census.take();
      const cpu = process.cpuUsage();
      try {
        return await work();
      } finally {
        const used = process.cpuUsage(cpu);
        cpuMicros += used.user + used.system;
        for (const [k, v] of Object.entries(census.take())) counts[k] = (counts[k] ?? 0) + v;
      }
    },
    /** The counts over `promotions`, and the census taken off. */
    per(promotions: number): PerPromotion {
      census.restore();
      const per = (x: number) => round3(x / promotions);
      return {
        unit: census.unit,
        kinds: Object.fromEntries(
          Object.entries(counts)
            .sort(([, a], [, b]) => b - a)
            .map(([k, v]) => [k, per(v)]),
        ),
        // Items a request carries are counted beside it, not as requests.
        total: per(
          Object.entries(counts)
            .filter(([k]) => !k.endsWith(' items'))
            .reduce((a, [, b]) => a + b, 0),
        ),
        cpuMs: per(cpuMicros / 1000),
      };
    },
  };
}

/** A breakdown's JSON keys: `<prefix>_<unit>_per_promotion`, one `<prefix>_<unit>_<kind>` a kind, `<prefix>_cpu_ms_per_promotion`. */
function breakdownKeys(prefix: string, p: PerPromotion | null): Record<string, number> {
  if (!p) return {};
  return {
    [`${prefix}_${p.unit}_per_promotion`]: p.total,
    // e.g. batch_tick_1000_all_due_statements_rollout_apply, batch_tick_1000_all_due_requests_transact_write_items_table.
    ...Object.fromEntries(Object.entries(p.kinds).map(([kind, v]) => [`${prefix}_${p.unit}_${kindKey(kind)}`, v])),
    [`${prefix}_cpu_ms_per_promotion`]: p.cpuMs,
  };
}

/** A kind as a key: lower case, words joined by `_` (TransactWriteItems → transact_write_items). */
const kindKey = (kind: string) =>
  kind
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_|_$/g, '');

/** A breakdown for the human line. */
const breakdownText = (p: PerPromotion | null) =>
  p
    ? `; a promotion: ${p.total} ${p.unit} (${Object.entries(p.kinds)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}), ${p.cpuMs} ms CPU here`
    : '';

async function batchTicks(backend: LeaseBackend, n: number): Promise<{ idle: number; allDue: number; setupMs: number; perPromotion: PerPromotion | null }> {
  const { engine, elector } = await setup(backend);
  const batch = new BatchPromoter(engine, campaignEachTime(elector), { concurrency: 16, duePerTick: Math.max(1_000, n) });
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < n; i += 50) {
    ids.push(
      ...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, async () => (await createRollout(engine, { spec: chain(3), actor: 'bench' })).id))),
    );
  }
  await batch.tick(); // activates stage 0 everywhere
  const setupMs = performance.now() - t0;
  const settled = await batch.tick(); // each is looked at once more after its activation, then scheduled: all wait for metrics
  if (settled.evaluated !== n || settled.actions.length)
    throw new Error(`the tick after activation evaluated ${settled.evaluated}, acted ${settled.actions.length}`);
  let t = performance.now();
  const idle = await batch.tick(); // nothing due
  const idleMs = performance.now() - t;
  if (idle.evaluated !== 0) throw new Error(`idle tick evaluated ${idle.evaluated}`);
  const now = Date.now();
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(
      ids.slice(i, i + 50).map((id) => backend.rollouts.recordMetrics(id, { stage: 0 }, { requests: 100, errors: 0, p99LatencyMs: null, observedAt: now })),
    );
  }
  // Counted around the timed tick alone.
  const census = promotionCensus(backend);
  t = performance.now();
  const due = await (census ? census.window(() => batch.tick()) : batch.tick()); // every rollout promotes stage 0
  const dueMs = performance.now() - t;
  const promoted = due.actions.filter((a) => a.applied && a.transition === 'promote').length;
  if (promoted !== n) throw new Error(`all-due tick promoted ${promoted} of ${n}`);
  const perPromotion = census?.per(promoted) ?? null;
  return { idle: idleMs, allDue: dueMs, setupMs, perPromotion };
}

/**
 * A tick over `n` running rollouts of which `due` are due, after every one
 * was activated and scheduled (each waits for traffic until its deadline);
 * a tick with none due; an alarm change no rollout watches, through the
 * StreamingPromoter as a node takes it.
 */
async function dueTicks(
  backend: LeaseBackend,
  n: number,
  due: number,
): Promise<{ dueMs: number; noneDueMs: number; evaluated: number; setupMs: number; flipMs: number; flipRolloutsRead: number }> {
  const { engine, elector, streaming } = await setup(backend);
  const batch = new BatchPromoter(engine, campaignEachTime(elector), { concurrency: 16 });
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < n; i += 100) {
    ids.push(
      ...(await Promise.all(Array.from({ length: Math.min(100, n - i) }, async () => (await createRollout(engine, { spec: chain(3), actor: 'bench' })).id))),
    );
  }
  // Activated, then evaluated once more and scheduled: a tick takes 1,000 at most.
  for (let ticks = 0; (await batch.tick()).evaluated > 0; ticks++) if (ticks > (4 * n) / 1_000 + 10) throw new Error('due rollouts never settled');
  const setupMs = performance.now() - t0;
  const now = Date.now();
  const chosen = ids.filter((_, i) => i % Math.floor(n / due) === 0).slice(0, due);
  await Promise.all(chosen.map((id) => backend.rollouts.recordMetrics(id, { stage: 0 }, { requests: 100, errors: 0, p99LatencyMs: null, observedAt: now })));
  let t = performance.now();
  const tick = await batch.tick();
  const dueMs = performance.now() - t;
  const promoted = tick.actions.filter((a) => a.applied && a.transition === 'promote').length;
  if (tick.evaluated !== due || promoted !== due) throw new Error(`the tick evaluated ${tick.evaluated} and promoted ${promoted}; ${due} were due`);
  await batch.tick(); // the promoted ones, looked at once more and scheduled
  t = performance.now();
  const idle = await batch.tick();
  const noneDueMs = performance.now() - t;
  if (idle.evaluated !== 0) throw new Error(`a tick with none due evaluated ${idle.evaluated}`);
  // Every rollout the store hands back counts as read, whichever call asked.
  const store = backend.rollouts;
  let read = 0;
  const counting =
    <A extends unknown[], R>(f: (...a: A) => Promise<R>, count: (r: R) => number) =>
    async (...a: A) => {
      const r = await f(...a);
      read += count(r);
      return r;
    };
  const original = { load: store.load.bind(store), loadWatching: store.loadWatching.bind(store), loadRunning: store.loadRunning.bind(store) };
  store.load = counting(original.load, (v) => (v ? 1 : 0));
  store.loadWatching = counting(original.loadWatching, (v) => v.length);
  store.loadRunning = counting(original.loadRunning, (v) => v.length);
  t = performance.now();
  await streaming.handle({ type: 'rollout.alarm_changed', alarm: 'nobody-watches-this', state: 'ALARM', changedAt: Date.now() });
  const flipMs = performance.now() - t;
  Object.assign(store, original);
  return { dueMs, noneDueMs, evaluated: tick.evaluated, setupMs, flipMs, flipRolloutsRead: read };
}

/**
 * One tick over `n` running rollouts whose active stage has one Prometheus
 * gate each, every gate due (a query per rollout, its reading stored, the
 * rollout evaluated); then a tick with none due (read within the interval).
 */
async function prometheusTicks(
  backend: LeaseBackend,
  n: number,
  prometheus: PrometheusServer,
): Promise<{ allDue: number; noneDue: number; readings: number; inconclusive: number }> {
  const { engine, elector } = await setup(backend);
  const batch = new BatchPromoter(engine, campaignEachTime(elector), {
    concurrency: 16,
    duePerTick: Math.max(1_000, n),
    reader: new GateReader(defaultGateProviders({ outbound: new OutboundPolicy({ origins: [prometheus.url] }) }), backend.rollouts),
  });
  const gated = (i: number) => ({
    target: { service: `svc-${i}`, version: 'v2' },
    stages: [
      {
        name: 'canary',
        percent: 10,
        bakeSeconds: 3_600,
        gates: {
          providers: [
            {
              type: 'prometheus',
              name: 'error-rate',
              address: prometheus.url,
              query: `bench_error_rate{rollout="${i}"}`,
              comparison: '<',
              threshold: 0.05,
              intervalSeconds: 3_600,
            },
          ],
        },
      },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });
  for (let i = 0; i < n; i += 50)
    await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, j) => createRollout(engine, { spec: gated(i + j), actor: 'bench' })));
  await batch.tick(); // activates every canary; its gate is read from the next tick on
  let t = performance.now();
  const due = await batch.tick();
  const allDue = performance.now() - t;
  t = performance.now();
  const idle = await batch.tick();
  const noneDue = performance.now() - t;
  if (due.readings !== n || idle.readings !== 0) throw new Error(`prometheus ticks read ${due.readings} then ${idle.readings} gates of ${n}`);
  const inconclusive = (await backend.rollouts.loadRunning()).reduce((sum, v) => sum + (v.gates.get(0)?.get('error-rate')?.inconclusive ?? 0), 0);
  return { allDue, noneDue, readings: due.readings, inconclusive };
}

/**
 * A real Prometheus scraping one series per gated rollout (the exporter's
 * gauge), for the gated tick only: up while the latency windows are taken,
 * its scrapes (1,000 series a second, the exporter's share in this process)
 * would land in their samples.
 */
async function withPrometheus<T>(series: number, run: (prometheus: PrometheusServer) => Promise<T>): Promise<T> {
  const exporter = await startExporter();
  try {
    const rate = exporter.gauge('bench_error_rate', 'error rate per rollout', ['rollout']);
    for (let i = 0; i < series; i++) rate.set({ rollout: String(i) }, 0.001);
    const prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 1_000 });
    try {
      await waitForSeries(prometheus.url, 'count(bench_error_rate)', (s) => s[0]?.value === series, 60_000);
      return await run(prometheus);
    } finally {
      await prometheus.stop();
    }
  } finally {
    await exporter.close();
  }
}

async function main() {
  const out: Record<string, Record<string, number | boolean>> = {};
  let proxy: ContentionProxy | undefined;
  if (args['emulate-conflicts']) {
    proxy = await new ContentionProxy(dynamoEndpoint()).start();
    process.env.AWS_ENDPOINT_URL_DYNAMODB = proxy.url; // every DynamoDB client of the run is made after this
  }
  for (const name of parts.has('promoter') ? (args.backends.split(',').map((s) => s.trim()) as BackendName[]) : []) {
    const backend = await openBackend(name);
    const before = { ...conflictStats };
    try {
      const total = Math.max(EARLY, WARMUP) + SAMPLES;
      const raw = await rawConditionalWrite(name);
      const timed = async (into: number[]) => {
        const t = performance.now();
        await raw.op(into.length);
        into.push(performance.now() - t);
      };
      // Alone: the raw write back to back with nothing else in the process, as every earlier run took it.
      const rawAlone: number[] = [];
      while (rawAlone.length < total) await timed(rawAlone);
      // Paired: one raw write before each metrics event, so both meet the same conditions (the machine's
      // other tenants, drift over the run, the process's own garbage and compiled code).
      const rawPaired: number[] = [];
      const first = await eventToPromotion(backend, 1, total, () => timed(rawPaired));
      await raw.close();
      const windowed = (from: number) => ({
        one: first.samples.slice(from, from + SAMPLES),
        paired: rawPaired.slice(from, from + SAMPLES),
        alone: rawAlone.slice(from, from + SAMPLES),
      });
      const early = windowed(EARLY);
      const steady = windowed(WARMUP);
      const hundredRun = await eventToPromotion(backend, 100, SAMPLES, undefined, true);
      const hundred = hundredRun.samples;
      // A store of its own: the tick must see exactly its 1,000 rollouts.
      const tickBackend = await openBackend(name);
      const ticks = await batchTicks(tickBackend, TICK_ROLLOUTS).finally(() => tickBackend.close());
      const gatedBackend = await openBackend(name);
      const gated = await withPrometheus(TICK_ROLLOUTS, (prometheus) => prometheusTicks(gatedBackend, TICK_ROLLOUTS, prometheus)).finally(() =>
        gatedBackend.close(),
      );
      const figures = (w: ReturnType<typeof windowed>, key: (k: string) => string) => {
        const [p50, p99] = [percentile(w.one, 50), percentile(w.one, 99)];
        const raw = { p50: percentile(w.paired, 50), p99: percentile(w.paired, 99) };
        const alone = { p50: percentile(w.alone, 50), p99: percentile(w.alone, 99) };
        return {
          [key('event_to_promotion_p50_ms')]: round3(p50),
          [key('event_to_promotion_p99_ms')]: round3(p99),
          [key('raw_conditional_write_p50_ms')]: round3(raw.p50),
          [key('raw_conditional_write_p99_ms')]: round3(raw.p99),
          [key('event_to_promotion_p50_vs_raw_p50')]: round3(p50 / raw.p50),
          [key('event_to_promotion_p99_vs_raw_p99')]: round3(p99 / raw.p99),
          [key('raw_conditional_write_alone_p50_ms')]: round3(alone.p50),
          [key('raw_conditional_write_alone_p99_ms')]: round3(alone.p99),
          [key('event_to_promotion_p50_vs_raw_alone_p50')]: round3(p50 / alone.p50),
          [key('event_to_promotion_p99_vs_raw_alone_p99')]: round3(p99 / alone.p99),
        };
      };
      const e = figures(early, (k) => k);
      const steadyKey = (k: string) => k.replace(/^(event_to_promotion|raw_conditional_write)/, '$1_steady');
      const st = figures(steady, steadyKey);
      const latency: Record<string, number> = { ...e, ...st };
      const row = {
        ...latency,
        event_to_promotion_100_rollouts_p50_ms: round3(percentile(hundred, 50)),
        event_to_promotion_100_rollouts_p99_ms: round3(percentile(hundred, 99)),
        // Against the raw write alone (steady p50) of the same run, as the issue's figures compare them.
        event_to_promotion_100_rollouts_p50_vs_raw_alone_p50: round3(percentile(hundred, 50) / percentile(steady.alone, 50)),
        event_to_promotion_100_rollouts_p99_vs_raw_alone_p50: round3(percentile(hundred, 99) / percentile(steady.alone, 50)),
        ...breakdownKeys('event_to_promotion_100_rollouts', hundredRun.perPromotion),
        batch_tick_1000_ms: Math.round(ticks.idle),
        batch_tick_1000_all_due_ms: Math.round(ticks.allDue),
        // What the all-due tick took a promotion, against the raw write alone (steady p50) of the same run: the issue's ×raw.
        batch_tick_1000_all_due_ms_per_promotion: round3(ticks.allDue / TICK_ROLLOUTS),
        batch_tick_1000_all_due_per_promotion_vs_raw_alone_p50: round3(ticks.allDue / TICK_ROLLOUTS / percentile(steady.alone, 50)),
        ...breakdownKeys('batch_tick_1000_all_due', ticks.perPromotion),
        batch_tick_1000_prometheus_gates_ms: Math.round(gated.allDue),
        batch_tick_1000_prometheus_gates_none_due_ms: Math.round(gated.noneDue),
        batch_tick_prometheus_share_of_interval: round3(gated.allDue / (BATCH_TICK_SECONDS * 1000)),
        prometheus_readings_inconclusive: gated.inconclusive,
        samples_1: early.one.length,
        warmup_early: EARLY,
        warmup_steady: WARMUP,
        held_view_share: round3(first.held / first.events),
        samples_100: hundred.length,
        ...(name === 'dynamodb'
          ? {
              transaction_conflicts: conflictStats.conflicts - before.conflicts,
              transaction_retries: conflictStats.retries - before.retries,
              transaction_retries_exhausted: conflictStats.exhausted - before.exhausted,
              conflicts_emulated: proxy !== undefined,
            }
          : {}),
      };
      const window = (f: Record<string, number>, k: (key: string) => string) =>
        `p50 ${f[k('event_to_promotion_p50_ms')]} / p99 ${f[k('event_to_promotion_p99_ms')]} ms = ${f[k('event_to_promotion_p50_vs_raw_p50')]}× / ${f[k('event_to_promotion_p99_vs_raw_p99')]}× ` +
        `a raw conditional write's p50 ${f[k('raw_conditional_write_p50_ms')]} / p99 ${f[k('raw_conditional_write_p99_ms')]} ms taken alternately with it ` +
        `(the raw write alone: ${f[k('raw_conditional_write_alone_p50_ms')]} / ${f[k('raw_conditional_write_alone_p99_ms')]} ms, ${f[k('event_to_promotion_p50_vs_raw_alone_p50')]}× / ${f[k('event_to_promotion_p99_vs_raw_alone_p99')]}×)`;
      out[name] = row;
      console.log(
        `${name.padEnd(9)} event→promotion, 1 rollout, after ${EARLY}: ${window(latency, (k) => k)} · after ${WARMUP}: ${window(latency, steadyKey)} · ` +
          `${(100 * row.held_view_share).toFixed(0)}% in one write on the held view · ` +
          `100 rollouts p50 ${row.event_to_promotion_100_rollouts_p50_ms} / p99 ${row.event_to_promotion_100_rollouts_p99_ms} ms ` +
          `= ${row.event_to_promotion_100_rollouts_p50_vs_raw_alone_p50}× / ${row.event_to_promotion_100_rollouts_p99_vs_raw_alone_p50}× the raw write alone's p50` +
          `${breakdownText(hundredRun.perPromotion)} · ` +
          `tick over ${TICK_ROLLOUTS}: ${row.batch_tick_1000_ms} ms idle, ${row.batch_tick_1000_all_due_ms} ms all due = ${row.batch_tick_1000_all_due_ms_per_promotion} ms a promotion, ${row.batch_tick_1000_all_due_per_promotion_vs_raw_alone_p50}× the raw write alone (setup ${Math.round(ticks.setupMs)} ms` +
          breakdownText(ticks.perPromotion) +
          `) · ` +
          `with a Prometheus gate each: ${row.batch_tick_1000_prometheus_gates_ms} ms all read (${TICK_ROLLOUTS} queries, ${row.prometheus_readings_inconclusive} inconclusive; ${(100 * row.batch_tick_prometheus_share_of_interval).toFixed(1)}% of the ${BATCH_TICK_SECONDS} s interval), ${row.batch_tick_1000_prometheus_gates_none_due_ms} ms none due` +
          (name === 'dynamodb'
            ? ` · transaction conflicts ${row.transaction_conflicts}, retries ${row.transaction_retries}, given up ${row.transaction_retries_exhausted}${proxy ? ' (emulated)' : ''}`
            : ''),
      );
    } finally {
      await backend.close();
    }
  }
  await proxy?.stop();
  const dueOut: Record<string, Record<string, number>> = {};
  for (const name of parts.has('due') ? (args.backends.split(',').map((s) => s.trim()) as BackendName[]) : []) {
    const backend = await openBackend(name);
    try {
      const n = Number(args['due-rollouts']);
      const r = await dueTicks(backend, n, Number(args.due));
      dueOut[name] = {
        rollouts: n,
        due: r.evaluated,
        tick_due_ms: Math.round(r.dueMs),
        tick_none_due_ms: Math.round(r.noneDueMs),
        alarm_flip_unwatched_ms: round3(r.flipMs),
        alarm_flip_unwatched_rollouts_read: r.flipRolloutsRead,
        setup_s: Math.round(r.setupMs / 1000),
      };
      console.log(
        `${name.padEnd(9)} tick over ${n} running rollouts, ${r.evaluated} due: ${dueOut[name].tick_due_ms} ms; none due: ${dueOut[name].tick_none_due_ms} ms · ` +
          `an alarm no rollout watches changed: ${dueOut[name].alarm_flip_unwatched_ms} ms, ${r.flipRolloutsRead} rollouts read (setup ${dueOut[name].setup_s} s)`,
      );
    } finally {
      await backend.close();
    }
  }
  const judged = parts.has('judge') ? judgeCost() : undefined;
  let node: Record<string, number> | undefined;
  if (parts.has('node-metrics')) {
    const cost = await nodeMetricsCost(chain(STAGES), SAMPLES, WARMUP);
    console.log(cost.line);
    node = cost.figures;
  }
  console.log(
    JSON.stringify({
      bench: 'promotion',
      backends: out,
      ...(Object.keys(dueOut).length ? { due: dueOut } : {}),
      ...(judged ? { judge: judged } : {}),
      ...(node ? { node_metrics: node } : {}),
    }),
  );
}

/** One gate reading's judgement, by kind, in this process: the median of repeated judgements (ms). */
function judgeCost(): Record<string, number> {
  let seed = 47;
  const random = () => (seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 4_294_967_296;
  const series = (n: number, mean: number) => Array.from({ length: n }, () => mean * (0.8 + 0.4 * random()));
  const gate = (o: Record<string, unknown>) =>
    providerGatesSchema.parse([{ type: 'prometheus', name: 'g', address: 'http://prometheus:9090', query: 'q{version="{{version}}"}', ...o }])[0]!;
  const where = { attempt: 1, stage: 0, at: 0, source: 'poll' } as const;
  const time = (reps: number, fn: () => unknown) => {
    const ms: number[] = [];
    for (let i = 0; i < reps; i++) {
      const t = performance.now();
      fn();
      ms.push(performance.now() - t);
    }
    return round3(percentile(ms, 50));
  };
  const threshold = providerGatesSchema.parse([
    { type: 'prometheus', name: 'g', address: 'http://prometheus:9090', query: 'q', comparison: '<', threshold: 1 },
  ])[0]!;
  const mw = gate({ judge: { kind: 'mann-whitney' } });
  const rel = gate({ judge: { kind: 'relative', measure: 'ratio', tolerance: 0.2 } });
  const big = { kind: 'cohorts', canary: series(10_000, 1.1), baseline: series(10_000, 1), answer: '' } as const;
  const points = { kind: 'cohorts', canary: series(1_000, 1.1), baseline: series(1_000, 1), answer: '' } as const;
  const figures = {
    threshold_reading_ms: time(2_000, () => judge(threshold, { kind: 'number', value: 0.5, answer: '' }, where)),
    mann_whitney_10000_a_side_ms: time(20, () => judge(mw, big, where)),
    mann_whitney_1000_points_ms: time(200, () => judge(mw, points, where)),
    relative_1000_points_ms: time(2_000, () => judge(rel, points, where)),
  };
  console.log(
    `judge     one reading's judgement: threshold ${figures.threshold_reading_ms} ms · mann-whitney 10,000 a side ${figures.mann_whitney_10000_a_side_ms} ms, ` +
      `1,000-point series ${figures.mann_whitney_1000_points_ms} ms · relative 1,000 points ${figures.relative_1000_points_ms} ms`,
  );
  return figures;
}

// The loop empties only if a sample waits for a promotion that never comes: fail loudly instead of exiting 0 with no result.
process.on('beforeExit', () => {
  console.error('promotion bench: a sample waited for a stage_promoted event that never came');
  process.exit(1);
});

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
