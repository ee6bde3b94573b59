import { HttpError, type apiHandler } from '../../api/handler.js';
import { PROMOTION_LEASE } from '../../lease/names.js';
import { ClusterMember, type LeaderView, type NodeStats } from '../../cluster/member.js';
import { Membership, type NodeState } from '../../cluster/membership.js';
import { openControlPlane, type ControlPlane } from '../../compose/control-plane.js';
import { sqlStores } from '../../compose/stores.js';
import { parseConfig } from '../../config.js';
import { noticeFromEvent } from '../../drain/sources.js';
import { InProcessBus } from '../../events/bus.js';
import { coordinatorRequest } from '../../ledger/coordinator-protocol.js';
import type { RunCoordinators } from '../../ledger/run-coordinators.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { inboundFromEnvelope } from '../../rollout/inbound.js';
import type { RolloutEngine } from '../../rollout/engine.js';
import { BatchPromoter, StreamingPromoter } from '../../rollout/promoters.js';
import { BATCH_TICK_SECONDS } from '../../topology.js';
import { PostgresIdempotency } from '../../adapters/postgres/idempotency.js';
import { LedgerDeadLetters, LedgerSender, LedgerWorkQueue } from '../../adapters/postgres/ledger-queue.js';
import { PostgresMembershipStore } from '../../adapters/postgres/membership-store.js';
import { PostgresRunStats } from '../../adapters/postgres/run-stats.js';
import type { Sql } from '../../adapters/postgres/sql.js';
import { InProcessWake, PgNotifyWake, type WakeSource } from '../../adapters/postgres/wake.js';
import { OutboundPolicy } from '../../outbound/policy.js';
import { PostgresSeenSignatures } from '../../adapters/postgres/signatures.js';
import { SIGNATURE_WINDOW_SECONDS } from '../../auth/signature.js';
import { apiUrlOf, LEADER_CHANNEL, nodeConfigSchema, storeOf, type NodeConfig, type NodeConfigInput } from './config.js';
import { LocalTriggers, type LocalHandlers } from './triggers.js';

export { ELECTORS, LEADER_CHANNEL, nodeConfigSchema, type ElectorKind, type NodeConfig, type NodeConfigInput } from './config.js';
export type { LeaderView, NodeStats } from '../../cluster/member.js';

/**
 * A control-plane node on one machine: the local runtime over the same
 * control plane the Lambda functions run (compose/control-plane.ts), on
 * PostgreSQL (a server in cluster mode, embedded PGlite for `npm start`).
 * It adds what a long-lived process has and a Lambda has not: the
 * topology's triggers as timers and an in-process bus (triggers.ts), the
 * run coordinators kept while it leads, and its part in the cluster
 * (cluster/member.ts: heartbeat, monitor, events).
 *
 * What runs where (as in Leoflow's ADR 0009): the HTTP API, metrics and health on every node;
 * the BatchPromoter's evaluations, the run coordinators and the monitor on
 * the leader only. Safety does not rest on that split: every effectful write
 * is fenced by the store.
 */
/**
 * Fields a companion of the node adds to a rollout on the status page
 * (GET /ui/state), by rollout id (none: undefined). `npm start`'s demo
 * (demo/, not shipped) adds what its simulated fleet was told.
 */
export type RolloutFields = (rolloutId: string) => Readonly<Record<string, unknown>> | undefined;

/** A node's membership of the cluster. */
interface Cluster {
  readonly membership: Membership;
  readonly member: ClusterMember;
}

export class ControlPlaneNode {
  readonly apiUrl: string;
  readonly member: ClusterMember;
  readonly membership: Membership;
  /** The topology's functions, wired from their triggers (triggers.ts). */
  readonly triggers: LocalTriggers;
  readonly sql: Sql;
  private readonly coordinators: RunCoordinators;
  readonly streaming: StreamingPromoter;
  private readonly batch: BatchPromoter;
  private readonly timers: NodeJS.Timeout[] = [];
  /** What companions add to each rollout on the status page; each adds and removes its own. */
  readonly statusFields = new Set<RolloutFields>();
  /** Lines the status page shows above everything, about this node (npm start: its mock workers). */
  readonly statusNotes = new Set<string>();
  private stopping = false;
  /** The API over the pool: built once, not per request. */
  private pooledApi: ReturnType<typeof apiHandler> | undefined;

