import { hostname as osHostname } from 'node:os';
import { z } from 'zod';
import { apiHandler, PROMOTION_LEASE, type ApiDeps } from '../../api/handler.js';
import { Membership, type ClusterNode, type ClusterEventType, type NodeState } from '../../cluster/membership.js';
import { parseConfig } from '../../config.js';
import { InProcessBus } from '../../events/bus.js';
import { AdvisoryLockElector } from '../../adapters/postgres/advisory-lock-elector.js';
import { runtimeLeaseTimings } from '../../lease/config.js';
import { LeaseElector, type ElectorCallbacks, type LeaderElector } from '../../lease/elector.js';
import type { LeaseToken } from '../../lease/record.js';
import { pinStaticLeader } from '../../lease/static-elector.js';
import type { LeaseStore } from '../../lease/store.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { RunCoordinators } from '../../ledger/run-coordinators.js';
import { LedgerDeadLetters, LedgerSender, LedgerWorkQueue } from '../../adapters/postgres/ledger-queue.js';
import { PostgresIdempotency } from '../../adapters/postgres/idempotency.js';
import { InProcessWake, PgNotifyWake, type WakeSource } from '../../adapters/postgres/wake.js';
import { WorkerRegistry } from '../../registry/registry.js';
import { leadershipOf, RolloutEngine, type Leadership } from '../../rollout/engine.js';
import { BatchPromoter, StreamingPromoter } from '../../rollout/promoters.js';
import { openStores, sqlStores, type StoreBundle } from '../../compose/stores.js';
import type { LedgerStore } from '../../ledger/store.js';
import { PostgresMembershipStore } from '../../adapters/postgres/membership-store.js';
import type { Sql } from '../../adapters/postgres/sql.js';
import { BATCH_TICK_SECONDS } from '../../topology.js';
import { noticeFromEvent } from '../../drain/sources.js';
import { coordinatorRequest } from '../../ledger/coordinator-protocol.js';
import { inboundFromEnvelope } from '../../rollout/inbound.js';
import { HttpError } from '../../api/handler.js';
import { LocalTriggers, type LocalHandlers } from './triggers.js';

/**
 * A control-plane node on one machine: the local runtime that wires the same
 * core the Lambda functions run (promoters, coordinator, API) around a
 * PostgreSQL store (a server in cluster mode, embedded PGlite for
 * `npm start`), with the loops of Orchestry's distributed controller:
 *
 *   heartbeat  every heartbeatInterval: the node's row in cluster_nodes, the
 *              cluster events that could not be written yet
 *   election   the elector's own loop (lease: retry every electionInterval,
 *              renew every heartbeatInterval; advisory-lock; static)
 *   monitor    every monitorInterval, on the leader: stale nodes unhealthy,
 *              dead ones removed, old events and request records pruned
 *
 * What runs where (as in Leoflow's ADR 0009): the HTTP API, metrics and health on every node;
 * the BatchPromoter's evaluations, the run coordinators and the monitor on
 * the leader only. Safety does not rest on that split: every effectful write
 * is fenced by the store.
 */

export const ELECTORS = ['lease', 'advisory-lock', 'static'] as const;
export type ElectorKind = (typeof ELECTORS)[number];

/** Leadership changes wake followers on this channel (a resigning leader is replaced at once, not at the next retry). */
export const LEADER_CHANNEL = 'rollout_leader';

