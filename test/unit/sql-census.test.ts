/** The promotion bench's statement census (test/bench/sql-census.ts): kinds, and counts through a transaction. */
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../shared/adapters/postgres/sql.js';
import { sqlCensus, statementKind } from '../bench/sql-census.js';

describe('sql census', () => {
  it('names a statement by the function it calls, or by its verb and first table', () => {
    expect(statementKind('SELECT rollout_apply($1::jsonb)')).toBe('rollout_apply');
    expect(statementKind('UPDATE rollout_events\n   SET published_at = now() WHERE id = ANY($1)')).toBe('update rollout_events');
    expect(statementKind('INSERT INTO gate_readings (a) VALUES ($1)')).toBe('insert gate_readings');
    expect(statementKind('DELETE FROM rollouts WHERE id = $1')).toBe('delete rollouts');
    expect(statementKind('WITH d AS (SELECT 1) SELECT * FROM rollout_due JOIN d ON true')).toBe('select rollout_due');
  });

  it('counts every statement, those inside a transaction and its BEGIN and COMMIT too, and puts the Sql back', async () => {
    const sent: string[] = [];
    const send: Sql['query'] = (text) => (sent.push(text), Promise.resolve({ rows: [] }));
    // As the drivers do: a transaction runs on its own connection's Sql, in which a nested one just runs.
    const tx: Sql = { query: send, exec: () => Promise.resolve(), transaction: (fn) => fn(tx) };
    const sql: Sql = { query: send, exec: () => Promise.resolve(), transaction: (fn) => fn(tx) };
    const census = sqlCensus(sql);
    await sql.query('SELECT 1 FROM leases');
    await sql.transaction(async (tx) => {
      await tx.query('SELECT rollout_apply($1)');
      await tx.transaction((inner) => inner.query('UPDATE rollout_events SET x = 1'));
    });
    expect(census.take()).toEqual({ 'select leases': 1, 'begin/commit': 2, rollout_apply: 1, 'update rollout_events': 1 });
    expect(census.take()).toEqual({});
    census.restore();
    await sql.query('SELECT 1 FROM leases');
    expect(census.take()).toEqual({});
    expect(sent).toHaveLength(4);
  });
});
