/**
 * What a node's metrics cost its event → promotion path (the promotion
 * bench's `node-metrics` part).
 *
 * Nodes on the harness's PostgreSQL, each a process of its own over the
 * built package (metrics-node.mjs) with a database of its own, as `rollout
 * serve` runs them, differing only in /metrics:
 *
 *   without     two nodes with an empty registry, nobody scraping
 *   with        two nodes with nodeMetrics(node), scraped once a second (Prometheus at a 1 s interval)
 *   fast        one node with nodeMetrics(node), scraped every 100 ms: the 1 s store-read cache under load
 *
 * Separate processes because prom-client's default collectors are
 * process-wide (a GC observer, an event-loop delay monitor): in one process
 * they would run under the nodes without metrics too. Two identical node
 * processes still differ by a few percent in a run (where each one's code
 * and memory happened to land): hence two nodes a side, pooled, for
 * `metrics_cost_p50`, and the two nodes without metrics compared with each
 * other (`noise_floor_p50`) for what a difference of nothing looks like.
 *
 * One client posts each event to the node's `/events` (as the trigger path
 * does) and times it to the answer, which comes once the stage is promoted,
 * its event published and marked published: event → promotion as a reporter
 * sees it. Nodes take blocks of BLOCK_ROLLOUTS rollouts in turn, in a fresh
 * order every round, so the machine's other tenants and drift over the run
 * fall on every arm alike. A scraper keeps its node's own time: it scrapes
 * every interval of the time its node is measured, is quiet in the others'
 * blocks, and its scrape in flight is finished before the next block.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, request } from 'node:http';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from '../../infra/local/processes.js';
import { builtCli } from '../bench/built.js';
import { percentile, round3 } from '../bench/raw.js';
import { freshDatabase } from './backends.js';

const NODE_SCRIPT = resolve(import.meta.dirname, 'metrics-node.mjs');
/** 20 events a block: tens of milliseconds, short beside the machine's slow swings, long beside a switch of node. */
const BLOCK_ROLLOUTS = 5;
const WARM_SCRAPES = 100;

type Spec = { target: { service: string; version: string }; stages: unknown[] };

interface Answer {
  readonly status: number;
  readonly text: string;
}

function send(agent: Agent, url: string, body?: unknown): Promise<Answer> {
  return new Promise((done, fail) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) };
    const req = request(url, { method: payload === undefined ? 'GET' : 'POST', agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(payload);
  });
}

class ServedNode {
  private readonly lines;

  private constructor(
    readonly child: ChildProcess,
    private readonly drop: () => Promise<void>,
  ) {
    this.lines = createInterface({ input: child.stdout! });
    child.stdin!.on('error', () => undefined); // a node that died first: its exit is the error reported
  }

  static async start(metrics: boolean): Promise<{ node: ServedNode; url: string }> {
    const db = await freshDatabase('bench_metrics');
    const port = await freePort();
    const child = spawn(process.execPath, [NODE_SCRIPT, JSON.stringify({ databaseUrl: db.url, port, metrics })], { stdio: ['pipe', 'pipe', 'inherit'] });
    const node = new ServedNode(child, () => db.drop());
    const ready = await node.line().catch(async (err: unknown) => {
      await db.drop();
      throw err;
    });
    return { node, url: String(ready.url) };
  }

  /** The node's next JSON line; an exit first is an error. */
  private line(): Promise<Record<string, unknown>> {
    return new Promise((done, fail) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        return fail(new Error(`the bench's node has exited (${this.child.exitCode ?? this.child.signalCode})`));
      const exited = (code: number | null) => fail(new Error(`the bench's node exited with ${code}`));
      this.child.once('exit', exited);
      this.lines.once('line', (l: string) => {
        this.child.off('exit', exited);
        done(JSON.parse(l) as Record<string, unknown>);
      });
    });
  }

  /** Stops the node; what it counted. */
  async stop(): Promise<{ scrapeStoreReads: number }> {
    try {
      const last = this.line();
      this.child.stdin!.end();
      const { scrapeStoreReads } = await last;
      return { scrapeStoreReads: Number(scrapeStoreReads) };
    } finally {
      await this.drop();
    }
  }
}