  private constructor(
    readonly config: NodeConfig,
    readonly plane: ControlPlane,
    readonly bus: InProcessBus,
    cluster: Cluster,
    readonly wake: WakeSource,
    private readonly closeWake: () => Promise<void>,
    readonly logger: Logger,
  ) {
    this.apiUrl = apiUrlOf(config);
    // Cluster mode is PostgreSQL's (a server, or PGlite for `npm start`): membership and the ledger-backed queue need SQL.
    this.sql = plane.stores.sql!;
    ({ membership: this.membership, member: this.member } = cluster);
    this.member.elector = plane.elector;
    this.streaming = new StreamingPromoter(plane.engine, plane.leadership);
    this.batch = new BatchPromoter(plane.engine, plane.leadership, { reader: plane.gateReader, logger: this.logger, retention: config.retention });
    this.coordinators = plane.runCoordinators({
      isLeader: () => this.isLeader(),
      queueFor: (runId) => new LedgerWorkQueue(this.sql, this.wake, runId, null),
      // The ledger-backed queue: an item given back maxReceiveCount times is a dead letter, failed with the reason.
      deadLettersFor: (runId) => new LedgerDeadLetters(this.sql, runId),
      // Items moved by steals, per run: the status page's figure.
      onSteal: (runId, n) => new PostgresRunStats(this.sql).addSteals(runId, n),
      retention: config.retention,
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
          if (!request.success)
            throw new HttpError(
              400,
              `invalid coordinator request: ${request.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
            );
          if (request.data.action !== 'steal')
            throw new HttpError(400, `a node's coordinator answers "steal" requests; "${request.data.action}" runs on its own schedule here`);
          const r = await this.stealFor(request.data.runId, request.data.workerId);
          return r.leader ? { leader: true, notice: { ...r.notice, items: [...r.notice.items] } } : r;
        },
        // As the stack's scan-all: the dead letters first (each failed under its run's lease), then the scan.
        schedule: { everySeconds: c.scanIntervalSeconds, run: () => this.coordinators.failDeadLetters().then(() => this.coordinators.scan()) },
      },
      spotDrain: { rule: (event) => this.plane.registry.requestDrain(noticeFromEvent(event, Date.now()), Date.now()) },
      api: { http: (req) => this.api()(req) },
    };
  }

  /** Connects and migrates the store, pins or prepares the elector; nothing runs until `start()`. */
  static async open(input: NodeConfigInput, logger: Logger = silentLogger): Promise<ControlPlaneNode> {
    const config = parseConfig('node', nodeConfigSchema, input);
    const bus = new InProcessBus(1_000);
    // The node is created after the control plane; its member's callbacks reach the coordinators through this.
    let node: ControlPlaneNode | null = null;
    let cluster: Cluster | null = null;
    const plane = await openControlPlane({
      store: storeOf(config),
      holderId: config.nodeId,
      timings: {
        ttlMs: config.leaseTtlSeconds * 1000,
        renewIntervalMs: config.heartbeatIntervalSeconds * 1000,
        retryIntervalMs: config.electionIntervalSeconds * 1000,
      },
      election:
        config.elector === 'static'
          ? { kind: 'static' }
          : config.elector === 'advisory-lock' && config.store.kind === 'postgres'
            ? { kind: 'advisory-lock', connection: { connectionString: config.store.databaseUrl } }
            : { kind: 'lease', loop: true, isLeaderCacheMs: Math.min(1_000, config.electionIntervalSeconds * 500) },
      bus,
      outbound: new OutboundPolicy(config.outbound),
      targets: config.targets,
      assignmentReadMs: config.assignmentReadMs,
      leaderMeta: { hostname: config.hostname, apiUrl: apiUrlOf(config) },
      callbacks: (stores) => {
        const membership = new Membership(new PostgresMembershipStore(stores.sql!), {
          staleAfterMs: config.electionTimeoutSeconds * 1000,
          deadAfterMs: config.deadAfterSeconds * 1000,
        });
        const member = new ClusterMember({
          self: { nodeId: config.nodeId, hostname: config.hostname, port: config.port, apiUrl: apiUrlOf(config) },
          membership,
          leases: stores.leases,
          leaseName: PROMOTION_LEASE,
          eventRetentionMs: config.eventRetentionDays * 86_400_000,
          logger,
          // Take up the coordinators now rather than at the next scan; give them up at once.
          onLeading: () => void node?.coordinators.scan(),
          onNotLeading: () => void node?.coordinators.closeAll(),
        });
        cluster = { membership, member };
        return member.callbacks();
      },
      logger,
    });
    if (config.store.kind !== 'postgres') {
      node = new ControlPlaneNode(config, plane, bus, cluster!, new InProcessWake(), () => Promise.resolve(), logger);
      return node;
    }
    let onLeader = (_payload: string) => undefined as void;
    const wake = await PgNotifyWake.open({ connectionString: config.store.databaseUrl }, logger, { [LEADER_CHANNEL]: (p) => onLeader(p) }).catch(
      async (err: unknown) => {
        await plane.close();
        throw err;
      },
    );
    node = new ControlPlaneNode(config, plane, bus, cluster!, wake, () => wake.close(), logger);
    const opened = node;
    // A NOTIFY on the leader channel: someone resigned; try for the lease now.
    onLeader = (p) => {
      if (!opened.stopping && p !== opened.nodeId) opened.plane.elector.tryNow();
    };
    return node;
  }

