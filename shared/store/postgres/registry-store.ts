import type { DrainRequest, RegistryStore, WorkerRecord, WorkerState } from '../../registry/registry.js';
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

  async heartbeat(instanceId: string, workerId: string, now: number): Promise<WorkerRecord | null> {
    const { rows } = await this.sql.query<Row>(
      `UPDATE workers SET heartbeat_at = GREATEST(heartbeat_at, $3) WHERE instance_id = $1 AND worker_id = $2 AND state <> 'gone' RETURNING ${COLUMNS}`,
      [instanceId, workerId, new Date(now)],
    );
    if (rows[0]) return recordOf(rows[0]);
    return (await this.byInstance(instanceId)).find((w) => w.workerId === workerId) ?? null;
  }

  async setState(instanceId: string, workerId: string, from: readonly WorkerState[], to: { state: WorkerState; drain?: DrainRequest; goneAt?: number }): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE workers SET state = $3, drain = COALESCE($4::jsonb, drain), gone_at = COALESCE($5, gone_at)
        WHERE instance_id = $1 AND worker_id = $2 AND state = ANY($6::text[]) RETURNING worker_id`,
      [instanceId, workerId, to.state, to.drain ? JSON.stringify(to.drain) : null, to.goneAt === undefined ? null : new Date(to.goneAt), [...from]],
    );
    return rows.length === 1;
  }

  async list(): Promise<WorkerRecord[]> {
    const { rows } = await this.sql.query<Row>(`SELECT ${COLUMNS} FROM workers ORDER BY instance_id, worker_id`);
    return rows.map(recordOf);
  }
}