/**
 * Scrapes every `everyMs` of its arm's own time (resumed and paused with the
 * arm's blocks); one scrape at a time, as Prometheus scrapes a target.
 */
class Scraper {
  readonly durations: number[] = [];
  /** Wall-clock span of the scrapes, warm-up included: the store-read cache counts in wall time. */
  readonly wall = { first: 0, last: 0 };
  bytes = 0;
  skipped = 0;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private elapsed = 0;
  private since = 0;
  private next: number;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | null = null;
  private error: Error | null = null;

  constructor(
    private readonly url: string,
    readonly everyMs: number,
  ) {
    this.next = Math.random() * everyMs; // the scrape's phase is unrelated to the events'
  }

  resume(): void {
    this.since = performance.now();
    this.schedule();
  }

  async pause(): Promise<void> {
    clearTimeout(this.timer);
    this.elapsed += performance.now() - this.since;
    await this.inflight;
    if (this.error) throw this.error;
  }

  close(): void {
    this.agent.destroy();
  }

  /**
   * Back-to-back scrapes before any is timed, as a node scraped for a while
   * has had: at one a second the bench's own would be too few to leave
   * the scrape's code compiled (the first takes ten times as long).
   */
  async warm(n: number): Promise<void> {
    this.wall.first = performance.now();
    for (let i = 0; i < n; i++) {
      const res = await send(this.agent, `${this.url}/metrics`);
      if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status} ${res.text.slice(0, 200)}`);
    }
  }

  private now(): number {
    return this.elapsed + performance.now() - this.since;
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.fire(), Math.max(0, this.next - this.now()));
  }

  private fire(): void {
    // Behind schedule (the client was busy): the next one an interval on, not a burst to catch up.
    this.next = Math.max(this.next + this.everyMs, this.now() + this.everyMs / 2);
    if (this.inflight) this.skipped++;
    else {
      this.inflight = this.scrape()
        .catch((err: unknown) => void (this.error ??= err instanceof Error ? err : new Error(String(err))))
        .finally(() => (this.inflight = null));
    }
    this.schedule();
  }

  private async scrape(): Promise<void> {
    const t = performance.now();
    const res = await send(this.agent, `${this.url}/metrics`);
    if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status} ${res.text.slice(0, 200)}`);
    this.durations.push(performance.now() - t);
    this.wall.first ||= t;
    this.wall.last = performance.now();
    this.bytes = Buffer.byteLength(res.text);
  }
}

type Group = 'without' | 'with' | 'fast';

interface Arm {
  readonly name: string;
  readonly group: Group;
  readonly node: ServedNode;
  readonly url: string;
  readonly agent: Agent;
  readonly scraper: Scraper | null;
  readonly samples: number[];
}

async function arm(name: string, group: Group, scrapeEveryMs: number | null): Promise<Arm> {
  const { node, url } = await ServedNode.start(group !== 'without');
  return {
    name,
    group,
    node,
    url,
    agent: new Agent({ keepAlive: true, maxSockets: 1 }),
    scraper: scrapeEveryMs === null ? null : new Scraper(url, scrapeEveryMs),
    samples: [],
  };
}

