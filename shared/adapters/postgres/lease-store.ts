import type { LeaseRecord } from '../../lease/record.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { toInt, toMillis, type Sql } from './sql.js';

const COLUMNS = 'name, holder, epoch, version, acquired_at, renewed_at, expires_at, hostname, api_url';

interface LeaseRow {
  name: string;
  holder: string | null;
  epoch: unknown;
  version: unknown;
  acquired_at: unknown;
  renewed_at: unknown;
  expires_at: unknown;
  hostname: string | null;
  api_url: string | null;
}

export function leaseFromRow(r: LeaseRow): LeaseRecord {
  return {
    name: r.name,
    holder: r.holder,
    epoch: toInt(r.epoch, 'leases.epoch'),
    version: toInt(r.version, 'leases.version'),
    acquiredAt: toMillis(r.acquired_at, 'leases.acquired_at'),
    renewedAt: toMillis(r.renewed_at, 'leases.renewed_at'),
    expiresAt: toMillis(r.expires_at, 'leases.expires_at'),
    hostname: r.hostname,
    apiUrl: r.api_url,
  };
}

function params(n: LeaseRecord): unknown[] {
  return [n.name, n.holder, n.epoch, n.version, new Date(n.acquiredAt), new Date(n.renewedAt), new Date(n.expiresAt), n.hostname, n.apiUrl];
}

/** Leases on PostgreSQL or PGlite: one conditional statement per transition. */
export class PostgresLeaseStore implements LeaseStore {
  constructor(private readonly sql: Sql) {}

  async read(name: string): Promise<LeaseRecord | null> {
    const { rows } = await this.sql.query<LeaseRow>(`SELECT ${COLUMNS} FROM leases WHERE name = $1`, [name]);
    return rows[0] ? leaseFromRow(rows[0]) : null;
  }

  async compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
    const { rows } =
      expected === null
        ? // acquire: only if no row has ever existed under this name
          await this.sql.query(
            `INSERT INTO leases (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (name) DO NOTHING RETURNING name`,
            params(next),
          )
        : // steal, renew, release: only over the exact prior row
          await this.sql.query(
            `UPDATE leases SET holder = $2, epoch = $3, version = $4, acquired_at = $5, renewed_at = $6,
                    expires_at = $7, hostname = $8, api_url = $9
              WHERE name = $1 AND version = $10 RETURNING name`,
            [...params(next), expected.version],
          );
    if (rows.length === 1) return { ok: true, record: next };
    return { ok: false, current: await this.read(next.name) };
  }
}
