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
    const { rows } = await tx.query<{ holder: string | null; epoch: unknown }>('SELECT holder, epoch FROM leases WHERE name = $1 FOR SHARE', [token.name]);
    const row = rows[0];
    const current = row ? { holder: row.holder, epoch: toInt(row.epoch, 'leases.epoch') } : null;
    if (!matchesToken(current, token)) throw new FencedError(token, current);
    return write(tx);
  });
}

/** The fence as SQL: a `WITH` to put before a write and the condition its WHERE must include. */
export interface FenceClauses {
  readonly with: string;
  readonly holds: string;
}

/**
 * The same fence inside one statement: one round trip instead of four
 * (BEGIN, lock, write, COMMIT). A materialized CTE locks the lease row FOR
 * SHARE only if it still has the token's holder and epoch, and the write's
 * WHERE requires that row. The statement is its own transaction, so the
 * lock is held until the write commits; a steal in progress makes the CTE
 * wait and then re-check the new row (no match: nothing is written), a
 * steal that comes later waits for our commit.
 *
 *   WITH fence AS MATERIALIZED (SELECT 1 FROM leases WHERE name = … AND holder = … AND epoch = … FOR SHARE)
 *   UPDATE … WHERE … AND EXISTS (SELECT 1 FROM fence)
 *
 * Appends its parameters to `params`. A statement that changed nothing may
 * have been fenced or may have found its rows changed: `assertStillHeld`
 * tells which (only then, so the common path stays one round trip).
 */
export function fenceClauses(token: LeaseToken, params: unknown[]): FenceClauses {
  const p = (v: unknown) => `$${params.push(v)}`;
  return {
    with: `WITH fence AS MATERIALIZED (SELECT 1 FROM leases WHERE name = ${p(token.name)} AND holder = ${p(token.holder)} AND epoch = ${p(token.epoch)} FOR SHARE)`,
    holds: 'EXISTS (SELECT 1 FROM fence)',
  };
}

/** After a fenced statement changed nothing: FencedError if the token no longer holds the lease. */
export async function assertStillHeld(sql: Sql, token: LeaseToken): Promise<void> {
  const { rows } = await sql.query<{ holder: string | null; epoch: unknown }>('SELECT holder, epoch FROM leases WHERE name = $1', [token.name]);
  const row = rows[0];
  const current = row ? { holder: row.holder, epoch: toInt(row.epoch, 'leases.epoch') } : null;
  if (!matchesToken(current, token)) throw new FencedError(token, current);
}
