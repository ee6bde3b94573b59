/**
 * What a chaos schedule leaves behind, in a form that owes nothing to the
 * project's store code: the clients' history (what was asked, what came
 * back), the nemesis' log (what was broken, when), and a dump of the store
 * read with plain SQL (PostgreSQL) or plain Scan/stream reads (DynamoDB).
 * The checker (check.ts) and the timeline picture (timeline.ts) read only
 * these shapes, so both topologies share them.
 *
 * Times are milliseconds since the schedule started, on the harness's
 * monotonic clock (performance.now), unless a field says otherwise.
 */

export type Outcome = 'ok' | 'failed' | 'unknown';

/** One client invocation and its completion (Jepsen's :invoke / :ok | :fail | :info pair). */
export interface Op {
  readonly id: number;
  /** The client that made it (`rollouts-1`, `signals`, `reader-nginx`, `cli`…). */
  readonly client: string;
  /** What it was: `rollout.create`, `rollout.pause`, `signal.metrics`, `run.create`, `read.rollout`… */
  readonly kind: string;
  /** Where it was sent: `nginx`, a node id, `cli`, `lambda:<function>`. */
  readonly via: string;
  /** The rollout or run it concerns. */
  readonly target?: string;
  /** The Idempotency-Key sent with it, if any. */
  readonly key?: string;
  readonly invokedAt: number;
  /** null while it was still in flight when the history was closed (then outcome is `unknown`). */
  completedAt: number | null;
  /** ok: the system said it happened; failed: the system said it did not; unknown: no answer (timeout, cut connection, 5xx from a proxy). */
  outcome: Outcome;
  status?: number;
  /** The node that answered (x-rollout-node-id), when one did. */
  node?: string;
  /** Short, human: the error, or what came back. */
  detail?: string;
  /** What the answer said, for the checker (e.g. `{ applied: true, transition: 'pause' }`, `{ id, created }`). */
  result?: Record<string, unknown>;
}

export type FaultKind =
  | 'kill-leader'
  | 'kill-follower'
  | 'kill-worker'
  | 'kill-coordinator'
  | 'pause-leader'
  | 'zombie-leader'
  | 'restart-leader'
  | 'store-restart'
  | 'store-blackhole'
  | 'store-delay'
  | 'store-lose-replies'
  | 'clock-offset'
  | 'signals-duplicated'
  | 'signals-reordered'
  | 'signals-late'
  | 'slow-promotion'
  | 'invoke-duplicated'
  | 'invoke-killed'
  | 'store-throttle'
  | 'store-conflict'
  | 'queue-redeliver'
  | 'notice-duplicated'
  | 'notice-late'
  | 'target-outside-writer'
  | 'pause-mid-actuation'
  | 'target-write-delayed';

/** One fault the nemesis injected: from `startAt` until it healed it at `endAt` (a kill has endAt when the process was back). */
export interface FaultRecord {
  readonly kind: FaultKind;
  /** The process or link it hit: `node-2`, `worker-1@run-a`, `store`, `node-1→store`. */
  readonly target: string;
  readonly startAt: number;
  endAt: number | null;
  readonly detail?: string;
}

/** When a process was alive and not paused, as the harness knows it (it started, killed, stopped them). */
export interface ProcessSpan {
  readonly process: string;
  readonly role: 'node' | 'worker' | 'store' | 'proxy' | 'lambda';
  readonly from: number;
  /** null: still running when the history closed. */
  to: number | null;
  /** How the span ended. */
  end?: 'killed' | 'stopped' | 'paused' | 'exited' | 'crashed';
}

/**
 * A stretch when a process could not run its code on time: its event loop
 * was late (CPU starvation, a SIGSTOP, a long synchronous stretch), as the
 * process measured it itself with an interval timer (stalls.ts). The harness
 * process's own stalls are recorded under `harness`: it carries the store
 * links, the observing proxy and the execution backend.
 */
export interface Stall {
  /** The process as ProcessSpan names it, or `harness`. */
  readonly process: string;
  readonly pid: number;
  /** When its timer should have fired. */
  readonly at: number;
  /** How late it fired. */
  readonly ms: number;
}

/** The schedule's phases: faults while the workload runs, then healing, then a bounded quiet period. */
export interface Phases {
  readonly faultsUntil: number;
  readonly healedAt: number;
  readonly quietUntil: number;
}

// ── the store, as read after the schedule ─────────────────────────────────

export interface LeaseRef {
  readonly holder: string | null;
  readonly epoch: number;
}

/** Every change of a lease row, in commit order (a trigger or a change stream the harness installed, not the product). */
export interface LeaseChange {
  readonly seq: number;
  /** Wall-clock ms of the change, converted to the schedule's clock by the harness. */
  readonly at: number;
  readonly name: string;
  readonly change: 'insert' | 'update' | 'delete';
  readonly holder: string | null;
  readonly epoch: number;
  readonly expiresAt: number | null;
}

