import { matchesToken } from '../../shared/lease/fencing.js';
import type { LeaseRecord, LeaseToken } from '../../shared/lease/record.js';
import type { ItemFields, ItemChange } from '../../shared/ledger/transitions.js';
import type { Rollout, StageStatus } from '../../shared/rollout/model.js';
import type { TransitionPlan } from '../../shared/rollout/transitions.js';
import { passStreakOf, tallyWith, type GateReading, type GateTally } from '../../shared/rollout/gates.js';

/**
 * The store as the explorer sees it: plain data, and the write conditions the
 * adapters apply, one function each, with the adapter they follow named.
 *
 * - lease compare-and-swap: `PostgresLeaseStore.compareAndSwap` (INSERT … ON
 *   CONFLICT DO NOTHING for an absent row, else UPDATE … WHERE version = the
 *   expected row's) and `DynamoLeaseStore` (attribute_not_exists / version =).
 * - the fence: `withFence` / `fenceClauses` (postgres/fence.ts) and
 *   `fencedTransactWrite` (dynamodb/fence.ts): the lease row's holder AND epoch,
 *   checked in the same atomic step as the write.
 * - a ledger item CAS: each transition's statement (postgres/ledger-statements.ts,
 *   dynamodb/ledger-updates.ts) — every `expect` field equal, `set` applied,
 *   attempts + 1 when asked, version + 1; a fenced change is refused with
 *   FencedError when the fence fails.
 * - a rollout plan: the `rollout_apply` function of schema.ts — fence, then
 *   the rollout row WHERE version, state and attempt, then each stage of the
 *   expected attempt WHERE phase = the expected one; all or nothing.
 *
 * Alongside the data the store keeps a ghost: the history the invariants are
 * judged on (grants of each epoch, fenced writes with the lease row at their
 * commit, stage and item changes). No process and no write condition reads
 * the ghost.
 *
 * Broken variants switch one condition off, here or in a process model; the
 * product code is never changed.
 */

export const VARIANTS = [
  'correct',
  'fence-holder-only',
  'fence-epoch-only',
  'fence-check-then-write',
  'resign-deletes-row',
  'promote-if-not-promoted',
  'promote-fence-only',
  'steal-started',
  'steal-two-step',
  'ack-any-worker',
  'ack-by-worker-only',
  'held-no-alarm-check',
  'held-no-metrics-check',
  'late-read-applied',
  'actuate-without-revision',
  'tally-late-pass',
  'gates-any-period',
  'gates-no-streak',
  'gates-dry-run',
  'insufficient-pass-early',
] as const;
export type Variant = (typeof VARIANTS)[number];

// ── leases ────────────────────────────────────────────────────────────────

export interface LeaseCell {
  readonly row: LeaseRecord | null;
  /** Ghost: the grant (acquire or steal) the row's holder got the lease by; null while released or absent. */
  readonly grant: number | null;
}

/** A lease token as a process holds it, with the grant it came from (ghost, for the invariants only). */
export interface HeldToken extends LeaseToken {
  readonly grant: number | null;
}

export interface LeaseGhost {
  /** Every grant in commit order (the grant number is the index). */
  readonly grants: readonly { readonly epoch: number; readonly holder: string }[];
  /** Highest epoch the row ever had (-1: none yet). */
  readonly highest: number;
  /** Every accepted fenced write: the lease it was made under, and the lease row when it committed (deduplicated, sorted). */
  readonly writes: readonly { readonly under: string; readonly atCommit: string }[];
}

export const noLease: LeaseCell = { row: null, grant: null };
export const emptyLeaseGhost: LeaseGhost = { grants: [], highest: -1, writes: [] };

export interface LeaseWrite {
  readonly ok: boolean;
  readonly cell: LeaseCell;
  readonly ghost: LeaseGhost;
}

/** A grant is a change of holder or epoch onto a held row: acquire or steal. Renew keeps it; release ends it. */
function grantOf(expected: LeaseRecord | null, next: LeaseRecord): boolean {
  return next.holder !== null && (expected === null || expected.holder !== next.holder || expected.epoch !== next.epoch);
}

/** `compareAndSwap(expected, next)`: an absent row only if none exists; otherwise only over the exact prior version. */
export function leaseCas(cell: LeaseCell, ghost: LeaseGhost, expected: LeaseRecord | null, next: LeaseRecord): LeaseWrite {
  const ok = expected === null ? cell.row === null : cell.row !== null && cell.row.version === expected.version;
  if (!ok) return { ok, cell, ghost };
  const granted = grantOf(expected, next);
  return {
    ok,
    cell: { row: next, grant: granted ? ghost.grants.length : next.holder === null ? null : cell.grant },
    ghost: {
      ...ghost,
      grants: granted ? [...ghost.grants, { epoch: next.epoch, holder: next.holder! }] : ghost.grants,
      highest: Math.max(ghost.highest, next.epoch),
    },
  };
}

/**
 * Resign. Correct: the release row is compare-and-swapped in (the row is kept,
 * so the next holder is epoch + 1). resign-deletes-row: the naive
 * `DELETE … WHERE holder = self`.
 */
export function leaseResign(cell: LeaseCell, ghost: LeaseGhost, expected: LeaseRecord, next: LeaseRecord, variant: Variant): LeaseWrite {
  if (variant !== 'resign-deletes-row') return leaseCas(cell, ghost, expected, next);
  const ok = cell.row !== null && cell.row.holder === expected.holder;
  return ok ? { ok, cell: noLease, ghost } : { ok, cell, ghost };
}

