import type { ClusterEvent, ClusterEventType, ClusterNode, MembershipStore, NodeState } from '../../cluster/membership.js';
import { toInt, toMillis, type Sql } from './sql.js';

type Row = Record<string, unknown>;

function nodeOf(r: Row): ClusterNode {
  return {
    nodeId: String(r.node_id),
    hostname: String(r.hostname),
    port: toInt(r.port),
    apiUrl: String(r.api_url),
    state: r.state as NodeState,
    term: toInt(r.term),
    lastHeartbeat: toMillis(r.last_heartbeat),
    isHealthy: Boolean(r.is_healthy),
    createdAt: toMillis(r.created_at),
  };
}

/** `cluster_nodes` and `cluster_events` (the cluster tables of Orchestry's distributed controller) on PostgreSQL / PGlite. */
export class PostgresMembershipStore implements MembershipStore {
  constructor(private readonly sql: Sql) {}

  async upsert(node: Pick<ClusterNode, 'nodeId' | 'hostname' | 'port' | 'apiUrl'>, now: number): Promise<boolean> {
    const { rows } = await this.sql.query<{ inserted: boolean }>(
      `INSERT INTO cluster_nodes (node_id, hostname, port, api_url, state, term, last_heartbeat, is_healthy, created_at, updated_at)
       VALUES ($1, $2, $3, $4, 'follower', 0, $5, true, $5, $5)
       ON CONFLICT (node_id) DO UPDATE SET hostname = $2, port = $3, api_url = $4, state = 'follower', last_heartbeat = $5, is_healthy = true, updated_at = $5
       RETURNING (xmax = 0) AS inserted`,
      [node.nodeId, node.hostname, node.port, node.apiUrl, new Date(now)],
    );
    return Boolean(rows[0]?.inserted);
  }

  async heartbeat(nodeId: string, state: NodeState, term: number, now: number): Promise<boolean> {
    const { rows } = await this.sql.query(
      'UPDATE cluster_nodes SET state = $2, term = $3, last_heartbeat = GREATEST(last_heartbeat, $4), is_healthy = true, updated_at = $4 WHERE node_id = $1 RETURNING node_id',
      [nodeId, state, term, new Date(now)],
    );
    return rows.length === 1;
  }

  async markStale(before: number, now: number): Promise<string[]> {
    const { rows } = await this.sql.query<{ node_id: string }>(
      'UPDATE cluster_nodes SET is_healthy = false, updated_at = $2 WHERE is_healthy AND last_heartbeat < $1 RETURNING node_id',
      [new Date(before), new Date(now)],
    );
    return rows.map((r) => r.node_id).sort();
  }

  async removeDead(before: number): Promise<string[]> {
    const { rows } = await this.sql.query<{ node_id: string }>('DELETE FROM cluster_nodes WHERE last_heartbeat < $1 RETURNING node_id', [new Date(before)]);
    return rows.map((r) => r.node_id).sort();
  }

  async remove(nodeId: string): Promise<boolean> {
    const { rows } = await this.sql.query('DELETE FROM cluster_nodes WHERE node_id = $1 RETURNING node_id', [nodeId]);
    return rows.length === 1;
  }

  async list(): Promise<ClusterNode[]> {
    const { rows } = await this.sql.query<Row>('SELECT * FROM cluster_nodes ORDER BY node_id');
    return rows.map(nodeOf);
  }

  async append(type: ClusterEventType, nodeId: string, data: Record<string, unknown> | null, now: number): Promise<void> {
    await this.sql.query('INSERT INTO cluster_events (node_id, event_type, event_data, timestamp) VALUES ($1, $2, $3, $4)', [
      nodeId,
      type,
      data === null ? null : JSON.stringify(data),
      new Date(now),
    ]);
  }

  async pruneEvents(before: number): Promise<void> {
    await this.sql.query('DELETE FROM cluster_events WHERE timestamp < $1', [new Date(before)]);
  }

  async events(limit: number): Promise<ClusterEvent[]> {
    const { rows } = await this.sql.query<Row>('SELECT * FROM cluster_events ORDER BY id DESC LIMIT $1', [limit]);
    return rows.map((r) => ({
      id: toInt(r.id),
      nodeId: String(r.node_id),
      type: r.event_type as ClusterEventType,
      data: (r.event_data as Record<string, unknown> | null) ?? null,
      at: toMillis(r.timestamp),
    }));
  }
}
