import pg from 'pg';
import type {
  EventRow,
  FencedWrite,
  IdempotencyRow,
  ItemRow,
  ItemState,
  ItemTransition,
  LeaseChange,
  LeaseRef,
  RolloutRow,
  RolloutTransition,
  RunRow,
  StagePhase,
  StageTransition,
  StoreDump,
  GateReadingRow,
} from '../history.js';

/**
 * The checker's view of PostgreSQL, owing nothing to the project's store
 * code: triggers the harness installs (not the product) log every change of
 * a lease row, a rollout, a stage and a work item, inside the writing
 * transaction, together with the lease row that fences it as it stands at
 * that moment. A fenced write holds that row FOR SHARE until it commits, so
 * what the trigger reads is the lease current at commit; changes of one row
 * are serialised by its row lock, so their `seq` order is their commit order.
 *
 * Item heartbeats are not logged (they change no state or owner); lease
 * renewals are (a few a second), so a leader's term can be drawn to its end.
 */

const AUDIT_SQL = `
CREATE TABLE IF NOT EXISTS chaos_audit (
  seq    bigserial PRIMARY KEY,
  at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  tbl    text NOT NULL,
  op     text NOT NULL,
  old    jsonb,
  new    jsonb,
  lease  jsonb
);

CREATE OR REPLACE FUNCTION chaos_audit_row() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  lease_name text;
  lease_row jsonb;
  subject jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
BEGIN
  IF TG_TABLE_NAME IN ('rollouts', 'rollout_stages', 'rollout_events') THEN
    lease_name := 'promotion_leader';
  ELSIF TG_TABLE_NAME = 'work_items' THEN
    lease_name := 'coordinator:' || (subject->>'run_id');
  END IF;
  IF lease_name IS NOT NULL THEN
    SELECT jsonb_build_object('name', name, 'holder', holder, 'epoch', epoch) INTO lease_row FROM leases WHERE name = lease_name;
    lease_row := COALESCE(lease_row, jsonb_build_object('name', lease_name, 'absent', true));
  END IF;
  INSERT INTO chaos_audit (tbl, op, old, new, lease)
  VALUES (TG_TABLE_NAME, TG_OP,
          CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE to_jsonb(OLD) END,
          CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE to_jsonb(NEW) END,
          lease_row);
  RETURN NULL;
END
$f$;

-- Renewals too: the timeline draws a term until its last renewal runs out.
DROP TRIGGER IF EXISTS chaos_audit_leases ON leases;
CREATE TRIGGER chaos_audit_leases AFTER INSERT OR UPDATE OR DELETE ON leases
  FOR EACH ROW EXECUTE FUNCTION chaos_audit_row();

DROP TRIGGER IF EXISTS chaos_audit_rollouts ON rollouts;
CREATE TRIGGER chaos_audit_rollouts AFTER INSERT ON rollouts
  FOR EACH ROW EXECUTE FUNCTION chaos_audit_row();
DROP TRIGGER IF EXISTS chaos_audit_rollout_changes ON rollouts;
CREATE TRIGGER chaos_audit_rollout_changes AFTER UPDATE ON rollouts
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.attempt IS DISTINCT FROM NEW.attempt)
  EXECUTE FUNCTION chaos_audit_row();

DROP TRIGGER IF EXISTS chaos_audit_stages ON rollout_stages;
CREATE TRIGGER chaos_audit_stages AFTER INSERT ON rollout_stages
  FOR EACH ROW EXECUTE FUNCTION chaos_audit_row();
DROP TRIGGER IF EXISTS chaos_audit_stage_changes ON rollout_stages;
CREATE TRIGGER chaos_audit_stage_changes AFTER UPDATE ON rollout_stages
  FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase OR OLD.promoted_epoch IS DISTINCT FROM NEW.promoted_epoch)
  EXECUTE FUNCTION chaos_audit_row();

-- Every transition writes its outbox events in the same atomic step, each carrying the epoch it was made under.
DROP TRIGGER IF EXISTS chaos_audit_events ON rollout_events;
CREATE TRIGGER chaos_audit_events AFTER INSERT ON rollout_events
  FOR EACH ROW EXECUTE FUNCTION chaos_audit_row();

-- A gate reading's place in the log: its key only (its series stay in gate_readings), so the checker
-- knows which readings the store held before a promotion committed, in the store's own order.
CREATE OR REPLACE FUNCTION chaos_audit_reading() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO chaos_audit (tbl, op, old, new, lease)
  VALUES (TG_TABLE_NAME, TG_OP, NULL,
          jsonb_build_object('rollout_id', NEW.rollout_id, 'attempt', NEW.attempt, 'stage_index', NEW.stage_index, 'gate', NEW.gate,
                             'at_ms', floor(extract(epoch FROM NEW.at) * 1000)::bigint),
          NULL);
  RETURN NULL;
END
$f$;
DROP TRIGGER IF EXISTS chaos_audit_gate_readings ON gate_readings;
CREATE TRIGGER chaos_audit_gate_readings AFTER INSERT ON gate_readings
  FOR EACH ROW EXECUTE FUNCTION chaos_audit_reading();

DROP TRIGGER IF EXISTS chaos_audit_items ON work_items;
CREATE TRIGGER chaos_audit_items AFTER UPDATE ON work_items
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.worker IS DISTINCT FROM NEW.worker OR OLD.started IS DISTINCT FROM NEW.started OR OLD.result_hash IS DISTINCT FROM NEW.result_hash)
  EXECUTE FUNCTION chaos_audit_row();
`;

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Once the schema exists (the first node migrated it). */
export async function installAudit(url: string): Promise<void> {
  await withClient(url, (c) => c.query(AUDIT_SQL));
}

