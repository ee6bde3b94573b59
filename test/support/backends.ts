/**
 * The three store backends as the contract suites see them, each over a real
 * server (PostgreSQL, DynamoDB Local) or the real embedded engine (PGlite),
 * isolated per fixture: a fresh schema, a fresh PGlite, a fresh table.
 */
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe } from 'vitest';
import type { LeaseToken } from '../../shared/lease/record.js';
import type { LeaseStore } from '../../shared/lease/store.js';
import { fencedTransactWrite } from '../../shared/adapters/dynamodb/fence.js';
import { DynamoLeaseStore } from '../../shared/adapters/dynamodb/lease-store.js';
import { ensureTable } from '../../shared/adapters/dynamodb/table.js';
import { connectPostgres, openPglite } from '../../shared/adapters/postgres/connect.js';
import { assertStillHeld, fenceClauses } from '../../shared/adapters/postgres/fence.js';
import { PostgresLeaseStore } from '../../shared/adapters/postgres/lease-store.js';
import { PostgresRolloutStore } from '../../shared/adapters/postgres/rollout-store.js';
import { DynamoRolloutStore } from '../../shared/adapters/dynamodb/rollout-store.js';
import type { RolloutStore } from '../../shared/rollout/store.js';
import type { LedgerStore } from '../../shared/ledger/store.js';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';
import { PostgresRunLeaseStore } from '../../shared/adapters/postgres/run-lease-store.js';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../../shared/adapters/dynamodb/run-lease-store.js';
import type { Sql } from '../../shared/adapters/postgres/sql.js';
import type { PostgresHandle } from '../../shared/adapters/postgres/connect.js';
import { FaultyProxy } from './tcp-proxy.js';

export type BackendName = 'postgres' | 'pglite' | 'dynamodb';
export const BACKENDS: readonly BackendName[] = ['postgres', 'pglite', 'dynamodb'];

export interface LeaseBackend {
  readonly name: BackendName;
  readonly store: LeaseStore;
  readonly rollouts: RolloutStore;
  readonly ledger: LedgerStore;
  /** The coordinator lease store of one run (stamps the run's epoch with each lease win). */
  runLeases(runId: string): LeaseStore;
  /** Writes key = value through the backend's real fenced-write primitive. */
  fencedPut(token: LeaseToken, key: string, value: string): Promise<void>;
  probe(key: string): Promise<string | null>;
  /** PostgreSQL / PGlite only: the SQL port (the ledger-backed queue runs on it). */
  readonly sql?: Sql;
  /** DynamoDB only: the client every store of the backend sends through, and the table. */
  readonly dynamo?: { readonly doc: DynamoDBDocumentClient; readonly table: string };
  /** PostgreSQL only: the server's connection string (for LISTEN/NOTIFY connections). */
  readonly url?: string;
  /** PostgreSQL only: the fixture's schema; a connection of its own needs `-c search_path=<schema>`. */
  readonly schema?: string;
  close(): Promise<void>;
}

/** A database of its own on the harness's PostgreSQL (for nodes, which migrate the public schema), dropped with `drop()`. */
export async function freshDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = required('DATABASE_URL');
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  const u = new URL(admin);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const d = new pg.Client({ connectionString: admin });
      await d.connect();
      await d.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await d.end();
    },
  };
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the suites through \`npm test\` / \`npm run test:contract\`, which start the services`);
  return v;
}

const PROBE_DDL = 'CREATE TABLE fence_probe (key text PRIMARY KEY, value text NOT NULL)';

/** A probe write fenced in one statement (the form the ledger's coordinator writes use). */
export async function fencedProbePut(sql: Sql, token: LeaseToken, key: string, value: string): Promise<void> {
  const params: unknown[] = [key, value];
  const fence = fenceClauses(token, params);
  const { rows } = await sql.query(
    `${fence.with} INSERT INTO fence_probe (key, value) SELECT $1, $2 WHERE ${fence.holds} ON CONFLICT (key) DO UPDATE SET value = excluded.value RETURNING key`,
    params,
  );
  if (!rows.length) await assertStillHeld(sql, token);
}

function sqlProbe(sql: Sql): Pick<LeaseBackend, 'fencedPut' | 'probe'> {
  return {
    fencedPut: (token, key, value) => fencedProbePut(sql, token, key, value),
    probe: async (key) => (await sql.query<{ value: string }>('SELECT value FROM fence_probe WHERE key = $1', [key])).rows[0]?.value ?? null,
  };
}

