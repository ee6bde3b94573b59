/**
 * The functions' database roles (shared/adapters/postgres/roles.ts) on a real
 * PostgreSQL: each role does what its function does, through the same store
 * code, and is refused (permission denied) what it must not. Each role's
 * sessions run under it with `SET ROLE` (role=… at connect), as a function
 * logged in with an IAM token on Aurora would; the schema is the test's own.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { applyDatabaseRoles, DATABASE_ROLES, mayCreateRoles, type DatabaseRole } from '../../shared/adapters/postgres/roles.js';
import { pgSql, type Sql } from '../../shared/adapters/postgres/sql.js';
import { InProcessWake } from '../../shared/adapters/postgres/wake.js';
import { openControlPlane, type ControlPlane } from '../../shared/compose/control-plane.js';
import { sqlStores } from '../../shared/compose/stores.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import { FUNCTIONS, type FunctionSpec } from '../../shared/topology.js';
import { postgresSchema, uniqueName } from '../support/backends.js';

const SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10 } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};
const TIMINGS = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000 };
const DENIED = /permission denied|must be owner/;

describe('database roles, one per function', () => {
  let db: Awaited<ReturnType<typeof postgresSchema>>;
  const pools: pg.Pool[] = [];
  const planes: ControlPlane[] = [];

  /** Connection options of a session of `role` in the test's schema. */
  const as = (role: DatabaseRole): pg.PoolConfig => ({ connectionString: db.url, max: 2, options: `-c search_path=${db.schema} -c role=${role}` });
  function sqlAs(role: DatabaseRole): Sql {
    const pool = new pg.Pool(as(role));
    pool.on('error', () => undefined);
    pools.push(pool);
    return pgSql(pool);
  }
  // One holder for every role, as every function of a stack shares its node id.
  async function planeAs(role: DatabaseRole, holderId = 'stack'): Promise<ControlPlane> {
    const plane = await openControlPlane({
      store: { kind: 'postgres', connection: as(role) },
      holderId,
      timings: TIMINGS,
      election: { kind: 'lease', loop: false },
      bus: new InProcessBus(),
    });
    planes.push(plane);
    return plane;
  }
  /** A rollout and a run with items, made by the schema's owner. */
  async function fixtures() {
    const owner = sqlStores(db.sql);
    const rolloutId = uniqueName('ro');
    await owner.rollouts.create(rolloutId, parseRolloutSpec(SPEC), Date.now(), 'alice');
    const runId = uniqueName('run');
    await owner.ledger.createRun(runId, {}, Date.now());
    const { ids } = await owner.ledger.enqueue(runId, [{ i: 1 }, { i: 2 }], Date.now());
    return { rolloutId, runId, ids };
  }

  beforeAll(async () => {
    db = await postgresSchema(4);
  });
  afterAll(async () => {
    for (const p of planes) await p.close();
    for (const p of pools) await p.end();
    await db?.close();
  });

  it('the schema owner sets them up on connect: every role the topology names, able to log in, no superuser, no role creation', async () => {
    expect(await mayCreateRoles(db.sql)).toBe(true);
    const named = Object.values(FUNCTIONS).flatMap((f) => ((f as FunctionSpec).databaseRole ? [(f as FunctionSpec).databaseRole!] : []));
    expect(named.every((r) => Object.hasOwn(DATABASE_ROLES, r))).toBe(true);
    const { rows } = await db.sql.query<{ rolname: string; rolcanlogin: boolean; rolsuper: boolean; rolcreaterole: boolean; rolcreatedb: boolean }>(
      'SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname',
      [Object.keys(DATABASE_ROLES)],
    );
    expect(rows.map((r) => r.rolname)).toEqual(Object.keys(DATABASE_ROLES).sort());
    for (const r of rows) expect([r.rolname, r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolcreatedb]).toEqual([r.rolname, true, false, false, false]);
    // Run again (a second migrator, a restart): the same grants, no error.
    await applyDatabaseRoles(db.sql);
    // A function's role may not set them up, and its own open skips the step.
    expect(await mayCreateRoles(sqlAs('rollout_api'))).toBe(false);
  });

  it('each role holds exactly the table privileges listed for it, in the schema, and EXECUTE on the rollout functions only where listed', async () => {
    const { rows } = await db.sql.query<{ role: string; table: string; privilege: string }>(
      `SELECT r.rolname AS role, c.relname AS table, p.privilege
         FROM pg_roles r CROSS JOIN pg_class c
         CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(privilege)
        WHERE r.rolname = ANY($1) AND c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p')
          AND has_table_privilege(r.rolname, c.oid, p.privilege)
        ORDER BY 1, 2, 3`,
      [Object.keys(DATABASE_ROLES)],
    );
    const held = rows.map((r) => `${r.role} ${r.table} ${r.privilege}`);
    const listed = Object.entries(DATABASE_ROLES)
      .flatMap(([role, g]) => [
        `${role} schema_migrations SELECT`,
        ...Object.entries(g.tables).flatMap(([table, privileges]) => (privileges as readonly string[]).map((p) => `${role} ${table} ${p}`)),
      ])
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect(held).toEqual(listed);
    const { rows: calls } = await db.sql.query<{ role: string; fn: string }>(
      `SELECT r.rolname AS role, p.proname AS fn FROM pg_roles r CROSS JOIN pg_proc p
        WHERE r.rolname = ANY($1) AND p.pronamespace = current_schema()::regnamespace AND has_function_privilege(r.rolname, p.oid, 'EXECUTE')
        GROUP BY 1, 2 ORDER BY 1, 2`,
      [Object.keys(DATABASE_ROLES)],
    );
    const callers = [...new Set(calls.map((c) => c.role))].sort();
    expect(callers).toEqual(
      Object.entries(DATABASE_ROLES)
        .filter(([, g]) => g.rolloutFunctions)
        .map(([r]) => r)
        .sort(),
    );
    // The trigger functions are called by their triggers only.
    expect(calls.filter((c) => c.fn.startsWith('rollout_due_'))).toEqual([]);
  });

  it('no role may change the schema: create, alter, drop, truncate are refused', async () => {
    for (const role of Object.keys(DATABASE_ROLES) as DatabaseRole[]) {
      const sql = sqlAs(role);
      await expect(sql.exec('CREATE TABLE sneaky (id int)'), role).rejects.toThrow(DENIED);
      await expect(sql.exec('DROP TABLE rollouts'), role).rejects.toThrow(DENIED);
      await expect(sql.exec('ALTER TABLE runs ADD COLUMN x int'), role).rejects.toThrow(DENIED);
      await expect(sql.exec('TRUNCATE leases'), role).rejects.toThrow(DENIED);
      await expect(sql.exec('DELETE FROM schema_migrations'), role).rejects.toThrow(DENIED);
    }
    // The families held apart, table by table (each statement alone, so no other table's refusal hides a grant too wide).
    const forbidden: Record<DatabaseRole, string[]> = {
      rollout_api: ['DELETE FROM rollouts', 'DELETE FROM runs', 'DELETE FROM work_items', 'INSERT INTO workers (run_id) VALUES (NULL)', 'DELETE FROM leases'],
      rollout_promoter: ['SELECT 1 FROM runs', 'SELECT 1 FROM work_items', 'SELECT 1 FROM workers', 'DELETE FROM rollouts', 'DELETE FROM leases'],
      rollout_batch_promoter: ['SELECT 1 FROM runs', 'SELECT 1 FROM work_items', 'SELECT 1 FROM workers', 'DELETE FROM leases'],
      rollout_coordinator: ['SELECT 1 FROM rollouts', 'SELECT 1 FROM rollout_events', 'SELECT 1 FROM stage_metrics', 'DELETE FROM leases'],
      rollout_worker: [
        'SELECT 1 FROM rollouts',
        'SELECT 1 FROM rollout_events',
        'INSERT INTO runs (id) VALUES (NULL)',
        'DELETE FROM work_items',
        'UPDATE leases SET epoch = 0',
      ],
    };
    for (const [role, statements] of Object.entries(forbidden) as [DatabaseRole, string[]][]) {
      const sql = sqlAs(role);
      for (const st of statements) await expect(sql.exec(st), `${role}: ${st}`).rejects.toThrow(DENIED);
    }
    // Nothing changed: the tables are there.
    expect((await db.sql.query('SELECT 1 FROM rollouts LIMIT 1')).rows).toBeDefined();
  });

  it('rollout_api: creates and commands rollouts, creates and reads runs; deletes nothing, writes no registry', async () => {
    const plane = await planeAs('rollout_api');
    const { id } = await createRollout(plane.engine, { spec: SPEC, actor: 'alice' });
    const token = await plane.leadership();
    expect(token).not.toBeNull();
    await runCommand(plane.engine, token!, { rolloutId: id, command: 'pause', actor: 'alice' });
    expect((await plane.stores.rollouts.load(id))!.rollout.state).toBe('paused');
    const runId = uniqueName('run');
    await plane.stores.ledger.createRun(runId, {}, Date.now());
    await plane.stores.ledger.enqueue(runId, [{ a: 1 }], Date.now());
    expect(await plane.stores.ledger.counts(runId)).toMatchObject({ pending: 1 });
    const sql = sqlAs('rollout_api');
    await expect(plane.stores.rollouts.pruneEnded(Date.now() + 1_000_000, 10)).rejects.toThrow(DENIED);
    await expect(sql.query('DELETE FROM work_items WHERE run_id = $1', [runId])).rejects.toThrow(DENIED);
    await expect(sql.query(`INSERT INTO workers (run_id) VALUES ('x')`)).rejects.toThrow(DENIED);
    // Nothing deleted.
    expect(await plane.stores.ledger.counts(runId)).toMatchObject({ pending: 1 });
    expect(await plane.stores.rollouts.load(id)).not.toBeNull();
  });

  it('rollout_promoter: stores signals and evaluates; touches no run, deletes no rollout', async () => {
    const { rolloutId, runId } = await fixtures();
    const plane = await planeAs('rollout_promoter');
    const token = await plane.leadership();
    expect(token).not.toBeNull();
    await plane.engine.evaluate(rolloutId, token!);
    await plane.stores.rollouts.recordMetrics(rolloutId, { stage: 'canary' }, { requests: 50, errors: 0, p99LatencyMs: null, observedAt: Date.now() });
    await plane.engine.evaluate(rolloutId, token!);
    expect((await plane.stores.rollouts.load(rolloutId))!.stages[0]!.phase).toBe('promoted');
    await expect(plane.stores.ledger.getRun(runId)).rejects.toThrow(DENIED);
    await expect(plane.stores.ledger.createRun(uniqueName('run'), {}, Date.now())).rejects.toThrow(DENIED);
    await expect(plane.stores.rollouts.pruneEnded(Date.now() + 1_000_000, 10)).rejects.toThrow(DENIED);
    await expect(sqlAs('rollout_promoter').query('SELECT * FROM workers')).rejects.toThrow(DENIED);
    expect(await sqlStores(db.sql).ledger.counts(runId)).toMatchObject({ pending: 2 });
  });

  it('rollout_batch_promoter: deletes ended rollouts past their retention; touches no run', async () => {
    const { rolloutId, runId } = await fixtures();
    const plane = await planeAs('rollout_batch_promoter');
    const token = await plane.leadership();
    await runCommand(plane.engine, token!, { rolloutId, command: 'abort', actor: 'alice' });
    expect(await plane.stores.rollouts.pruneEnded(Date.now() + 1_000_000, 100)).toBeGreaterThanOrEqual(1);
    expect(await plane.stores.rollouts.load(rolloutId)).toBeNull();
    await expect(plane.stores.ledger.pruneRuns(Date.now() + 1_000_000, 10, Date.now())).rejects.toThrow(DENIED);
    expect(await sqlStores(db.sql).ledger.getRun(runId)).not.toBeNull();
  });

  it('rollout_coordinator: run leases, the scan, retention of runs; no rollout table, no rollout function', async () => {
    const { rolloutId, runId } = await fixtures();
    const plane = await planeAs('rollout_coordinator');
    expect(await plane.stores.ledger.openRuns()).toContain(runId);
    const queue = new LedgerWorkQueue(sqlAs('rollout_coordinator'), new InProcessWake(), runId, null);
    const opened = await plane.openRunCoordinator(runId, { queue });
    expect(opened.coordinator).not.toBeNull();
    await opened.coordinator!.scan();
    await plane.stores.ledger.pruneRuns(Date.now() - 1_000_000, 10, Date.now());
    await expect(plane.stores.rollouts.load(rolloutId)).rejects.toThrow(DENIED);
    await expect(createRollout(plane.engine, { spec: SPEC, actor: 'alice' })).rejects.toThrow(DENIED);
    await expect(sqlAs('rollout_coordinator').query(`SELECT rollout_ts('{}'::jsonb)`)).rejects.toThrow(DENIED);
    expect(await sqlStores(db.sql).rollouts.load(rolloutId)).not.toBeNull();
  });

  it('rollout_worker: claims, runs and settles items and keeps its registry record; reads no rollout, creates and deletes no run', async () => {
    const { rolloutId, runId } = await fixtures();
    const sql = sqlAs('rollout_worker');
    const stores = sqlStores(sql);
    const wake = new InProcessWake();
    const worker = new Worker({
      runId,
      workerId: 'w1',
      ledger: stores.ledger,
      queue: new LedgerWorkQueue(sql, wake, runId, null).forWorker('w1'),
      backend: mockBackend(),
      waitSeconds: 0,
    });
    const finished = async () => {
      const c = await stores.ledger.counts(runId);
      return c.pending + c.running === 0;
    };
    await worker.run(new AbortController().signal, finished);
    expect(await stores.ledger.counts(runId)).toMatchObject({ done: 2, pending: 0, running: 0 });
    const now = Date.now();
    const key = { workerId: 'w1', instanceId: 'i-0123456789abcdef0', runId };
    await stores.registry.register({ ...key, provider: 'aws', state: 'active', registeredAt: now, heartbeatAt: now, drain: null, goneAt: null });
    expect(await stores.registry.heartbeat(key, now + 1)).not.toBeNull();
    await expect(stores.rollouts.load(rolloutId)).rejects.toThrow(DENIED);
    await expect(stores.ledger.createRun(uniqueName('run'), {}, now)).rejects.toThrow(DENIED);
    await expect(sql.query('DELETE FROM runs WHERE id = $1', [runId])).rejects.toThrow(DENIED);
    await expect(sql.query('UPDATE leases SET epoch = epoch + 1')).rejects.toThrow(DENIED);
    expect(await sqlStores(db.sql).ledger.getRun(runId)).not.toBeNull();
  });
});
