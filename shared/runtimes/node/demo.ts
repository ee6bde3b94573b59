import { errorMessage, type Logger } from '../../log.js';
import { createRollout } from '../../rollout/commands.js';
import { isTerminal } from '../../rollout/transitions.js';
import type { ControlPlaneNode } from './node.js';
import type { LocalWorkerPool } from './worker-pool.js';

/**
 * `npm start`'s demo: a 4-stage rollout promoted stage by stage on metrics
 * reported as it goes, and a work run on the in-process workers with a late
 * joiner stealing and one simulated spot interruption drained.
 */
export interface DemoOptions {
  items: number;
  bakeSeconds: number;
  /** Metrics reports per second while a stage is active. */
  reportsPerSecond?: number;
}

export interface DemoProgress {
  readonly rolloutId: string;
  readonly rolloutState: string;
  readonly stages: readonly { name: string; percent: number; phase: string }[];
  readonly errorRate: number | null;
  readonly p99LatencyMs: number | null;
  readonly runId: string;
  readonly items: number;
  readonly done: number;
  readonly running: number;
  readonly failed: number;
  readonly steals: number;
  readonly drains: number;
  readonly rolloutSeconds: number | null;
  readonly runSeconds: number | null;
}

export class Demo {
  readonly rolloutId: string;
  readonly runId: string;
  private readonly began = Date.now();
  private rolloutDoneAt: number | null = null;
  private runDoneAt: number | null = null;
  private interrupted = false;
  private readonly counters = new Map<number, { requests: number; errors: number }>();
  private timer: NodeJS.Timeout | undefined;
  private reporting: Promise<void> = Promise.resolve();

  constructor(
    private readonly node: ControlPlaneNode,
    private readonly pool: LocalWorkerPool,
    private readonly o: DemoOptions,
  ) {
    const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '');
    this.rolloutId = `demo-rollout-${stamp}`;
    this.runId = `demo-run-${stamp}`;
  }

  async start(): Promise<void> {
    const gates = { maxErrorRate: 0.05, maxP99LatencyMs: 800, minRequests: 50 };
    await createRollout(this.node.plane.engine, {
      id: this.rolloutId,
      actor: 'demo',
      spec: {
        target: { service: 'checkout', version: 'v2.0.0' },
        stages: [
          { name: 'canary', percent: 5, bakeSeconds: this.o.bakeSeconds, gates },
          { name: 'quarter', percent: 25, bakeSeconds: this.o.bakeSeconds, gates },
          { name: 'half', percent: 50, bakeSeconds: this.o.bakeSeconds, gates },
          { name: 'all', percent: 100, bakeSeconds: this.o.bakeSeconds, gates },
        ],
      },
    });
    await this.node.streaming.handle({ type: 'rollout.created', rolloutId: this.rolloutId });
    const now = Date.now();
    await this.node.plane.stores.ledger.createRun(this.runId, { demo: true }, now);
    await this.node.plane.stores.ledger.enqueue(this.runId, Array.from({ length: this.o.items }, (_, i) => ({ demo: this.runId, item: i })), now);
    await this.node.wake.notify(this.runId);
    const every = 1000 / (this.o.reportsPerSecond ?? 4);
    const loop = () => {
      this.reporting = this.step()
        .catch(() => undefined)
        .finally(() => {
          if (!this.finished()) this.timer = setTimeout(loop, every);
        });
    };
    loop();
  }

  /** One metrics report for the active stage (cumulative, ~0.5% errors), and the spot interruption when due. */
  private async step(): Promise<void> {
    const view = await this.node.plane.engine.store.load(this.rolloutId);
    if (view && !isTerminal(view.rollout.state)) {
      const active = view.stages.find((s) => s.phase === 'active');
      if (active) {
        const c = this.counters.get(active.index) ?? { requests: 0, errors: 0 };
        c.requests += 40;
        c.errors += Math.random() < 0.2 ? 1 : 0;
        this.counters.set(active.index, c);
        await this.node.streaming.handle({ type: 'rollout.metrics_reported', rolloutId: this.rolloutId, stage: active.index, requests: c.requests, errors: c.errors, p99LatencyMs: 120 + Math.round(Math.random() * 60), observedAt: Date.now() });
      }
    } else if (view && this.rolloutDoneAt === null) this.rolloutDoneAt = Date.now();
    const counts = await this.node.plane.stores.ledger.counts(this.runId);
    // Once a late worker has stolen (or the run is nearly done), so the demo shows both.
    if (!this.interrupted && counts.done >= this.o.items / 3 && (this.pool.stolen(this.runId) > 0 || counts.done >= (this.o.items * 3) / 4)) this.interrupted = (await this.pool.interrupt(this.runId)) !== null;
    if (this.runDoneAt === null && counts.pending + counts.running === 0) this.runDoneAt = Date.now();
  }

  finished(): boolean {
    return this.rolloutDoneAt !== null && this.runDoneAt !== null;
  }

  async progress(): Promise<DemoProgress> {
    const view = await this.node.plane.engine.store.load(this.rolloutId);
    const counts = await this.node.plane.stores.ledger.counts(this.runId);
    const active = view?.stages.find((s) => s.phase === 'active');
    const m = active ? view?.metrics.get(active.index) : undefined;
    const secs = (t: number | null) => (t === null ? null : (t - this.began) / 1000);
    return {
      rolloutId: this.rolloutId,
      rolloutState: view?.rollout.state ?? 'unknown',
      stages: (view?.stages ?? []).map((s) => ({ name: s.name, percent: view!.rollout.spec.stages[s.index]!.percent, phase: s.phase })),
      errorRate: m && m.requests ? m.errors / m.requests : null,
      p99LatencyMs: m?.p99LatencyMs ?? null,
      runId: this.runId,
      items: this.o.items,
      done: counts.done,
      running: counts.running,
      failed: counts.failed,
      steals: this.pool.stolen(this.runId),
      drains: this.pool.drained(this.runId),
      rolloutSeconds: secs(this.rolloutDoneAt),
      runSeconds: secs(this.runDoneAt),
    };
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    await this.reporting;
  }
}