const seconds = z.number().positive();
export const nodeConfigSchema = z
  .object({
    nodeId: z.string().trim().min(1).max(255).regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : -'),
    hostname: z.string().trim().min(1).max(255).default(osHostname()),
    /** Interface to listen on. */
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65_535).default(8000),
    /** The URL other nodes and proxies reach this node at (default http://<host>:<port>). */
    apiUrl: z.string().url().optional(),
    store: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('postgres'), databaseUrl: z.string().min(1, 'DATABASE_URL is required for a PostgreSQL node') }),
      z.object({ kind: z.literal('pglite'), dataDir: z.string().min(1).nullable() }),
    ]),
    elector: z.enum(ELECTORS).default('lease'),
    leaseTtlSeconds: seconds.default(30),
    heartbeatIntervalSeconds: seconds.default(10),
    electionIntervalSeconds: seconds.default(5),
    /** A node silent this long is unhealthy. */
    electionTimeoutSeconds: seconds.default(15),
    monitorIntervalSeconds: seconds.default(15),
    /** A node silent this long is removed (node_left). */
    deadAfterSeconds: seconds.default(180),
    /** BatchPromoter cadence (the topology's 10 s by default). */
    tickIntervalSeconds: seconds.optional(),
    /** Coordinator failure scan of open runs. */
    scanIntervalSeconds: seconds.default(5),
    /** Followers answer writes with 307 to the leader instead of 503 with the leader named. */
    redirectWrites: z.boolean().default(false),
    /** On a graceful stop, NOTIFY followers so one takes over at once (off: they find out at their next retry). */
    wakeOnResign: z.boolean().default(true),
    eventRetentionDays: z.number().positive().default(7),
  })
  .superRefine((c, ctx) => {
    if (c.elector === 'advisory-lock' && c.store.kind !== 'postgres') ctx.addIssue({ code: 'custom', path: ['elector'], message: 'advisory-lock needs a PostgreSQL server (PGlite has one session; its locks exclude nothing)' });
    if (c.elector === 'lease' && !(c.leaseTtlSeconds > c.heartbeatIntervalSeconds && c.heartbeatIntervalSeconds > 1.2 * c.electionIntervalSeconds)) {
      ctx.addIssue({ code: 'custom', path: ['leaseTtlSeconds'], message: `needs lease TTL (${c.leaseTtlSeconds}) > heartbeat interval (${c.heartbeatIntervalSeconds}) > 1.2 × election interval (${c.electionIntervalSeconds})` });
    } else if (!(c.leaseTtlSeconds > c.heartbeatIntervalSeconds)) {
      // Whatever the elector, run coordinators hold row leases with these timings.
      ctx.addIssue({ code: 'custom', path: ['leaseTtlSeconds'], message: `needs lease TTL (${c.leaseTtlSeconds}) > heartbeat interval (${c.heartbeatIntervalSeconds}): run coordinators renew their leases at the heartbeat` });
    }
    if (!(c.deadAfterSeconds > c.electionTimeoutSeconds)) ctx.addIssue({ code: 'custom', path: ['deadAfterSeconds'], message: 'must exceed the election timeout' });
  });
export type NodeConfigInput = z.input<typeof nodeConfigSchema>;
export type NodeConfig = z.output<typeof nodeConfigSchema>;


export interface LeaderView {
  readonly id: string;
  readonly epoch: number;
  readonly hostname: string | null;
  readonly apiUrl: string | null;
  readonly acquiredAt: number;
  readonly renewedAt: number;
  readonly expiresAt: number;
}

/** Counters and timestamps behind /metrics and /cluster/status. */
export interface NodeStats {
  elections: number;
  leaderChanges: number;
  leaderSince: number | null;
  leadershipSecondsTotal: number;
  lastFailoverAt: number | null;
  heartbeats: number;
  heartbeatFailures: number;
  storeReachable: boolean;
  lastStoreError: string | null;
}


export class ControlPlaneNode {
  readonly config: NodeConfig;
  readonly apiUrl: string;
  readonly bus = new InProcessBus(1_000);
  readonly stats: NodeStats = { elections: 0, leaderChanges: 0, leaderSince: null, leadershipSecondsTotal: 0, lastFailoverAt: null, heartbeats: 0, heartbeatFailures: 0, storeReachable: true, lastStoreError: null };
  readonly leases: LeaseStore;
  readonly engine: RolloutEngine;
  readonly ledger: LedgerStore;
  readonly registry: WorkerRegistry;
  readonly membership: Membership;
  readonly streaming: StreamingPromoter;
  readonly leadership: Leadership;
  /** The topology's functions, wired from their triggers (triggers.ts). */
  readonly triggers: LocalTriggers;
  elector!: LeaderElector;
  /** The lease row as last read: who leads, for followers' answers and the status page. */
  leader: LeaderView | null = null;
  /** Membership as last read. */
  nodes: ClusterNode[] = [];

