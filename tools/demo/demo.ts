import { spawnSync } from 'node:child_process';
import { startSplitNginx } from '../../test/support/split-nginx.js';
import { existsSync } from 'node:fs';
import type { NginxTarget } from '../../shared/actuation/targets.js';
import { MAX_ASSIGNMENT_ENTITIES } from '../../shared/api/handler.js';
import { errorMessage, type Logger } from '../../shared/log.js';
import { trafficOf } from '../../shared/rollout/assignment.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { isTerminal } from '../../shared/rollout/transitions.js';
import { authEnabled } from '../../shared/runtimes/node/config.js';
import type { ControlPlaneNode, RolloutFields } from '../../shared/runtimes/node/node.js';
import type { LocalWorkerPool } from '../../shared/runtimes/node/worker-pool.js';

/**
 * `npm start`'s demo: a 4-stage rollout promoted stage by stage on metrics
 * reported as it goes, moving a real nginx when one is installed (the target
 * `web`), with a simulated fleet asking which version each of its hosts
 * should run; and a work run on the in-process workers with a late joiner
 * stealing and one simulated spot interruption drained.
 */
export interface DemoOptions {
  items: number;
  bakeSeconds: number;
  /** Metrics reports per second while a stage is active. */
  reportsPerSecond?: number;
  /** The node's URL: the simulated fleet asks it, as hosts would. None: no fleet. */
  url?: string;
  /** A target the operator declared for the demo rollout to move (`web`, startDemoTarget). */
  target?: string | null;
}

export interface DemoProgress {
  readonly rolloutId: string;
  readonly rolloutState: string;
  readonly stages: readonly { name: string; percent: number; phase: string }[];
  readonly errorRate: number | null;
  /** What the fleet was told under the stage in force now (the last one, once completed). */
  readonly fleet: FleetStage | null;
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
  private fleet: Fleet | null = null;
  /** What the demo does beyond the rollout and the run, a line each (a fleet, or why there is none). */
  readonly notes: string[] = [];

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
    await this.endEarlierDemos();
    await createRollout(this.node.plane.engine, {
      id: this.rolloutId,
      actor: 'demo',
      spec: {
        target: { service: 'checkout', version: 'v2.0.0' },
        ...(this.o.target ? { actuators: [this.o.target] } : {}),
        stages: [
          { name: 'canary', percent: 5, bakeSeconds: this.o.bakeSeconds, gates },
          { name: 'quarter', percent: 25, bakeSeconds: this.o.bakeSeconds, gates },
          { name: 'half', percent: 50, bakeSeconds: this.o.bakeSeconds, gates },
          { name: 'all', percent: 100, bakeSeconds: this.o.bakeSeconds, gates },
        ],
      },
    });
    await this.node.streaming.handle({ type: 'rollout.created', rolloutId: this.rolloutId });
    if (this.o.url && authEnabled(this.node.config)) this.notes.push('demo: no simulated fleet: this node asks who is calling (authentication is on)');
    else if (this.o.url) {
      this.fleet = new Fleet({ url: loopbackFor(this.o.url), rolloutId: this.rolloutId });
      showFleet(this.node, this.fleet);
      this.fleet.start();
      this.notes.push(
        `demo: ${this.fleet.entities.length.toLocaleString('en')} simulated hosts ask GET /rollouts/{id}/assignment every ${FLEET_EVERY_MS / 1000} s, ${FLEET_BATCH} a request; the status page charts what they are told`,
      );
    }
    const now = Date.now();
    await this.node.plane.stores.ledger.createRun(this.runId, { demo: true }, now);
    await this.node.plane.stores.ledger.enqueue(
      this.runId,
      Array.from({ length: this.o.items }, (_, i) => ({ demo: this.runId, item: i })),
      now,
    );
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
        await this.node.streaming.handle({
          type: 'rollout.metrics_reported',
          rolloutId: this.rolloutId,
          stage: active.index,
          requests: c.requests,
          errors: c.errors,
          p99LatencyMs: 120 + Math.round(Math.random() * 60),
          observedAt: Date.now(),
        });
      }
    } else if (view && this.rolloutDoneAt === null) this.rolloutDoneAt = Date.now();
    const counts = await this.node.plane.stores.ledger.counts(this.runId);
    // Once a late worker has stolen (or the run is nearly done), so the demo shows both.
    if (!this.interrupted && counts.done >= this.o.items / 3 && (this.pool.stolen(this.runId) > 0 || counts.done >= (this.o.items * 3) / 4))
      this.interrupted = (await this.pool.interrupt(this.runId)) !== null;
    if (this.runDoneAt === null && counts.pending + counts.running === 0) this.runDoneAt = Date.now();
  }

  /**
   * A demo stopped part-way leaves its rollout running, and on the next start
   * it would hold the demo's target against the new one (drift, a pause):
   * those that move a target are aborted first, their traffic taken back.
   */
  private async endEarlierDemos(): Promise<void> {
    const { rows } = await this.node.sql.query<{ id: string }>(`SELECT id FROM rollouts WHERE id LIKE 'demo-rollout-%' AND state IN ('running', 'paused')`);
    const token = rows.length ? await this.node.plane.leadership() : null;
    if (!token) return;
    for (const { id } of rows) {
      const view = await this.node.plane.engine.store.load(id);
      if (!view?.rollout.spec.actuators?.length) continue;
      await runCommand(this.node.plane.engine, token, {
        rolloutId: id,
        command: 'abort',
        actor: 'demo',
        reason: 'a new demo started; this one was left unfinished',
      }).catch(() => undefined);
    }
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
      fleet: (view && this.fleet?.current(view.rollout.attempt, trafficOf(view).stage?.name ?? null)) ?? null,
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
    if (this.fleet) {
      showFleet(this.node, null);
      await this.fleet.stop();
    }
  }
}