function bar(p: DemoProgress): string {
  const mark = (phase: string) => (phase === 'promoted' ? '✔' : phase === 'active' ? '▶' : phase === 'rolled_back' ? '✘' : ' ');
  return p.stages.map((s) => `[${mark(s.phase)} ${s.name} ${s.percent}%]`).join('');
}

function progressLines(p: DemoProgress, url: string): string[] {
  const gate = p.errorRate === null ? '' : `  errors ${(100 * p.errorRate).toFixed(1)}%, p99 ${p.p99LatencyMs ?? '-'} ms`;
  return [
    `rollout ${p.rolloutId}  ${p.rolloutState.padEnd(9)} ${bar(p)}${gate}${p.rolloutSeconds === null ? '' : `  (${p.rolloutSeconds.toFixed(1)} s)`}`,
    `run     ${p.runId}  ${p.done}/${p.items} done, ${p.running} running, ${p.failed} failed · steals ${p.steals} · drains ${p.drains}${p.runSeconds === null ? '' : `  (${p.runSeconds.toFixed(1)} s)`}`,
    `status page ${url}   Ctrl-C to stop`,
  ];
}

/**
 * The demo's live progress on `out`: redrawn in place on a terminal, a line
 * per change otherwise; a summary line when it is over, then `onFinished`.
 */
export function printProgress(demo: Demo, out: NodeJS.WriteStream, url: string, logger: Logger, onFinished: () => void): { stop(): void } {
  const tty = out.isTTY === true;
  let drawn = 0;
  let last = '';
  let drawing = false;
  const draw = async () => {
    const p = await demo.progress();
    const lines = progressLines(p, url);
    const text = lines.join('\n');
    if (tty) {
      out.write(`${drawn ? `\x1b[${drawn}A\x1b[J` : ''}${text}\n`);
      drawn = lines.length;
    } else if (text !== last) out.write(`${lines.slice(0, 2).join('\n')}\n`);
    last = text;
    if (demo.finished()) {
      clearInterval(ticker);
      out.write(`demo complete: rollout ${p.rolloutId} ${p.rolloutState} in ${p.rolloutSeconds?.toFixed(1)} s; run ${p.runId} finished in ${p.runSeconds?.toFixed(1)} s (${p.done} done, ${p.failed} failed, steals ${p.steals}, drains ${p.drains})\n`);
      onFinished();
    }
  };
  const ticker = setInterval(() => {
    if (drawing) return;
    drawing = true;
    draw()
      .catch((err: unknown) => logger.warn('progress failed', { error: errorMessage(err) }))
      .finally(() => (drawing = false));
  }, tty ? 250 : 1_000);
  return { stop: () => clearInterval(ticker) };
}