  private readonly batch: BatchPromoter;
  /** On the leader: a coordinator per open run. */
  private readonly coordinators: RunCoordinators;
  private readonly pendingEvents: { type: ClusterEventType; data: Record<string, unknown> | null; at: number }[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private lastRenewals = 0;
  private stopping = false;

  readonly sql: Sql;

  private constructor(
    config: NodeConfig,
    private readonly stores: StoreBundle,
    readonly wake: WakeSource,
    private readonly closeStore: () => Promise<void>,
    readonly logger: Logger,
  ) {
    this.config = config;
    this.apiUrl = config.apiUrl ?? `http://${config.host === '0.0.0.0' ? config.hostname : config.host}:${config.port}`;
    // Cluster mode is PostgreSQL's (a server, or PGlite for `npm start`): membership and the ledger-backed queue need SQL.
    this.sql = stores.sql!;
    this.leases = stores.leases;
    this.engine = new RolloutEngine({ store: stores.rollouts, bus: this.bus, logger });
    this.ledger = stores.ledger;
    this.registry = new WorkerRegistry(stores.registry);
    this.membership = new Membership(new PostgresMembershipStore(this.sql), { staleAfterMs: config.electionTimeoutSeconds * 1000, deadAfterMs: config.deadAfterSeconds * 1000 });
    this.leadership = async () => (this.elector ? leadershipOf(this.elector)() : null);
    this.streaming = new StreamingPromoter(this.engine, this.leadership);
    this.batch = new BatchPromoter(this.engine, this.leadership);
    this.coordinators = new RunCoordinators({
      holderId: config.nodeId,
      ledger: this.ledger,
      runLeases: stores.runLeases,
      timings: this.leaseTimings(),
      bus: this.bus,
      isLeader: () => this.isLeader(),
      queueFor: (runId) => new LedgerWorkQueue(this.sql, this.wake, runId, null),
      // The ledger-backed queue: an item given back maxReceiveCount times is a dead letter, failed with the reason.
      deadLettersFor: (runId) => new LedgerDeadLetters(this.sql, runId),
      onSteal: (runId, n) => this.countSteals(runId, n),
      logger,
    });
    this.triggers = new LocalTriggers(this.functions(), logger);
  }

  /** What each function of the topology is on this node. */
  private functions(): LocalHandlers {
    const c = this.config;
    return {
      streamingPromoter: { rule: (event) => this.streaming.handle(inboundFromEnvelope(event)) },
      batchPromoter: { schedule: { everySeconds: c.tickIntervalSeconds ?? BATCH_TICK_SECONDS, run: () => this.batch.tick() } },
      coordinator: {
        invoke: async (input) => {
          const request = coordinatorRequest.safeParse(input);
          if (!request.success) throw new HttpError(400, `invalid coordinator request: ${request.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
          if (request.data.action !== 'steal') throw new HttpError(400, `a node's coordinator answers "steal" requests; "${request.data.action}" runs on its own schedule here`);
          const r = await this.stealFor(request.data.runId, request.data.workerId);
          return r.leader ? { leader: true, notice: { ...r.notice, items: [...r.notice.items] } } : r;
        },
        schedule: { everySeconds: c.scanIntervalSeconds, run: () => this.coordinators.scan() },
      },
      // The ledger-backed queue: an item given back maxReceiveCount times is a dead letter, failed with the reason.
      deadLetters: { queue: { everySeconds: c.scanIntervalSeconds, run: () => this.coordinators.failDeadLetters() } },
      spotDrain: { rule: (event) => this.registry.requestDrain(noticeFromEvent(event, Date.now()), Date.now()) },
      api: { http: (req) => this.api()(req) },
    };
  }

  /** Connects and migrates the store; nothing runs until `start()`. */
  static async open(input: NodeConfigInput, logger: Logger = silentLogger): Promise<ControlPlaneNode> {
    const config = parseConfig('node', nodeConfigSchema, input);
    let node: ControlPlaneNode;
    if (config.store.kind === 'postgres') {
      const url = config.store.databaseUrl;
      // A node paused inside a transaction (SIGSTOP, a long GC pause) must not hold its row and
      // advisory locks past its lease: PostgreSQL ends such a session after one TTL, and the new
      // leader's retry of the same write (same Idempotency-Key) goes through instead of waiting.
      const idleLimitMs = Math.ceil(config.leaseTtlSeconds * 1000);
      const stores = await openStores({
        kind: 'postgres',
        // Bounded waits: a store that stops answering must turn into errors (stale reads, step-down), not hung requests.
        connection: { connectionString: url, max: 10, connectionTimeoutMillis: 3_000, query_timeout: 10_000 },
        onConnect: (client) => void client.query(`SET idle_in_transaction_session_timeout = ${idleLimitMs}`).catch(() => undefined),
      });
      let onLeader = (_payload: string) => undefined as void;
      const wake = await PgNotifyWake.open({ connectionString: url }, logger, { [LEADER_CHANNEL]: (p) => onLeader(p) }).catch(async (err: unknown) => {
        await stores.close();
        throw err;
      });
      node = new ControlPlaneNode(config, stores, wake, async () => {
        await wake.close();
        await stores.close();
      }, logger);
      onLeader = (p) => node.onLeaderNotice(p);
    } else {
      const stores = await openStores({ kind: 'pglite', dataDir: config.store.dataDir });
      node = new ControlPlaneNode(config, stores, new InProcessWake(), () => stores.close(), logger);
    }
    return node;
  }

  get nodeId(): string {
    return this.config.nodeId;
  }

  get state(): NodeState {
    return this.elector?.state ?? 'follower';
  }

  get term(): number {
    return this.elector?.token()?.epoch ?? this.leader?.epoch ?? 0;
  }

  /**
   * Every row lease this node holds (promotion_leader, coordinator:<run>):
   * renewed with the heartbeat, retried every election interval — or faster
   * when another elector's long interval would break the row lease's rule
   * (renew > 1.2 × retry).
   */
  private leaseTimings() {
    const c = this.config;
    return runtimeLeaseTimings({ ttlMs: c.leaseTtlSeconds * 1000, renewIntervalMs: c.heartbeatIntervalSeconds * 1000, retryIntervalMs: c.electionIntervalSeconds * 1000 });
  }

  /** Join the cluster, start electing, promoting and coordinating. */
  async start(): Promise<void> {
    const c = this.config;
    const callbacks: ElectorCallbacks = {
      onStartedLeading: (t) => this.onStartedLeading(t),
      onStoppedLeading: (t, reason) => this.onStoppedLeading(t, reason),
      onNewLeader: (l) => this.onNewLeader(l),
    };
    const meta = { hostname: c.hostname, apiUrl: this.apiUrl };
    if (c.elector === 'static') {
      const e = await pinStaticLeader(this.leases, c.nodeId, meta);
      this.elector = e;
      this.onStartedLeading(e.token()!);
    } else if (c.elector === 'advisory-lock' && c.store.kind === 'postgres') {
      this.elector = new AdvisoryLockElector({ holderId: c.nodeId, name: PROMOTION_LEASE, retryIntervalMs: c.electionIntervalSeconds * 1000, ...meta, connection: { connectionString: c.store.databaseUrl }, logger: this.logger, ...callbacks });
    } else {
      this.elector = new LeaseElector(this.leases, {
        name: PROMOTION_LEASE,
        holderId: c.nodeId,
        ...meta,
        ...this.leaseTimings(),
        isLeaderCacheMs: Math.min(1_000, c.electionIntervalSeconds * 500),
        logger: this.logger,
        ...callbacks,
      });
    }
    await this.membership.join({ nodeId: c.nodeId, hostname: c.hostname, port: c.port, apiUrl: this.apiUrl });
    this.elector.start();
    this.triggers.start();
    this.every(c.heartbeatIntervalSeconds, () => this.heartbeat());
    this.every(c.monitorIntervalSeconds, () => this.monitor());
    await this.refreshLeader().catch(() => undefined);
    this.logger.info('node started', { nodeId: c.nodeId, elector: c.elector, apiUrl: this.apiUrl });
  }

  private every(intervalSeconds: number, fn: () => Promise<void>): void {
    let busy = false;
    const t = setInterval(() => {
      if (busy || this.stopping) return;
      busy = true;
      fn()
        .catch((err: unknown) => this.logger.warn('background step failed', { error: errorMessage(err) }))
        .finally(() => (busy = false));
    }, intervalSeconds * 1000);
    this.timers.push(t);
  }

  // ── leadership ──────────────────────────────────────────────────────────

  private onStartedLeading(token: LeaseToken): void {
    this.stats.elections++;
    this.stats.leaderSince = Date.now();
    this.logger.info('leader elected', { nodeId: this.nodeId, term: token.epoch });
    this.record('leader_elected', { term: token.epoch });
    void this.heartbeat().catch(() => undefined);
    // Take up the coordinators now rather than at the next scan.
    void this.coordinators.scan();
  }

  private onStoppedLeading(token: LeaseToken, reason: string): void {
    if (this.stats.leaderSince !== null) this.stats.leadershipSecondsTotal += (Date.now() - this.stats.leaderSince) / 1000;
    this.stats.leaderSince = null;
    this.logger.warn('leadership lost', { nodeId: this.nodeId, term: token.epoch, reason });
    this.record('leader_lost', { term: token.epoch, reason });
    void this.coordinators.closeAll();
    if (!this.stopping) void this.heartbeat().catch(() => undefined);
  }

  private onNewLeader(l: { holder: string | null; epoch: number }): void {
    if (l.holder === null) {
      this.record('election_started', { lastTerm: l.epoch });
      return;
    }
    this.stats.leaderChanges++;
    this.stats.lastFailoverAt = Date.now();
    void this.refreshLeader().catch(() => undefined);
  }

  /** A NOTIFY on the leader channel: someone resigned; try for the lease now. */
  private onLeaderNotice(payload: string): void {
    if (this.stopping || payload === this.nodeId) return;
    this.elector?.tryNow();
  }

  async refreshLeader(): Promise<LeaderView | null> {
    const row = await this.leases.read(PROMOTION_LEASE);
    this.leader = row && row.holder !== null && row.expiresAt > Date.now() ? { id: row.holder, epoch: row.epoch, hostname: row.hostname, apiUrl: row.apiUrl, acquiredAt: row.acquiredAt, renewedAt: row.renewedAt, expiresAt: row.expiresAt } : null;
    return this.leader;
  }

  async isLeader(): Promise<boolean> {
    return (await this.leadership()) !== null;
  }

  // ── loops ───────────────────────────────────────────────────────────────

  /** Cluster events are written by the heartbeat; while the store is down they wait here (in order). */
  private record(type: ClusterEventType, data: Record<string, unknown> | null): void {
    this.pendingEvents.push({ type, data, at: Date.now() });
    if (this.pendingEvents.length > 10_000) this.pendingEvents.shift();
    void this.flushEvents().catch(() => undefined);
  }

  private flushing: Promise<void> = Promise.resolve();
  private flushEvents(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      while (this.pendingEvents.length) {
        const e = this.pendingEvents[0]!;
        await this.membership.record(e.type, this.nodeId, { ...e.data, at: new Date(e.at).toISOString() });
        this.pendingEvents.shift();
      }
    }).catch(() => undefined);
    return this.flushing;
  }