/**
 * One effectful write the store accepted, with the lease row as it stood
 * when the write committed (read inside the write's own transaction by the
 * harness's trigger, or by a serialising observer) and the epoch the write
 * itself carries, where the product records one.
 */
export interface FencedWrite {
  readonly seq: number;
  readonly at: number;
  readonly table: string;
  /** The row: `rollout/attempt/stage`, `run/item`, … */
  readonly key: string;
  /** The lease that fences this kind of write (`promotion_leader`, `coordinator:<run>`). */
  readonly lease: string;
  /** The lease row at commit; null when it did not exist. */
  readonly current: LeaseRef | null;
  /** The holder and epoch the write says it was made under (e.g. promoted_by / promoted_epoch); null when the row carries none. */
  readonly claimed: LeaseRef | null;
  readonly before: Record<string, unknown> | null;
  readonly after: Record<string, unknown> | null;
}

export type StagePhase = 'pending' | 'active' | 'promoted' | 'rolled_back';

/** A stage's phase change, in commit order. */
export interface StageTransition {
  readonly seq: number;
  readonly at: number;
  readonly rolloutId: string;
  readonly attempt: number;
  readonly index: number;
  readonly from: StagePhase | null;
  readonly to: StagePhase;
  readonly epoch: number | null;
  readonly by: string | null;
}

/** A rollout's state change, in commit order. */
export interface RolloutTransition {
  readonly seq: number;
  readonly at: number;
  readonly rolloutId: string;
  readonly from: { state: string; attempt: number } | null;
  readonly to: { state: string; attempt: number; reason: string | null; by: string | null };
}

export type ItemState = 'pending' | 'running' | 'done' | 'failed';

/** A work item's change, in commit order. */
export interface ItemTransition {
  readonly seq: number;
  readonly at: number;
  readonly runId: string;
  readonly itemId: string;
  readonly from: { state: ItemState; worker: string | null; started: boolean } | null;
  readonly to: { state: ItemState; worker: string | null; started: boolean; resultHash: string | null; error: string | null; attempts: number };
}

export interface RolloutRow {
  readonly id: string;
  readonly state: string;
  readonly attempt: number;
  readonly reason: string | null;
  /** The spec's labels, where the workload puts its own key (to match a create with its rollout). */
  readonly labels: Record<string, string>;
  readonly stages: readonly {
    attempt: number;
    index: number;
    name: string;
    phase: StagePhase;
    promotedEpoch: number | null;
    promotedBy: string | null;
    activatedAt: number | null;
  }[];
  /** The spec's `actuators`: the targets it moves (absent where the topology has none). */
  readonly actuators?: readonly string[];
  /** The spec's stage percents, by index. */
  readonly stagePercents?: readonly number[];
  /** Each stage's provider gates as the spec holds them (`stages[i].gates.providers`), where the spec has any. */
  readonly stageGates?: readonly (readonly Record<string, unknown>[])[];
  /** The spec's rollout-wide gates (`rolloutGates`: `fromStage` and `providers`), where it has them. */
  readonly rolloutGates?: Record<string, unknown>;
  /** Each stage's stretch for data, by index: how long its bake may stretch and what it does then (null: a stage with neither field). */
  readonly stageStretch?: readonly ({ readonly seconds: number; readonly onInsufficientData: string } | null)[];
}

/**
 * One provider gate reading the store kept (gate_readings), with when the
 * store took it: `seq` and `at` come from the harness's trigger on the
 * insert (the same log, clock and order as the stage and rollout changes),
 * not from the reading, whose own time (`readAt`) is the reader's clock.
 */
export interface GateReadingRow {
  readonly seq: number;
  readonly at: number;
  readonly rolloutId: string;
  readonly attempt: number;
  readonly stage: number;
  readonly gate: string;
  /** The reading's own time (the reading node's clock), schedule clock: what a tally orders readings by. */
  readonly readAt: number;
  readonly outcome: 'pass' | 'fail' | 'inconclusive';
  readonly value: number | null;
  readonly reason: string | null;
  /** What a judged reading was judged on (gate_readings.series), or null. */
  readonly series: Record<string, unknown> | null;
}

export interface ItemRow {
  readonly runId: string;
  readonly id: string;
  readonly state: ItemState;
  readonly worker: string | null;
  readonly resultHash: string | null;
  readonly error: string | null;
  readonly attempts: number;
  /** Pending with a message on record (PostgreSQL ledger queue: always true; SQS: the message was seen in the queue or sent_at is set). */
  readonly hasMessage: boolean;
}

export interface RunRow {
  readonly id: string;
  readonly items: number;
}

/** A recorded answer to an idempotent write (api_requests or its DynamoDB equivalent). */
export interface IdempotencyRow {
  readonly key: string;
  readonly status: number;
  readonly node: string;
}