  get nodeId(): string {
    return this.config.nodeId;
  }
  get stats(): NodeStats {
    return this.member.stats;
  }
  get state(): NodeState {
    return this.member.state;
  }
  get term(): number {
    return this.member.term;
  }

  /** Join the cluster, start electing, promoting and coordinating. */
  async start(): Promise<void> {
    const c = this.config;
    await this.member.join();
    this.plane.elector.start();
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

  refreshLeader(): Promise<LeaderView | null> {
    return this.member.refreshLeader();
  }

  async isLeader(): Promise<boolean> {
    return (await this.plane.leadership()) !== null;
  }

  heartbeat(): Promise<void> {
    return this.member.heartbeat();
  }

  storeUp(): void {
    this.member.storeUp();
  }

  storeDown(err: unknown): void {
    this.member.storeDown(err);
  }

  /** On the leader: membership's monitor pass, old events and request records pruned. */
  async monitor(): Promise<void> {
    if (!(await this.isLeader())) return;
    await this.member.monitor();
    await new PostgresIdempotency(this.sql).prune(Date.now() - 86_400_000);
    // Past twice their window: a replay that old is refused by its time alone.
    await new PostgresSeenSignatures(this.sql).prune(Date.now() - 2 * SIGNATURE_WINDOW_SECONDS * 1000);
  }

  /** Items this node's coordinators failed for their dead letters, since it started. */
  deadLetters(): number {
    return this.coordinators.deadLetters;
  }

  /** Since this node started: items its coordinators re-pended from silent workers, and failed by cause. */
  runTotals(): RunCoordinators['totals'] {
    return this.coordinators.totals;
  }

  /** A run just cancelled: its Pending items failed now by its coordinator here (null: not coordinated here; the scan does it). */
  cancelled(runId: string): Promise<number | null> {
    return this.coordinators.cancelled(runId);
  }

  /** Carry a rollout's committed traffic out to its targets now, when we lead (the tick would, later). */
  async actuate(rolloutId: string): Promise<void> {
    try {
      const token = await this.plane.leadership();
      const view = token ? await this.plane.stores.rollouts.load(rolloutId) : null;
      if (token && view) await this.plane.engine.actuate(view, token);
    } catch (err) {
      this.logger.warn('actuation after a command not carried out; the next tick reconciles it', { rolloutId, error: errorMessage(err) });
    }
  }

  /** A worker's steal request (in-process or over HTTP). */
  stealFor(runId: string, workerId: string): ReturnType<RunCoordinators['stealFor']> {
    return this.coordinators.stealFor(runId, workerId);
  }

  /** The shared API over the pool, or over one request's transaction `tx` with its engine (a write with an Idempotency-Key). */
  api(over?: { tx: Sql; engine: RolloutEngine; afterCommit: (fn: () => Promise<void>) => void }): ReturnType<typeof apiHandler> {
    if (!over) return (this.pooledApi ??= this.plane.api({ workQueue: () => new LedgerSender(this.wake) }));
    const { leases, ledger } = sqlStores(over.tx);
    return this.plane.api({ workQueue: () => new LedgerSender(this.wake, over.afterCommit), over: { engine: over.engine, leases, ledger } });
  }

  /** Over the pool first (the listening connection may be down or reconnecting), then over the listening connection. */
  private async announceResigned(wake: PgNotifyWake): Promise<void> {
    let error: unknown;
    for (const send of [() => this.sql.query('SELECT pg_notify($1, $2)', [LEADER_CHANNEL, this.nodeId]), () => wake.publish(LEADER_CHANNEL, this.nodeId)]) {
      try {
        await send();
        return;
      } catch (err) {
        error = err;
      }
    }
    this.logger.warn('could not tell the followers of the resignation; one takes over at its next retry', { error: errorMessage(error) });
  }

  /**
   * Graceful: stop promoting and coordinating, resign (row kept, epoch kept),
   * tell followers at once so one takes over without waiting for a retry,
   * leave the membership, close the store.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.member.stop();
    for (const t of this.timers) clearInterval(t);
    await this.triggers.stop();
    await this.coordinators.stop();
    // Told when a row held in our name was released, whether or not we knew we led.
    const { released } = await this.plane.elector.stop();
    if (released && this.wake instanceof PgNotifyWake && this.config.wakeOnResign) await this.announceResigned(this.wake);
    await this.member.leave();
    await this.closeWake();
    await this.plane.close();
    this.logger.info('node stopped', { nodeId: this.nodeId });
  }
}