/** The demo's fleet: how many hosts, how often each asks, how many one request asks about (as many as the route takes). */
export const FLEET_SIZE = 1_000;
export const FLEET_EVERY_MS = 2_000;
export const FLEET_BATCH = MAX_ASSIGNMENT_ENTITIES;

/** One stage as the fleet saw it: the newest answer each host was given while the stage was in force. */
export interface FleetStage {
  readonly attempt: number;
  /** The stage named by the answers; null before the first activation and after a rollback or an abort. */
  readonly stage: string | null;
  readonly percent: number;
  /** Hosts answered under this stage, and how many of them were told the new version. */
  readonly observed: number;
  readonly onNew: number;
}

export interface FleetView {
  readonly rolloutId: string;
  readonly entities: number;
  readonly everySeconds: number;
  readonly requests: number;
  readonly failures: number;
  readonly lastError: string | null;
  readonly stages: readonly FleetStage[];
}

interface Answer {
  readonly entity: string;
  readonly variant: 'new' | 'stable';
  readonly stage: string | null;
  readonly percent: number;
  readonly attempt: number;
}

/**
 * Hosts that each ask, every couple of seconds (jittered), which version they
 * should run: `GET /rollouts/{id}/assignment`, in batches as a fleet agent
 * would, over HTTP like any client. It keeps what it was told, per stage.
 */
export class Fleet {
  readonly rolloutId: string;
  readonly entities: readonly string[];
  private readonly seen = new Map<string, { attempt: number; stage: string | null; percent: number; variants: Map<string, 'new' | 'stable'> }>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly asking = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private stopped = false;
  private requests = 0;
  private failures = 0;
  private lastError: string | null = null;

  constructor(private readonly o: { url: string; rolloutId: string; size?: number; everyMs?: number; batch?: number }) {
    this.rolloutId = o.rolloutId;
    const size = o.size ?? FLEET_SIZE;
    const width = String(size - 1).length;
    this.entities = Array.from({ length: size }, (_, i) => `host-${String(i).padStart(width, '0')}`);
  }

