/**
 * A real Prometheus server for tests (Debian's `prometheus`, 2.42), started
 * like the throwaway PostgreSQL in infra/local/processes.ts: its own temp dir,
 * a free loopback port, a readiness wait that reports the server's output if
 * it dies. It scrapes targets the test controls, usually an exporter from
 * `startExporter()` whose counters the test raises.
 *
 * Prometheus 2.42 hands discovered targets (static ones too) to its scrape
 * loop at most every 5 s, so the first scrape lands about 5 s after start
 * (and after a restart), whatever the scrape interval: wait for it with
 * `waitForSeries`, never a sleep.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collect, exited, freePort, waitFor } from '../../infra/local/processes.js';
import { closeNow, listenOnLoopback } from './local-server.js';

export interface PrometheusServer {
  /** `http://127.0.0.1:PORT`, the base of the HTTP API. */
  readonly url: string;
  readonly port: number;
  /** SIGTERM (SIGKILL only if it has not exited after 10 s), then removes the temp dir. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL, keeping the data dir: a crash; `restart()` brings it back with its data. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data dir (after `kill()`); resolves once it is ready. */
  restart(): Promise<void>;
}

export interface PrometheusOptions {
  /** `host:port` of each target, all in one job named `app`. */
  readonly targets: readonly string[];
  /** Scrape and rule-evaluation interval; default 500 ms. */
  readonly scrapeIntervalMs?: number;
  /** Default: a free port. */
  readonly port?: number;
}

/** The job name every target is scraped under (the `job` label of its series). */
export const PROMETHEUS_JOB = 'app';

/** The Prometheus binary: PROMETHEUS_BIN, else `prometheus` on PATH, else Debian's path. */
export function prometheusBin(): string {
  const given = process.env.PROMETHEUS_BIN;
  if (given) {
    if (!existsSync(given)) throw new Error(`PROMETHEUS_BIN=${given} does not exist`);
    return given;
  }
  const found = spawnSync('sh', ['-c', 'command -v prometheus'], { encoding: 'utf8' });
  if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
  if (existsSync('/usr/bin/prometheus')) return '/usr/bin/prometheus';
  throw new Error('Prometheus not found: apt-get install prometheus (the Debian package, 2.42), or set PROMETHEUS_BIN to the binary');
}

