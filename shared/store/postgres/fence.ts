import { FencedError, matchesToken } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import { toInt, type Sql } from './sql.js';

/**
 * The fenced-write primitive on PostgreSQL: runs `write` in one transaction
 * that first locks the lease row FOR SHARE and checks holder and epoch.
 *
 * Why FOR SHARE and not a plain SELECT: under READ COMMITTED a plain read is
 * check-then-write — a steal can commit between the check and our COMMIT. The
 * share lock makes a concurrent steal (an UPDATE of the row) wait for our
 * commit, and a steal already in progress makes our lock wait and then see the
 * new epoch. Either way no write carrying the old epoch lands after the steal.
 */
export async function withFence<T>(sql: Sql, token: LeaseToken, write: (tx: Sql) => Promise<T>): Promise<T> {
  return sql.transaction(async (tx) => {
    const { rows } = await tx.query<{ holder: string | null; epoch: unknown }>(
      'SELECT holder, epoch FROM leases WHERE name = $1 FOR SHARE',
      [token.name],
    );
    const row = rows[0];
    const current = row ? { holder: row.holder, epoch: toInt(row.epoch, 'leases.epoch') } : null;
    if (!matchesToken(current, token)) throw new FencedError(token, current);
    return write(tx);
  });
}