  start(): void {
    const every = this.o.everyMs ?? FLEET_EVERY_MS;
    const batch = this.o.batch ?? FLEET_BATCH;
    // Spread over the first interval, as hosts that did not start together.
    for (let i = 0; i < this.entities.length; i += batch) this.schedule(this.entities.slice(i, i + batch), Math.random() * every, every);
  }

  private schedule(batch: readonly string[], delayMs: number, every: number): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      const asked = this.ask(batch).finally(() => {
        this.asking.delete(asked);
        this.schedule(batch, every * (0.75 + Math.random() / 2), every);
      });
      this.asking.add(asked);
    }, delayMs);
    this.timers.add(timer);
  }

  private async ask(batch: readonly string[]): Promise<void> {
    const query = new URLSearchParams(batch.map((e): [string, string] => ['entity', e]));
    try {
      this.requests++;
      const res = await fetch(`${this.o.url}/rollouts/${encodeURIComponent(this.rolloutId)}/assignment?${query.toString()}`, { signal: this.abort.signal });
      const body = (await res.json()) as { assignments?: Answer[]; error?: string } & Partial<Answer>;
      if (!res.ok) throw new Error(`HTTP ${res.status}: ${body.error ?? ''}`);
      for (const a of body.assignments ?? [body as Answer]) this.record(a);
    } catch (err) {
      if (this.stopped) return;
      this.failures++;
      this.lastError = errorMessage(err);
    }
  }

  private record(a: Answer): void {
    const key = `${a.attempt}:${a.stage ?? ''}`;
    let s = this.seen.get(key);
    if (!s) this.seen.set(key, (s = { attempt: a.attempt, stage: a.stage, percent: a.percent, variants: new Map() }));
    s.variants.set(a.entity, a.variant);
  }

  /** What the fleet was told under one stage of one attempt; null before any host was. */
  current(attempt: number, stage: string | null): FleetStage | null {
    return this.view().stages.find((s) => s.attempt === attempt && s.stage === stage) ?? null;
  }

  view(): FleetView {
    const stages = [...this.seen.values()].map((s) => ({
      attempt: s.attempt,
      stage: s.stage,
      percent: s.percent,
      observed: s.variants.size,
      onNew: [...s.variants.values()].filter((v) => v === 'new').length,
    }));
    return {
      rolloutId: this.rolloutId,
      entities: this.entities.length,
      everySeconds: (this.o.everyMs ?? FLEET_EVERY_MS) / 1000,
      requests: this.requests,
      failures: this.failures,
      lastError: this.lastError,
      stages,
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.abort.abort();
    await Promise.allSettled([...this.asking]);
  }
}

/** A node listening on every interface is asked over loopback (a wildcard address names no host it answers to). */
function loopbackFor(url: string): string {
  const u = new URL(url);
  if (u.hostname === '0.0.0.0') u.hostname = '127.0.0.1';
  else if (u.hostname === '[::]') u.hostname = '[::1]';
  return u.origin;
}

// The status page shows the fleet of the demo running on its node, beside that rollout's stages: a field the demo adds (node.statusFields).
const fleets = new WeakMap<ControlPlaneNode, { fleet: Fleet; fields: RolloutFields }>();

export function showFleet(node: ControlPlaneNode, fleet: Fleet | null): void {
  const shown = fleets.get(node);
  if (shown) node.statusFields.delete(shown.fields);
  fleets.delete(node);
  if (!fleet) return;
  const fields: RolloutFields = (rolloutId) => (rolloutId === fleet.rolloutId ? { fleet: fleet.view() } : undefined);
  fleets.set(node, { fleet, fields });
  node.statusFields.add(fields);
}

export function fleetOf(node: ControlPlaneNode): Fleet | undefined {
  return fleets.get(node)?.fleet;
}

/** The demo's nginx, declared to the node as a target before it opens. */
export const DEMO_TARGET = 'web';

export interface DemoTarget {
  readonly name: string;
  /** nginx's URL: a request goes to stable or canary by its X-Entity header. */
  readonly url: string;
  readonly config: NginxTarget;
  stop(): Promise<void>;
}

