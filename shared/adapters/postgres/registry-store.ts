import type { DrainRequest, Registered, RegistryStore, WorkerKey, WorkerRecord, WorkerState } from '../../registry/registry.js';
import { toMillis, type Sql } from './sql.js';

type Row = Record<string, unknown>;

function recordOf(r: Row): WorkerRecord {
  return {
    workerId: String(r.worker_id),
    instanceId: String(r.instance_id),
    provider: r.provider as WorkerRecord['provider'],
    runId: String(r.run_id),
    state: r.state as WorkerState,
    registeredAt: toMillis(r.registered_at),
    heartbeatAt: toMillis(r.heartbeat_at),
    drain: (r.drain as WorkerRecord['drain']) ?? null,
    goneAt: r.gone_at === null || r.gone_at === undefined ? null : toMillis(r.gone_at),
    silentForMs: Math.max(0, Number(r.silent_for_ms)),
  };
}

const COLUMNS = 'instance_id, run_id, worker_id, provider, state, registered_at, heartbeat_at, drain, gone_at';
// Measured by the store's clock, in the statement that reads the row: one clock for the comparison.
const RETURNING = `${COLUMNS}, (extract(epoch FROM now() - seen_at) * 1000)::float8 AS silent_for_ms`;
const KEY = 'instance_id = $1 AND run_id = $2 AND worker_id = $3';
const keyOf = (k: WorkerKey) => [k.instanceId, k.runId, k.workerId];

export class PostgresRegistryStore implements RegistryStore {
  constructor(private readonly sql: Sql) {}

  async register(w: Omit<WorkerRecord, 'silentForMs'>): Promise<Registered> {
    // Two rounds at most: a record refused as draining and gone by the time it is read was a drain that finished.
    for (let round = 0; ; round++) {
      const { rows } = await this.sql.query<Row>(
        `INSERT INTO workers (${COLUMNS}, seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
         ON CONFLICT (instance_id, run_id, worker_id) DO UPDATE
            SET provider = excluded.provider, state = excluded.state, registered_at = excluded.registered_at,
                heartbeat_at = excluded.heartbeat_at, drain = excluded.drain, gone_at = excluded.gone_at, seen_at = now()
          -- A pending drain request survives any registration: the worker reads it back and drains.
          WHERE workers.state <> 'draining'
         -- xmax is 0 on a row this statement inserted, and set on one it updated: whether the worker was here before.
         RETURNING ${RETURNING}, (xmax = 0) AS inserted`,
        [
          w.instanceId,
          w.runId,
          w.workerId,
          w.provider,
          w.state,
          new Date(w.registeredAt),
          new Date(w.heartbeatAt),
          w.drain ? JSON.stringify(w.drain) : null,
          w.goneAt === null ? null : new Date(w.goneAt),
        ],
      );
      if (rows[0]) return { ...recordOf(rows[0]), known: rows[0].inserted !== true || round > 0 };
      const stored = await this.get(w);
      if (stored?.state === 'draining') return { ...stored, known: true };
      if (round >= 1)
        throw new Error(`worker ${w.workerId} of run ${w.runId} on ${w.instanceId}: registration refused twice, the record is ${stored?.state ?? 'missing'}`);
    }
  }

  async byInstance(instanceId: string): Promise<WorkerRecord[]> {
    const { rows } = await this.sql.query<Row>(`SELECT ${RETURNING} FROM workers WHERE instance_id = $1 ORDER BY worker_id, run_id`, [instanceId]);
    return rows.map(recordOf);
  }

  async heartbeat(key: WorkerKey, now: number): Promise<WorkerRecord | null> {
    const { rows } = await this.sql.query<Row>(
      `UPDATE workers SET heartbeat_at = GREATEST(heartbeat_at, $4), seen_at = now() WHERE ${KEY} AND state <> 'gone' RETURNING ${RETURNING}`,
      [...keyOf(key), new Date(now)],
    );
    return rows[0] ? recordOf(rows[0]) : this.get(key);
  }

  async setState(key: WorkerKey, from: readonly WorkerState[], to: { state: WorkerState; drain?: DrainRequest; goneAt?: number }): Promise<boolean> {
    const { rows } = await this.sql.query(
      `UPDATE workers SET state = $4, drain = COALESCE($5::jsonb, drain), gone_at = COALESCE($6, gone_at)
        WHERE ${KEY} AND state = ANY($7::text[]) RETURNING worker_id`,
      [...keyOf(key), to.state, to.drain ? JSON.stringify(to.drain) : null, to.goneAt === undefined ? null : new Date(to.goneAt), [...from]],
    );
    return rows.length === 1;
  }

  async list(): Promise<WorkerRecord[]> {
    const { rows } = await this.sql.query<Row>(`SELECT ${RETURNING} FROM workers ORDER BY instance_id, worker_id, run_id`);
    return rows.map(recordOf);
  }

  async worker(runId: string, workerId: string): Promise<WorkerRecord | null> {
    const { rows } = await this.sql.query<Row>(`SELECT ${RETURNING} FROM workers WHERE run_id = $1 AND worker_id = $2 ORDER BY heartbeat_at DESC LIMIT 1`, [
      runId,
      workerId,
    ]);
    return rows[0] ? recordOf(rows[0]) : null;
  }

  private async get(key: WorkerKey): Promise<WorkerRecord | null> {
    const { rows } = await this.sql.query<Row>(`SELECT ${RETURNING} FROM workers WHERE ${KEY}`, keyOf(key));
    return rows[0] ? recordOf(rows[0]) : null;
  }
}