async function post(a: Arm, path: string, body: unknown, want: number): Promise<Record<string, unknown>> {
  const res = await send(a.agent, `${a.url}${path}`, body);
  if (res.status !== want) throw new Error(`POST ${path} on the node ${a.name}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
  return JSON.parse(res.text) as Record<string, unknown>;
}

/** Whether a POST /events answer applied the stage's promotion. */
function promoted(body: Record<string, unknown>): boolean {
  const actions = (body.actions ?? []) as { transition: string; applied: boolean }[];
  return actions.some((x) => x.applied && x.transition === 'promote');
}

/** One block: `BLOCK_ROLLOUTS` rollouts created and activated (untimed), each stage's metrics event timed to its promotion. */
async function block(a: Arm, spec: Spec, clock: { observedAt: number }): Promise<void> {
  for (let r = 0; r < BLOCK_ROLLOUTS; r++) {
    const { id } = (await post(a, '/rollouts', { spec }, 201)) as { id: string };
    await post(a, '/events', { type: 'rollout.created', rolloutId: id }, 202);
    for (let stage = 0; stage < spec.stages.length; stage++) {
      // Newer than the last report, and not before the stage became active (a reading from before is ignored).
      clock.observedAt = Math.max(clock.observedAt + 1, Date.now());
      const t = performance.now();
      const body = await post(
        a,
        '/events',
        { type: 'rollout.metrics_reported', rolloutId: id, stage, requests: 100, errors: 0, p99LatencyMs: null, observedAt: clock.observedAt },
        202,
      );
      a.samples.push(performance.now() - t);
      if (!promoted(body)) throw new Error(`a metrics event for stage ${stage} of ${id} promoted nothing: ${JSON.stringify(body)}`);
    }
  }
}

export interface NodeMetricsCost {
  readonly figures: Record<string, number>;
  readonly line: string;
}

/** `samples` events per node after `warmup` of its own, the nodes taken in turn. */
export async function nodeMetricsCost(spec: Spec, samples: number, warmup: number): Promise<NodeMetricsCost> {
  builtCli(); // the nodes run dist/
  const arms: Arm[] = [];
  try {
    arms.push(
      await arm('without metrics #1', 'without', null),
      await arm('with metrics #1', 'with', 1_000),
      await arm('without metrics #2', 'without', null),
      await arm('with metrics #2', 'with', 1_000),
      await arm('with metrics scraped every 100 ms', 'fast', 100),
    );
    for (const a of arms) await a.scraper?.warm(WARM_SCRAPES);
    const clock = { observedAt: Date.now() };
    const total = warmup + samples;
    while (arms.some((a) => a.samples.length < total)) {
      // A fresh order every round: no node always follows the same one (a scrape's work in PostgreSQL, a node's caches gone cold).
      for (const a of shuffled(arms)) {
        a.scraper?.resume();
        try {
          await block(a, spec, clock);
        } finally {
          await a.scraper?.pause();
        }
      }
    }
    const perBlock = BLOCK_ROLLOUTS * spec.stages.length;
    const of = (g: Group) => arms.filter((a) => a.group === g);
    const [without, withMetrics, fast] = [of('without'), of('with'), of('fast')];
    // Kept samples, by round: one block a node a round, a group's nodes pooled.
    const rounds = (group: readonly Arm[]) => {
      const out: number[][] = [];
      for (const a of group) for (let i = warmup; i < Math.min(a.samples.length, total); i++) (out[Math.floor(i / perBlock)] ??= []).push(a.samples[i]!);
      return out.filter(Boolean);
    };
    const flat = (group: readonly Arm[]) => rounds(group).flat();
    const p = (group: readonly Arm[], q: number) => round3(percentile(flat(group), q));
    const cost = (group: readonly Arm[], base: readonly Arm[], q: number) => round3(percentile(flat(group), q) / percentile(flat(base), q) - 1);
    const interval = (group: readonly Arm[], base: readonly Arm[]) => costInterval(rounds(base), rounds(group));
    const [floorA, floorB] = [[without[0]!], [without[1]!]];
    const reads = new Map<Arm, number>();
    const scrapers = { with: withMetrics.map((a) => a.scraper!), fast: fast[0]!.scraper! };
    while (arms.length) {
      const a = arms.shift()!;
      reads.set(a, (await stopArm(a)).scrapeStoreReads);
    }
    const scrapeDurations = scrapers.with.flatMap((s) => s.durations);
    const [withLo, withHi] = interval(withMetrics, without);
    const [fastLo, fastHi] = interval(fast, without);
    const [floorLo, floorHi] = interval(floorB, floorA);
    const f = {
      without_metrics_p50_ms: p(without, 50),
      without_metrics_p99_ms: p(without, 99),
      with_metrics_p50_ms: p(withMetrics, 50),
      with_metrics_p99_ms: p(withMetrics, 99),
      metrics_cost_p50: cost(withMetrics, without, 50),
      metrics_cost_p50_lo: withLo,
      metrics_cost_p50_hi: withHi,
      metrics_cost_p99: cost(withMetrics, without, 99),
      noise_floor_p50: cost(floorB, floorA, 50),
      noise_floor_p50_lo: floorLo,
      noise_floor_p50_hi: floorHi,
      noise_floor_p99: cost(floorB, floorA, 99),
      scrapes: scrapeDurations.length,
      scrape_p50_ms: round3(percentile(scrapeDurations, 50)),
      scrape_store_reads: withMetrics.reduce((n, a) => n + reads.get(a)!, 0),
      // A short run may leave one of the two nodes unscraped: the size of a scrape either took.
      metrics_bytes: Math.max(...scrapers.with.map((s) => s.bytes)),
      fast_scrape_p50_ms: p(fast, 50),
      fast_scrape_p99_ms: p(fast, 99),
      fast_scrape_cost_p50: cost(fast, without, 50),
      fast_scrape_cost_p50_lo: fastLo,
      fast_scrape_cost_p50_hi: fastHi,
      fast_scrape_cost_p99: cost(fast, without, 99),
      fast_scrapes: scrapers.fast.durations.length,
      fast_scrape_each_p50_ms: round3(percentile(scrapers.fast.durations, 50)),
      fast_scrape_store_reads: reads.get(fast[0]!)!,
      fast_scrape_wall_seconds: round3((scrapers.fast.wall.last - scrapers.fast.wall.first) / 1000),
      samples_per_node: flat(floorA).length,
      warmup_per_node: warmup,
    };
    const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
    const costs = (p50: number, lo: number, hi: number, p99: number) => `p50 ${pct(p50)} (90% ${pct(lo)} to ${pct(hi)}), p99 ${pct(p99)}`;
    const line =
      `node on postgres, event → promotion over HTTP, ${f.samples_per_node} events a node: ` +
      `without metrics p50 ${f.without_metrics_p50_ms} / p99 ${f.without_metrics_p99_ms} ms · ` +
      `with metrics scraped every 1 s ${f.with_metrics_p50_ms} / ${f.with_metrics_p99_ms} ms, metrics_cost ${costs(f.metrics_cost_p50, withLo, withHi, f.metrics_cost_p99)} ` +
      `(${f.scrapes} scrapes of ${f.metrics_bytes} bytes, p50 ${f.scrape_p50_ms} ms; with the ${WARM_SCRAPES} a node before, ${f.scrape_store_reads} store reads) · ` +
      `noise floor (one node without metrics against the other) ${costs(f.noise_floor_p50, floorLo, floorHi, f.noise_floor_p99)} · ` +
      `scraped every 100 ms ${f.fast_scrape_p50_ms} / ${f.fast_scrape_p99_ms} ms, ${costs(f.fast_scrape_cost_p50, fastLo, fastHi, f.fast_scrape_cost_p99)} ` +
      `(${f.fast_scrapes} scrapes, p50 ${f.fast_scrape_each_p50_ms} ms; with the ${WARM_SCRAPES} before, ${f.fast_scrape_store_reads} store reads over ${f.fast_scrape_wall_seconds} s)`;
    return { figures: f, line };
  } finally {
    await Promise.all(arms.map((a) => stopArm(a).catch(() => undefined)));
  }
}

function shuffled<T>(xs: readonly T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

async function stopArm(a: Arm): Promise<{ scrapeStoreReads: number }> {
  a.agent.destroy();
  a.scraper?.close();
  return a.node.stop();
}

/**
 * A 90% interval of the p50 cost, resampling whole rounds (both sides'
 * blocks of a round together, as they were taken side by side): how far the
 * run's noise from sample to sample could move the figure. Not where each
 * process happened to land: the noise floor shows that.
 */
function costInterval(base: number[][], arm: number[][]): [number, number] {
  const n = Math.min(base.length, arm.length);
  const costs: number[] = [];
  for (let b = 0; b < 1_000; b++) {
    const x: number[] = [];
    const y: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = Math.floor(Math.random() * n);
      x.push(...base[r]!);
      y.push(...arm[r]!);
    }
    costs.push(percentile(y, 50) / percentile(x, 50) - 1);
  }
  return [round3(percentile(costs, 5)), round3(percentile(costs, 95))];
}
