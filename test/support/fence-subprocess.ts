/**
 * A coordinator process for the fence_aborts_within_5s witness. It takes the
 * run's coordinator lease, prints `ready <epoch>`, and on each stdin line
 * `steal-for <worker>` asks its coordinator to steal — as a live coordinator
 * would. Deposed meanwhile, it must print one coordinator_fenced event and exit.
 */
import { createInterface } from 'node:readline';
import pg from 'pg';
import { LeaseElector } from '../../shared/lease/elector.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { exitOnFence } from '../../shared/ledger/self-fence.js';
import { coordinatorLease, type LedgerStore } from '../../shared/ledger/store.js';
import type { LeaseStore } from '../../shared/lease/store.js';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../../shared/adapters/dynamodb/run-lease-store.js';
import { pgSql } from '../../shared/adapters/postgres/sql.js';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';
import { PostgresRunLeaseStore } from '../../shared/adapters/postgres/run-lease-store.js';

const runId = process.env.FENCE_RUN_ID!;
let ledger: LedgerStore;
let leases: LeaseStore;
if (process.env.FENCE_STORE === 'dynamodb') {
  const doc = dynamoDocumentClient();
  ledger = new DynamoLedgerStore(doc, process.env.FENCE_TABLE!);
  leases = new DynamoRunLeaseStore(doc, process.env.FENCE_TABLE!, runId);
} else {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${process.env.FENCE_SCHEMA}`, max: 2 });
  ledger = new PostgresLedgerStore(pgSql(pool));
  leases = new PostgresRunLeaseStore(pgSql(pool), runId);
}
const elector = new LeaseElector(leases, {
  name: coordinatorLease(runId),
  holderId: 'subprocess',
  ttlMs: 60_000,
  renewIntervalMs: 20_000,
  retryIntervalMs: 5_000,
});
await elector.campaign();
const coordinator = new Coordinator({
  runId,
  ledger,
  elector,
  failureTimeoutMs: 60_000,
  bus: { publish: (events) => Promise.resolve(void events.forEach((e) => console.log(`event ${JSON.stringify(e)}`))) },
  onFenced: exitOnFence({ log: (l) => console.log(l) }),
});
console.log(`ready ${elector.token()?.epoch}`);
for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, arg] = line.trim().split(' ');
  if (cmd === 'steal-for') {
    try {
      const notice = await coordinator.stealFor(arg!);
      console.log(`stole ${notice.items.length}`);
    } catch (err) {
      console.log(`error ${(err as Error).name}`);
    }
  }
}