/** The audit log's high-water mark: a schedule reads only what came after it. */
export async function auditMark(url: string): Promise<number> {
  return withClient(url, async (c) => Number((await c.query<{ n: string | null }>('SELECT max(seq) AS n FROM chaos_audit')).rows[0]?.n ?? 0));
}

type Json = Record<string, unknown>;
const num = (v: unknown): number => (v === null || v === undefined ? NaN : Number(v));
const str = (v: unknown): string | null => (v === null || v === undefined ? null : typeof v === 'string' ? v : JSON.stringify(v));
const ms = (v: unknown): number | null =>
  v === null || v === undefined ? null : v instanceof Date ? v.getTime() : typeof v === 'string' || typeof v === 'number' ? new Date(v).getTime() : NaN;

function leaseRef(l: Json | null): LeaseRef | null {
  if (!l || l.absent) return null;
  return { holder: str(l.holder), epoch: num(l.epoch) };
}

/**
 * Everything the checker needs about the rollouts and runs of one schedule
 * (`rollouts` / `runs` name them), and every lease change since `fromSeq`.
 * `epochMs` converts the server's timestamps to the schedule's clock (same machine).
 */
export async function dumpStore(
  url: string,
  o: { fromSeq: number; epochMs: number; rollouts: readonly string[]; runs: readonly string[] },
): Promise<StoreDump> {
  return withClient(url, async (c) => {
    const rel = (v: unknown) => (ms(v) ?? o.epochMs) - o.epochMs;
    const { rows: audit } = await c.query<{ seq: string; at: Date; tbl: string; op: string; old: Json | null; new: Json | null; lease: Json | null }>(
      // Each lease's last change before the schedule too: who held what when it began.
      `SELECT * FROM (SELECT DISTINCT ON (coalesce(new, old)->>'name') seq, at, tbl, op, old, new, lease FROM chaos_audit
                       WHERE tbl = 'leases' AND seq <= $1 ORDER BY coalesce(new, old)->>'name', seq DESC) AS before
       UNION ALL SELECT seq, at, tbl, op, old, new, lease FROM chaos_audit WHERE seq > $1 ORDER BY seq`,
      [o.fromSeq],
    );
    const mine = (rolloutOrRun: unknown, set: readonly string[]) => set.includes(String(rolloutOrRun));
    const leaseChanges: LeaseChange[] = [];
    const writes: FencedWrite[] = [];
    const stageTransitions: StageTransition[] = [];
    const rolloutTransitions: RolloutTransition[] = [];
    const itemTransitions: ItemTransition[] = [];
    /** Each kept reading's insert: its key → the log's seq and time. */
    const readingLog = new Map<string, { seq: number; at: number }>();
    const readingKey = (r: Json, atMs: number) => `${String(r.rollout_id)}/${num(r.attempt)}/${num(r.stage_index)}/${String(r.gate)}/${atMs}`;
    for (const a of audit) {
      const seq = Number(a.seq);
      const at = rel(a.at);
      const row = (a.new ?? a.old)!;
      if (a.tbl === 'leases') {
        // A lease as it stood when the schedule began counts from the schedule's start.
        leaseChanges.push({
          seq,
          at: seq <= o.fromSeq ? Math.max(0, at) : at,
          name: String(row.name),
          change: a.op === 'INSERT' ? 'insert' : a.op === 'DELETE' ? 'delete' : 'update',
          holder: a.op === 'DELETE' ? null : str(row.holder),
          epoch: num(row.epoch),
          expiresAt: a.op === 'DELETE' ? null : rel(row.expires_at),
        });
        continue;
      }
      if (a.tbl === 'gate_readings') {
        if (mine(row.rollout_id, o.rollouts)) readingLog.set(readingKey(row, num(row.at_ms)), { seq, at });
        continue;
      }
      if (a.tbl === 'rollout_stages') {
        if (!mine(row.rollout_id, o.rollouts) || !a.new) continue;
        const to = String(a.new.phase) as StagePhase;
        const from = a.old ? (String(a.old.phase) as StagePhase) : null;
        const epoch = a.new.promoted_epoch === null ? null : num(a.new.promoted_epoch);
        stageTransitions.push({
          seq,
          at,
          rolloutId: String(row.rollout_id),
          attempt: num(row.attempt),
          index: num(row.stage_index),
          from,
          to,
          epoch: to === 'promoted' ? epoch : null,
          by: to === 'promoted' ? str(a.new.promoted_by) : null,
        });
        writes.push({
          seq,
          at,
          table: 'rollout_stages',
          key: `${String(row.rollout_id)}/${num(row.attempt)}/${num(row.stage_index)}`,
          lease: 'promotion_leader',
          current: leaseRef(a.lease),
          // The product records the epoch a promotion was made under (promoted_by is the actor, not the holder).
          claimed: to === 'promoted' && from !== 'promoted' && epoch !== null ? { holder: null, epoch } : null,
          before: a.old ? { phase: a.old.phase } : null,
          after: { phase: a.new.phase },
        });
        continue;
      }
      if (a.tbl === 'rollout_events') {
        if (!mine(row.rollout_id, o.rollouts) || !a.new) continue;
        const detail = (a.new.detail ?? {}) as Json;
        writes.push({
          seq,
          at,
          table: 'rollout_events',
          key: `${String(row.rollout_id)}/${String(a.new.detail_type)}`,
          lease: 'promotion_leader',
          current: leaseRef(a.lease),
          claimed: typeof detail.epoch === 'number' ? { holder: null, epoch: detail.epoch } : null,
          before: null,
          after: { detailType: a.new.detail_type, actor: detail.actor ?? null },
        });
        continue;
      }
      if (a.tbl === 'rollouts') {
        if (!mine(row.id, o.rollouts) || !a.new) continue;
        rolloutTransitions.push({
          seq,
          at,
          rolloutId: String(row.id),
          from: a.old ? { state: String(a.old.state), attempt: num(a.old.attempt) } : null,
          to: { state: String(a.new.state), attempt: num(a.new.attempt), reason: str(a.new.state_reason), by: str(a.new.state_by) },
        });
        writes.push({
          seq,
          at,
          table: 'rollouts',
          key: String(row.id),
          lease: 'promotion_leader',
          current: leaseRef(a.lease),
          claimed: null,
          before: a.old ? { state: a.old.state, attempt: a.old.attempt } : null,
          after: { state: a.new.state, attempt: a.new.attempt },
        });
        continue;
      }
      if (a.tbl === 'work_items') {
        if (!mine(row.run_id, o.runs) || !a.new || !a.old) continue;
        const state = (v: Json) => String(v.state) as ItemState;
        itemTransitions.push({
          seq,
          at,
          runId: String(row.run_id),
          itemId: String(row.id),
          from: { state: state(a.old), worker: str(a.old.worker), started: a.old.started === true },
          to: {
            state: state(a.new),
            worker: str(a.new.worker),
            started: a.new.started === true,
            resultHash: str(a.new.result_hash),
            error: str(a.new.error),
            attempts: num(a.new.attempts),
          },
        });
        // A steal (Running(victim) → Running(thief)) records the coordinator epoch it was made under.
        const stolen = a.old.state === 'running' && a.new.state === 'running' && a.old.worker !== a.new.worker && a.new.worker !== null;
        writes.push({
          seq,
          at,
          table: 'work_items',
          key: `${String(row.run_id)}/${String(row.id)}`,
          lease: `coordinator:${String(row.run_id)}`,
          current: leaseRef(a.lease),
          claimed: stolen && a.new.epoch !== null ? { holder: null, epoch: num(a.new.epoch) } : null,
          before: { state: a.old.state, worker: a.old.worker, started: a.old.started },
          after: { state: a.new.state, worker: a.new.worker, started: a.new.started },
        });
      }
    }

    const { rows: rolloutRows } = await c.query<{
      id: string;
      state: string;
      attempt: number;
      state_reason: string | null;
      labels: Record<string, string> | null;
      actuators: string[] | null;
      percents: number[] | null;
      providers: (Record<string, unknown>[] | null)[] | null;
      rollout_gates: Record<string, unknown> | null;
      stretches: ({ bakeSeconds: number; maxBakeSeconds: number | null; onInsufficientData: string | null } | null)[] | null;
    }>(
      `SELECT id, state, attempt, state_reason, spec #> '{target,labels}' AS labels, spec -> 'actuators' AS actuators,
              (SELECT jsonb_agg(s #> '{gates,providers}' ORDER BY i) FROM jsonb_array_elements(spec -> 'stages') WITH ORDINALITY AS x(s, i)) AS providers,
              spec -> 'rolloutGates' AS rollout_gates,
              (SELECT jsonb_agg(jsonb_build_object('bakeSeconds', s -> 'bakeSeconds', 'maxBakeSeconds', s -> 'maxBakeSeconds', 'onInsufficientData', s -> 'onInsufficientData') ORDER BY i)
                 FROM jsonb_array_elements(spec -> 'stages') WITH ORDINALITY AS x(s, i)) AS stretches,
              (SELECT jsonb_agg((s ->> 'percent')::numeric ORDER BY i) FROM jsonb_array_elements(spec -> 'stages') WITH ORDINALITY AS x(s, i)) AS percents
         FROM rollouts WHERE id = ANY($1::text[])`,
      [o.rollouts],
    );
    const { rows: stageRows } = await c.query<{
      rollout_id: string;
      attempt: number;
      stage_index: number;
      name: string;
      phase: StagePhase;
      promoted_epoch: string | null;
      promoted_by: string | null;
      activated_at: Date | null;
    }>(
      'SELECT rollout_id, attempt, stage_index, name, phase, promoted_epoch, promoted_by, activated_at FROM rollout_stages WHERE rollout_id = ANY($1::text[]) ORDER BY rollout_id, attempt, stage_index',
      [o.rollouts],
    );
    const rollouts: RolloutRow[] = rolloutRows.map((r) => ({
      id: r.id,
      state: r.state,
      attempt: Number(r.attempt),
      reason: r.state_reason,
      labels: r.labels ?? {},
      ...(r.actuators?.length ? { actuators: r.actuators } : {}),
      ...(r.percents ? { stagePercents: r.percents.map(Number) } : {}),
      ...(r.providers?.some((p) => p?.length) ? { stageGates: r.providers.map((p) => p ?? []) } : {}),
      ...(r.rollout_gates ? { rolloutGates: r.rollout_gates } : {}),
      // As stretchEndOf reads a stage: maxBakeSeconds, or the bake itself when only onInsufficientData is set; pause by default.
      ...(r.stretches?.some((x) => x && (x.maxBakeSeconds !== null || x.onInsufficientData !== null))
        ? {
            stageStretch: r.stretches.map((x) =>
              x && (x.maxBakeSeconds !== null || x.onInsufficientData !== null)
                ? { seconds: Number(x.maxBakeSeconds ?? x.bakeSeconds), onInsufficientData: x.onInsufficientData ?? 'pause' }
                : null,
            ),
          }
        : {}),
      stages: stageRows
        .filter((s) => s.rollout_id === r.id)
        .map((s) => ({
          attempt: Number(s.attempt),
          index: Number(s.stage_index),
          name: s.name,
          phase: s.phase,
          promotedEpoch: s.promoted_epoch === null ? null : Number(s.promoted_epoch),
          promotedBy: s.promoted_by,
          activatedAt: s.activated_at ? rel(s.activated_at) : null,
        })),
    }));
    const { rows: runRows } = await c.query<{ id: string; n: string }>(
      'SELECT r.id, count(w.id) AS n FROM runs r LEFT JOIN work_items w ON w.run_id = r.id WHERE r.id = ANY($1::text[]) GROUP BY r.id',
      [o.runs],
    );
    const runs: RunRow[] = runRows.map((r) => ({ id: r.id, items: Number(r.n) }));
    const { rows: itemRows } = await c.query<{
      run_id: string;
      id: string;
      state: ItemState;
      worker: string | null;
      result_hash: string | null;
      error: string | null;
      attempts: number;
    }>('SELECT run_id, id, state, worker, result_hash, error, attempts FROM work_items WHERE run_id = ANY($1::text[])', [o.runs]);
    // The ledger-backed queue delivers from the rows themselves: a Pending row is its own message.
    const items: ItemRow[] = itemRows.map((r) => ({
      runId: r.run_id,
      id: r.id,
      state: r.state,
      worker: r.worker,
      resultHash: r.result_hash,
      error: r.error,
      attempts: Number(r.attempts),
      hasMessage: true,
    }));
    const { rows: keyRows } = await c.query<{ key: string; status: number; node_id: string }>(
      'SELECT key, status, node_id FROM api_requests WHERE created_at >= $1',
      [new Date(o.epochMs - 1_000)],
    );
    const idempotency: IdempotencyRow[] = keyRows.map((r) => ({ key: r.key, status: Number(r.status), node: r.node_id }));
    const { rows: eventRows } = await c.query<{ seq: string; rollout_id: string; detail_type: string; detail: Json; time: Date; published_at: Date | null }>(
      'SELECT seq, rollout_id, detail_type, detail, time, published_at FROM rollout_events WHERE rollout_id = ANY($1::text[]) ORDER BY seq',
      [o.rollouts],
    );
    const events: EventRow[] = eventRows.map((e) => ({
      seq: Number(e.seq),
      rolloutId: e.rollout_id,
      detailType: e.detail_type,
      detail: e.detail,
      at: rel(e.time),
      publishedAt: e.published_at === null ? null : rel(e.published_at),
    }));
    const { rows: readingRows } = await c.query<{
      rollout_id: string;
      attempt: number;
      stage_index: number;
      gate: string;
      at: Date;
      at_ms: string;
      outcome: GateReadingRow['outcome'];
      value: number | null;
      reason: string | null;
      series: Record<string, unknown> | null;
    }>(
      // The key as the trigger wrote it (the same expression), so no rounding of microseconds can tell them apart.
      `SELECT rollout_id, attempt, stage_index, gate, at, floor(extract(epoch FROM at) * 1000)::bigint AS at_ms, outcome, value, reason, series
         FROM gate_readings WHERE rollout_id = ANY($1::text[])`,
      [o.rollouts],
    );
    const gateReadings: GateReadingRow[] = readingRows
      .flatMap((r) => {
        const logged = readingLog.get(readingKey(r, num(r.at_ms)));
        // A reading the log did not see (before the schedule's mark) has no place in its order.
        if (!logged) return [];
        return [
          {
            ...logged,
            rolloutId: r.rollout_id,
            attempt: Number(r.attempt),
            stage: Number(r.stage_index),
            gate: r.gate,
            readAt: num(r.at_ms) - o.epochMs,
            outcome: r.outcome,
            value: r.value === null ? null : Number(r.value),
            reason: r.reason,
            series: r.series,
          },
        ];
      })
      .sort((a, b) => a.seq - b.seq);
    return { leaseChanges, writes, stageTransitions, rolloutTransitions, itemTransitions, rollouts, runs, items, idempotency, events, gateReadings };
  });
}
