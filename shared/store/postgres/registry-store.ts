import type { RegistryStore, WorkerRecord, WorkerState } from '../../registry/registry.js';
import { toMillis, type Sql } from './sql.js';

type Row = Record<string, unknown>;

function recordOf(r: Row): WorkerRecord {
  return {
    workerId: String(r.worker_id),
    instanceId: String(r.instance_id),
    provider: r.provider as WorkerRecord['provider'],
    runId: (r.run_id as string | null) ?? null,
    state: r.state as WorkerState,
    registeredAt: toMillis(r.registered_at),
    heartbeatAt: toMillis(r.heartbeat_at),
    drain: (r.drain as WorkerRecord['drain']) ?? null,
    goneAt: r.gone_at === null || r.gone_at === undefined ? null : toMillis(r.gone_at),
  };
}

const COLUMNS = 'instance_id, worker_id, provider, run_id, state, registered_at, heartbeat_at, drain, gone_at';
const values = (w: WorkerRecord) => [w.instanceId, w.workerId, w.provider, w.runId, w.state, new Date(w.registeredAt), new Date(w.heartbeatAt), w.drain ? JSON.stringify(w.drain) : null, w.goneAt === null ? null : new Date(w.goneAt)];

export class PostgresRegistryStore implements RegistryStore {
  constructor(private readonly sql: Sql) {}

  async put(w: WorkerRecord): Promise<void> {
    await this.sql.query(
      `INSERT INTO workers (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (instance_id, worker_id) DO UPDATE SET provider = $3, run_id = $4, state = $5, registered_at = $6, heartbeat_at = $7, drain = $8, gone_at = $9`,
      values(w),
    );
  }

  async byInstance(instanceId: string): Promise<WorkerRecord[]> {
    const { rows } = await this.sql.query<Row>(`SELECT ${COLUMNS} FROM workers WHERE instance_id = $1 ORDER BY worker_id`, [instanceId]);
    return rows.map(recordOf);
  }

  async replace(expectedState: WorkerState, expectedHeartbeatAt: number, w: WorkerRecord): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE workers SET provider = $3, run_id = $4, state = $5, registered_at = $6, heartbeat_at = $7, drain = $8, gone_at = $9
        WHERE instance_id = $1 AND worker_id = $2 AND state = $10 AND heartbeat_at = $11 RETURNING worker_id`,
      [...values(w), expectedState, new Date(expectedHeartbeatAt)],
    );
    return rows.length === 1;
  }

  async list(): Promise<WorkerRecord[]> {
    const { rows } = await this.sql.query<Row>(`SELECT ${COLUMNS} FROM workers ORDER BY instance_id, worker_id`);
    return rows.map(recordOf);
  }
}