  async heartbeat(): Promise<void> {
    const c = this.config;
    try {
      await this.membership.heartbeat({ nodeId: c.nodeId, hostname: c.hostname, port: c.port, apiUrl: this.apiUrl }, this.state, this.term);
      const renewals = this.elector?.renewalCounts().renewals ?? 0;
      if (renewals > this.lastRenewals && this.state === 'leader') this.record('lease_renewed', { term: this.term, renewals: renewals - this.lastRenewals });
      this.lastRenewals = renewals;
      await this.flushEvents();
      this.nodes = await this.membership.nodes();
      await this.refreshLeader();
      this.stats.heartbeats++;
      this.storeUp();
    } catch (err) {
      this.stats.heartbeatFailures++;
      this.storeDown(err);
      throw err;
    }
  }

  storeUp(): void {
    this.stats.storeReachable = true;
    this.stats.lastStoreError = null;
  }

  storeDown(err: unknown): void {
    this.stats.storeReachable = false;
    this.stats.lastStoreError = errorMessage(err);
  }

  async monitor(): Promise<void> {
    if (!(await this.isLeader())) return;
    const r = await this.membership.monitor(this.nodeId);
    if (r.stale.length || r.removed.length) this.logger.warn('cluster membership changed', { ...r });
    await this.membership.pruneEvents(this.config.eventRetentionDays * 86_400_000);
    await new PostgresIdempotency(this.sql).prune(Date.now() - 86_400_000);
    this.nodes = await this.membership.nodes();
  }

