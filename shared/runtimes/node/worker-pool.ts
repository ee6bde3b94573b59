import { setTimeout as sleep } from 'node:timers/promises';
import { WorkerAgent, type AgentExit } from '../../ledger/agent.js';
import { mockBackend } from '../../ledger/backends.js';
import { Worker, type WorkerOptions } from '../../ledger/worker/index.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { LedgerWorkQueue } from '../../adapters/postgres/ledger-queue.js';
import type { ControlPlaneNode } from './node.js';

/**
 * In-process workers for the single-machine runtime (`npm start`): for every
 * open run, `size` workers (mock backend) — the same Worker and WorkerAgent a
 * `rollout worker` process runs, each on its own simulated instance, so a
 * spot notice for one instance drains exactly one worker through the worker
 * registry, as the spot-drain path does in AWS.
 *
 * Each worker has an identity of its own on the node (worker id and simulated
 * instance), whatever its run: interrupting one run's worker never touches
 * another run's.
 *
 * A run must finish, so a worker that stops before its run is done is
 * replaced:
 *   - drained (its instance was interrupted): at once, by a fresh worker on a
 *     fresh simulated instance — the old one is being reclaimed;
 *   - died (its run rejected, or it stopped while the pool is open): after a
 *     delay that doubles with each death in a row (a worker that dies at once
 *     must not spin), by the same identity on the same instance, as a process
 *     restarted on its machine: it adopts what it had claimed, and learns of a
 *     drain requested while it was down.
 */
export interface PoolOptions {
  size?: number;
  /** Mock backend: time per item. */
  itemMs?: number;
  /** Workers after the first join this much later (they find the queue empty and steal). */
  staggerMs?: number;
  /** Delay before replacing a worker that died; doubles with each death in a row, up to `max`. */
  restartBackoffMs?: { initial: number; max: number };
  /** How a worker is built from its options (tests build workers that fail). */
  makeWorker?: (options: WorkerOptions) => Worker;
  logger?: Logger;
}

interface Identity {
  readonly workerId: string;
  readonly instanceId: string;
}

interface PoolWorker extends Identity {
  readonly runId: string;
  readonly worker: Worker;
  exit: AgentExit['reason'] | 'died' | null;
}