/** Whether the fence admits a write carrying `token` over the lease row as it is now. */
export function fenceAdmits(cell: LeaseCell, token: LeaseToken, variant: Variant): boolean {
  const row = cell.row;
  switch (variant) {
    case 'fence-holder-only':
      return row !== null && row.holder === token.holder;
    case 'fence-epoch-only':
      return row !== null && row.epoch === token.epoch;
    default:
      return matchesToken(row, token);
  }
}

/**
 * fence-check-then-write checks the fence when the write is issued and
 * commits it later without looking again (a plain SELECT in READ COMMITTED):
 * the model asks at issue time and carries the answer.
 */
export function checksAtIssue(variant: Variant): boolean {
  return variant === 'fence-check-then-write';
}

const tokenText = (t: { holder: string | null; epoch: number; grant: number | null }) => `${t.holder ?? '(released)'}@${t.epoch} grant ${t.grant ?? '-'}`;

/** Ghost: an accepted fenced write, with the lease row current when it committed. */
export function recordFencedWrite(ghost: LeaseGhost, cell: LeaseCell, token: HeldToken): LeaseGhost {
  const entry = {
    under: tokenText(token),
    atCommit: cell.row === null ? 'no lease row' : tokenText({ holder: cell.row.holder, epoch: cell.row.epoch, grant: cell.grant }),
  };
  if (ghost.writes.some((w) => w.under === entry.under && w.atCommit === entry.atCommit)) return ghost;
  const order = (w: typeof entry) => `${w.under}|${w.atCommit}`;
  return { ...ghost, writes: [...ghost.writes, entry].sort((a, b) => (order(a) < order(b) ? -1 : 1)) };
}

// ── the ledger ────────────────────────────────────────────────────────────

/** One work item row, without its run id, id and payload (constants of the model). */
export type ItemRow = ItemFields & { readonly version: number };

/**
 * One item CAS, conditions as the transitions' statements write them (ledger-statements.ts):
 * each expected field equal, then the set, attempts + 1
 * when the change bumps them, version + 1. The fence is the caller's: it is
 * checked first, in the same step.
 */
export function applyItemCas(item: ItemRow, change: ItemChange): ItemRow | null {
  for (const [field, value] of Object.entries(change.expect)) {
    if ((item as unknown as Record<string, unknown>)[field] !== value) return null;
  }
  return { ...item, ...change.set, attempts: item.attempts + (change.bumpAttempts ? 1 : 0), version: item.version + 1 };
}

// ── rollouts ──────────────────────────────────────────────────────────────

/** The rollout row without its spec (a constant of the model). */
export type RolloutRow = Omit<Rollout, 'spec'>;

/** What `rollout_apply` reads of a plan (events go to the outbox and change nothing the invariants judge). */
export interface PlanWrite {
  readonly transition: TransitionPlan['transition'];
  readonly expect: TransitionPlan['expect'];
  readonly next: RolloutRow;
  readonly stageChanges: TransitionPlan['stageChanges'];
  readonly newStages: readonly StageStatus[];
}

export function planWrite(plan: TransitionPlan): PlanWrite {
  const { spec: _spec, ...next } = plan.next;
  return { transition: plan.transition, expect: plan.expect, next, stageChanges: plan.stageChanges, newStages: plan.newStages };
}

export interface RolloutCell {
  readonly rollout: RolloutRow;
  /** Stage rows by attempt (a retry adds the next attempt's; old ones stay). */
  readonly stages: Readonly<Record<number, readonly StageStatus[]>>;
}

export type ApplyStatus = 'ok' | 'stale' | 'fenced';

/**
 * `rollout_apply`, after its fence: the rollout row as evaluated, then each
 * stage's exact phase, all or nothing. promote-if-not-promoted writes the
 * rollout row unconditionally and each stage WHERE phase != 'promoted' (the
 * naive PromoteStage); promote-fence-only checks nothing but the fence.
 */
export function applyPlan(cell: RolloutCell, plan: PlanWrite, variant: Variant): { status: Exclude<ApplyStatus, 'fenced'>; cell: RolloutCell } {
  const r = cell.rollout;
  const x = plan.expect;
  const rowHolds =
    variant === 'promote-if-not-promoted' || variant === 'promote-fence-only' || (r.version === x.version && r.state === x.state && r.attempt === x.attempt);
  if (!rowHolds) return { status: 'stale', cell };
  const stages = [...(cell.stages[x.attempt] ?? [])];
  for (const c of plan.stageChanges) {
    const s = stages[c.index];
    if (!s) return { status: 'stale', cell };
    const phaseHolds = variant === 'promote-fence-only' || (variant === 'promote-if-not-promoted' ? s.phase !== 'promoted' : s.phase === c.expect);
    if (!phaseHolds) return { status: 'stale', cell };
    stages[c.index] = { ...s, ...c.set };
  }
  const byAttempt = { ...cell.stages, [x.attempt]: stages };
  if (plan.newStages.length) byAttempt[plan.next.attempt] = plan.newStages;
  return { status: 'ok', cell: { rollout: plan.next, stages: byAttempt } };
}

// ── gate readings ─────────────────────────────────────────────────────────

/**
 * `recordGateReadings`: a reading taken in period `origin` counted into its
 * (attempt, stage, gate) tally by `tallyWith`, as DynamoDB calls it and
 * PostgreSQL's upsert mirrors it; null when it belongs to an older period and
 * does not count. tally-late-pass: a store whose count adds a pass to the
 * streak even when it arrives after a newer reading (taken before a failure
 * already counted).
 */
export function countReading(tally: GateTally | undefined, reading: GateReading, origin: number, variant: Variant): GateTally | null {
  const next = tallyWith(tally, reading, origin);
  if (next === null || variant !== 'tally-late-pass' || reading.outcome !== 'pass') return next;
  const fresh = !tally || tally.origin < origin;
  return { ...next, passStreak: (fresh ? 0 : passStreakOf(tally)) + 1 };
}
