import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { proxyTimeouts, startNginx } from '../../../infra/local/cluster.js';
import { collect, exited, freePort, postgresAnswers, postgresBinDir, serverUser, waitFor } from '../../../infra/local/processes.js';
import { startFakePrometheus, type FakePrometheus } from '../../support/fake-prometheus.js';
import { FaultyProxy } from '../../support/tcp-proxy.js';
import type { ProcessSpan, Stall } from '../history.js';
import { onScheduleClock, readStallDir } from '../stalls.js';
import { variantNamed } from '../variants.js';
import { installAudit } from './audit.js';
import { chaosSeries } from './judged.js';
import { ChaosTargets } from './targets.js';

/**
 * What a user runs, as OS processes the nemesis can kill, pause and cut off:
 * a PostgreSQL server (restartable on its data directory), `rollout serve`
 * nodes — each reaching PostgreSQL through its own faulty TCP link — nginx
 * with the shipped configuration, the split nginx targets the rollouts move
 * (targets.ts, declared to every node), `rollout worker` processes, an HTTP
 * execution backend the workers call (the harness's own: it records every
 * execution as an op, independently of what workers report), and a
 * Prometheus-compatible answerer the judged gates read (judged.ts), the one
 * origin the nodes' outbound configuration allows.
 */

const root = resolve(import.meta.dirname, '../../..');
const wall = () => performance.timeOrigin + performance.now();

/** Short timings so elections happen within a schedule; the bounds the checker uses follow from them. */
export const TIMINGS = { ttlS: 3, heartbeatS: 1, electionS: 0.5, tickS: 0.5 } as const;
/** How often a worker heartbeats the items it holds. */
export const WORKER_HEARTBEAT_MS = 500;
export const SKEW_MARGIN_MS = Math.min(1_000, (TIMINGS.ttlS * 1000) / 10);

export class ManagedProcess {
  child: ChildProcess | null = null;
  log: () => string = () => '';
  clockOffsetMs = 0;
  paused = false;
  /** Wall-clock spans (converted per schedule). */
  readonly spans: { from: number; to: number | null; end?: ProcessSpan['end'] }[] = [];

  constructor(
    readonly name: string,
    readonly role: ProcessSpan['role'],
    private readonly launch: (offsetMs: number) => ChildProcess,
  ) {}

  get alive(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    this.child = this.launch(this.clockOffsetMs);
    this.log = collect(this.child);
    // CHAOS_LOG_DIR keeps every process's output, across restarts, for reading a schedule afterwards.
    const dir = process.env.CHAOS_LOG_DIR;
    if (dir) {
      const file = join(dir, `${this.name}.log`);
      const keep = (b: Buffer) => appendFileSync(file, b);
      appendFileSync(file, `--- ${new Date().toISOString()} started (pid ${this.child.pid ?? '?'})\n`);
      this.child.stdout?.on('data', keep);
      this.child.stderr?.on('data', keep);
    }
    this.paused = false;
    this.spans.push({ from: wall(), to: null });
    const child = this.child;
    // Closes whichever span is open (a resume opens a new one).
    child.once('exit', (code, signal) => this.closeSpan(signal === 'SIGKILL' ? 'killed' : code === 0 ? 'exited' : signal ? 'stopped' : 'crashed'));
  }

  private closeSpan(end: ProcessSpan['end']): void {
    const open = this.spans.at(-1);
    if (open && open.to === null) {
      open.to = wall();
      open.end = end;
    }
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (!this.child || !this.alive) return;
    if (this.paused) this.child.kill('SIGCONT');
    this.closeSpan(signal === 'SIGKILL' ? 'killed' : 'stopped');
    const child = this.child;
    child.kill(signal);
    // A process that does not stop within 15 s of a polite signal is killed.
    const force = signal === 'SIGKILL' ? undefined : setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited(child);
    clearTimeout(force);
    this.paused = false;
  }

  pause(): void {
    if (!this.child || !this.alive || this.paused) return;
    this.child.kill('SIGSTOP');
    this.paused = true;
    this.closeSpan('paused');
  }

  resume(): void {
    if (!this.child || !this.paused) return;
    this.child.kill('SIGCONT');
    this.paused = false;
    if (this.alive) this.spans.push({ from: wall(), to: null });
  }
}

