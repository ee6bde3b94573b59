import { systemClock, type Clock } from '../clock.js';

/**
 * Cluster membership for `rollout serve` nodes (after Orchestry's distributed controller): every node
 * registers in `cluster_nodes` and heartbeats; a monitor marks nodes whose
 * heartbeat is stale unhealthy and removes dead ones; everything that
 * changes membership or leadership is appended to `cluster_events`.
 * Leadership itself is the lease (`promotion_leader`), not this table: a
 * node's `state` and `term` here are what it reports, for people and the
 * status page.
 */
export type NodeState = 'follower' | 'candidate' | 'leader' | 'stopped';
export const CLUSTER_EVENT_TYPES = [
  'leader_elected',
  'leader_lost',
  'node_joined',
  'node_left',
  'election_started',
  'lease_renewed',
  'cluster_degraded',
] as const;
export type ClusterEventType = (typeof CLUSTER_EVENT_TYPES)[number];

export interface ClusterNode {
  readonly nodeId: string;
  readonly hostname: string;
  readonly port: number;
  readonly apiUrl: string;
  readonly state: NodeState;
  readonly term: number;
  readonly lastHeartbeat: number;
  readonly isHealthy: boolean;
  readonly createdAt: number;
}

export interface ClusterEvent {
  readonly id: number;
  readonly nodeId: string;
  readonly type: ClusterEventType;
  readonly data: Record<string, unknown> | null;
  readonly at: number;
}

export interface MembershipStore {
  /** Insert or refresh a node's row (state follower, healthy, heartbeat now); true when it was new. */
  upsert(node: Pick<ClusterNode, 'nodeId' | 'hostname' | 'port' | 'apiUrl'>, now: number): Promise<boolean>;
  /** Refresh the heartbeat and what the node reports; false when the row is gone (removed as dead). */
  heartbeat(nodeId: string, state: NodeState, term: number, now: number): Promise<boolean>;
  /** Mark unhealthy the healthy nodes whose heartbeat is older than `before`; returns their ids. */
  markStale(before: number, now: number): Promise<string[]>;
  /** Delete nodes whose heartbeat is older than `before`; returns their ids. */
  removeDead(before: number): Promise<string[]>;
  remove(nodeId: string): Promise<boolean>;
  list(): Promise<ClusterNode[]>;
  append(type: ClusterEventType, nodeId: string, data: Record<string, unknown> | null, now: number): Promise<void>;
  /** Newest first. */
  events(limit: number): Promise<ClusterEvent[]>;
  /** Delete events older than `before`. */
  pruneEvents(before: number): Promise<void>;
}

export interface MembershipOptions {
  /** A node silent this long is unhealthy (default 3 heartbeats: 30 s). */
  staleAfterMs?: number;
  /** A node silent this long is removed (default 3 minutes). */
  deadAfterMs?: number;
  clock?: Clock;
}

export class Membership {
  private readonly staleAfterMs: number;
  private readonly deadAfterMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly store: MembershipStore,
    options: MembershipOptions = {},
  ) {
    this.staleAfterMs = options.staleAfterMs ?? 30_000;
    this.deadAfterMs = options.deadAfterMs ?? 180_000;
    this.clock = options.clock ?? systemClock;
    if (!(this.staleAfterMs > 0) || !(this.deadAfterMs > this.staleAfterMs)) {
      throw new Error(`invalid membership config: deadAfterMs (${this.deadAfterMs}) must exceed staleAfterMs (${this.staleAfterMs}) > 0`);
    }
  }

  async join(node: Pick<ClusterNode, 'nodeId' | 'hostname' | 'port' | 'apiUrl'>): Promise<void> {
    if (!node.nodeId.trim()) throw new Error('invalid node: nodeId: must not be empty');
    const now = this.clock.now();
    if (await this.store.upsert(node, now)) await this.store.append('node_joined', node.nodeId, { hostname: node.hostname, apiUrl: node.apiUrl }, now);
  }

  /** A heartbeat; a node that was removed meanwhile (it was silent too long) joins again. */
  async heartbeat(node: Pick<ClusterNode, 'nodeId' | 'hostname' | 'port' | 'apiUrl'>, state: NodeState, term: number): Promise<void> {
    if (!(await this.store.heartbeat(node.nodeId, state, term, this.clock.now()))) {
      await this.join(node);
      await this.store.heartbeat(node.nodeId, state, term, this.clock.now());
    }
  }

  /** Graceful exit: the row goes, with a node_left event. */
  async leave(nodeId: string, reason = 'shutdown'): Promise<void> {
    if (await this.store.remove(nodeId)) await this.store.append('node_left', nodeId, { reason }, this.clock.now());
  }

  /**
   * The monitor loop's step (every 15 s on one node is enough; any node may run it):
   * stale nodes become unhealthy, dead ones are removed, and a cluster with no
   * healthy majority records `cluster_degraded`.
   */
  async monitor(by: string): Promise<{ stale: string[]; removed: string[]; degraded: boolean }> {
    const now = this.clock.now();
    const stale = await this.store.markStale(now - this.staleAfterMs, now);
    const removed = await this.store.removeDead(now - this.deadAfterMs);
    for (const id of removed) await this.store.append('node_left', id, { reason: 'dead', detectedBy: by }, now);
    const nodes = await this.store.list();
    const healthy = nodes.filter((n) => n.isHealthy).length;
    const degraded = nodes.length > 0 && healthy * 2 <= nodes.length;
    if (degraded && stale.length) await this.store.append('cluster_degraded', by, { healthy, total: nodes.length, stale }, now);
    return { stale, removed, degraded };
  }

  /** The cluster log keeps `retentionMs` of history. */
  pruneEvents(retentionMs: number): Promise<void> {
    return this.store.pruneEvents(this.clock.now() - retentionMs);
  }

  nodes(): Promise<ClusterNode[]> {
    return this.store.list();
  }

  record(type: ClusterEventType, nodeId: string, data: Record<string, unknown> | null = null): Promise<void> {
    return this.store.append(type, nodeId, data, this.clock.now());
  }

  events(limit = 50): Promise<ClusterEvent[]> {
    return this.store.events(limit);
  }
}
