import type { ElectorCallbacks, LeaderElector } from '../lease/elector.js';
import type { LeaseRecord, LeaseToken } from '../lease/record.js';
import type { LeaseStore } from '../lease/store.js';
import { errorMessage, type Logger } from '../log.js';
import type { ClusterEventType, ClusterNode, Membership, NodeState } from './membership.js';

const FLUSH_RETRY_MS = 500;
const FLUSH_RETRY_MAX_MS = 30_000;

/**
 * One node's part in the cluster, the loops of Orchestry's distributed
 * controller that are not the control plane itself:
 *
 *   heartbeat  the node's row in cluster_nodes, its lease renewals as events,
 *              the cluster events that could not be written yet, and a fresh
 *              view of who leads and who is up
 *   monitor    on the leader: stale nodes unhealthy, dead ones removed, old
 *              events pruned
 *
 * It keeps the figures /metrics and /cluster/status show, and records
 * leadership changes as cluster events (through `callbacks()`, given to the
 * elector). Cluster events are written by the heartbeat; while the store is
 * down they wait in memory, in order.
 */

export interface LeaderView {
  readonly id: string;
  readonly epoch: number;
  readonly hostname: string | null;
  readonly apiUrl: string | null;
  readonly acquiredAt: number;
  readonly renewedAt: number;
  readonly expiresAt: number;
}

