import type {
  AckCas,
  ClaimCas,
  FailCas,
  HeartbeatCas,
  ItemCas,
  NackCas,
  RejectCas,
  RependCas,
  StartCas,
  StealCas,
  Transition,
} from '../../ledger/transitions.js';
import type { FenceClauses } from './fence.js';

/**
 * Every ledger transition on PostgreSQL / PGlite, one literal statement each
 * (transitions.ts says what each change is; here is how it is written). Each
 * is an UPDATE of a batch: `$1` the run, `$2` now (updated_at), `$3` the item
 * ids, then one array per column of `v`, a row per change; every row matches
 * only its own item in its own exact expected state. A single change is a
 * batch of one. The store appends RETURNING; the coordinator's transitions
 * (repend, steal, fail) are fenced in the same statement (fence.ts).
 *
 * Why the text is as it is (the planner, with statistics that may be stale):
 * - `w.id = ANY($3)`: items are looked up by key, never by joining the run.
 * - an expected Running is written `(SELECT 'running')`: as a plain constant,
 *   statistics taken while everything was Pending ("running is rare") steer
 *   the batch onto the partial index of the whole running set
 *   (work_items_running) instead of the primary key.
 * - expected values of one item (worker, version) are columns of `v`: as
 *   constants they would be estimated the same way.
 */

/** A transition's statement and its parameters from `$3` on, for changes of one run, one transition and one fence. */
export interface LedgerStatement<C extends ItemCas> {
  readonly text: string | ((fence: FenceClauses) => string);
  params(changes: readonly C[]): unknown[];
  /** Changes with different keys need different statements (claim takes its values once, not per row). */
  batchKey?(change: C): string;
}

/** `$3` the ids, then one array per further column of `v`. */
function columns<C extends ItemCas>(changes: readonly C[], row: (c: C) => readonly unknown[]): unknown[][] {
  const rows = changes.map((c) => [c.itemId, ...row(c)]);
  return (rows[0] ?? []).map((_, k) => rows.map((r) => r[k]));
}
const at = (ms: number) => new Date(ms);
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

/** Which Pending items a claim takes, and the epoch it stamps on them. */
interface ClaimSource {
  readonly with: string;
  readonly ids: string;
  readonly epoch: string;
}

/**
 * claim — a worker takes Pending items.
 * When: the item is Pending.
 * Then: Running, held by $3, claimed at $4, heartbeat at $5, started $6 (false;
 * the ledger-backed queue may claim and start in one step), stamped with the
 * run's coordinator epoch.
 */
const claim = (from: ClaimSource) => `${from.with}
  UPDATE work_items w
     SET state = 'running', worker = $3, epoch = ${from.epoch}, claimed_at = $4, heartbeat_at = $5, started = $6,
         version = w.version + 1, updated_at = $2
   WHERE w.run_id = $1 AND w.id = ANY(${from.ids}) AND w.state = 'pending'`;

/** claim of the items named ($7), with the epoch the worker last saw ($8). */
export const CLAIM: LedgerStatement<ClaimCas> = {
  text: claim({ with: '', ids: '$7::text[]', epoch: '$8' }),
  params: (cs) => {
    const { worker, claimedAt, heartbeatAt, started, epoch } = cs[0]!.set;
    return [worker, at(claimedAt), at(heartbeatAt), started, cs.map((c) => c.itemId), epoch];
  },
  batchKey: (c) => `${c.set.worker}|${c.set.epoch}|${c.set.claimedAt}|${c.set.heartbeatAt}`,
};

/**
 * The ledger-backed queue's receive is claim of the next Pending items: at
 * most $7, after $9 in id order, given back fewer than $8 times; rows another
 * worker is claiming are skipped (workers never wait on each other). Stamped
 * with the run's epoch as it is now.
 */
export const CLAIM_NEXT = claim({
  with: `WITH picked AS (
           SELECT id FROM work_items
            WHERE run_id = $1 AND state = 'pending' AND attempts < $8 AND id > $9
            ORDER BY id LIMIT $7 FOR UPDATE SKIP LOCKED)`,
  ids: 'ARRAY(SELECT id FROM picked)', // by key: no join for the planner to misjudge
  epoch: 'GREATEST((SELECT coordinator_epoch FROM runs WHERE id = $1), 0)',
});

/**
 * start — the holder begins executing an item; from now on it is never stolen.
 * When: Running, held by v.worker, not started.
 */
export const START: LedgerStatement<StartCas> = {
  text: `
  UPDATE work_items w
     SET started = true, heartbeat_at = v.heartbeat_at,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::timestamptz[]) AS v(id, worker, heartbeat_at)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.worker AND w.started = false`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, at(c.set.heartbeatAt)]),
};

/**
 * heartbeat — the holder is alive.
 * When: Running, held by v.worker.
 */
export const HEARTBEAT: LedgerStatement<HeartbeatCas> = {
  text: `
  UPDATE work_items w
     SET heartbeat_at = v.heartbeat_at,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::timestamptz[]) AS v(id, worker, heartbeat_at)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.worker`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, at(c.set.heartbeatAt)]),
};