/** An outbound event the store holds (rollout_events), for "applied twice" checks and the outbox's promotion work. */
export interface EventRow {
  readonly seq: number;
  readonly rolloutId: string;
  readonly detailType: string;
  readonly detail: Record<string, unknown>;
  /** When it was made (the event's time, on the writer's clock), schedule clock. */
  readonly at: number;
  /** When it was marked published, schedule clock; null: still in the outbox when the history closed. */
  readonly publishedAt: number | null;
}

export interface StoreDump {
  readonly leaseChanges: readonly LeaseChange[];
  readonly writes: readonly FencedWrite[];
  readonly stageTransitions: readonly StageTransition[];
  readonly rolloutTransitions: readonly RolloutTransition[];
  readonly itemTransitions: readonly ItemTransition[];
  readonly rollouts: readonly RolloutRow[];
  readonly runs: readonly RunRow[];
  readonly items: readonly ItemRow[];
  readonly idempotency: readonly IdempotencyRow[];
  readonly events: readonly EventRow[];
  /** The schedule's rollouts' gate readings (absent in histories saved before they were dumped). */
  readonly gateReadings?: readonly GateReadingRow[];
}

// ── targets, as the harness saw them ──────────────────────────────────────

/** The mark a target carries, parsed from the target itself (the nginx include's first line). */
export interface TargetStamp {
  readonly rolloutId: string;
  readonly attempt: number;
  readonly stage: number | null;
  readonly epoch: number;
  readonly percent: number;
  readonly final: boolean;
}

/**
 * What one target carried, read by the harness every few tens of
 * milliseconds: one entry per run of identical readings. Times are on the
 * wall clock the store's change log uses (Date.now() − epochMs), read after
 * the file was, so a content is never dated before it was there.
 */
export interface TargetSample {
  readonly target: string;
  /** First read that saw it. */
  readonly at: number;
  /** Last read that saw it. */
  until: number;
  /** Share on the new side, 0–100 (a finalised split reads 100). */
  readonly percent: number;
  /** Nothing split any more: all on the new side. */
  readonly final: boolean;
  readonly stamp: TargetStamp | null;
}

/** An outside writer's edit of a target: the split changed, the stamp line kept. */
export interface TargetEdit {
  readonly target: string;
  /** When the edited file was in place (same clock as TargetSample). */
  readonly at: number;
  readonly stamp: TargetStamp | null;
  /** The split before and after the edit. */
  readonly from: number;
  readonly percent: number;
}

/**
 * A target write as the harness's gate let it go, just before the writer
 * re-reads the target's stamp (local topology: test/chaos/target-gate.ts).
 */
export interface TargetCheck {
  readonly target: string;
  /** Schedule clock, from the writer's real wall clock. */
  readonly at: number;
  readonly pid: number;
  /** The stamp the write carries. */
  readonly stamp: TargetStamp;
}

export interface TargetHistory {
  readonly samples: readonly TargetSample[];
  readonly edits: readonly TargetEdit[];
  /** When each write began its check of the target, where the harness can see it. */
  readonly checks?: readonly TargetCheck[];
  /** The BatchPromoter's tick, which reconciles every target it has not just written. */
  readonly tickMs: number;
  /** What one write to a target may take on this host (nginx -t, reload, read back), stated by the harness. */
  readonly writeSlackMs: number;
}

/** Everything one schedule produced. */
export interface ChaosHistory {
  readonly topology: 'local' | 'aws';
  readonly seed: string;
  readonly schedule: number;
  /** The deliberately broken variant the harness switched on, if any. */
  readonly variant: string | null;
  /** Wall-clock ms when the schedule's clock read 0. */
  readonly epochMs: number;
  /** The nodes (or Lambda functions) and workers that took part. */
  readonly nodes: readonly string[];
  readonly workers: readonly string[];
  readonly ops: readonly Op[];
  readonly faults: readonly FaultRecord[];
  readonly processes: readonly ProcessSpan[];
  /** Scheduling stalls each process recorded (absent in histories saved before they were recorded). */
  readonly stalls?: readonly Stall[];
  readonly phases: Phases;
  /** Bounds the liveness checks use (ms), stated by the harness from its own settings. */
  readonly bounds: {
    /** A leader exists within this long after the faults heal (TTL + one election interval + the skew margin). */
    readonly leaderWithinMs: number;
    /** Every run finishes within this long after the faults heal. */
    readonly runsFinishWithinMs: number;
    /** A worker silent this long may lose its items (the failure timeout). */
    readonly failureTimeoutMs: number;
    /** How often a worker heartbeats the items it holds. */
    readonly heartbeatMs?: number;
  };
  readonly store: StoreDump;
  /** The targets rollouts move, sampled by the harness (local topology). */
  readonly targets?: TargetHistory;
}

/** A broken invariant, with the smallest slice of history that shows it. */
export interface Violation {
  readonly invariant: string;
  readonly kind: 'safety' | 'liveness';
  readonly message: string;
  /** Ops, faults, lease changes and writes that show it, in time order, one line each. */
  readonly evidence: readonly string[];
  /** When it happened (schedule clock), for the timeline. */
  readonly at: number | null;
}
