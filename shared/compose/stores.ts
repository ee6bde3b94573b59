import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type pg from 'pg';
import { dynamoDocumentClient } from '../adapters/dynamodb/connect.js';
import { DynamoLeaseStore } from '../adapters/dynamodb/lease-store.js';
import { DynamoLedgerStore } from '../adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../adapters/dynamodb/run-lease-store.js';
import { DynamoRegistryStore } from '../adapters/dynamodb/registry-store.js';
import { DynamoRolloutStore } from '../adapters/dynamodb/rollout-store.js';
import { DynamoStatusReads } from '../adapters/dynamodb/status-reads.js';
import { connectPostgres, openPglite } from '../adapters/postgres/connect.js';
import { PostgresLeaseStore } from '../adapters/postgres/lease-store.js';
import { PostgresLedgerStore } from '../adapters/postgres/ledger-store.js';
import { PostgresRunLeaseStore } from '../adapters/postgres/run-lease-store.js';
import { PostgresRegistryStore } from '../adapters/postgres/registry-store.js';
import { PostgresRolloutStore } from '../adapters/postgres/rollout-store.js';
import type { Sql } from '../adapters/postgres/sql.js';
import { PostgresStatusReads } from '../adapters/postgres/status-reads.js';
import type { StatusReads } from '../api/status-reads.js';
import type { LeaseStore } from '../lease/store.js';
import type { LedgerStore } from '../ledger/store.js';
import type { RegistryStore } from '../registry/registry.js';
import type { RolloutStore } from '../rollout/store.js';
import { DEFAULT_RUN_SHARDS } from '../ledger/capacity.js';

/**
 * The one place that turns "which store" into the store ports: every runtime
 * (the Lambda functions, a node, `npm start`, `rollout worker`) opens its
 * stores here, so choosing DynamoDB, PostgreSQL or PGlite is one branch in
 * the project, not one per runtime.
 */
export type StoreConfig =
  /** `retainRunDays`: how long a finished item is kept (its TTL, set by the write that ends it); default 30. */
  | { readonly kind: 'dynamodb'; readonly table: string; readonly client?: DynamoDBClient; readonly retainRunDays?: number }
  /**
   * A server (or Aurora): a pool over `connection`. `onConnect` runs on each new
   * session (e.g. session timeouts) and the pool hands the session out only
   * once it has settled, so no query is ever queued behind it on one client.
   */
  | { readonly kind: 'postgres'; readonly connection: pg.PoolConfig; readonly onConnect?: (client: pg.ClientBase) => Promise<void> }
  /** Embedded PostgreSQL in `dataDir` (in memory when null). */
  | { readonly kind: 'pglite'; readonly dataDir: string | null };

export interface StoreBundle {
  readonly kind: StoreConfig['kind'];
  readonly leases: LeaseStore;
  readonly rollouts: RolloutStore;
  readonly ledger: LedgerStore;
  readonly registry: RegistryStore;
  /** The coordinator lease store of one run (stamps the run's epoch with each lease win). */
  readonly runLeases: (runId: string) => LeaseStore;
  /** What the status page reads beside the other ports (GET /ui/state). */
  readonly statusReads: StatusReads;
  /** PostgreSQL and PGlite: the SQL port, for what only they offer (the ledger-backed queue, cluster membership). */
  readonly sql: Sql | null;
  close(): Promise<void>;
}

/** Opens (and for PostgreSQL, migrates) the store and returns its ports. */
export async function openStores(c: StoreConfig): Promise<StoreBundle> {
  if (c.kind === 'dynamodb') {
    const doc = dynamoDocumentClient(c.client ?? new DynamoDBClient({}));
    return {
      kind: c.kind,
      leases: new DynamoLeaseStore(doc, c.table),
      rollouts: new DynamoRolloutStore(doc, c.table),
      ledger: new DynamoLedgerStore(doc, c.table, { defaultShards: DEFAULT_RUN_SHARDS, ...(c.retainRunDays ? { retainRunDays: c.retainRunDays } : {}) }),
      registry: new DynamoRegistryStore(doc, c.table),
      runLeases: (runId) => new DynamoRunLeaseStore(doc, c.table, runId),
      statusReads: new DynamoStatusReads(doc, c.table),
      sql: null,
      close: () => Promise.resolve(doc.destroy()),
    };
  }
  // A pool option, not a 'connect' listener: the migration's sessions get it too, and pg-pool waits for
  // the promise it returns before handing the session out (typed `void` in @types/pg, awaited in pg-pool 3).
  const db =
    c.kind === 'postgres'
      ? // eslint-disable-next-line @typescript-eslint/no-misused-promises
        await connectPostgres({ ...c.connection, ...(c.onConnect ? { onConnect: c.onConnect } : {}) })
      : await openPglite(c.dataDir ?? undefined);
  return { kind: c.kind, ...sqlStores(db.sql), sql: db.sql, close: () => db.close() };
}

/** The store ports over one SQL connection (a pool, or one request's transaction). */
export function sqlStores(sql: Sql): Pick<StoreBundle, 'leases' | 'rollouts' | 'ledger' | 'registry' | 'runLeases' | 'statusReads'> {
  return {
    leases: new PostgresLeaseStore(sql),
    rollouts: new PostgresRolloutStore(sql),
    ledger: new PostgresLedgerStore(sql),
    registry: new PostgresRegistryStore(sql),
    runLeases: (runId) => new PostgresRunLeaseStore(sql, runId),
    statusReads: new PostgresStatusReads(sql),
  };
}