/**
 * ack — the holder records the result: Done, once (the worker stays: who produced it).
 * When: Running, held by v.worker.
 */
export const ACK: LedgerStatement<AckCas> = {
  text: `
  UPDATE work_items w
     SET state = 'done', result_hash = v.result_hash, result = v.result::jsonb, error = NULL,
         epoch = NULL, claimed_at = NULL, started = false, heartbeat_at = NULL,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS v(id, worker, result_hash, result)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.worker`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, c.set.resultHash, json(c.set.result)]),
};

/**
 * nack — the holder gives an item back: Pending, with no message on record;
 * an attempt counts when v.counts (the backend failed it, not a drain).
 * When: Running, held by v.worker.
 */
export const NACK: LedgerStatement<NackCas> = {
  text: `
  UPDATE work_items w
     SET state = 'pending', error = v.error, sent_at = NULL, attempts = w.attempts + v.counts::int,
         worker = NULL, epoch = NULL, claimed_at = NULL, started = false, heartbeat_at = NULL,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::text[], $6::boolean[]) AS v(id, worker, error, counts)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.worker`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, c.set.error, c.bumpAttempts]),
};

/**
 * reject — the holder ran it but cannot record the result: Failed with the reason, an attempt counted.
 * When: Running, held by v.worker.
 */
export const REJECT: LedgerStatement<RejectCas> = {
  text: `
  UPDATE work_items w
     SET state = 'failed', error = v.error, attempts = w.attempts + 1,
         epoch = NULL, claimed_at = NULL, started = false, heartbeat_at = NULL,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::text[]) AS v(id, worker, error)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.worker`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, c.set.error]),
};

/**
 * repend (coordinator, fenced) — a silent worker's item goes back to Pending,
 * with no message on record; an attempt counts when v.counts (it had started).
 * When: Running, held by v.worker, at exactly version v.version (the row judged
 * stale: a heartbeat since keeps it), and the coordinator still holds the lease.
 */
export const REPEND: LedgerStatement<RependCas> = {
  text: (fence) => `${fence.with}
  UPDATE work_items w
     SET state = 'pending', error = v.error, sent_at = NULL, attempts = w.attempts + v.counts::int,
         worker = NULL, epoch = NULL, claimed_at = NULL, started = false, heartbeat_at = NULL,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::bigint[], $6::text[], $7::boolean[]) AS v(id, worker, version, error, counts)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.worker AND w.version = v.version
     AND ${fence.holds}`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, c.expect.version, c.set.error, c.bumpAttempts]),
};

/**
 * steal (coordinator, fenced) — an unstarted item moves from the victim to the
 * thief in one step (no Pending in between), stamped with the coordinator's epoch.
 * When: Running, held by v.victim, not started (a start racing this: exactly
 * one wins), and the coordinator still holds the lease.
 */
export const STEAL: LedgerStatement<StealCas> = {
  text: (fence) => `${fence.with}
  UPDATE work_items w
     SET worker = v.thief, epoch = v.epoch, claimed_at = v.claimed_at, started = false, heartbeat_at = v.heartbeat_at,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::timestamptz[], $8::timestamptz[])
         AS v(id, victim, thief, epoch, claimed_at, heartbeat_at)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = (SELECT 'running') AND w.worker = v.victim AND w.started = false
     AND ${fence.holds}`,
  params: (cs) => columns(cs, (c) => [c.expect.worker, c.set.worker, c.set.epoch, at(c.set.claimedAt), at(c.set.heartbeatAt)]),
};

/**
 * fail (coordinator, fenced) — a poison item (or a cancelled run's) ends Failed with the reason; an attempt
 * counts when v.counts (a started item whose worker went silent).
 * When: as judged — Pending, or Running held by v.worker; at version v.version
 * when one is given — and the coordinator still holds the lease.
 */
export const FAIL: LedgerStatement<FailCas> = {
  text: (fence) => `${fence.with}
  UPDATE work_items w
     SET state = 'failed', error = v.error, attempts = w.attempts + v.counts::int,
         worker = NULL, epoch = NULL, claimed_at = NULL, started = false, heartbeat_at = NULL,
         version = w.version + 1, updated_at = $2
    FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::boolean[]) AS v(id, state, worker, version, error, counts)
   WHERE w.run_id = $1 AND w.id = ANY($3::text[]) AND w.id = v.id
     AND w.state = v.state AND (v.state = 'pending' OR w.worker = v.worker)
     AND (v.version IS NULL OR w.version = v.version)
     AND ${fence.holds}`,
  params: (cs) =>
    columns(cs, (c) => [c.expect.state, c.expect.state === 'running' ? c.expect.worker : null, c.expect.version ?? null, c.set.error, c.bumpAttempts]),
};

/** The statement of each transition. */
export const LEDGER_STATEMENTS: { readonly [T in Transition]: LedgerStatement<Extract<ItemCas, { transition: T }>> } = {
  claim: CLAIM,
  start: START,
  heartbeat: HEARTBEAT,
  ack: ACK,
  nack: NACK,
  reject: REJECT,
  repend: REPEND,
  steal: STEAL,
  fail: FAIL,
};