  // ── run coordinators (leader only) ──────────────────────────────────────

  /** A worker's steal request (in-process or over HTTP). */
  stealFor(runId: string, workerId: string): ReturnType<RunCoordinators['stealFor']> {
    return this.coordinators.stealFor(runId, workerId);
  }

  /** Items moved by steals, per run: the status page's figure (drains are read from the worker registry). */
  private async countSteals(runId: string, n: number): Promise<void> {
    await this.sql.query('INSERT INTO run_stats (run_id, steals) VALUES ($1, $2) ON CONFLICT (run_id) DO UPDATE SET steals = run_stats.steals + $2', [runId, n]);
  }

  // ── the API ─────────────────────────────────────────────────────────────

  /** The shared API's dependencies over `sql` (the pool, or one request's transaction). */
  apiDeps(sql: Sql, engine: RolloutEngine, afterCommit?: (fn: () => Promise<void>) => void): ApiDeps {
    const tx = sql === this.sql ? this.stores : sqlStores(sql);
    return {
      nodeId: this.nodeId,
      engine,
      leadership: this.leadership,
      leases: tx.leases,
      ledger: tx.ledger,
      workQueue: () => new LedgerSender(this.wake, afterCommit),
    };
  }

  api(): ReturnType<typeof apiHandler> {
    return apiHandler(this.apiDeps(this.sql, this.engine));
  }

  // ── shutdown ────────────────────────────────────────────────────────────

  /**
   * Graceful: stop promoting and coordinating, resign (row kept, epoch kept),
   * tell followers at once so one takes over without waiting for a retry,
   * leave the membership, close the store.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    await this.triggers.stop();
    await this.coordinators.stop();
    const wasLeader = this.elector?.state === 'leader';
    await this.elector?.stop();
    if (wasLeader && this.config.store.kind === 'postgres' && this.config.wakeOnResign) {
      await this.sql.query('SELECT pg_notify($1, $2)', [LEADER_CHANNEL, this.nodeId]).catch(() => undefined);
    }
    await this.flushEvents();
    await this.membership.leave(this.nodeId).catch((err: unknown) => this.logger.warn('leaving the cluster failed', { error: errorMessage(err) }));
    await this.closeStore();
    this.logger.info('node stopped', { nodeId: this.nodeId });
  }
}