export class LocalWorkerPool {
  private readonly size: number;
  private readonly itemMs: number;
  private readonly staggerMs: number;
  private readonly backoff: { initial: number; max: number };
  private readonly makeWorker: (options: WorkerOptions) => Worker;
  private readonly logger: Logger;
  private readonly quiet: Logger;
  private readonly stop = new AbortController();
  /** Every worker the pool has run, replaced ones included (for the counts). */
  private readonly workers: PoolWorker[] = [];
  /** Open runs being worked on, with how many of their slots still run a worker. */
  private readonly runs = new Map<string, number>();
  private readonly running: Promise<void>[] = [];
  private identities = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly node: ControlPlaneNode,
    options: PoolOptions = {},
  ) {
    this.size = options.size ?? 3;
    if (!(Number.isInteger(this.size) && this.size >= 0)) throw new Error(`invalid pool config: size: an integer, 0 or more, got ${this.size}`);
    this.itemMs = options.itemMs ?? 25;
    this.staggerMs = options.staggerMs ?? 400;
    this.backoff = options.restartBackoffMs ?? { initial: 250, max: 30_000 };
    if (!(this.backoff.initial > 0 && this.backoff.max >= this.backoff.initial)) {
      throw new Error(`invalid pool config: restartBackoffMs: needs 0 < initial <= max, got ${this.backoff.initial} and ${this.backoff.max}`);
    }
    this.makeWorker = options.makeWorker ?? ((o) => new Worker(o));
    this.logger = options.logger ?? silentLogger;
    // The workers' own warnings (a drain, a lost claim) are what the demo shows; only errors go to the log.
    this.quiet = { ...silentLogger, error: this.logger.error.bind(this.logger) };
  }

  start(): void {
    if (this.size === 0) return;
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
    for (const runId of await this.node.plane.stores.ledger.openRuns()) {
      if (this.runs.has(runId) || this.stop.signal.aborted) continue;
      this.runs.set(runId, this.size);
      for (let i = 0; i < this.size; i++) {
        this.running.push(
          this.supervise(runId, i, i === 0 ? 0 : this.staggerMs).finally(() => {
            // Every slot done: forget the run, so it is adopted again if it reopens.
            const left = (this.runs.get(runId) ?? 1) - 1;
            if (left > 0) this.runs.set(runId, left);
            else this.runs.delete(runId);
          }),
        );
      }
    }
  }

  /** A fresh worker id on a fresh simulated instance, unique on this node whatever the run. */
  private identity(): Identity {
    const n = ++this.identities;
    return { workerId: `${this.node.nodeId}-w${n}`, instanceId: `local-${this.node.nodeId}-${n}` };
  }

  /** One slot of a run: runs a worker until the run is done or the pool closes, replacing it when it stops short. */
  private async supervise(runId: string, slot: number, delayMs: number): Promise<void> {
    const signal = this.stop.signal;
    let identity = this.identity();
    let deaths = 0;
    if (delayMs && !(await this.pause(delayMs))) return;
    while (!signal.aborted) {
      const { pw, agent } = this.spawn(runId, slot, identity);
      let error: unknown = null;
      try {
        pw.exit = (await agent.run(signal)).reason;
      } catch (err) {
        pw.exit = 'died';
        error = err;
      }
      if (signal.aborted || pw.exit === 'done') return;
      if (pw.exit === 'drained') {
        deaths = 0;
        identity = this.identity();
        this.logger.info('worker drained: a fresh worker on a fresh instance takes its place', {
          runId,
          workerId: pw.workerId,
          instanceId: pw.instanceId,
          next: identity.workerId,
        });
        continue;
      }
      // A worker that got items done before it died was not dying at once: its count starts over.
      deaths = pw.worker.stats.done > 0 ? 1 : deaths + 1;
      const restartInMs = Math.min(this.backoff.max, this.backoff.initial * 2 ** (deaths - 1));
      this.logger.warn('worker exited unexpectedly: replacing it', {
        runId,
        workerId: pw.workerId,
        instanceId: pw.instanceId,
        error: error === null ? 'stopped while its run still has work' : errorMessage(error),
        deaths,
        restartInMs,
      });
      if (!(await this.pause(restartInMs))) return;
    }
  }

  /** Waits `ms` unless the pool closes first; false if it closed. */
  private async pause(ms: number): Promise<boolean> {
    try {
      await sleep(ms, undefined, { signal: this.stop.signal });
      return true;
    } catch {
      return false;
    }
  }

  private spawn(runId: string, slot: number, { workerId, instanceId }: Identity): { pw: PoolWorker; agent: WorkerAgent } {
    const node = this.node;
    const worker = this.makeWorker({
      runId,
      workerId,
      ledger: node.plane.stores.ledger,
      queue: new LedgerWorkQueue(node.sql, node.wake, runId, null).forWorker(workerId),
      backend: mockBackend({ durationMs: this.itemMs }),
      coordinator: {
        requestWork: async (w) => {
          const r = await node.stealFor(runId, w);
          return r.leader ? r.notice : { epoch: 0, victim: null, items: [] };
        },
      },
      waitSeconds: 1,
      // A few workers in one process, no Lambda behind the coordinator: a late one asks as soon as it finds nothing.
      askAtStart: true,
      // The first worker takes a large share, so the late ones have something to steal.
      receiveBatch: slot === 0 ? 100 : 10,
      heartbeatMs: 1_000,
      logger: this.quiet,
    });
    const agent = new WorkerAgent({
      worker,
      registry: node.plane.registry,
      registration: { workerId, instanceId, provider: 'local', runId },
      ledger: node.plane.stores.ledger,
      registryHeartbeatMs: 250,
      exitWhenDone: true,
      logger: this.quiet,
    });
    const pw: PoolWorker = { runId, workerId, instanceId, worker, exit: null };
    this.workers.push(pw);
    return { pw, agent };
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
    const r = await this.node.plane.registry.requestDrain({ instanceId: victim.instanceId, kind: 'interruption', provider: 'aws', noticeAt: now }, now);
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
