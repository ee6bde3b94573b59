import type { FUNCTIONS } from '../../topology.js';
import type { Sql } from './sql.js';

/**
 * One database role per function, each granted only what its function does
 * (run after the migrations by whoever owns the schema: the migrator on
 * Aurora, the node on a plain PostgreSQL). On Aurora each role is also
 * granted `rds_iam`, so its function logs in with an IAM token
 * (`rds-db:connect` on `dbuser:<cluster>/<role>`), never with the master
 * secret. The tables stay the owner's: no role may create, alter or drop.
 *
 * PostgreSQL cannot hold a role to some rows of a table without row-level
 * security, so the promotion lease and the run leases (both rows of
 * `leases`) are one grant; the families of tables are what is held apart.
 */

/** The tables of rollouts, their signals and gate readings (the `rollouts` key family). */
export const ROLLOUT_TABLES = [
  'rollouts',
  'rollout_events',
  'rollout_stages',
  'rollout_actuations',
  'rollout_due',
  'gate_readings',
  'gate_tallies',
  'rollout_cohort_reports',
  'stage_metrics',
  'alarm_states',
] as const;

/** What rollouts are read through (a view): read only. */
const ROLLOUT_VIEWS = ['rollout_views'] as const;

/** The tables of work runs and their items (`runs`); `workers` is the registry. */
export const RUN_TABLES = ['runs', 'work_items', 'run_stats'] as const;

/** The functions the rollout tables are written through (`rollout_apply`, its triggers' helpers): EXECUTE is held to the roles that write rollouts. */
const ROLLOUT_FUNCTIONS = ['rollout_apply', 'rollout_apply_with_reading', 'rollout_ts', 'rollout_alarm_names'] as const;

type Table = (typeof ROLLOUT_TABLES)[number] | (typeof ROLLOUT_VIEWS)[number] | (typeof RUN_TABLES)[number] | 'workers' | 'leases';
type Privilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';

export interface RoleGrants {
  /** Per table, what the role may do. */
  readonly tables: Partial<Readonly<Record<Table, readonly Privilege[]>>>;
  /** May call the rollout functions (and draw rollout event numbers). */
  readonly rolloutFunctions: boolean;
}

const READ_WRITE: readonly Privilege[] = ['SELECT', 'INSERT', 'UPDATE'];
const ALL: readonly Privilege[] = ['SELECT', 'INSERT', 'UPDATE', 'DELETE'];
const each = <T extends string>(tables: readonly T[], p: readonly Privilege[]) =>
  Object.fromEntries(tables.map((t) => [t, p])) as Record<T, readonly Privilege[]>;

/**
 * The roles, by what their functions do (shared/topology.ts names each
 * function's role):
 *   rollout_api                 creates and commands rollouts, creates, reads and cancels runs; campaigns for
 *                               the promotion lease on a command. Deletes nothing.
 *   rollout_promoter            stores signals and evaluates rollouts (the streaming promoter); deletes nothing.
 *   rollout_batch_promoter      the same on its tick, and deletes ended rollouts past their retention.
 *   rollout_coordinator         run leases, steals, the failure scan, dead letters, retention of finished runs:
 *                               runs, items, the registry; no rollout table.
 *   rollout_worker              a worker process on PostgreSQL: claims, heartbeats and settles items and writes
 *                               its registry record; reads runs and their leases; no rollout table.
 */
export const DATABASE_ROLES = {
  rollout_api: {
    tables: {
      ...each(ROLLOUT_TABLES, READ_WRITE),
      ...each(ROLLOUT_VIEWS, ['SELECT']),
      ...each(RUN_TABLES, READ_WRITE),
      workers: ['SELECT'],
      leases: READ_WRITE,
    },
    rolloutFunctions: true,
  },
  rollout_promoter: { tables: { ...each(ROLLOUT_TABLES, READ_WRITE), ...each(ROLLOUT_VIEWS, ['SELECT']), leases: READ_WRITE }, rolloutFunctions: true },
  rollout_batch_promoter: { tables: { ...each(ROLLOUT_TABLES, ALL), ...each(ROLLOUT_VIEWS, ['SELECT']), leases: READ_WRITE }, rolloutFunctions: true },
  rollout_coordinator: { tables: { ...each(RUN_TABLES, ALL), workers: ALL, leases: READ_WRITE }, rolloutFunctions: false },
  rollout_worker: {
    tables: { runs: ['SELECT'], work_items: ['SELECT', 'UPDATE'], run_stats: ['SELECT', 'UPDATE'], workers: ALL, leases: ['SELECT'] },
    rolloutFunctions: false,
  },
} as const satisfies Record<string, RoleGrants>;

