import type { LeaderView } from '../cluster/member.js';
import { PublicError } from '../errors.js';
import type { ClusterNode, NodeState } from '../cluster/membership.js';

/**
 * The /cluster/* answers, defined once for every runtime (a node, the
 * Lambda API), with Orchestry's field names:
 *
 *   GET /cluster/status   node_id, state, is_leader, leader_id, term, elector,
 *                         leader {…} (as below), time; a node adds hostname,
 *                         api_url, cluster_size, healthy_nodes, nodes[]
 *   GET /cluster/leader   leader_id, term, hostname, api_url, acquired_at,
 *                         renewed_at, expires_at; 503 "no leader elected"
 *   GET /cluster/health   always 200 while the process answers (a liveness
 *                         probe); `status` healthy when the store answers and
 *                         a leader is known, else degraded with the reason in
 *                         `store` / `cluster_ready`
 *
 * What differs between runtimes is what they know, given as a ClusterView: a
 * node knows its elector's state and its membership; a Lambda knows the lease
 * row and its own holder id.
 */
export interface ClusterView {
  readonly nodeId: string;
  readonly hostname?: string | null;
  readonly apiUrl?: string | null;
  readonly elector: 'lease' | 'advisory-lock' | 'static';
  readonly version: string;
  /** Who leads, as the store says now; throws when the store cannot be read. */
  leader(): Promise<LeaderView | null>;
  /** This process's own view (a node's elector); by default read off `leader()`. */
  self?(): { readonly state: NodeState; readonly term: number };
  /** The members, read now (a node). */
  members?(): Promise<readonly ClusterNode[]>;
  /** The members as last read, for health (which reads nothing but the lease). */
  knownMembers?(): readonly ClusterNode[];
  /** Whether the store answered health's read (null) or why not: a node shows it on /metrics. */
  storeSeen?(err: unknown): void;
}

export interface ClusterAnswer {
  readonly status: number;
  readonly body: unknown;
}

export function leaderJson(l: LeaderView) {
  return {
    leader_id: l.id,
    term: l.epoch,
    hostname: l.hostname,
    api_url: l.apiUrl,
    acquired_at: new Date(l.acquiredAt).toISOString(),
    renewed_at: new Date(l.renewedAt).toISOString(),
    expires_at: new Date(l.expiresAt).toISOString(),
  };
}

function selfOf(view: ClusterView, leader: LeaderView | null): { state: NodeState; term: number } {
  return view.self?.() ?? { state: leader?.id === view.nodeId ? 'leader' : 'follower', term: leader?.epoch ?? 0 };
}

function nodeJson(n: ClusterNode) {
  return {
    node_id: n.nodeId,
    hostname: n.hostname,
    port: n.port,
    api_url: n.apiUrl,
    state: n.state,
    term: n.term,
    is_healthy: n.isHealthy,
    last_heartbeat: new Date(n.lastHeartbeat).toISOString(),
  };
}

export async function clusterStatus(view: ClusterView, now = Date.now()): Promise<ClusterAnswer> {
  const leader = await view.leader();
  const members = view.members ? await view.members() : null;
  const self = selfOf(view, leader);
  return {
    status: 200,
    body: {
      node_id: view.nodeId,
      ...(view.hostname === undefined ? {} : { hostname: view.hostname }),
      ...(view.apiUrl === undefined ? {} : { api_url: view.apiUrl }),
      state: self.state,
      is_leader: self.state === 'leader',
      leader_id: leader?.id ?? null,
      term: self.term,
      elector: view.elector,
      leader: leader ? leaderJson(leader) : null,
      ...(members ? { cluster_size: members.length, healthy_nodes: members.filter((n) => n.isHealthy).length, nodes: members.map(nodeJson) } : {}),
      time: new Date(now).toISOString(),
    },
  };
}

export async function clusterLeader(view: ClusterView): Promise<ClusterAnswer> {
  const leader = await view.leader();
  return leader ? { status: 200, body: leaderJson(leader) } : { status: 503, body: { error: 'no leader elected' } };
}

export async function clusterHealth(view: ClusterView, now = Date.now()): Promise<ClusterAnswer> {
  let leader: LeaderView | null = null;
  let storeError: unknown = null;
  try {
    leader = await view.leader();
    view.storeSeen?.(null);
  } catch (err) {
    storeError = err;
    view.storeSeen?.(err);
  }
  const ready = storeError === null && leader !== null;
  const self = selfOf(view, leader);
  const members = view.knownMembers?.();
  return {
    status: 200,
    body: {
      status: ready ? 'healthy' : 'degraded',
      clustering: view.elector === 'static' ? 'disabled' : 'enabled',
      node_id: view.nodeId,
      state: self.state,
      is_leader: self.state === 'leader',
      leader_id: leader?.id ?? null,
      ...(members ? { cluster_size: members.length } : {}),
      cluster_ready: ready,
      // The driver's words stay in the node's log and /cluster/status: health is answered to anyone.
      store: storeError === null ? 'reachable' : `unreachable${storeError instanceof PublicError ? `: ${storeError.message}` : ''}`,
      timestamp: now / 1000,
      version: view.version,
    },
  };
}
