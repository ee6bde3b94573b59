import type { Sql } from '../../shared/adapters/postgres/sql.js';

/**
 * Counts the statements a store sends through one `Sql`, by kind, while it
 * is installed: what a promotion costs in round trips, for the bench's
 * breakdown. A kind is the function a statement calls (`rollout_apply`), or
 * its verb and first table (`insert outbox`, `select rollouts`); a
 * transaction adds its BEGIN and COMMIT as `begin/commit` (two round trips).
 */
export interface SqlCensus {
  /** The counts since the last take, and starts counting afresh. */
  take(): Record<string, number>;
  /** Puts the Sql's own methods back. */
  restore(): void;
}

export function statementKind(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim().toLowerCase();
  const fn = /\b(rollout_\w+|lease_\w+|ledger_\w+|work_\w+)\s*\(/.exec(t);
  if (fn) return fn[1]!;
  const verb = /^(with\b.*?\)\s*)?(select|insert into|update|delete from)\b/.exec(t)?.[2] ?? t.split(' ')[0]!;
  const table = verb === 'select' ? /\bfrom\s+([a-z_][\w.]*)/.exec(t)?.[1] : new RegExp(`^(?:with\\b.*?\\)\\s*)?${verb}\\s+([a-z_][\\w.]*)`).exec(t)?.[1];
  return `${verb.split(' ')[0]} ${table ?? '?'}`;
}

export function sqlCensus(sql: Sql): SqlCensus {
  let counts: Record<string, number> = {};
  const count = (kind: string, n = 1) => (counts[kind] = (counts[kind] ?? 0) + n);
  // Kept bound, to be put back as they were.
  const query = sql.query.bind(sql);
  const transaction = sql.transaction.bind(sql);
  const counted =
    (q: Sql['query']): Sql['query'] =>
    (text, params, name) => (count(statementKind(text)), q(text, params, name));
  sql.query = counted(query);
  sql.transaction = <T>(fn: (tx: Sql) => Promise<T>): Promise<T> =>
    transaction<T>((tx: Sql) => {
      count('begin/commit', 2);
      const inside: Sql = { query: counted(tx.query.bind(tx)), exec: tx.exec.bind(tx), transaction: <U>(inner: (t: Sql) => Promise<U>) => inner(inside) };
      return fn(inside);
    });
  return {
    take: () => {
      const out = counts;
      counts = {};
      return out;
    },
    restore: () => {
      sql.query = query;
      sql.transaction = transaction;
    },
  };
}
