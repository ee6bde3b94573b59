import type { Sql } from './sql.js';

/**
 * Schema migrations, applied in order, each once. Timestamps are timestamptz
 * (readable in psql) written from the lease holder's clock; `version` is what
 * compare-and-swap compares.
 */
export const migrations: readonly { id: number; name: string; sql: string }[] = [
  {
    id: 1,
    name: 'leases',
    sql: `
      CREATE TABLE leases (
        name        text PRIMARY KEY,
        holder      text,
        epoch       bigint NOT NULL CHECK (epoch >= 0),
        version     bigint NOT NULL CHECK (version >= 0),
        acquired_at timestamptz NOT NULL,
        renewed_at  timestamptz NOT NULL,
        expires_at  timestamptz NOT NULL,
        hostname    text,
        api_url     text
      );
      COMMENT ON TABLE leases IS 'Lease rows are never deleted: deleting one resets its epoch and breaks fencing.';
    `,
  },
  {
    id: 2,
    name: 'rollouts',
    sql: `
      CREATE TABLE rollouts (
        id                   text PRIMARY KEY,
        spec                 jsonb NOT NULL,
        state                text NOT NULL CHECK (state IN ('running', 'paused', 'completed', 'rolled_back', 'aborted')),
        attempt              integer NOT NULL CHECK (attempt >= 1),
        version              bigint NOT NULL,
        created_at           timestamptz NOT NULL,
        updated_at           timestamptz NOT NULL,
        last_progress_at     timestamptz NOT NULL,
        deadline_exceeded_at timestamptz,
        state_by             text,
        state_reason         text
      );
      CREATE INDEX rollouts_running ON rollouts (id) WHERE state = 'running';
      CREATE TABLE rollout_stages (
        rollout_id     text NOT NULL REFERENCES rollouts (id),
        attempt        integer NOT NULL,
        stage_index    integer NOT NULL,
        name           text NOT NULL,
        phase          text NOT NULL CHECK (phase IN ('pending', 'active', 'promoted', 'rolled_back')),
        activated_at   timestamptz,
        promoted_at    timestamptz,
        promoted_epoch bigint,
        promoted_by    text,
        rolled_back_at timestamptz,
        reason         text,
        PRIMARY KEY (rollout_id, attempt, stage_index)
      );
      CREATE TABLE stage_metrics (
        rollout_id     text NOT NULL REFERENCES rollouts (id),
        attempt        integer NOT NULL,
        stage_index    integer NOT NULL,
        requests       bigint NOT NULL,
        errors         bigint NOT NULL,
        p99_latency_ms double precision,
        observed_at    timestamptz NOT NULL,
        PRIMARY KEY (rollout_id, attempt, stage_index)
      );
      CREATE TABLE alarm_states (
        name       text PRIMARY KEY,
        state      text NOT NULL CHECK (state IN ('OK', 'ALARM', 'INSUFFICIENT_DATA')),
        changed_at timestamptz NOT NULL
      );
      CREATE TABLE rollout_events (
        seq          bigserial,
        id           text PRIMARY KEY,
        rollout_id   text NOT NULL,
        detail_type  text NOT NULL,
        time         timestamptz NOT NULL,
        detail       jsonb NOT NULL,
        published_at timestamptz
      );
      CREATE INDEX rollout_events_unpublished ON rollout_events (seq) WHERE published_at IS NULL;
      CREATE INDEX rollout_events_by_rollout ON rollout_events (rollout_id, seq);
    `,
  },
];

// Any fixed key: serialises concurrent migrators on a server (a no-op on PGlite, which has one session).
const MIGRATION_LOCK = 7_413_026_401;

export async function migrate(sql: Sql): Promise<void> {
  await sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await tx.query<{ id: number }>('SELECT id FROM schema_migrations');
    const applied = new Set(rows.map((r) => Number(r.id)));
    for (const m of migrations) {
      if (applied.has(m.id)) continue;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    }
  });
}
