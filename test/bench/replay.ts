/**
 * npm run bench -- replay
 *
 * On PostgreSQL: a coordinator restart (win the lease, rebuild the in-flight
 * map) over ledgers of 10k and 100k items (1 % Running, 10 % Pending, the rest
 * Done), and the failure scan over 1k Done + 100 Running next to 100k Done +
 * 100 Running in the same run: the scan should not grow with finished work.
 * (DynamoDB Local is left out: loading 100k items into it alone takes minutes.)
 * Last line: one JSON object.
 */
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';
import { PostgresRunLeaseStore } from '../../shared/adapters/postgres/run-lease-store.js';
import { postgresSchema } from '../support/backends.js';
import { percentile } from './raw.js';

const db = await postgresSchema(4);
const ledger = new PostgresLedgerStore(db.sql);

/** A run of `n` items: `running` Running with old heartbeats, `pending` Pending, the rest Done. */
async function ledgerOf(runId: string, n: number, running: number, pending: number) {
  await ledger.createRun(runId, {}, Date.now());
  await ledger.enqueue(
    runId,
    Array.from({ length: n }, (_, i) => ({ runId, i })),
    Date.now(),
  );
  // Everything Done, then the first `running` ids Running (stale heartbeats), the next `pending` Pending.
  await db.sql.query(`UPDATE work_items SET state = 'done', result_hash = 'x' WHERE run_id = $1`, [runId]);
  await db.sql.query(
    `UPDATE work_items SET state = 'running', result_hash = NULL, worker = 'w' || (get_byte(decode(substr(id, 1, 2), 'hex'), 0) % 8),
            heartbeat_at = now() - interval '1 hour', claimed_at = now() - interval '1 hour'
      WHERE run_id = $1 AND id IN (SELECT id FROM work_items WHERE run_id = $1 ORDER BY id LIMIT $2)`,
    [runId, running],
  );
  await db.sql.query(
    `UPDATE work_items SET state = 'pending', result_hash = NULL
      WHERE run_id = $1 AND id IN (SELECT id FROM work_items WHERE run_id = $1 AND state = 'done' ORDER BY id LIMIT $2)`,
    [runId, pending],
  );
  await db.sql.query('ANALYZE work_items');
}

function coordinatorFor(runId: string, holder: string) {
  const elector = new LeaseElector(new PostgresRunLeaseStore(db.sql, runId), {
    name: coordinatorLease(runId),
    holderId: holder,
    ttlMs: 60_000,
    renewIntervalMs: 20_000,
    retryIntervalMs: 5_000,
  });
  return { elector, c: new Coordinator({ runId, ledger, elector, bus: new InProcessBus(), failureTimeoutMs: 60_000 }) };
}

async function restart(runId: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const { elector, c } = coordinatorFor(runId, `restart-${i}`);
    await elector.campaign();
    const inflight = await c.replay();
    times.push(performance.now() - t);
    if (!inflight.running.size) throw new Error('replay found nothing running');
    await elector.resign();
  }
  return percentile(times, 50);
}

/** Scan time with nothing stale to re-pend (heartbeats fresh), so only the query is measured. */
async function scan(runId: string): Promise<number> {
  await db.sql.query(`UPDATE work_items SET heartbeat_at = now() WHERE run_id = $1 AND state = 'running'`, [runId]);
  const { elector, c } = coordinatorFor(runId, 'scanner');
  await elector.campaign();
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    const { repended } = await c.failureScan();
    times.push(performance.now() - t);
    if (repended.length) throw new Error('nothing should be stale');
  }
  await elector.resign();
  return percentile(times, 50);
}

const t0 = performance.now();
await ledgerOf('r10k', 10_000, 100, 1_000);
await ledgerOf('r100k', 100_000, 1_000, 10_000);
await ledgerOf('s1k', 1_100, 100, 0);
await ledgerOf('s100k', 100_100, 100, 0);
console.log(`setup ${Math.round(performance.now() - t0)} ms`);
const r = {
  replay_10k_ms: Math.round((await restart('r10k')) * 10) / 10,
  replay_100k_ms: Math.round((await restart('r100k')) * 10) / 10,
  failure_scan_1k_ms: Math.round((await scan('s1k')) * 100) / 100,
  failure_scan_100k_ms: Math.round((await scan('s100k')) * 100) / 100,
};
console.log(
  `restart + replay: 10k items ${r.replay_10k_ms} ms, 100k items ${r.replay_100k_ms} ms · failure scan with 100 Running: over 1k Done ${r.failure_scan_1k_ms} ms, over 100k Done ${r.failure_scan_100k_ms} ms (${(r.failure_scan_100k_ms / r.failure_scan_1k_ms).toFixed(2)}×)`,
);
await db.close();
console.log(JSON.stringify({ bench: 'replay', backend: 'postgres', ...r }));
process.exit(0);