/** Found without installing anything: `npm start` needs nothing but Node.js, so nginx is a bonus when present. */
function nginxInstalled(): boolean {
  if (['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'].some((p) => existsSync(p))) return true;
  return spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' }).status === 0;
}

/**
 * A real nginx splitting traffic between two tiny servers (the one the
 * nginx actuator's tests run), for the demo rollout to move; none when
 * nginx is not installed, or when the operator already declared a target of
 * that name. `note` says which, in a line.
 */
export async function startDemoTarget(declared: Readonly<Record<string, unknown>> = {}): Promise<{ target: DemoTarget | null; note: string }> {
  if (DEMO_TARGET in declared) return { target: null, note: `demo: a target named ${DEMO_TARGET} is declared already; the demo rollout moves no target` };
  if (!nginxInstalled())
    return { target: null, note: 'demo: nginx not found, so the demo rollout moves no target (install nginx to watch it split real traffic)' };
  try {
    const nginx = await startSplitNginx();
    return {
      target: { name: DEMO_TARGET, url: nginx.url, config: nginx.target, stop: () => nginx.stop() },
      note: `demo: nginx on ${nginx.url} is the rollout's target ${DEMO_TARGET}, splitting requests between stable and canary by their X-Entity header`,
    };
  } catch (err) {
    return { target: null, note: `demo: nginx did not start (${errorMessage(err).split('\n', 1)[0]}); the demo rollout moves no target` };
  }
}

function bar(p: DemoProgress): string {
  const mark = (phase: string) => (phase === 'promoted' ? '✔' : phase === 'active' ? '▶' : phase === 'rolled_back' ? '✘' : ' ');
  return p.stages.map((s) => `[${mark(s.phase)} ${s.name} ${s.percent}%]`).join('');
}

function progressLines(p: DemoProgress, url: string): string[] {
  const gate = p.errorRate === null ? '' : `  errors ${(100 * p.errorRate).toFixed(1)}%, p99 ${p.p99LatencyMs ?? '-'} ms`;
  const f = p.fleet;
  return [
    `rollout ${p.rolloutId}  ${p.rolloutState.padEnd(9)} ${bar(p)}${gate}${p.rolloutSeconds === null ? '' : `  (${p.rolloutSeconds.toFixed(1)} s)`}`,
    `run     ${p.runId}  ${p.done}/${p.items} done, ${p.running} running, ${p.failed} failed · steals ${p.steals} · drains ${p.drains}${p.runSeconds === null ? '' : `  (${p.runSeconds.toFixed(1)} s)`}`,
    ...(f
      ? [
          `fleet   ${f.onNew.toLocaleString('en')} of ${f.observed.toLocaleString('en')} hosts told the new version at ${f.stage ?? 'no stage'} ${f.percent}% (${((100 * f.onNew) / Math.max(1, f.observed)).toFixed(1)}%)`,
        ]
      : []),
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
    if (tty) {
      out.write(`${drawn ? `\x1b[${drawn}A\x1b[J` : ''}${lines.join('\n')}\n`);
      drawn = lines.length;
    } else {
      // The rollout and the run, a line per change (the fleet's tallies change at every answer).
      const text = lines.slice(0, 2).join('\n');
      if (text !== last) out.write(`${text}\n`);
      last = text;
    }
    if (demo.finished()) {
      clearInterval(ticker);
      out.write(
        `demo complete: rollout ${p.rolloutId} ${p.rolloutState} in ${p.rolloutSeconds?.toFixed(1)} s; run ${p.runId} finished in ${p.runSeconds?.toFixed(1)} s (${p.done} done, ${p.failed} failed, steals ${p.steals}, drains ${p.drains})\n`,
      );
      onFinished();
    }
  };
  const ticker = setInterval(
    () => {
      if (drawing) return;
      drawing = true;
      draw()
        .catch((err: unknown) => logger.warn('progress failed', { error: errorMessage(err) }))
        .finally(() => (drawing = false));
    },
    tty ? 250 : 1_000,
  );
  return { stop: () => clearInterval(ticker) };
}
