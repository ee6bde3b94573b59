/**
 * `rollout store resend-pending`, a failover's step, as a process against a
 * real store: Pending items with a message on record have none afterwards,
 * so the coordinator's next scan sends each again; a bad invocation names
 * what is missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import type { LedgerStore } from '../../shared/ledger/store.js';
import { dynamoTable, postgresSchema, uniqueName } from '../support/backends.js';
import { rollout } from '../support/cli.js';

describe.each(['postgres', 'dynamodb'] as const)('rollout store resend-pending on %s', (store) => {
  let ledger: LedgerStore;
  let args: string[];
  let close: () => Promise<void>;
  beforeAll(async () => {
    if (store === 'postgres') {
      const db = await postgresSchema(2);
      ledger = new PostgresLedgerStore(db.sql);
      const url = new URL(db.url);
      url.searchParams.set('options', `-c search_path=${db.schema}`);
      args = ['--store', 'postgres', '--database-url', url.toString()];
      close = () => db.close();
    } else {
      const t = await dynamoTable();
      ledger = new DynamoLedgerStore(t.doc, t.table, { defaultShards: 4 });
      args = ['--store', 'dynamodb', '--table', t.table];
      close = () => t.close();
    }
  });
  afterAll(async () => {
    await close?.();
  });

  it('marks every Pending item of the run unsent, and says how many', async () => {
    const runId = uniqueName('failover');
    const now = Date.now();
    await ledger.createRun(runId, {}, now);
    const { ids } = await ledger.enqueue(runId, [{ a: 1 }, { a: 2 }, { a: 3 }], now);
    await ledger.markSent(
      runId,
      ids.map((id) => ({ id, version: 0 })),
      now,
    );
    await expect.poll(async () => (await ledger.unsent(runId, now - 1, 10)).length, { interval: 20, timeout: 5_000 }).toBe(0);
    const r = await rollout(['store', 'resend-pending', '--run', runId, ...args]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^${runId}: [3-9] pending items marked unsent`));
    await expect.poll(async () => (await ledger.unsent(runId, now - 1, 10)).map((i) => i.id).sort(), { interval: 20, timeout: 5_000 }).toEqual([...ids].sort());
  });

  it('refuses an invocation without its store named, exit 2', async () => {
    const r = await rollout(['store', 'resend-pending', '--store', store], { DATABASE_URL: '', ROLLOUT_TABLE: '' });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(store === 'postgres' ? /--database-url is required/ : /--table is required/);
  });
});