// Servers not stopped when the test process exits (a failed hook, an interrupted run) die with it, and
// their temp dirs go (best effort: a SIGKILLed child may still be writing for a moment).
const running = new Set<ChildProcess>();
const dirs = new Set<string>();
process.once('exit', () => {
  running.forEach((c) => c.kill('SIGKILL'));
  dirs.forEach((d) => {
    try {
      rmSync(d, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // nothing more to do on the way out
    }
  });
});

export async function startPrometheus(o: PrometheusOptions): Promise<PrometheusServer> {
  const bin = prometheusBin();
  const intervalMs = o.scrapeIntervalMs ?? 500;
  if (!Number.isInteger(intervalMs) || intervalMs <= 0) throw new Error(`scrapeIntervalMs must be a positive integer, got ${intervalMs}`);
  const port = o.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'rollout-prom-'));
  dirs.add(dir);
  const config = join(dir, 'prometheus.yml');
  // JSON is YAML. scrape_timeout must not exceed the interval; equal is allowed.
  const interval = `${intervalMs}ms`;
  writeFileSync(
    config,
    JSON.stringify(
      {
        global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
        scrape_configs: [{ job_name: PROMETHEUS_JOB, static_configs: [{ targets: [...o.targets] }] }],
      },
      null,
      2,
    ),
  );
  const args = [
    `--config.file=${config}`,
    `--storage.tsdb.path=${join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
    // Nothing from /etc/prometheus (the package's console templates): this server serves the API only.
    `--web.console.templates=${dir}`,
    `--web.console.libraries=${dir}`,
  ];
  const url = `http://127.0.0.1:${port}`;

  let child: ChildProcess | undefined;
  let stopped = false;
  const halt = async (signal: NodeJS.Signals) => {
    const c = child;
    if (!c) return;
    if (c.exitCode === null && c.signalCode === null) c.kill(signal);
    // A graceful stop that hangs (a stuck compaction) must not leave a server behind.
    const force = signal === 'SIGKILL' ? undefined : setTimeout(() => c.kill('SIGKILL'), 10_000);
    await exited(c);
    clearTimeout(force);
    running.delete(c);
    child = undefined;
  };
  const stop = async () => {
    stopped = true;
    await halt('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    dirs.delete(dir);
  };
  const launch = async () => {
    if (stopped) throw new Error('Prometheus was stopped; start a new one');
    await halt('SIGKILL'); // restart() of a running server: one server per data dir
    const c = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
    child = c;
    running.add(c);
    const log = collect(c);
    const spawnError = new Promise<never>((_, reject) => c.once('error', reject));
    spawnError.catch(() => undefined);
    try {
      // /-/ready answers 200 once the TSDB (and its WAL, after a kill) is loaded. A short probe timeout:
      // whatever else holds the port (Prometheus then exits at once) may never answer.
      const ready = async () => (await get(`${url}/-/ready`, 1_000)).status === 200;
      await Promise.race([spawnError, waitFor(`Prometheus on port ${port}`, 60_000, ready, c, log)]);
    } catch (err) {
      await halt('SIGKILL'); // a server that never became ready is not left behind
      throw err;
    }
  };

  try {
    await launch();
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, port, stop, kill: () => halt('SIGKILL'), restart: launch };
}

// ------------------------------------------------------------------ queries

/** One series of an instant vector, its value parsed. */
export interface Sample {
  readonly metric: Readonly<Record<string, string>>;
  readonly value: number;
  /** Seconds since the epoch, as Prometheus reports it. */
  readonly timestamp: number;
}

/** Prometheus answered, with `"status": "error"` (a bad query is `bad_data` with HTTP 400). */
export class PrometheusApiError extends Error {
  constructor(
    readonly httpStatus: number,
    readonly errorType: string,
    message: string,
  ) {
    super(`Prometheus ${errorType} (HTTP ${httpStatus}): ${message}`);
    this.name = 'PrometheusApiError';
  }
}

/**
 * A GET on a fresh connection every time: after a kill the next request fails
 * with ECONNREFUSED, never with the reset of a pooled keep-alive socket.
 */
function get(url: string, timeoutMs = 10_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * An instant query (`/api/v1/query`) that must return a vector. A server that
 * cannot be reached rejects with Node's error (`code` ECONNREFUSED when
 * nothing listens); one that answers with an error, with `PrometheusApiError`.
 */
export async function queryVector(url: string, query: string): Promise<Sample[]> {
  const res = await get(`${url}/api/v1/query?${new URLSearchParams({ query }).toString()}`);
  let body: { status?: string; errorType?: string; error?: string; data?: { resultType?: string; result?: unknown } };
  try {
    body = JSON.parse(res.body) as typeof body;
  } catch {
    throw new PrometheusApiError(res.status, 'not_json', res.body.slice(0, 200));
  }
  if (body.status !== 'success') throw new PrometheusApiError(res.status, body.errorType ?? 'unknown', body.error ?? res.body.slice(0, 200));
  if (body.data?.resultType !== 'vector') throw new PrometheusApiError(res.status, 'not_a_vector', `${query} returned a ${body.data?.resultType}`);
  const result = body.data.result as { metric: Record<string, string>; value: [number, string] }[];
  return result.map((s) => ({ metric: s.metric, value: Number(s.value[1]), timestamp: s.value[0] }));
}

/**
 * Polls `query` until it returns a non-empty vector that `predicate` accepts
 * (every series present, by default) and returns that vector: a test waits
 * for the scrape it needs to have landed. Connection errors count as "not
 * yet" (a server coming back); an error Prometheus answers with (a bad
 * query) fails at once, since waiting will not fix it.
 */
export async function waitForSeries(
  url: string,
  query: string,
  predicate: (series: readonly Sample[]) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<Sample[]> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = 'no answer yet';
  for (;;) {
    try {
      const series = await queryVector(url, query);
      if (series.length && predicate(series)) return series;
      last = series;
    } catch (err) {
      if (err instanceof PrometheusApiError) throw err;
      last = err instanceof Error ? err.message : err;
    }
    if (Date.now() > deadline)
      throw new Error(`Prometheus at ${url}: ${query} did not return the expected series within ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ----------------------------------------------------------------- exporter

export interface Exporter {
  /** `127.0.0.1:PORT`, a scrape target for `startPrometheus`. */
  readonly target: string;
  /** Its own registry (never prom-client's global one, which other code in the process shares). */
  readonly registry: Registry;
  counter<L extends string>(name: string, help: string, labelNames?: readonly L[]): Counter<L>;
  gauge<L extends string>(name: string, help: string, labelNames?: readonly L[]): Gauge<L>;
  histogram<L extends string>(name: string, help: string, labelNames?: readonly L[], buckets?: readonly number[]): Histogram<L>;
  close(): Promise<void>;
}

/** An HTTP server on a free loopback port serving `/metrics` from its own registry. */
export async function startExporter(): Promise<Exporter> {
  const registry = new Registry();
  const server: Server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
  const url = new URL(await listenOnLoopback(server));
  return {
    target: url.host,
    registry,
    counter: (name, help, labelNames = []) => new Counter({ name, help, labelNames, registers: [registry] }),
    gauge: (name, help, labelNames = []) => new Gauge({ name, help, labelNames, registers: [registry] }),
    histogram: (name, help, labelNames = [], buckets) =>
      new Histogram({ name, help, labelNames, registers: [registry], ...(buckets ? { buckets: [...buckets] } : {}) }),
    // Prometheus keeps its scrape connection alive; a plain close would wait for it.
    close: () => closeNow(server),
  };
}