/** The leader a lease row names, or null when nobody holds it or the lease has run out by `now`. */
export function leaderViewOf(row: LeaseRecord | null, now: number): LeaderView | null {
  return row && row.holder !== null && row.expiresAt > now
    ? {
        id: row.holder,
        epoch: row.epoch,
        hostname: row.hostname,
        apiUrl: row.apiUrl,
        acquiredAt: row.acquiredAt,
        renewedAt: row.renewedAt,
        expiresAt: row.expiresAt,
      }
    : null;
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

export interface MemberOptions {
  readonly self: Pick<ClusterNode, 'nodeId' | 'hostname' | 'port' | 'apiUrl'>;
  readonly membership: Membership;
  /** Where the promotion lease is read: who leads, for followers' answers. */
  readonly leases: LeaseStore;
  readonly leaseName: string;
  readonly eventRetentionMs: number;
  readonly logger: Logger;
  /** Leadership won: what else starts now (the node's coordinators). */
  readonly onLeading?: () => void;
  /** Leadership lost: what else stops now. */
  readonly onNotLeading?: () => void;
}

export class ClusterMember {
  readonly stats: NodeStats = {
    elections: 0,
    leaderChanges: 0,
    leaderSince: null,
    leadershipSecondsTotal: 0,
    lastFailoverAt: null,
    heartbeats: 0,
    heartbeatFailures: 0,
    storeReachable: true,
    lastStoreError: null,
  };
  /** The lease row as last read. */
  leader: LeaderView | null = null;
  /** Membership as last read. */
  nodes: ClusterNode[] = [];
  /** Set once the control plane has its elector. */
  elector: LeaderElector | null = null;

  private readonly pendingEvents: { type: ClusterEventType; data: Record<string, unknown> | null; at: number }[] = [];
  private flushing: Promise<void> = Promise.resolve();
  /** Events that could not be written are retried with backoff, not left for the next heartbeat. */
  private flushRetry: { timer: NodeJS.Timeout | undefined; delayMs: number } = { timer: undefined, delayMs: FLUSH_RETRY_MS };
  private lastRenewals = 0;
  private stopping = false;

  constructor(private readonly o: MemberOptions) {}

  get nodeId(): string {
    return this.o.self.nodeId;
  }

  get state(): NodeState {
    return this.elector?.state ?? 'follower';
  }

  get term(): number {
    return this.elector?.token()?.epoch ?? this.leader?.epoch ?? 0;
  }

  /** What the elector tells about leadership changes. */
  callbacks(): ElectorCallbacks {
    return {
      onStartedLeading: (t) => this.startedLeading(t),
      onStoppedLeading: (t, reason) => this.stoppedLeading(t, reason),
      onNewLeader: (l) => this.newLeader(l),
    };
  }

  join(): Promise<void> {
    return this.o.membership.join(this.o.self);
  }

  /** The node is stopping: losing leadership now is no reason to beat again. */
  stop(): void {
    this.stopping = true;
  }

  /** Write what waits, leave the cluster. */
  async leave(): Promise<void> {
    await this.flushEvents();
    clearTimeout(this.flushRetry.timer); // leaving: what is still unwritten stays in this process's log
    await this.o.membership.leave(this.nodeId).catch((err: unknown) => this.o.logger.warn('leaving the cluster failed', { error: errorMessage(err) }));
  }

  private startedLeading(token: LeaseToken): void {
    this.stats.elections++;
    this.stats.leaderSince = Date.now();
    this.o.logger.info('leader elected', { nodeId: this.nodeId, leaseEpoch: token.epoch });
    this.record('leader_elected', { term: token.epoch });
    void this.heartbeat().catch(() => undefined);
    this.o.onLeading?.();
  }

  private stoppedLeading(token: LeaseToken, reason: string): void {
    if (this.stats.leaderSince !== null) this.stats.leadershipSecondsTotal += (Date.now() - this.stats.leaderSince) / 1000;
    this.stats.leaderSince = null;
    this.o.logger.warn('leadership lost', { nodeId: this.nodeId, leaseEpoch: token.epoch, reason });
    this.record('leader_lost', { term: token.epoch, reason });
    this.o.onNotLeading?.();
    if (!this.stopping) void this.heartbeat().catch(() => undefined);
  }

  private newLeader(l: { holder: string | null; epoch: number }): void {
    if (l.holder === null) {
      this.record('election_started', { lastTerm: l.epoch });
      return;
    }
    this.stats.leaderChanges++;
    this.stats.lastFailoverAt = Date.now();
    void this.refreshLeader().catch(() => undefined);
  }

  async refreshLeader(): Promise<LeaderView | null> {
    this.leader = leaderViewOf(await this.o.leases.read(this.o.leaseName), Date.now());
    return this.leader;
  }

  private record(type: ClusterEventType, data: Record<string, unknown> | null): void {
    this.pendingEvents.push({ type, data, at: Date.now() });
    if (this.pendingEvents.length > 10_000) this.pendingEvents.shift();
    void this.flushEvents().catch(() => undefined);
  }

  private flushEvents(): Promise<void> {
    this.flushing = this.flushing
      .then(async () => {
        while (this.pendingEvents.length) {
          const e = this.pendingEvents[0]!;
          await this.o.membership.record(e.type, this.nodeId, { ...e.data, at: new Date(e.at).toISOString() });
          this.pendingEvents.shift();
        }
        this.flushRetry.delayMs = FLUSH_RETRY_MS;
      })
      .catch((err: unknown) => {
        const r = this.flushRetry;
        this.o.logger.warn('cluster events not written; retrying', { pending: this.pendingEvents.length, retryInMs: r.delayMs, error: errorMessage(err) });
        clearTimeout(r.timer);
        r.timer = setTimeout(() => void this.flushEvents(), r.delayMs);
        r.timer.unref();
        r.delayMs = Math.min(r.delayMs * 2, FLUSH_RETRY_MAX_MS);
      });
    return this.flushing;
  }

  async heartbeat(): Promise<void> {
    try {
      await this.o.membership.heartbeat(this.o.self, this.state, this.term);
      const renewals = this.elector?.renewalCounts().renewals ?? 0;
      if (renewals > this.lastRenewals && this.state === 'leader') this.record('lease_renewed', { term: this.term, renewals: renewals - this.lastRenewals });
      this.lastRenewals = renewals;
      await this.flushEvents();
      this.nodes = await this.o.membership.nodes();
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

  /** On the leader (the caller checks): membership's monitor pass and event pruning. */
  async monitor(): Promise<void> {
    const r = await this.o.membership.monitor(this.nodeId);
    if (r.stale.length || r.removed.length) this.o.logger.warn('cluster membership changed', { ...r });
    await this.o.membership.pruneEvents(this.o.eventRetentionMs);
    this.nodes = await this.o.membership.nodes();
  }
}