export type DatabaseRole = keyof typeof DATABASE_ROLES;

type Declared = { [F in keyof typeof FUNCTIONS]: (typeof FUNCTIONS)[F] extends { readonly databaseRole: infer R } ? R : never }[keyof typeof FUNCTIONS];
type DefinedHere<R extends DatabaseRole> = R;
/** The roles the topology gives its functions: a compile error if it names one not defined above. */
export type FunctionRole = DefinedHere<Declared>;

// Any fixed key, apart from the migrations' own: serialises concurrent role setups (roles are the server's, not a schema's).
const ROLES_LOCK = 4_285_170_031;

/** A name spliced into SQL: ours, checked all the same. */
function ident(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`database roles: not a plain identifier: ${JSON.stringify(name)}`);
  return name;
}

/** Whether this session may create roles (a superuser, Aurora's master user): a function's own role may not, and skips the setup. */
export async function mayCreateRoles(sql: Sql): Promise<boolean> {
  const { rows } = await sql.query<{ may: boolean }>('SELECT rolsuper OR rolcreaterole AS may FROM pg_roles WHERE rolname = current_user');
  return rows[0]?.may === true;
}

/**
 * Creates the roles (LOGIN, no password: on Aurora they log in with IAM
 * tokens through `rds_iam`, granted where it exists) and sets their
 * privileges on the current schema to exactly `DATABASE_ROLES`: what was
 * granted before and is no longer listed is revoked. Idempotent; one
 * transaction, so a role never sees half its grants.
 */
export async function applyDatabaseRoles(sql: Sql, roles: Readonly<Record<string, RoleGrants>> = DATABASE_ROLES): Promise<void> {
  await sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [ROLES_LOCK]);
    const { rows } = await tx.query<{ schema: string | null; iam: boolean; events: string | null }>(
      `SELECT current_schema() AS schema, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_iam') AS iam,
              pg_get_serial_sequence('rollout_events', 'seq') AS events`,
    );
    const { schema, iam, events } = rows[0] ?? { schema: null, iam: false, events: null };
    if (!schema || !events) throw new Error('database roles: the schema is not migrated (no rollout_events in the current schema); migrate first');
    const functions = ROLLOUT_FUNCTIONS.map((f) => `'${f}'`).join(', ');
    const statements: string[] = [
      // What PostgreSQL grants to every role by default: the rollout functions (and their trigger functions) are held to their roles.
      `DO $$ DECLARE f regprocedure; BEGIN
         FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'rollout\\_%' LOOP
           EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
         END LOOP;
       END $$`,
    ];
    for (const [name, grants] of Object.entries(roles)) {
      const role = ident(name);
      statements.push(
        `DO $$ BEGIN
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${role}') THEN CREATE ROLE ${role} LOGIN; END IF;
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; -- created meanwhile by a server not holding our lock
         END $$`,
        `GRANT USAGE ON SCHEMA ${ident(schema)} TO ${role}`,
        `REVOKE ALL ON ALL TABLES IN SCHEMA ${ident(schema)} FROM ${role}`,
        `REVOKE ALL ON ALL SEQUENCES IN SCHEMA ${ident(schema)} FROM ${role}`,
        `REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ${ident(schema)} FROM ${role}`,
        // Every function checks the schema's version when it opens the store.
        `GRANT SELECT ON schema_migrations TO ${role}`,
        ...Object.entries(grants.tables).map(([table, privileges]) => `GRANT ${privileges.join(', ')} ON ${ident(table)} TO ${role}`),
      );
      if (iam) statements.push(`GRANT rds_iam TO ${role}`);
      if (grants.rolloutFunctions) {
        statements.push(
          `DO $$ DECLARE f regprocedure; BEGIN
             FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname IN (${functions}) LOOP
               EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO ${role}', f);
             END LOOP;
           END $$`,
          `GRANT USAGE ON SEQUENCE ${events} TO ${role}`,
        );
      }
    }
    for (const s of statements) await tx.exec(s);
  });
}
