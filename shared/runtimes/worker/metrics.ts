import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { ExecutionBackend } from '../../ledger/backends.js';
import type { Worker } from '../../ledger/worker/index.js';

/**
 * A worker process's metrics (`rollout worker --metrics-port`, or
 * `createWorker({ metricsPort })`), served at /metrics:
 *
 *   rollout_worker_items_total{run,outcome}    done, failed (the handler threw), lost (taken
 *                                              over or ended elsewhere), rejected, stolen (taken
 *                                              over by this worker from a silent one)
 *   rollout_worker_backend_failures_total{run} attempts the handler failed
 *   rollout_worker_heartbeats_total{run,result} heartbeat rounds that wrote an item (ok), or failed
 *   rollout_worker_item_seconds{run,outcome}   time per attempt (a histogram)
 *   rollout_worker_process_*                   the process (CPU, memory, event loop lag)
 *
 * Runs are the process's own (at most 50), so the labels are bounded.
 */
export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly seconds: Histogram<'run' | 'outcome'>;
  private readonly failures: Counter<'run'>;
  private readonly workers = new Map<string, Worker>();

  constructor(workerId: string) {
    const registry = this.registry;
    registry.setDefaultLabels({ worker_id: workerId });
    collectDefaultMetrics({ register: registry, prefix: 'rollout_worker_process_' });
    const workers = this.workers;
    new Counter({
      name: 'rollout_worker_items_total',
      help: 'Items this worker ended, by outcome',
      labelNames: ['run', 'outcome'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [run, w] of workers) {
          const s = w.stats;
          for (const [outcome, n] of [
            ['done', s.done],
            ['failed', s.failedAttempts],
            ['lost', s.lost],
            ['rejected', s.rejected],
            ['stolen', s.stolen],
          ] as const)
            this.inc({ run, outcome }, n);
        }
      },
    });
    new Counter({
      name: 'rollout_worker_heartbeats_total',
      help: 'Heartbeat rounds that wrote a held item (one not written for most of an interval), by result',
      labelNames: ['run', 'result'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [run, w] of workers) {
          this.inc({ run, result: 'ok' }, w.beats.ok);
          this.inc({ run, result: 'failed' }, w.beats.failed);
        }
      },
    });
    this.failures = new Counter({
      name: 'rollout_worker_backend_failures_total',
      help: 'Attempts the handler (or backend) failed',
      labelNames: ['run'] as const,
      registers: [registry],
    });
    this.seconds = new Histogram({
      name: 'rollout_worker_item_seconds',
      help: 'Time per attempt, by outcome',
      labelNames: ['run', 'outcome'] as const,
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600],
      registers: [registry],
    });
  }

  watch(runId: string, worker: Worker): void {
    this.workers.set(runId, worker);
  }

  /** `backend`, timed per attempt. */
  timed(backend: ExecutionBackend): ExecutionBackend {
    return async (payload, signal, item) => {
      const run = item?.runId ?? '';
      const began = performance.now();
      try {
        const out = await backend(payload, signal, item);
        this.seconds.observe({ run, outcome: 'ok' }, (performance.now() - began) / 1000);
        return out;
      } catch (err) {
        this.seconds.observe({ run, outcome: 'failed' }, (performance.now() - began) / 1000);
        if (!signal.aborted) this.failures.inc({ run });
        throw err;
      }
    };
  }

  /** Serves /metrics on host:port until closed. */
  async serve(port: number, host: string): Promise<{ readonly port: number; close(): Promise<void> }> {
    const server: Server = createServer((req, res) => {
      if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('GET /metrics\n');
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err)),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const address = server.address();
    return { port: typeof address === 'object' && address ? address.port : port, close: () => new Promise<void>((r) => server.close(() => r())) };
  }
}
