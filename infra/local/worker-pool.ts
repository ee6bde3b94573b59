import { WorkerAgent, type AgentExit } from '../../shared/ledger/agent.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker.js';
import { errorMessage, silentLogger, type Logger } from '../../shared/log.js';
import { LedgerWorkQueue } from '../../shared/queue/ledger/queue.js';
import type { ControlPlaneNode } from './node.js';

/**
 * In-process workers for the single-machine runtime (`npm start`): for every
 * open run, `size` workers (mock backend) — the same Worker and WorkerAgent a
 * `rollout worker` process runs, each on its own simulated instance, so a
 * spot notice for one instance drains exactly one worker through the worker
 * registry, as the spot-drain path does in AWS.
 */
export interface PoolOptions {
  size?: number;
  /** Mock backend: time per item. */
  itemMs?: number;
  /** Workers after the first join this much later (they find the queue empty and steal). */
  staggerMs?: number;
  logger?: Logger;
}

interface PoolWorker {
  readonly runId: string;
  readonly instanceId: string;
  readonly worker: Worker;
  exit: AgentExit['reason'] | null;
}

export class LocalWorkerPool {
  private readonly size: number;
  private readonly itemMs: number;
  private readonly staggerMs: number;
  private readonly logger: Logger;
  private readonly quiet: Logger;
  private readonly stop = new AbortController();
  private readonly workers: PoolWorker[] = [];
  private readonly runs = new Set<string>();
  private readonly running: Promise<unknown>[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly node: ControlPlaneNode,
    options: PoolOptions = {},
  ) {
    this.size = options.size ?? 3;
    this.itemMs = options.itemMs ?? 25;
    this.staggerMs = options.staggerMs ?? 400;
    this.logger = options.logger ?? silentLogger;
    // The workers' own warnings (a drain, a lost claim) are what the demo shows; only errors go to the log.
    this.quiet = { ...silentLogger, error: this.logger.error.bind(this.logger) };
  }

  start(): void {
    const look = () => {
      this.adoptRuns()
        .catch((err: unknown) => this.logger.warn('worker pool: listing runs failed', { error: errorMessage(err) }))
        .finally(() => {
          if (!this.stop.signal.aborted) this.timer = setTimeout(look, 500);
        });
    };
    look();
  }

  private async adoptRuns(): Promise<void> {
    for (const runId of await this.node.ledger.openRuns()) {
      if (this.runs.has(runId) || this.stop.signal.aborted) continue;
      this.runs.add(runId);
      for (let i = 0; i < this.size; i++) this.spawn(runId, i, i === 0 ? 0 : this.staggerMs);
    }
  }

  private spawn(runId: string, index: number, delayMs: number): void {
    const node = this.node;
    const workerId = `${node.nodeId}-w${index + 1}`;
    const instanceId = `local-${node.nodeId}-${index + 1}`;
    const worker = new Worker({
      runId,
      workerId,
      ledger: node.ledger,
      queue: new LedgerWorkQueue(node.sql, node.wake, runId, null).forWorker(workerId),
      backend: mockBackend({ durationMs: this.itemMs }),
      coordinator: {
        requestWork: async (w) => {
          const r = await node.stealFor(runId, w);
          return r.leader ? r.notice : { epoch: 0, victim: null, items: [] };
        },
      },
      waitSeconds: 1,
      // The first worker takes a large share, so the late ones have something to steal.
      receiveBatch: index === 0 ? 100 : 10,
      heartbeatMs: 1_000,
      logger: this.quiet,
    });
    const pw: PoolWorker = { runId, instanceId, worker, exit: null };
    this.workers.push(pw);
    const agent = new WorkerAgent({ worker, registry: node.registry, registration: { workerId, instanceId, provider: 'local', runId }, ledger: node.ledger, registryHeartbeatMs: 250, exitWhenDone: true, logger: this.quiet });
    this.running.push(
      (async () => {
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
        if (this.stop.signal.aborted) return;
        const exit = await agent.run(this.stop.signal);
        pw.exit = exit.reason;
        if (exit.reason === 'drained') this.logger.info('worker drained', { workerId, items: exit.report.nacked.length, ms: exit.report.elapsedMs });
      })().catch((err: unknown) => {
        pw.exit = 'stopped';
        this.logger.error('worker failed', { workerId, error: errorMessage(err) });
      }),
    );
  }

  /**
   * A simulated spot interruption of the instance of one working worker of
   * the run (the latest to join that still holds items): recorded in the worker
   * registry, as the spot-drain function does for EC2's notice; the worker's
   * registry heartbeat sees it and drains.
   */
  async interrupt(runId: string): Promise<string | null> {
    const victim = this.workers.filter((w) => w.runId === runId && w.exit === null && w.worker.held.length > 0).at(-1);
    if (!victim) return null;
    const now = Date.now();
    const r = await this.node.registry.requestDrain({ instanceId: victim.instanceId, kind: 'interruption', provider: 'aws', noticeAt: now }, now);
    return r.outcome === 'requested' ? victim.worker.id : null;
  }

  /** Items moved to this run's workers by steals, as the workers counted them. */
  stolen(runId: string): number {
    return this.workers.filter((w) => w.runId === runId).reduce((n, w) => n + w.worker.stats.stolen, 0);
  }

  drained(runId: string): number {
    return this.workers.filter((w) => w.runId === runId && w.exit === 'drained').length;
  }

  async close(): Promise<void> {
    this.stop.abort();
    clearTimeout(this.timer);
    await Promise.all(this.running);
  }
}