/** A fresh schema on the test PostgreSQL; every connection of the pool sees only it. */
export async function postgresSchema(poolSize = 20): Promise<{ sql: Sql; pool: pg.Pool; schema: string; url: string; close(): Promise<void> }> {
  const url = required('DATABASE_URL');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const handle = await connectPostgres({ connectionString: url, max: poolSize, options: `-c search_path=${schema}` });
  return {
    ...handle,
    schema,
    url,
    async close() {
      await handle.close();
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

/**
 * A schema of its own for a describe block's processes: its ledger, and the
 * connection string a worker (a process, or createWorker) reaches it with.
 * Set up before the block's tests, dropped after.
 */
export function ledgerSchemaPerSuite(poolSize = 4): { readonly ledger: PostgresLedgerStore; readonly url: string; readonly sql: Sql } {
  let db: Awaited<ReturnType<typeof postgresSchema>> | undefined;
  let ledger: PostgresLedgerStore | undefined;
  beforeAll(async () => {
    db = await postgresSchema(poolSize);
    ledger = new PostgresLedgerStore(db.sql);
  });
  afterAll(async () => {
    await db?.close();
  });
  return {
    get ledger() {
      return ledger!;
    },
    get url() {
      return `${db!.url}?options=${encodeURIComponent(`-c search_path=${db!.schema}`)}`;
    },
    get sql() {
      return db!.sql;
    },
  };
}

/** A fresh schema, and a pool of `poolSize` that reaches it only through a FaultyProxy (to cut, refuse or delay). */
export async function proxiedPostgresSchema(
  poolSize: number,
): Promise<{ schema: Awaited<ReturnType<typeof postgresSchema>>; proxy: FaultyProxy; db: PostgresHandle; close(): Promise<void> }> {
  const schema = await postgresSchema(2);
  const url = new URL(schema.url);
  const proxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
  url.port = String(proxy.port);
  const db = await connectPostgres({ connectionString: url.toString(), options: `-c search_path=${schema.schema}`, max: poolSize });
  return {
    schema,
    proxy,
    db,
    async close() {
      await db.close();
      await proxy.stop();
      await schema.close();
    },
  };
}

export async function dynamoTable(): Promise<{ client: DynamoDBClient; doc: DynamoDBDocumentClient; table: string; close(): Promise<void> }> {
  if (!process.env.AWS_ENDPOINT_URL && process.env.ROLLOUT_TEST_AWS !== 'account') required('AWS_ENDPOINT_URL_DYNAMODB');
  const client = new DynamoDBClient({});
  const doc = dynamoDocumentClient(client);
  const table = uniqueName('rollout-test');
  await ensureTable(client, table);
  return {
    client,
    doc,
    table,
    async close() {
      await client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
      client.destroy();
    },
  };
}

async function sqlBackend(name: BackendName, sql: Sql, close: () => Promise<void>, url?: string, schema?: string): Promise<LeaseBackend> {
  await sql.query(PROBE_DDL);
  return {
    name,
    sql,
    ...(url ? { url } : {}),
    ...(schema ? { schema } : {}),
    store: new PostgresLeaseStore(sql),
    rollouts: new PostgresRolloutStore(sql),
    ledger: new PostgresLedgerStore(sql),
    runLeases: (runId) => new PostgresRunLeaseStore(sql, runId),
    ...sqlProbe(sql),
    close,
  };
}

export async function openBackend(name: BackendName): Promise<LeaseBackend> {
  switch (name) {
    case 'postgres': {
      const db = await postgresSchema();
      return sqlBackend(name, db.sql, () => db.close(), db.url, db.schema);
    }
    case 'pglite': {
      const db = await openPglite();
      return sqlBackend(name, db.sql, () => db.close());
    }
    case 'dynamodb': {
      const t = await dynamoTable();
      return {
        name,
        dynamo: { doc: t.doc, table: t.table },
        store: new DynamoLeaseStore(t.doc, t.table),
        rollouts: new DynamoRolloutStore(t.doc, t.table),
        // Runs spread over 4 shards: every contract suite exercises the fan-out, not one key.
        ledger: new DynamoLedgerStore(t.doc, t.table, { defaultShards: 4 }),
        runLeases: (runId) => new DynamoRunLeaseStore(t.doc, t.table, runId),
        fencedPut: (token, key, value) =>
          fencedTransactWrite(t.doc, t.table, token, [{ Put: { TableName: t.table, Item: { pk: `PROBE#${key}`, sk: 'PROBE', value } } }]),
        probe: async (key) => {
          const { Item } = await t.doc.send(new GetCommand({ TableName: t.table, Key: { pk: `PROBE#${key}`, sk: 'PROBE' }, ConsistentRead: true }));
          return typeof Item?.value === 'string' ? Item.value : null;
        },
        close: () => t.close(),
      };
    }
  }
}

export interface BackendBlockOptions {
  /** Only these backends (default: all three). */
  readonly only?: readonly BackendName[];
  /** `each`: a backend of its own for every test (default `once` per block). */
  readonly fresh?: 'once' | 'each';
}

/**
 * One `describe` per backend, the backend opened before the block's tests
 * (`fresh: 'each'`: before each test) and closed after. `backend` is filled
 * in by that hook, so tests read `backend.store` as if it were a constant.
 */
export function forEachBackend(title: string, body: (backend: LeaseBackend, name: BackendName) => void): void;
export function forEachBackend(title: string, o: BackendBlockOptions, body: (backend: LeaseBackend, name: BackendName) => void): void;
export function forEachBackend(
  title: string,
  a: BackendBlockOptions | ((backend: LeaseBackend, name: BackendName) => void),
  b?: (backend: LeaseBackend, name: BackendName) => void,
): void {
  const [o, body]: [BackendBlockOptions, typeof b & {}] = typeof a === 'function' ? [{}, a] : [a, b!];
  describe.each(o.only ?? BACKENDS)(title, (name) => {
    const backend = { name } as LeaseBackend;
    const open = async () => void Object.assign(backend, await openBackend(name));
    const close = async () => void (await backend.close?.());
    if (o.fresh === 'each') {
      beforeEach(open);
      afterEach(close);
    } else {
      beforeAll(open);
      afterAll(close);
    }
    body(backend, name);
  });
}
