/** Helpers both benchmarks share: percentiles and the raw conditional write they compare with. */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { openPglite } from '../../shared/adapters/postgres/connect.js';
import type { Sql } from '../../shared/adapters/postgres/sql.js';
import { dynamoTable, postgresSchema, type BackendName } from '../support/backends.js';

export function percentile(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN;
}
export const round3 = (n: number) => Math.round(n * 1000) / 1000;

/** One conditional single-row write with no lease around it: the raw floor. */
export async function rawConditionalWrite(name: BackendName): Promise<{ op: (i: number) => Promise<unknown>; close(): Promise<void> }> {
  if (name === 'dynamodb') {
    const t = await dynamoTable();
    let v = 0;
    await t.doc.send(
      new UpdateCommand({ TableName: t.table, Key: { pk: 'RAW', sk: 'RAW' }, UpdateExpression: 'SET v = :z', ExpressionAttributeValues: { ':z': 0 } }),
    );
    return {
      op: () =>
        t.doc.send(
          new UpdateCommand({
            TableName: t.table,
            Key: { pk: 'RAW', sk: 'RAW' },
            UpdateExpression: 'SET v = :n',
            ConditionExpression: 'v = :v',
            ExpressionAttributeValues: { ':v': v, ':n': ++v },
          }),
        ),
      close: () => t.close(),
    };
  }
  const db: { sql: Sql; close(): Promise<void> } = name === 'postgres' ? await postgresSchema(2) : await openPglite();
  await db.sql.query('CREATE TABLE raw (k int PRIMARY KEY, v bigint NOT NULL)');
  await db.sql.query('INSERT INTO raw VALUES (1, 0)');
  let v = 0;
  return { op: () => db.sql.query('UPDATE raw SET v = $2 WHERE k = 1 AND v = $1', [v, ++v]), close: () => db.close() };
}