/** PostgreSQL on a data directory that outlives a stop: "stopped and restarted" keeps the data. */
class RestartablePostgres {
  readonly dir = mkdtempSync(join(tmpdir(), 'rollout-chaos-pg-'));
  private server: ChildProcess | null = null;
  readonly process: ManagedProcess;
  port = 0;

  constructor() {
    this.process = new ManagedProcess('store', 'store', () => this.spawnServer());
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async init(): Promise<void> {
    const user = serverUser();
    if (user) chownSync(this.dir, user.uid, user.gid);
    const init = spawnSync(
      join(postgresBinDir(), 'initdb'),
      ['-D', join(this.dir, 'data'), '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions'],
      { encoding: 'utf8', ...user },
    );
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
    this.port = await freePort();
    await this.start();
  }

  private spawnServer(): ChildProcess {
    this.server = spawn(
      join(postgresBinDir(), 'postgres'),
      // Commits are durable against a crash of the server process (the store-restart fault is one):
      // synchronous_commit stays on, so an acknowledged write is in the WAL. fsync off only gives up
      // durability against a crash of the machine, which no fault here causes.
      [
        '-D',
        join(this.dir, 'data'),
        '-p',
        String(this.port),
        '-k',
        this.dir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'fsync=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=300',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], ...serverUser() },
    );
    return this.server;
  }

  async start(): Promise<void> {
    this.process.start();
    await waitFor('PostgreSQL', 30_000, () => postgresAnswers(this.url), this.process.child!, this.process.log);
  }

