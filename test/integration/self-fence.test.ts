/**
 * split_brain_old_coord_self_fences, as a process: fence_aborts_within_5s.
 * A coordinator subprocess holds the run's lease; the test takes the lease
 * over and asks the old process to act. The store refuses it; it prints one
 * coordinator_fenced event and exits within 5 s.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseElector } from '../../shared/lease/elector.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { claim } from '../../shared/ledger/transitions.js';
import { dynamoTable, postgresSchema, uniqueName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';
import { PostgresRunLeaseStore } from '../../shared/adapters/postgres/run-lease-store.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../../shared/adapters/dynamodb/run-lease-store.js';

const root = resolve(import.meta.dirname, '../..');

describe.each(['postgres', 'dynamodb'] as const)('fence_aborts_within_5s on %s', (store) => {
  let fixture: { env: Record<string, string>; backend: Pick<LeaseBackend, 'ledger' | 'runLeases'>; close(): Promise<void> };
  beforeAll(async () => {
    if (store === 'postgres') {
      const db = await postgresSchema(2);
      fixture = {
        env: { FENCE_STORE: 'postgres', FENCE_SCHEMA: db.schema },
        backend: { ledger: new PostgresLedgerStore(db.sql), runLeases: (r) => new PostgresRunLeaseStore(db.sql, r) },
        close: () => db.close(),
      };
    } else {
      const t = await dynamoTable();
      fixture = {
        env: { FENCE_STORE: 'dynamodb', FENCE_TABLE: t.table },
        backend: { ledger: new DynamoLedgerStore(t.doc, t.table), runLeases: (r) => new DynamoRunLeaseStore(t.doc, t.table, r) },
        close: () => t.close(),
      };
    }
  });
  afterAll(async () => {
    await fixture?.close();
  });

  it('the deposed coordinator process emits exactly one coordinator_fenced event and exits within 5 s', async () => {
    const runId = uniqueName('run');
    const { ledger } = fixture.backend;
    await ledger.createRun(runId, {}, Date.now());
    const { ids } = await ledger.enqueue(runId, [{ a: 1 }, { a: 2 }, { a: 3 }, { a: 4 }], Date.now());
    for (const id of ids) await ledger.cas(claim(runId, id, 'busy', 0, Date.now()), Date.now());

    const child = spawn(process.execPath, ['--import', 'tsx', resolve(root, 'test/support/fence-subprocess.ts')], {
      cwd: root,
      env: { ...process.env, ...fixture.env, FENCE_RUN_ID: runId },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    const exited = new Promise<{ code: number | null; at: number }>((r) => child.on('exit', (code) => r({ code, at: Date.now() })));
    const ready = new Promise<void>((r) =>
      createInterface({ input: child.stdout }).on('line', (l) => {
        lines.push(l);
        if (l.startsWith('ready')) r();
      }),
    );
    await ready;
    expect(lines[0]).toBe('ready 0');

    // A new coordinator takes the lease (its clock says the old lease ran out; the old process's clock does not).
    const later = new ManualClock(Date.now() + 10 * 60_000);
    const successor = new LeaseElector(fixture.backend.runLeases(runId), {
      name: coordinatorLease(runId),
      holderId: 'successor',
      clock: later,
      ttlMs: 60_000,
      renewIntervalMs: 20_000,
      retryIntervalMs: 5_000,
    });
    expect((await successor.campaign()).leader).toBe(true);
    expect(successor.token()!.epoch).toBe(1);

    const asked = Date.now();
    child.stdin.write('steal-for idle\n');
    const { code, at } = await exited;
    expect(code).toBe(75);
    expect(at - asked).toBeLessThanOrEqual(5_000);
    const events = lines.filter((l) => l.startsWith('event ')).map((l) => JSON.parse(l.slice(6)) as { detailType: string; detail: { epoch: number } });
    expect(events.map((e) => e.detailType)).toEqual(['coordinator_fenced']);
    expect(events[0]!.detail).toMatchObject({ epoch: 0, current: { holder: 'successor', epoch: 1 } });
    for (const id of ids) expect((await ledger.get(runId, id))!.worker).toBe('busy'); // nothing it tried landed
  });
});