  /** An immediate shutdown (SIGQUIT): like a crash, recovered from the WAL at the next start. */
  async stop(): Promise<void> {
    await this.process.kill('SIGQUIT');
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface Execution {
  readonly n: number;
  readonly startedAt: number;
  endedAt: number | null;
  ok: boolean | null;
}

/**
 * The workers' execution backend. A payload `{ n, ms, poison }` takes `ms`
 * and fails when `poison` (every time: a poison item).
 */
class Backend {
  readonly executions: Execution[] = [];
  private server: Server | null = null;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (b: Buffer) => (body += b.toString()));
      req.on('end', () => {
        let p: { n?: number; ms?: number; poison?: boolean } = {};
        try {
          p = JSON.parse(body) as typeof p;
        } catch {
          res.writeHead(400).end('bad payload');
          return;
        }
        const e: Execution = { n: Number(p.n), startedAt: wall(), endedAt: null, ok: null };
        this.executions.push(e);
        setTimeout(
          () => {
            e.endedAt = wall();
            e.ok = !p.poison;
            if (p.poison) res.writeHead(500).end(`poison item ${p.n}`);
            else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ n: p.n, out: `done-${p.n}` }));
          },
          Math.max(0, Number(p.ms ?? 0)),
        );
      });
    });
    const port = await freePort();
    await new Promise<void>((r) => this.server!.listen(port, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

export interface ClusterNode {
  readonly id: string;
  readonly url: string;
  readonly process: ManagedProcess;
  /** Its link to PostgreSQL. */
  readonly link: FaultyProxy;
}

export class ChaosCluster {
  readonly store = new RestartablePostgres();
  readonly backend = new Backend();
  readonly nodes: ClusterNode[] = [];
  readonly workers = new Map<string, ManagedProcess>();
  readonly replacements: ManagedProcess[] = [];
  readonly targets = new ChaosTargets();
  /** Where every process it starts records its scheduling stalls (stalls.ts). */
  readonly stallDir = mkdtempSync(join(tmpdir(), 'rollout-chaos-stalls-'));
  /** The judged gates' provider: a range-query answerer in the harness process. */
  prometheus: FakePrometheus | null = null;
  /** The nodes' outbound configuration: the answerer's origin. */
  private readonly outboundFile = join(this.stallDir, 'outbound.json');
  nginxUrl = '';
  private nginx: { url: string; stop(): Promise<void> } | null = null;
  private readonly links: FaultyProxy[] = [];

  constructor(readonly o: { nodes: number; variant: string | null }) {}

  private nodeArgs(): string[] {
    return ['--import', 'tsx', '--import', join(root, 'test/chaos/preload.ts'), join(root, 'shared/runtimes/cli/cli.ts')];
  }

  private serveArgs(): string[] {
    return [...this.nodeArgs(), 'serve', '--json', '--targets-config', this.targets.configFile, '--outbound-config', this.outboundFile];
  }

  private env(offsetMs: number, name: string): NodeJS.ProcessEnv {
    return {
      ...process.env,
      CHAOS_STALL_DIR: this.stallDir,
      CHAOS_PROCESS: name,
      ...(this.o.variant ? { CHAOS_VARIANT: this.o.variant } : {}),
      CHAOS_TARGET_GATE: this.targets.gate.dir,
      CHAOS_CLOCK_OFFSET_MS: String(offsetMs),
      CLUSTER_LEASE_TTL: String(TIMINGS.ttlS),
      CLUSTER_HEARTBEAT_INTERVAL: String(TIMINGS.heartbeatS),
      CLUSTER_ELECTION_INTERVAL: String(TIMINGS.electionS),
      CLUSTER_ELECTION_TIMEOUT: String(TIMINGS.ttlS),
      CLUSTER_MONITOR_INTERVAL: '1',
      ROLLOUT_SCAN_INTERVAL: '1',
      ROLLOUT_TICK_INTERVAL: String(TIMINGS.tickS),
    };
  }

  async start(): Promise<void> {
    await this.store.init();
    await this.backend.start();
    await this.targets.start();
    this.prometheus = await startFakePrometheus(chaosSeries);
    writeFileSync(this.outboundFile, JSON.stringify({ origins: [this.prometheus.url] }));
    for (let i = 1; i <= this.o.nodes; i++) {
      const id = `node-${i}`;
      const port = await freePort();
      const link = await new FaultyProxy('127.0.0.1', this.store.port).start();
      this.links.push(link);
      const url = `http://127.0.0.1:${port}`;
      const proc = new ManagedProcess(id, 'node', (offset) =>
        spawn(process.execPath, this.serveArgs(), {
          cwd: root,
          env: {
            ...this.env(offset, id),
            CLUSTER_NODE_ID: id,
            CLUSTER_HOSTNAME: id,
            ROLLOUT_PORT: String(port),
            ROLLOUT_API_URL: url,
            DATABASE_URL: `postgres://postgres@127.0.0.1:${link.port}/postgres`,
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        }),
      );
      this.nodes.push({ id, url, process: proc, link });
    }
    // One node first: it migrates the schema; then the audit triggers go in before any traffic.
    await this.startNode(this.nodes[0]!);
    await installAudit(this.store.url);
    await Promise.all(this.nodes.slice(1).map((n) => this.startNode(n)));
    const variant = this.o.variant ? variantNamed(this.o.variant) : null;
    this.nginx = await startNginx(
      this.nodes.map((n) => Number(new URL(n.url).port)),
      {
        timeouts: proxyTimeouts({
          CLUSTER_LEASE_TTL: String(TIMINGS.ttlS),
          CLUSTER_HEARTBEAT_INTERVAL: String(TIMINGS.heartbeatS),
          CLUSTER_ELECTION_INTERVAL: String(TIMINGS.electionS),
        }),
        ...(variant?.nginx ? { rewrite: variant.nginx } : {}),
      },
    );
    this.nginxUrl = this.nginx.url;
  }

  /**
   * A second process under an existing node's id, on its own port: what an
   * orchestrator starts when it declares a paused or partitioned node dead.
   * Not behind nginx; it leads, coordinates and writes like any node.
   */
  async replacement(of: ClusterNode): Promise<ManagedProcess> {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // Its own link: the original's may be holding the original's late writes.
    const link = await new FaultyProxy('127.0.0.1', this.store.port).start();
    this.links.push(link);
    const proc = new ManagedProcess(of.id, 'node', (offset) =>
      spawn(process.execPath, this.serveArgs(), {
        cwd: root,
        env: {
          ...this.env(offset, of.id),
          CLUSTER_NODE_ID: of.id,
          CLUSTER_HOSTNAME: `${of.id}-replacement`,
          ROLLOUT_PORT: String(port),
          ROLLOUT_API_URL: url,
          DATABASE_URL: `postgres://postgres@127.0.0.1:${link.port}/postgres`,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    this.replacements.push(proc);
    proc.start();
    try {
      await waitFor(
        `${of.id} (replacement)`,
        60_000,
        async () => {
          const res = await fetch(`${url}/cluster/health`, { signal: AbortSignal.timeout(1_000) });
          await res.text();
          return res.ok;
        },
        proc.child!,
        proc.log,
      );
    } catch (err) {
      await proc.kill('SIGKILL');
      throw err;
    }
    return proc;
  }

  async startNode(n: ClusterNode): Promise<void> {
    n.process.start();
    await waitFor(
      n.id,
      60_000,
      async () => {
        const res = await fetch(`${n.url}/cluster/health`, { signal: AbortSignal.timeout(1_000) });
        await res.text();
        return res.ok;
      },
      n.process.child!,
      n.process.log,
    );
  }

  /** `chunkBudgetMs`: 1 starts one item at a time, so the rest of each batch waits claimed (and must be heartbeated). */
  worker(runId: string, workerId: string, o: { chunkBudgetMs?: number } = {}): ManagedProcess {
    const key = `${workerId}`;
    const proc = new ManagedProcess(key, 'worker', (offset) =>
      spawn(
        process.execPath,
        [
          ...this.nodeArgs(),
          'worker',
          '--run',
          runId,
          '--store',
          'postgres',
          '--database-url',
          this.store.url,
          '--queue',
          'ledger',
          '--coordinator',
          `${this.nginxUrl}/coordinator`,
          '--backend',
          'http',
          '--backend-url',
          this.backend.url,
          '--worker-id',
          workerId,
          '--instance-id',
          workerId,
          '--heartbeat-ms',
          String(WORKER_HEARTBEAT_MS),
          '--wait-seconds',
          '1',
          '--batch',
          '5',
          ...(o.chunkBudgetMs === undefined ? [] : ['--chunk-budget-ms', String(o.chunkBudgetMs)]),
          '--exit-when-done',
          '--json',
        ],
        { cwd: root, env: this.env(offset, key), stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    );
    this.workers.set(key, proc);
    return proc;
  }

  /** The node holding promotion_leader, as the store says (plain SQL). */
  async leader(): Promise<ClusterNode | null> {
    const c = new pg.Client({ connectionString: this.store.url });
    c.on('error', () => undefined);
    try {
      await c.connect();
      const { rows } = await c.query<{ holder: string | null; expires_at: Date }>("SELECT holder, expires_at FROM leases WHERE name = 'promotion_leader'");
      const holder = rows[0]?.holder;
      return this.nodes.find((n) => n.id === holder) ?? null;
    } catch {
      return null;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** Every process as a span on the schedule's clock. */
  spans(epochMs: number): ProcessSpan[] {
    const all: ManagedProcess[] = [this.store.process, ...this.nodes.map((n) => n.process), ...this.replacements, ...this.workers.values()];
    return all.flatMap((p) =>
      p.spans
        .filter((s) => s.to === null || s.to >= epochMs)
        .map((s) => ({
          process: p.name,
          role: p.role,
          from: Math.max(0, s.from - epochMs),
          to: s.to === null ? null : s.to - epochMs,
          ...(s.end ? { end: s.end } : {}),
        })),
    );
  }

  /** The stalls its processes recorded, on a schedule's clock. */
  stalls(epochMs: number): Stall[] {
    return onScheduleClock(readStallDir(this.stallDir), epochMs);
  }

  heal(): void {
    for (const l of this.links) {
      l.blackhole(false);
      l.delay(0);
      l.loseReplies(false);
      l.hold(false);
      l.refuse(false);
    }
    for (const n of this.nodes) n.process.resume();
    for (const w of this.workers.values()) w.resume();
    this.targets.gate.clear();
  }

  async stop(): Promise<void> {
    await this.nginx?.stop().catch(() => undefined);
    await Promise.all([...this.workers.values()].map((w) => w.kill('SIGKILL')));
    await Promise.all([...this.replacements, ...this.nodes.map((n) => n.process)].map((p) => p.kill('SIGTERM')));
    for (const l of this.links) await l.stop();
    await this.backend.stop();
    await this.targets.stop();
    await this.prometheus?.stop();
    await this.store.destroy();
    rmSync(this.stallDir, { recursive: true, force: true });
  }
}
