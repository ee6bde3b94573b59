/**
 * A DISCRETE-EVENT MODEL of a work run on the sharded DynamoDB ledger — a
 * model, not DynamoDB: it predicts how fast a run goes and which key runs
 * hot from the ledger's own requests, AWS's published per-key limits and a
 * few stated assumptions, nothing measured in AWS. Pure, seeded and
 * deterministic: the same input gives the same result, to the request.
 *
 * What it simulates, request by request, on a simulated clock:
 * - a producer enqueueing the items (PutItem each, as DynamoLedgerStore.enqueue
 *   does, a bounded number in flight, every put tried though one was refused),
 *   sending their messages (SendMessageBatch, 10 a call, one call after another
 *   as SqsWorkQueue.send does) and, in a deployment, recording them sent
 *   (markSent, dispatch.ts). In a deployment the producer is
 *   RolloutClient.enqueueRun (shared/client/producer.ts): items come at the
 *   target rate, requests go out as its window allows, and a refused one (503,
 *   or Lambda's concurrency spent) halves the window, holds every new request
 *   back for its Retry-After (1 s) and is sent again whole;
 * - W workers running Worker.step (shared/ledger/worker.ts): receive up to 10
 *   (fewer, after a pause, once throttled: slowDown / speedUp), read the run
 *   record if the last read is a minute old (RUN_RECORD_TTL_MS),
 *   claim each (bounded concurrency), extend
 *   the messages' visibility (10 a call); start a chunk (one item at a time when
 *   items are slow, up to maxChunk when fast), run it, ack in batches, delete the
 *   messages 10 a call; heartbeat rounds HEARTBEAT_ROUNDS times every heartbeatMs,
 *   each writing the held items heartbeatDue and extending the messages
 *   extensionDue (10 a call); when idle, reconcile only after an ask whose
 *   answer was lost (a query of every RUNNING key's entries, then its own
 *   items read: the workers are new to the registry, so none at start), ask
 *   the coordinator for work, long-poll;
 * - a round of item writes as casMany answers it: every write settles, and
 *   one past every retry leaves the others answered (PartialBatchError) —
 *   claims that landed are held, an unanswered claim's message comes back
 *   after the queue's visibility timeout (60 s), acks answered leave the list
 *   and the rest are sent at a later flush, a start round put back as the
 *   ledger has it (Worker.startRound); a refusal applied nothing, so the
 *   worker neither fails the step for a claim round answered in part nor
 *   reads the running set after a step that failed on one: it halves its
 *   receive batch and pauses before the next receive (100 ms doubling to
 *   2 s), and a failed step backs off (250 ms doubling);
 * - in a deployment, the coordinator Lambda, on warm sandboxes it reuses: a
 *   cold sandbox reads the lease and adopts it without a write while it has
 *   more than half its TTL left; a sandbox writes it only past half its TTL
 *   (a renewal, again when another sandbox renewed first): no lease write per
 *   ask. Before its first fenced write a sandbox reads the
 *   fence marker; finding none, it raises the shard fences (≤ 99 a
 *   transaction, each with the lease's check) and puts it. An idle worker's
 *   ask reads the run's steal hint and answers from what it read: tries a
 *   take of each entry, busiest first, until one is won (a take, won or
 *   lost, costs the hint's size), then moves its items, a fenced transaction
 *   each, one at a time; a stale hint is rebuilt by the one ask that wins the
 *   claim (the running set's entries, the candidates' items, a put). The scan every
 *   minute reads the running set's entries and every running item, re-pends
 *   silent items after the 30 s failure timeout and re-sends unsent ones.
 *   Fenced writes condition-check their shard's fence: a sandbox's own go in
 *   turn per fence; one arriving while another sandbox's transaction on the
 *   fence is in flight is cancelled (a conflict: counted, nothing charged)
 *   and retried as conflicts.ts does. Invocations past the account's
 *   concurrency are refused (429).
 * Every DynamoDB request is charged to the keys `ITEM_WRITES` names
 * (shared/ledger/capacity.ts): the item's shard partition and its shard's
 * PENDING / RUNNING keys, per fixed window of `windowMs`. As the throttling
 * simulator does (test/support/dynamodb-throttle.ts), a request is refused
 * when one of its keys has already used (or reserved) its limit in the current
 * window; it applied nothing and is retried as the code retries it: the SDK's
 * standard mode (4 attempts, throttling backoff 1 s doubling, full jitter, a
 * 500-token retry quota at 5 a retry), then `retryingThrottles` (8 attempts,
 * 50 ms doubling to 2 s, full jitter; throttles.ts). Fenced transactions are
 * not retried by the SDK: conflicts.ts retries them (10 attempts, 10 ms to
 * 400 ms). A refused request still costs the store a request.
 *
 * The store serves at most `machineRequestsPerSecond` requests (DynamoDB and
 * SQS alike: one FIFO server), each also taking a fixed latency. On this
 * machine that ceiling is calibrated from the unlimited benchmark run; in AWS
 * it is effectively unlimited, and the table's on-demand throughput quota
 * (`tableQuota`) applies instead, metered like a key; so do SQS's in-flight
 * limit (receives return nothing past it) and Lambda's concurrency.
 *
 * Scale. `weight` k makes each simulated worker, item and request stand for k
 * real ones moving in lockstep (k = 1 at the benchmark's scale: one simulated
 * request per real request). A simulated item's k real items are hashed to
 * shards independently (k uniform draws, seeded), so per-key loads have the
 * real spread; its requests charge each of those shards its share. A request
 * is admitted or refused whole (all k), which overstates throttling on a key
 * near its limit, and k workers in lockstep make bursts k times larger than
 * independent ones would (the fleet's heartbeats are spread over their
 * interval; the benchmark's, started together, are not). The same code runs
 * both scales; only k and the inputs differ. What happens once a run — the
 * hint's rebuild (its reads and put), the fences' raise — is charged once,
 * not k times; an ask's hint read, claim and take, and a sandbox's lease
 * writes, are k's. A hint lists STEAL_HINT_VICTIMS real victims, so
 * STEAL_HINT_VICTIMS / k simulated ones (the fraction drawn from the seeded
 * random source): fruitful steals keep their real rate on average, k at a time.
 * A simulated take is its k real thieves' busiest-first takes of the (up to
 * STEAL_HINT_VICTIMS) real entries its entry stands for: they collide with
 * each other as the real ones would (plan.ts busiestFirstTakes), while the
 * entry moves whole to the simulated thief.
 *
 * Simplified or not modelled: latencies are fixed, not distributed; one FIFO
 * server stands for the machine's CPUs; no crashes and no poison; a message is
 * delivered once until it comes back (no duplicates); a victim learns of a
 * steal at once; a hint read sees the hint as last written (no replication
 * lag); a take is charged the hint's size as it stands when sent; a
 * transaction cancelled for a conflict is charged no units; Lambda cold
 * starts' latency and its scaling rate (1,000 environments per 10 s) are not
 * modelled, only its concurrency, and a warm sandbox is never reclaimed;
 * DynamoDB's burst credits, adaptive capacity, splits for heat and on-demand
 * scaling (warm throughput) are not modelled — a table is taken as warm for
 * whatever its quota allows.
 */
import { CONFLICT_RETRY } from '../../shared/adapters/dynamodb/conflicts.js';
import { THROTTLE_RETRY } from '../../shared/adapters/dynamodb/throttles.js';
import { INDEX_ENTRY_KB, ITEM_WRITES, PARTITION_RCU, PARTITION_WCU, unitsPerWrite, type ItemWrite } from '../../shared/ledger/capacity.js';
import { MAX_STEAL_BATCH } from '../../shared/ledger/coordinator.js';
import { hintFresh, STEAL_HINT_REBUILD_MS, STEAL_HINT_VICTIMS } from '../../shared/ledger/steal-hint.js';
import { backoffMs, extensionDue, heartbeatDue, HEARTBEAT_ROUNDS, RUN_RECORD_TTL_MS, stealBackoffMs } from '../../shared/ledger/worker.js';
import { ProducerWindow } from '../../shared/client/producer.js';
import { PRICES } from '../cost.js';
import { busiestFirstTakes, COORDINATOR_LEASE_TTL_MS, hintReadRru, hintWriteWcu, stealHintBytes, STEAL_READ_ITEMS } from './plan.js';

// ---------------------------------------------------------------------------
// Inputs and results
// ---------------------------------------------------------------------------

/**
 * The AWS SDK v3's standard retry mode as this project's lockfile resolves it
 * (@smithy/core util-retry, `Retry.v2026`; DynamoDBClient's defaults): 4
 * attempts, a throttling error waits U(0, min(20 s, 1 s × 2^retry)), each
 * retry takes 5 tokens of a 500-token quota per client, a success gives back
 * 1 (or the retry's 5). Read from node_modules on 2026-11-24.
 */
export const SDK_RETRY = { maxAttempts: 4, throttlingBaseMs: 1_000, capMs: 20_000, quota: 500, retryCost: 5, successRefund: 1 } as const;

export interface KeyLimits {
  /** Units one table partition key may use per window (AWS: 1,000 WCU / 3,000 RCU a second). */
  readonly partitionWcu: number;
  readonly partitionRcu: number;
  /** The same for a GSI key (default: the partition's). */
  readonly gsiWcu?: number;
  readonly gsiRcu?: number;
  readonly windowMs: number;
}

/** A table-level throughput quota (units a second): the table's writes and reads, and its GSI's. */
export interface TableQuota {
  readonly wcu: number;
  readonly rcu: number;
  readonly gsiWcu: number;
  readonly gsiRcu: number;
}

export type Producer =
  /** The benchmark's: enqueue everything (bounded concurrency), then send every message, then start the workers. */
  | { readonly kind: 'phased'; readonly concurrency: number }
  /** A deployment's: API requests of `requestItems` paced at `itemsPerSecond`, each enqueue → send → markSent; workers run from the start. */
  | { readonly kind: 'streaming'; readonly itemsPerSecond: number; readonly requestItems: number; readonly concurrency: number };

export interface WorkerBehaviour {
  readonly receiveBatch: number;
  /** Requests in flight per ledger call (DynamoLedgerStore `concurrency`). */
  readonly concurrency: number;
  readonly maxChunk: number;
  readonly chunkBudgetMs: number;
  readonly heartbeatMs: number;
  /**
   * 'aligned': every worker's heartbeat timer ticks together (the benchmark starts them in one process at
   * once); 'spread': each at its own phase (a fleet's instances start at different moments).
   */
  readonly heartbeatPhase: 'aligned' | 'spread';
  /** Visibility set on each held message at claim and heartbeat (worker `--visibility-seconds`, default 30). */
  readonly visibilitySeconds: number;
  /** Long-poll wait when idle (0: none, as in the benchmark). */
  readonly waitSeconds: number;
  /** Whether an idle worker asks the coordinator (Lambda) for work. */
  readonly coordinator: boolean;
  /** 'shared': one SDK client (one retry quota) for everyone, as in the benchmark; 'per-worker': one per process. */
  readonly clients: 'shared' | 'per-worker';
}

export interface ModelInput {
  readonly items: number;
  readonly workers: number;
  /** null: the first (unsharded) layout — one key of each family, the run record on the items' partition. */
  readonly shards: number | null;
  readonly itemKb: number;
  /** How long the backend takes per item. */
  readonly itemMs: number;
  /** A mixed fleet: the last `count` workers take `itemMs` an item instead (unset: every worker alike). */
  readonly slowWorkers?: { readonly count: number; readonly itemMs: number };
  readonly limits: KeyLimits;
  /** null: none (the benchmark's simulator has none). */
  readonly tableQuota: TableQuota | null;
  readonly machineRequestsPerSecond: number;
  readonly latencyMs: { readonly dynamodb: number; readonly sqs: number; readonly lambda: number };
  readonly worker: WorkerBehaviour;
  /** The queue's visibility timeout: a message received and never extended comes back after it (the stack's and the benchmark's: 60 s). */
  readonly queueVisibilitySeconds: number;
  readonly producer: Producer;
  /** The coordinator's scheduled scan (null: none). */
  readonly scanEverySeconds: number | null;
  /** A Running item whose heartbeat has not moved this long (and did not at the scan before) is re-pended by the scan (the lease TTL: 30 s). */
  readonly failureTimeoutSeconds: number;
  /** Memory of the coordinator and API functions (GB-seconds are billed by it). */
  readonly lambdaMemoryMb: number;
  /** Concurrent executions the account allows: an invocation past it is refused (429) and the caller's step fails. */
  readonly lambdaConcurrencyLimit: number;
  /** In-flight messages the queue allows: past it, receives return nothing (SQS: about 120,000 per standard queue). */
  readonly sqsInFlightLimit: number;
  /** Real items, workers and requests each simulated one stands for (1: exact). */
  readonly weight: number;
  readonly seed: number;
  /** Simulated time after which a run that has not finished is stopped and reported unfinished (default: a day). */
  readonly stopAfterSeconds?: number;
  /**
   * The coordinator as one long-lived process (the benchmark's in-process
   * Coordinator) instead of Lambda invocations: every ask is served by the one
   * coordinator it opened — lease held, renewed by its elector every
   * `renewEveryMs` (one lease write), fences seen raised once, its fenced
   * writes in turn per fence — with no invocation, sandbox or lease write per
   * ask. Unset: the coordinator Lambda.
   */
  readonly coordinatorProcess?: { readonly renewEveryMs: number };
  /** Told of each worker's claim and ack rounds and pace changes and each enqueue attempt as they happen (tests look inside a run); changes nothing. */
  readonly trace?: (event: ModelTrace) => void;
}

/** What `trace` is told; times in simulated ms, counts in simulated items. */
export type ModelTrace =
  /** A claim round answered (in full or in part): its claims that landed, and those left unanswered past their retries. */
  | {
      readonly kind: 'claims';
      readonly receivedAt: number;
      readonly at: number;
      readonly worker: number;
      readonly received: number;
      readonly landed: readonly number[];
      readonly unanswered: readonly number[];
    }
  /** An ack round (Worker.flushOnce) answered in part or in full: the items it sent, and those left unanswered past their retries. */
  | { readonly kind: 'acks'; readonly at: number; readonly worker: number; readonly sent: readonly number[]; readonly unanswered: readonly number[] }
  /** A worker's receive batch and pause, changed by a throttled round or step (slowDown) or a claim round answered in full (speedUp). */
  | { readonly kind: 'pace'; readonly at: number; readonly worker: number; readonly throttled: boolean; readonly batch: number; readonly pauseMs: number }
  /** A worker reading the ledger for items it holds there (Worker.reconcile: after an ask that failed other than by a 429; a worker new to the registry does not at start). */
  | { readonly kind: 'reconcile'; readonly at: number; readonly worker: number }
  /** A worker's ask for work answered: items stolen, or failed (`refused`: Lambda's 429, the ask never ran). */
  | { readonly kind: 'ask'; readonly at: number; readonly worker: number; readonly stolen: number; readonly refused: boolean }
  /** An enqueue (one API request's attempt, or the benchmark's call), named by its first item, from when it was sent to its answer. */
  | {
      readonly kind: 'enqueue';
      readonly request: number;
      readonly sent: number;
      readonly at: number;
      readonly items: number;
      readonly stored: number;
      readonly accepted: boolean;
    };

/** Key families, named as the throttling simulator names them (`defaultFamily`). */
export type Family = 'item' | 'pending' | 'running' | 'runRecord' | 'lease' | 'runs' | 'hint' | 'fence';

export interface ModelResult {
  /** From the first enqueue to the end (the last ack, or every worker stopped: `finish`). */
  readonly seconds: number;
  readonly itemsPerSecond: number;
  /** When the workers started (the phased producer starts them once every message is out). */
  readonly workStartedSeconds: number;
  /** Per family: the most units one key used in one window, and the family's name as the simulator prints it. */
  readonly peakPerKey: Readonly<Record<Family, { readonly key: string; readonly wcu: number; readonly rcu: number }>>;
  /** The hottest key's family and units in its busiest window (writes). */
  readonly hottest: { readonly family: string; readonly wcu: number };
  /** Requests refused for throttling, by the family of each key that was at its limit (as the simulator counts; "(reads)" when its reads were), and in all. */
  readonly throttledByFamily: Readonly<Record<string, number>>;
  readonly throttledRequests: number;
  /** Requests refused by the table-level quota. */
  readonly tableThrottled: number;
  /** Requests that outlasted every retry (StoreThrottledError), and the worker steps that failed on one. */
  readonly exhausted: number;
  /** The same, by the family of the request's first key. */
  readonly exhaustedByFamily: Readonly<Record<string, number>>;
  readonly failedSteps: number;
  /** Worker rounds the store throttled, in part or whole (WorkerStats.throttledRounds): each halved the receive batch and paused. */
  readonly throttledRounds: number;
  /** API enqueue requests refused (503) and sent again; the longest one took from its first send to its acceptance. */
  readonly enqueueRetries: number;
  readonly enqueueLongestSeconds: number;
  /** Items the failure scan re-pended (their worker's heartbeat had stopped, or it had lost track of them). */
  readonly repended: number;
  readonly requests: { readonly dynamodb: number; readonly sqs: number };
  /** Units actually consumed (admitted requests): table writes, index writes, reads. */
  readonly units: { readonly wcu: number; readonly indexWcu: number; readonly rcu: number };
  /** Table-level units a second in the busiest window. */
  readonly peakTable: { readonly wcu: number; readonly indexWcu: number; readonly rcu: number };
  readonly sqsInFlightPeak: number;
  readonly lambda: {
    readonly invocations: number;
    readonly concurrencyPeak: number;
    readonly throttled: number;
    readonly gbSeconds: number;
    /** Asks served (a steal invocation each), and the items they moved. */
    readonly steals: number;
    readonly itemsStolen: number;
    /** The steal hint: rebuilds, rebuild claims tried, takes tried, takes won (fruitful steals). */
    readonly hintRebuilds: number;
    readonly hintClaims: number;
    readonly hintTakes: number;
    readonly fruitfulSteals: number;
    /** Lease writes (renewals and refused attempts; none per ask), and those that landed. */
    readonly leaseWrites: number;
    readonly leaseRenewals: number;
    /** Fenced transactions cancelled because another on their fence was in flight (each attempt counts). */
    readonly fenceConflicts: number;
  };
  /** Receives that returned nothing because the queue's in-flight limit was reached. */
  readonly sqsOverLimit: number;
  /** The workers' reads of the run record (Worker.runEpoch), real requests. */
  readonly runRecordReads: number;
  readonly weight: number;
  /** Items left unfinished when the simulation stopped (a day of simulated time), by where they were. */
  readonly unfinished: Readonly<Record<string, number>>;
  /** Every 10 simulated seconds: items done, requests refused, DynamoDB requests so far (real counts). */
  readonly timeline: readonly { readonly t: number; readonly done: number; readonly throttled: number; readonly dynamodb: number }[];
}

// ---------------------------------------------------------------------------
// Seeded randomness and the event queue
// ---------------------------------------------------------------------------

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A binary heap of (time, sequence) → callback: ties run in the order they were scheduled. */
class Events {
  private t: number[] = [];
  private s: number[] = [];
  private f: (() => void)[] = [];
  private seq = 0;

  get size(): number {
    return this.t.length;
  }

  push(time: number, fn: () => void): void {
    const t = this.t;
    const s = this.s;
    const f = this.f;
    let i = t.length;
    const seq = this.seq++;
    t.push(time);
    s.push(seq);
    f.push(fn);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (t[p]! < time || (t[p] === time && s[p]! < seq)) break;
      t[i] = t[p]!;
      s[i] = s[p]!;
      f[i] = f[p]!;
      i = p;
    }
    t[i] = time;
    s[i] = seq;
    f[i] = fn;
  }

  /** The earliest event's time and callback. */
  pop(): [number, () => void] {
    const t = this.t;
    const s = this.s;
    const f = this.f;
    const top: [number, () => void] = [t[0]!, f[0]!];
    const lt = t.pop()!;
    const ls = s.pop()!;
    const lf = f.pop()!;
    const n = t.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        let c = l;
        if (r < n && (t[r]! < t[l]! || (t[r] === t[l] && s[r]! < s[l]!))) c = r;
        if (lt < t[c]! || (lt === t[c] && ls < s[c]!)) break;
        t[i] = t[c]!;
        s[i] = s[c]!;
        f[i] = f[c]!;
        i = c;
      }
      t[i] = lt;
      s[i] = ls;
      f[i] = lf;
    }
    return top;
  }
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

/** How a refused request is retried: SDK then retryingThrottles ('app'), SDK only ('sdk'), or conflicts.ts's loop ('conflict'). */
type Policy = 'app' | 'sdk' | 'conflict';

interface Client {
  /** Tokens left in the SDK's retry quota. */
  quota: number;
}

interface Req {
  readonly svc: 'ddb' | 'sqs';
  /** Key ids, kinds (0 write, 1 read) and units (already × weight). */
  readonly keys: number[];
  readonly kinds: number[];
  readonly units: number[];
  readonly policy: Policy;
  readonly client: Client;
  /** Real requests it stands for: the weight, or 1 for what happens once a run (a hint rebuild). */
  count: number;
  /** A fenced transaction's ConditionCheck keys (the fences, or the lease while raising them), and the sandbox that sends it. */
  fences?: number[];
  box?: Sandbox;
  sdkAttempt: number;
  sdkRetried: boolean;
  appAttempt: number;
  stepFailures: number;
  done: () => void;
  /** What the request changes once applied (a claim lands, an ack records the result). */
  onOk?: () => void;
  /** Called when every retry is spent: the caller's request fails (StoreThrottledError). Unset: retried after the step backoff. */
  exhausted?: () => void;
  /** Past every retry in a round that settles every request (casMany): unanswered, nothing applied. */
  failed?: boolean;
}

/** What a simulated process waits for. */
type Op =
  | { readonly op: 'sleep'; readonly ms: number }
  /** `settle`: every request settles before the answer, a failed one marked `failed` (casMany); else mapLimit's first failure answers. */
  | { readonly op: 'all'; readonly reqs: readonly Req[]; readonly limit: number; readonly settle?: boolean }
  | { readonly op: 'poll'; readonly ms: number }
  /** Resumes when the process's own callback, handed to `register`, is called. */
  | { readonly op: 'wait'; readonly register: (resume: () => void) => void };

/** A simulated process: `yield` an op, get back whether it succeeded (an 'all' whose request outlasted its retries: false). */
type Proc<R = void> = Generator<Op, R, boolean>;

// Key families in key-id order: per-shard families first (id = family × N + shard), then the singletons (the fences after the hint).
/** How often a producer waiting for its window looks again (simulated ms). */
const PRODUCER_POLL_MS = 50;
const F_ITEM = 0;
const F_PENDING = 1;
const F_RUNNING = 2;

/** A coordinator Lambda execution environment: what it keeps across invocations. */
interface Sandbox {
  /** The lease's expiry as it last saw it (0: cold): its token is good until then. */
  tokenUntil: number;
  /** It saw this epoch's fences raised (read the marker, or raised them). */
  fencesSeen: boolean;
  /** Fences its own fenced transactions are on, and those waiting their turn (conflicts.ts inTurn). */
  readonly turns: Set<number>;
  readonly waiting: { readonly fences: readonly number[]; readonly go: () => void }[];
  /** A process coordinator's asks waiting on the ensure one of them is making (RunFences shares it): set while one is. */
  ensuring?: (() => void)[];
}

/** The run's steal hint as last written: victims (simulated worker → simulated items) and the rebuild claim. */
interface Hint {
  builtAt: number;
  claimedUntil: number;
  victims: Map<number, number[]>;
}

/** A hint as one ask read it: its entries in the order a thief tries them (most ids first). */
interface HintRead {
  readonly builtAt: number;
  readonly claimedUntil: number;
  readonly order: readonly { readonly victim: number; readonly ids: readonly number[] }[];
}

/** The order a thief tries a hint's entries in (Coordinator.stealFor): most ids first, ties as listed. */
export function takeOrder<V>(entries: Iterable<readonly [V, readonly number[]]>): { victim: V; ids: readonly number[] }[] {
  return [...entries].map(([victim, ids]) => ({ victim, ids })).sort((a, b) => b.ids.length - a.ids.length);
}

/**
 * One simulated take of an entry of `ids` ids, as its k real thieves make it:
 * the entry stands for up to STEAL_HINT_VICTIMS real ones, which they take
 * busiest first among themselves while it is there (`live`), and each loses
 * in turn once it is gone. `rest`: the hint's other real entries, busiest first.
 */
export function simulatedTake(k: number, ids: number, rest: readonly number[], live: boolean): { attempts: number; wcu: number } {
  const stands = Math.max(1, Math.min(k, STEAL_HINT_VICTIMS));
  if (live)
    return busiestFirstTakes(
      k,
      Array.from({ length: stands }, () => ids),
      rest.slice(0, STEAL_HINT_VICTIMS - stands),
    );
  const attempts = k * stands;
  return { attempts, wcu: attempts * hintWriteWcu(stealHintBytes(rest.slice(0, STEAL_HINT_VICTIMS))) };
}

// ---------------------------------------------------------------------------
// The simulation
// ---------------------------------------------------------------------------

export function simulate(input: ModelInput): ModelResult {
  return new Simulation(input).run();
}

interface WorkerState {
  readonly id: number;
  readonly client: Client;
  backlog: number[];
  executing: number[];
  outcomes: number[];
  /** Running(this worker) in the ledger: what its reconcile finds, less what it holds. */
  owned: Set<number>;
  itemMs: number | null;
  beating: boolean;
  stopped: boolean;
  /** Worker.reconcileDue: after an ask whose answer was lost (the model's workers are new to the registry: none at start). */
  reconcileDue: boolean;
  /** Asks that found nothing since work last came, and when the next is due (stealBackoffMs). */
  fruitless: number;
  nextAskAt: number;
  /** When its run-record read was sent (Worker.runEpoch): another only once RUN_RECORD_TTL_MS has passed. */
  epochReadAt: number;
  /** Worker.pace: the receive batch (starting at receiveBatch, which caps it, as the code does) and the pause before a receive. */
  batch: number;
  pauseMs: number;
}

class Simulation {
  private readonly rand: () => number;
  private readonly ev = new Events();
  private now = 0;
  private readonly k: number;
  private readonly stopAtMs: number;
  private readonly n: number; // shards (1 for the first layout)
  private readonly w: number; // units per write of an item
  private readonly e: number; // units per write of an index entry
  private readonly itemRead: number; // units of a consistent read of an item
  private readonly simItems: number;
  private readonly simWorkers: number;
  // Keys: 3 per shard, then the run record, the lease, the RUNS index key, the steal hint, a fence per shard, the fence marker.
  private readonly keyCount: number;
  private readonly kRunRecord: number;
  private readonly kLease: number;
  private readonly kRuns: number;
  private readonly kHint: number;
  private readonly kMarker: number;
  private readonly kFence0: number;
  private readonly isGsi: Uint8Array;
  private readonly keyWindow: Float64Array;
  private readonly used: [Float64Array, Float64Array];
  private readonly reserved: [Float64Array, Float64Array];
  private readonly peak: [Float64Array, Float64Array];
  private readonly keyRefused: Float64Array;
  private readonly limit: [number, number, number, number]; // table W, table R, gsi W, gsi R per window
  private readonly quota: [number, number, number, number] | null; // per window
  private tableWindow = -1;
  private readonly tableUsed = [0, 0, 0, 0]; // table W, table R, gsi W, gsi R
  private readonly tableReserved = [0, 0, 0, 0];
  private readonly tablePeak = [0, 0, 0, 0];
  // Items: their shard slots (k draws grouped), state, holder.
  private readonly slotStart: Int32Array;
  private readonly slotShard: Int32Array;
  private readonly slotCount: Float64Array;
  private readonly state: Uint8Array; // 0 stored, unsent; 1 pending with a message; 2 running; 3 done
  private readonly owner: Int32Array;
  private readonly started: Uint8Array;
  private readonly stored: Uint8Array; // enqueued (its PutItem landed)
  private readonly hasMsg: Uint8Array; // a message exists (queued or in flight)
  private readonly msgInFlight: Uint8Array; // received, neither deleted nor visible again
  private readonly msgDue: Float64Array; // when an in-flight message becomes visible again
  private readonly msgRef: Uint8Array; // the holding worker has the message's receipt (extends and deletes it)
  private readonly sentRecorded: Uint8Array; // markSent landed
  private readonly heldBy: Int32Array; // the worker whose memory (backlog, chunk, outcomes) has it
  private readonly lastBeat: Float64Array; // its heartbeatAt: claim, start, heartbeat, steal
  private readonly wrote: Float64Array; // when its holder last sent a write of it, as the holder knows (-Infinity: not known)
  private readonly knownVisible: Float64Array; // until when its holder knows its message invisible (-Infinity: not known)
  private readonly staleSeen: Uint8Array; // judged silent at the scan before (HeartbeatWatch needs two looks)
  private readonly startUnknown: Uint8Array; // started by its holder, who took it back as unstarted (its read failed)
  private readonly pendingCnt: Float64Array; // real entries under each shard's PENDING key
  private readonly runningCnt: Float64Array;
  private readonly unsentCnt: Float64Array;
  private readonly queue: number[] = [];
  private queueHead = 0;
  private readonly pollers: (() => void)[] = [];
  private serverFree = 0;
  private readonly serviceMs: number;
  private readonly workers: WorkerState[] = [];
  private readonly sharedClient: Client = { quota: SDK_RETRY.quota };
  private readonly coordinatorClient: Client = { quota: SDK_RETRY.quota };
  /** Warm coordinator sandboxes not serving an invocation (the last freed is reused first). */
  private readonly idleBoxes: Sandbox[] = [];
  /** The one coordinator of `coordinatorProcess`: its token never lapses (its elector renews it), so asks write no lease. */
  private readonly processBox: Sandbox | null;
  /** When the lease expires unless renewed (the lease is never lost here: no coordinator crashes). */
  private leaseUntil = 0;
  /** The fence marker is written (this epoch's fences are raised). */
  private fencesUp = false;
  /** Fenced transactions in flight per key (only fence keys and the lease are ever counted). */
  private readonly fenceBusy: Int32Array;
  private readonly hint: Hint = { builtAt: 0, claimedUntil: 0, victims: new Map() };
  private doneItems = 0;
  private lastAck = 0;
  private finished = false;
  private running = 0; // workers still looping
  private endAt: number | null = null;
  private workStartedAt = 0;
  // Counters (real units: × weight).
  private ddbRequests = 0;
  private sqsRequests = 0;
  private refusedRequests = 0;
  private tableRefused = 0;
  private exhaustedRequests = 0;
  private failedSteps = 0;
  private throttledRounds = 0;
  private enqueueRetries = 0;
  private enqueueLongestMs = 0;
  /** The producer's pacing (RolloutClient.enqueueRun), and its requests in flight, refused ones waiting to be resent included. */
  private readonly producerWindow = new ProducerWindow();
  private producerInFlight = 0;
  private readonly exhaustedBy = new Map<string, number>();
  private repended = 0;
  private readonly refusedByFamily = new Map<string, number>();
  private wcu = 0;
  private indexWcu = 0;
  private rcu = 0;
  private inFlight = 0;
  private inFlightPeak = 0;
  private lambdaInvocations = 0;
  private lambdaConcurrency = 0;
  private lambdaConcurrencyPeak = 0;
  private lambdaGbSeconds = 0;
  private lambdaThrottled = 0;
  private sqsOverLimit = 0;
  private steals = 0;
  private hintRebuilds = 0;
  private hintClaims = 0;
  private hintTakes = 0;
  private fruitfulSteals = 0;
  private leaseRenewals = 0;
  private leaseWrites = 0;
  private fenceConflicts = 0;
  private runRecordReads = 0;
  private readonly timeline: { t: number; done: number; throttled: number; dynamodb: number }[] = [];
  private itemsStolen = 0;

  constructor(private readonly o: ModelInput) {
    if (!(o.items >= 1 && o.workers >= 1 && o.weight >= 1)) throw new Error('model: items, workers and weight must be at least 1');
    this.rand = seededRandom(o.seed);
    this.k = o.weight;
    this.stopAtMs = (o.stopAfterSeconds ?? 86_400) * 1000;
    this.n = o.shards ?? 1;
    this.w = unitsPerWrite(o.itemKb);
    this.e = unitsPerWrite(INDEX_ENTRY_KB);
    this.itemRead = Math.max(1, Math.ceil(o.itemKb / 4));
    this.simItems = Math.max(1, Math.round(o.items / this.k));
    this.simWorkers = Math.max(1, Math.round(o.workers / this.k));
    this.kRunRecord = o.shards === null ? F_ITEM * this.n : 3 * this.n; // the first layout: the record shares the items' partition
    this.kLease = 3 * this.n + 1;
    this.kRuns = 3 * this.n + 2;
    this.kHint = 3 * this.n + 3;
    this.kFence0 = 3 * this.n + 4;
    this.kMarker = 4 * this.n + 4;
    this.keyCount = 4 * this.n + 5;
    this.fenceBusy = new Int32Array(this.keyCount);
    this.isGsi = new Uint8Array(this.keyCount);
    for (let s = 0; s < this.n; s++) {
      this.isGsi[F_PENDING * this.n + s] = 1;
      this.isGsi[F_RUNNING * this.n + s] = 1;
    }
    this.isGsi[this.kRuns] = 1;
    this.keyWindow = new Float64Array(this.keyCount).fill(-1);
    const arr = () => new Float64Array(this.keyCount);
    this.used = [arr(), arr()];
    this.reserved = [arr(), arr()];
    this.peak = [arr(), arr()];
    this.keyRefused = arr();
    const l = o.limits;
    this.limit = [l.partitionWcu, l.partitionRcu, l.gsiWcu ?? l.partitionWcu, l.gsiRcu ?? l.partitionRcu];
    const perWindow = l.windowMs / 1000;
    this.quota = o.tableQuota
      ? [o.tableQuota.wcu * perWindow, o.tableQuota.rcu * perWindow, o.tableQuota.gsiWcu * perWindow, o.tableQuota.gsiRcu * perWindow]
      : null;
    this.serviceMs = Number.isFinite(o.machineRequestsPerSecond) ? (1000 * this.k) / o.machineRequestsPerSecond : 0;
    this.processBox = o.coordinatorProcess ? { tokenUntil: Number.POSITIVE_INFINITY, fencesSeen: false, turns: new Set(), waiting: [] } : null;
    // Each simulated item's k real items, hashed to shards one by one.
    this.slotStart = new Int32Array(this.simItems + 1);
    const shards: number[] = [];
    const counts: number[] = [];
    const tally = new Map<number, number>();
    for (let i = 0; i < this.simItems; i++) {
      this.slotStart[i] = shards.length;
      tally.clear();
      if (this.n === 1) tally.set(0, this.k);
      else
        for (let j = 0; j < this.k; j++) {
          const s = Math.floor(this.rand() * this.n);
          tally.set(s, (tally.get(s) ?? 0) + 1);
        }
      for (const [s, c] of tally) {
        shards.push(s);
        counts.push(c);
      }
    }
    this.slotStart[this.simItems] = shards.length;
    this.slotShard = Int32Array.from(shards);
    this.slotCount = Float64Array.from(counts);
    this.state = new Uint8Array(this.simItems);
    this.owner = new Int32Array(this.simItems).fill(-1);
    this.started = new Uint8Array(this.simItems);
    this.stored = new Uint8Array(this.simItems);
    this.hasMsg = new Uint8Array(this.simItems);
    this.msgInFlight = new Uint8Array(this.simItems);
    this.msgDue = new Float64Array(this.simItems);
    this.msgRef = new Uint8Array(this.simItems);
    this.sentRecorded = new Uint8Array(this.simItems);
    this.heldBy = new Int32Array(this.simItems).fill(-1);
    this.lastBeat = new Float64Array(this.simItems);
    this.wrote = new Float64Array(this.simItems).fill(Number.NEGATIVE_INFINITY);
    this.knownVisible = new Float64Array(this.simItems).fill(Number.NEGATIVE_INFINITY);
    this.staleSeen = new Uint8Array(this.simItems);
    this.startUnknown = new Uint8Array(this.simItems);
    this.pendingCnt = new Float64Array(this.n);
    this.runningCnt = new Float64Array(this.n);
    this.unsentCnt = new Float64Array(this.n);
  }

  run(): ModelResult {
    const o = this.o;
    this.spawn(this.producer());
    if (o.producer.kind === 'streaming') this.startWorkers();
    if (o.scanEverySeconds !== null && o.worker.coordinator) this.every(o.scanEverySeconds * 1000, () => this.spawn(this.scan()));
    if (o.coordinatorProcess && o.worker.coordinator) this.every(o.coordinatorProcess.renewEveryMs, () => this.spawn(this.renewLease()));
    this.every(10_000, () =>
      this.timeline.push({ t: this.now / 1000, done: this.doneItems * this.k, throttled: this.refusedRequests, dynamodb: this.ddbRequests }),
    );
    // A run that does not finish (no worker, a limit of 0, items nobody will pick up) stops at stopAfterSeconds.
    while (this.ev.size > 0 && this.endAt === null) {
      const [t, fn] = this.ev.pop();
      if (t > this.stopAtMs) break;
      this.now = t;
      fn();
    }
    const end = this.endAt ?? this.now;
    return this.result(end);
  }

  // ------------------------------------------------------------ processes

  private spawn(p: Proc<unknown>, onEnd?: () => void): void {
    this.resume(p, true, onEnd);
  }

  private resume(p: Proc<unknown>, value: boolean, onEnd?: () => void): void {
    const r = p.next(value);
    if (r.done) {
      onEnd?.();
      return;
    }
    const op = r.value;
    const again = () => this.resume(p, true, onEnd);
    switch (op.op) {
      case 'sleep':
        this.ev.push(this.now + op.ms, again);
        return;
      case 'all':
        this.all(op.reqs, op.limit, (ok) => this.resume(p, ok, onEnd), op.settle);
        return;
      case 'poll': {
        if (this.queued() > 0 || op.ms <= 0) {
          this.ev.push(this.now, again);
          return;
        }
        let woken = false;
        const wake = () => {
          if (woken) return;
          woken = true;
          again();
        };
        this.pollers.push(wake);
        this.ev.push(this.now + op.ms, () => {
          // Timed out: no longer among the pollers a message wakes.
          const at = this.pollers.indexOf(wake);
          if (at >= 0) this.pollers.splice(at, 1);
          wake();
        });
        return;
      }
      case 'wait':
        op.register(() => this.ev.push(this.now, again));
        return;
    }
  }

  private every(ms: number, fn: () => void): void {
    const tick = () => {
      if (this.finished) return;
      fn();
      this.ev.push(this.now + ms, tick);
    };
    this.ev.push(this.now + ms, tick);
  }

  /**
   * mapLimit: at most `limit` in flight; `done(true)` once all have succeeded,
   * `done(false)` at the first that outlasted its retries — as mapLimit
   * rejects — while the other lanes go on in the background (their requests
   * still land: `onOk`). `settle` (DynamoDB casMany): a request past its
   * retries is marked `failed` and its lane goes on; `done(false)` once every
   * request has settled, if any failed.
   */
  private all(reqs: readonly Req[], limit: number, done: (ok: boolean) => void, settle = false): void {
    const n = reqs.length;
    if (n === 0) {
      this.ev.push(this.now, () => done(true));
      return;
    }
    let next = 0;
    let lanes = Math.min(limit, n);
    let settled = false;
    let failed = false;
    const lane = () => {
      if (next >= n) {
        if (--lanes === 0 && !settled) {
          settled = true;
          done(!failed);
        }
        return;
      }
      const r = reqs[next++]!;
      r.exhausted ??= settle
        ? () => {
            r.failed = true;
            failed = true;
            lane();
          }
        : () => {
            lanes--;
            if (settled) return;
            settled = true;
            done(false);
          };
      this.send(r, lane);
    };
    for (let i = 0, l = lanes; i < l; i++) lane();
  }

  // ------------------------------------------------------------ requests and retries

  private send(r: Req, done: () => void): void {
    const box = r.box;
    const fences = r.fences;
    if (!box || !fences) {
      r.done = done;
      this.attempt(r);
      return;
    }
    // A sandbox's own fenced writes on one fence go in turn (conflicts.ts inTurn): they never conflict with each other.
    const go = () => {
      for (const f of fences) box.turns.add(f);
      const release = () => {
        for (const f of fences) box.turns.delete(f);
        this.nextTurn(box);
      };
      r.done = () => {
        release();
        done();
      };
      const exhausted = r.exhausted;
      if (exhausted)
        r.exhausted = () => {
          release();
          exhausted();
        };
      this.attempt(r);
    };
    if (fences.some((f) => box.turns.has(f))) box.waiting.push({ fences, go });
    else go();
  }

  private nextTurn(box: Sandbox): void {
    for (let i = 0; i < box.waiting.length;) {
      const w = box.waiting[i]!;
      if (w.fences.some((f) => box.turns.has(f))) i++;
      else {
        box.waiting.splice(i, 1);
        w.go();
      }
    }
  }

  /** When a request the store takes now is answered: the FIFO server, then the fixed latency. */
  private served(latency: number): number {
    const start = Math.max(this.now, this.serverFree);
    this.serverFree = start + this.serviceMs;
    return this.serverFree + latency;
  }

  private attempt(r: Req): void {
    if (r.svc === 'sqs') {
      this.sqsRequests += this.k;
      this.ev.push(this.served(this.o.latencyMs.sqs), () => {
        r.onOk?.();
        r.done();
      });
      return;
    }
    this.ddbRequests += r.count;
    const at = this.served(this.o.latencyMs.dynamodb);
    const hot = this.hotKeys(r);
    if (hot !== null) {
      this.refusedRequests += r.count;
      if (hot.length === 0) this.tableRefused += r.count;
      for (const code of hot) {
        const key = code >> 1;
        this.keyRefused[key]! += r.count;
        const f = `${this.familyName(key)}${code & 1 ? ' (reads)' : ''}`;
        this.refusedByFamily.set(f, (this.refusedByFamily.get(f) ?? 0) + r.count);
      }
      this.ev.push(at, () => this.refused(r));
      return;
    }
    // Another transaction on one of its fences in flight: cancelled (TransactionConflict), nothing applied.
    const fences = r.fences;
    if (fences?.some((f) => this.fenceBusy[f]! > 0)) {
      this.fenceConflicts += r.count;
      this.ev.push(at, () => this.refused(r));
      return;
    }
    const window = this.reserve(r);
    if (fences) for (const f of fences) this.fenceBusy[f]!++;
    this.ev.push(at, () => {
      if (fences) for (const f of fences) this.fenceBusy[f]!--;
      this.settle(r, window);
      if (r.policy !== 'conflict') r.client.quota = Math.min(SDK_RETRY.quota, r.client.quota + (r.sdkRetried ? SDK_RETRY.retryCost : SDK_RETRY.successRefund));
      r.onOk?.();
      r.done();
    });
  }

  private refused(r: Req): void {
    r.sdkAttempt++;
    if (r.policy !== 'conflict' && r.sdkAttempt < SDK_RETRY.maxAttempts && r.client.quota >= SDK_RETRY.retryCost) {
      r.client.quota -= SDK_RETRY.retryCost;
      r.sdkRetried = true;
      const d = this.rand() * Math.min(SDK_RETRY.capMs, SDK_RETRY.throttlingBaseMs * 2 ** (r.sdkAttempt - 1));
      this.ev.push(this.now + d, () => this.attempt(r));
      return;
    }
    // The SDK gave up (or never retries): the caller's loop, if it has one.
    r.sdkAttempt = 0;
    r.sdkRetried = false;
    r.appAttempt++;
    const loop = r.policy === 'app' ? THROTTLE_RETRY : r.policy === 'conflict' ? CONFLICT_RETRY : null;
    if (loop && r.appAttempt < loop.maxAttempts) {
      const d = this.rand() * Math.min(loop.maxDelayMs, loop.baseDelayMs * 2 ** (r.appAttempt - 1));
      this.ev.push(this.now + d, () => this.attempt(r));
      return;
    }
    // Past every retry: the caller's request fails, or the step does and the worker does it again after its backoff.
    this.exhaustedRequests += r.count;
    const what = r.keys.length ? `${this.familyName(r.keys[0]!)}${r.kinds[0] ? ' (read)' : ''}` : 'sqs';
    this.exhaustedBy.set(what, (this.exhaustedBy.get(what) ?? 0) + r.count);
    if (r.exhausted) {
      r.exhausted();
      return;
    }
    r.appAttempt = 0;
    r.stepFailures++;
    this.ev.push(this.now + backoffMs(r.stepFailures, this.rand), () => this.attempt(r));
  }

  private roll(key: number): void {
    const win = Math.floor(this.now / this.o.limits.windowMs);
    if (this.keyWindow[key] !== win) {
      this.keyWindow[key] = win;
      this.used[0][key] = 0;
      this.used[1][key] = 0;
      this.reserved[0][key] = 0;
      this.reserved[1][key] = 0;
    }
  }

  private rollTable(): void {
    const win = Math.floor(this.now / this.o.limits.windowMs);
    if (this.tableWindow !== win) {
      this.tableWindow = win;
      this.tableUsed.fill(0);
      this.tableReserved.fill(0);
    }
  }

  /** The keys at their limit, as key × 2 + kind (null: admitted; empty: refused by the table quota alone). */
  private hotKeys(r: Req): number[] | null {
    let hot: number[] | null = null;
    for (let i = 0; i < r.keys.length; i++) {
      const key = r.keys[i]!;
      const kind = r.kinds[i]!;
      this.roll(key);
      const lim = this.limit[(this.isGsi[key] ? 2 : 0) + kind]!;
      if (this.used[kind as 0 | 1][key]! + this.reserved[kind as 0 | 1][key]! < lim) continue;
      hot ??= [];
      const code = key * 2 + kind;
      if (!hot.includes(code)) hot.push(code);
    }
    if (hot === null && this.quota) {
      this.rollTable();
      for (let i = 0; i < r.keys.length; i++) {
        const slot = (this.isGsi[r.keys[i]!] ? 2 : 0) + r.kinds[i]!;
        if (this.tableUsed[slot]! + this.tableReserved[slot]! >= this.quota[slot]!) return [];
      }
    }
    return hot;
  }

  private reserve(r: Req): number {
    this.rollTable();
    for (let i = 0; i < r.keys.length; i++) {
      const key = r.keys[i]!;
      const kind = r.kinds[i]!;
      this.reserved[kind as 0 | 1][key]! += r.units[i]!;
      this.tableReserved[(this.isGsi[key] ? 2 : 0) + kind]! += r.units[i]!;
    }
    return this.tableWindow;
  }

  /** The reservation gives way to the units used, charged in the window the answer comes in (as the simulator does). */
  private settle(r: Req, window: number): void {
    const sameWindow = Math.floor(this.now / this.o.limits.windowMs) === window;
    this.rollTable();
    for (let i = 0; i < r.keys.length; i++) {
      const key = r.keys[i]!;
      const kind = r.kinds[i]!;
      const u = r.units[i]!;
      const slot = (this.isGsi[key] ? 2 : 0) + kind;
      this.roll(key);
      if (sameWindow) {
        this.reserved[kind as 0 | 1][key] = Math.max(0, this.reserved[kind as 0 | 1][key]! - u);
        this.tableReserved[slot] = Math.max(0, this.tableReserved[slot]! - u);
      }
      const v = (this.used[kind as 0 | 1][key]! += u);
      if (v > this.peak[kind as 0 | 1][key]!) this.peak[kind as 0 | 1][key] = v;
      const t = (this.tableUsed[slot]! += u);
      if (t > this.tablePeak[slot]!) this.tablePeak[slot] = t;
      if (kind === 1) this.rcu += u;
      else if (this.isGsi[key]) this.indexWcu += u;
      else this.wcu += u;
    }
  }

  private req(svc: 'ddb' | 'sqs', policy: Policy, client: Client, keys: number[] = [], kinds: number[] = [], units: number[] = [], count = this.k): Req {
    return { svc, keys, kinds, units, policy, client, count, sdkAttempt: 0, sdkRetried: false, appAttempt: 0, stepFailures: 0, done: () => undefined };
  }

  private sqs(client: Client): Req {
    return this.req('sqs', 'sdk', client);
  }

  /** One of the item's ledger writes, charged to each shard its real items hash to. */
  private itemWrite(item: number, write: ItemWrite, client: Client): Req {
    return this.itemMove(item, ITEM_WRITES[write], client);
  }

  /** A write of the item: `c.item` writes of it on its partition, `c.pending` / `c.running` writes of its index entry on its PENDING and RUNNING keys. */
  private itemMove(
    item: number,
    c: { readonly item: number; readonly pending: number; readonly running: number },
    client: Client,
    policy: Policy = 'app',
  ): Req {
    const keys: number[] = [];
    const kinds: number[] = [];
    const units: number[] = [];
    for (let j = this.slotStart[item]!; j < this.slotStart[item + 1]!; j++) {
      const s = this.slotShard[j]!;
      const n = this.slotCount[j]!;
      keys.push(F_ITEM * this.n + s);
      kinds.push(0);
      units.push(c.item * n * this.w);
      if (c.pending) {
        keys.push(F_PENDING * this.n + s);
        kinds.push(0);
        units.push(c.pending * n * this.e);
      }
      if (c.running) {
        keys.push(F_RUNNING * this.n + s);
        kinds.push(0);
        units.push(c.running * n * this.e);
      }
    }
    return this.req('ddb', policy, client, keys, kinds, units);
  }

  /** A write refused by its condition (the item moved on): one unit of the item on its partition, nothing in the index. */
  private failedWrite(item: number, client: Client): Req {
    const keys: number[] = [];
    const units: number[] = [];
    for (let j = this.slotStart[item]!; j < this.slotStart[item + 1]!; j++) {
      keys.push(F_ITEM * this.n + this.slotShard[j]!);
      units.push(this.slotCount[j]! * this.w);
    }
    return this.req(
      'ddb',
      'app',
      client,
      keys,
      keys.map(() => 0),
      units,
    );
  }

  /** A steal: one fenced TransactWriteItems — the item's update (twice: prepare and commit), its RUNNING entry rewritten in place (its worker; twice), its shard fence's ConditionCheck (2). */
  private stealWrite(item: number, box: Sandbox, client: Client): Req {
    return this.fenced(this.itemMove(item, { item: 2, pending: 0, running: 2 }, client, 'conflict'), item, box);
  }

  /** The item's write made a fenced transaction: a ConditionCheck (2 units a real item) on the fence of each shard it is on. */
  private fenced(r: Req, item: number, box: Sandbox): Req {
    const fences: number[] = [];
    for (let j = this.slotStart[item]!; j < this.slotStart[item + 1]!; j++) {
      const f = this.kFence0 + this.slotShard[j]!;
      r.keys.push(f);
      r.kinds.push(0);
      r.units.push(2 * this.slotCount[j]!);
      fences.push(f);
    }
    r.fences = fences;
    r.box = box;
    return r;
  }

  /** One request on one key; `count` real requests (the weight, or 1 for what a run does once), units × count. */
  private single(key: number, kind: number, units: number, policy: Policy, client: Client, count = this.k): Req {
    return this.req('ddb', policy, client, [key], [kind], [units * count], count);
  }

  /**
   * Every page of a query of one index key: eventually consistent, ½ unit per started 4 KB (at least ½), 1 MB a page.
   * Each page a request of its own, retried on its own when throttled (queryAll's EachRequest): a refused page does not restart the read.
   */
  private queryPages(key: number, entries: number, client: Client, count = this.k): Req[] {
    const bytes = entries * INDEX_ENTRY_KB * 1024;
    const pages = Math.max(1, Math.ceil(bytes / (1024 * 1024)));
    const per = bytes / pages;
    return Array.from({ length: pages }, () => this.single(key, 1, 0.5 * Math.max(1, Math.ceil(per / 4096)), 'app', client, count));
  }

  /** The items read consistently, 100 to a BatchGetItem (DynamoLedgerStore readItems): each charged to its partitions, each retried on its own (batchGetAll's EachRequest). */
  private readItems(items: readonly number[], client: Client): Req[] {
    const reqs: Req[] = [];
    for (let i = 0; i < items.length; i += 100) {
      const keys: number[] = [];
      const units: number[] = [];
      for (const item of items.slice(i, i + 100)) {
        for (let j = this.slotStart[item]!; j < this.slotStart[item + 1]!; j++) {
          keys.push(F_ITEM * this.n + this.slotShard[j]!);
          units.push(this.slotCount[j]! * this.itemRead);
        }
      }
      reqs.push(
        this.req(
          'ddb',
          'app',
          client,
          keys,
          keys.map(() => 1),
          units,
        ),
      );
    }
    return reqs;
  }

  /**
   * Every shard's RUNNING entries (their pages in order): what `holders` reads, and `running` before the items.
   * `readers`: the real readers, each reading the whole set (runningCnt counts real items) — a simulated worker's
   * reconcile is its k workers'; a hint rebuild and the coordinator's scan are one reader's, once a run.
   */
  private *readRunning(client: Client, concurrency: number, readers: number): Proc<boolean> {
    const perKey: Req[][] = Array.from({ length: this.n }, (_, s) => this.queryPages(F_RUNNING * this.n + s, this.runningCnt[s]!, client, readers));
    // Pages of one key follow each other; keys fan out `concurrency` at a time.
    if (!(yield { op: 'all', reqs: perKey.map((pages) => pages[0]!), limit: concurrency })) return false;
    const rest = perKey.flatMap((pages) => pages.slice(1));
    return rest.length ? yield { op: 'all', reqs: rest, limit: concurrency } : true;
  }

  // ------------------------------------------------------------ the queue

  private queued(): number {
    return this.queue.length - this.queueHead;
  }

  /** New messages (a send): on the queue at once; long polls wake, one per batch's worth. */
  private pushMessages(items: readonly number[]): void {
    for (const i of items) {
      if (this.msgInFlight[i]) this.dropMessage(i); // a fresh message replaces one still held somewhere
      this.queue.push(i);
      this.hasMsg[i] = 1;
      if (this.state[i] === 0) this.state[i] = 1;
    }
    let wake = Math.ceil(items.length / this.o.worker.receiveBatch);
    while (wake-- > 0 && this.pollers.length) this.pollers.shift()!();
  }

  private take(max: number): number[] {
    const out: number[] = [];
    while (out.length < max && this.queueHead < this.queue.length) {
      const i = this.queue[this.queueHead++]!;
      if (!this.hasMsg[i] || this.msgInFlight[i]) continue; // deleted, or delivered already
      out.push(i);
    }
    if (this.queueHead > 4096 && this.queueHead * 2 > this.queue.length) {
      this.queue.splice(0, this.queueHead);
      this.queueHead = 0;
    }
    return out;
  }

  /**
   * Extend the messages' visibility as Worker.extendAll does: 10 to a
   * ChangeMessageVisibilityBatch; each holder knows its message invisible
   * from when the request was sent.
   */
  private extendRequests(items: readonly number[], client: Client): Req[] {
    const reqs: Req[] = [];
    const vis = this.o.worker.visibilitySeconds * 1000;
    for (let j = 0; j < items.length; j += 10) {
      const part = items.slice(j, j + 10);
      const sent = this.now;
      reqs.push(
        Object.assign(this.sqs(client), {
          onOk: () =>
            part.forEach((i) => {
              this.knownVisible[i] = sent + vis;
              if (this.msgInFlight[i]) this.invisibleFor(i, vis);
            }),
        }),
      );
    }
    return reqs;
  }

  /** A message received or extended stays invisible until `ms` from now; then, unless deleted or extended again, it is delivered again. */
  private invisibleFor(i: number, ms: number): void {
    const due = this.now + ms;
    this.msgDue[i] = due;
    this.ev.push(due, () => {
      if (!this.msgInFlight[i] || this.msgDue[i] !== due) return;
      this.msgInFlight[i] = 0;
      this.inFlight -= this.k;
      this.queue.push(i);
      if (this.pollers.length) this.pollers.shift()!();
    });
  }

  private dropMessage(i: number): void {
    if (this.msgInFlight[i]) this.inFlight -= this.k;
    this.msgInFlight[i] = 0;
    this.hasMsg[i] = 0;
    this.msgRef[i] = 0;
  }

  private moveCounts(item: number, from: Float64Array | null, to: Float64Array | null): void {
    for (let j = this.slotStart[item]!; j < this.slotStart[item + 1]!; j++) {
      const s = this.slotShard[j]!;
      const c = this.slotCount[j]!;
      if (from) from[s]! -= c;
      if (to) to[s]! += c;
    }
  }

  /** Whether an invocation now would be refused (429): the account's concurrency is used up. */
  private lambdaFull(n = this.k): boolean {
    return this.lambdaConcurrency + n > this.o.lambdaConcurrencyLimit;
  }

  /** An invocation, or null when the account's concurrency is used up (the caller gets a 429). */
  private lambdaStart(n = this.k): number | null {
    if (this.lambdaFull(n)) {
      this.lambdaThrottled += n;
      return null;
    }
    this.lambdaInvocations += n;
    this.lambdaConcurrency += n;
    this.lambdaConcurrencyPeak = Math.max(this.lambdaConcurrencyPeak, this.lambdaConcurrency);
    return this.now;
  }

  private lambdaEnd(began: number, n = this.k): void {
    this.lambdaConcurrency -= n;
    this.lambdaGbSeconds += (n * (this.now - began + this.o.latencyMs.lambda) * this.o.lambdaMemoryMb) / 1024 / 1000;
  }

  // ------------------------------------------------------------ the producer

  private *producer(): Proc {
    const p = this.o.producer;
    if (p.kind === 'phased') {
      const client = this.o.worker.clients === 'shared' ? this.sharedClient : { quota: SDK_RETRY.quota };
      const all = Array.from({ length: this.simItems }, (_, i) => i);
      // The benchmark's untilAccepted: a refused enqueue sent again whole after U(0, 1 s).
      for (let attempt = 1; !(yield* this.enqueue(all, p.concurrency, client)); attempt++) {
        if (attempt >= 50) throw new Error('model: the enqueue never got through (50 attempts)');
        yield { op: 'sleep', ms: 1000 * this.rand() };
      }
      for (let i = 0; i < all.length; i += 10) {
        yield { op: 'all', reqs: [this.sqs(client)], limit: 1 };
        this.pushMessages(all.slice(i, i + 10));
      }
      this.startWorkers();
      return;
    }
    // Streaming: the items come at the target rate; RolloutClient.enqueueRun sends them in API requests (each its own
    // Lambda invocation), as many in flight as its window allows and none during a refusal's Retry-After.
    const per = Math.max(1, Math.round(p.requestItems / this.k));
    const gapMs = (per * this.k * 1000) / p.itemsPerSecond;
    const start = this.now;
    let n = 0;
    for (let first = 0; first < this.simItems; first += per, n++) {
      const readyAt = start + n * gapMs;
      if (readyAt > this.now) yield { op: 'sleep', ms: readyAt - this.now };
      yield* this.producerSlot();
      const items = Array.from({ length: Math.min(per, this.simItems - first) }, (_, j) => first + j);
      this.spawn(this.apiRequest(items, p.concurrency));
    }
  }

  /** Waits for the producer window (producer.ts): a request in flight fewer than it allows, and no Retry-After pending. */
  private *producerSlot(): Proc {
    while (this.producerInFlight >= this.producerWindow.allowed || this.now < this.producerWindow.pauseUntil) {
      yield { op: 'sleep', ms: Math.max(PRODUCER_POLL_MS, this.producerWindow.pauseUntil - this.now) };
    }
    this.producerInFlight++;
  }

  /**
   * `ledger.enqueue`: every put tried, a bounded number in flight, though one
   * was refused (a throttled request stores what the table takes); then, if
   * it stored any, the run record's counter. False: a put or the counter
   * outlasted its retries (StoreThrottledError). Sent again, the items stored
   * already cost their partition a refused conditional put each.
   */
  private *enqueue(items: readonly number[], concurrency: number, client: Client): Proc<boolean> {
    const sent = this.now;
    let added = 0;
    const puts = items.map((i) => {
      if (this.state[i] !== 0 || this.stored[i]) return this.failedWrite(i, client);
      const r = this.itemWrite(i, 'enqueue', client);
      r.onOk = () => {
        if (this.stored[i]) return;
        this.stored[i] = 1;
        added++;
        this.moveCounts(i, null, this.pendingCnt);
        this.moveCounts(i, null, this.unsentCnt);
      };
      return r;
    });
    const all = yield { op: 'all', reqs: puts, limit: concurrency, settle: true };
    // The counter, once per request that stored items, also when some were refused (a retry would not count them).
    const accepted = (added === 0 || (yield { op: 'all', reqs: [this.single(this.kRunRecord, 0, 1, 'app', client)], limit: 1 })) && all;
    this.o.trace?.({ kind: 'enqueue', request: items[0]!, sent, at: this.now, items: items.length, stored: added, accepted });
    return accepted;
  }

  /**
   * One API request (POST /runs) of RolloutClient.enqueueRun, each attempt
   * its own invocation. Refused (StoreThrottledError: 503, Retry-After: 1;
   * or Lambda's concurrency spent), it halves the producer's window and
   * holds every new request back for that second, then is sent again whole
   * when the window has room — until accepted.
   */
  private *apiRequest(items: readonly number[], concurrency: number): Proc {
    const first = this.now;
    for (;;) {
      const send = this.producerWindow.sent();
      // One real request: the rate's arithmetic above makes each simulated request one API request of requestItems.
      const began = this.lambdaStart(1);
      let accepted = false;
      const client: Client = { quota: SDK_RETRY.quota };
      // Lambda's concurrency spent: the API refuses the request (429 or 5xx), and the producer paces as for a throttled store.
      if (began !== null) {
        accepted = yield* this.enqueue(items, concurrency, client);
        if (accepted) yield* this.dispatch(items, client, concurrency);
        this.lambdaEnd(began, 1);
      }
      this.producerInFlight--;
      if (accepted) {
        this.producerWindow.accepted();
        this.enqueueLongestMs = Math.max(this.enqueueLongestMs, this.now - first);
        return;
      }
      this.producerWindow.refused(send, this.now, 1_000); // the API's Retry-After: 1
      this.enqueueRetries++;
      yield* this.producerSlot();
    }
  }

  /** dispatch.ts: every message out (10 a call, one call after another), then each recorded sent (markSent). */
  private *dispatch(items: readonly number[], client: Client, concurrency: number): Proc<boolean> {
    for (let i = 0; i < items.length; i += 10) {
      yield { op: 'all', reqs: [this.sqs(client)], limit: 1 };
      this.pushMessages(items.slice(i, i + 10));
    }
    const marks = items.map((i) => {
      if (this.state[i] !== 1) return this.failedWrite(i, client); // claimed meanwhile: the condition refuses it
      const r = this.itemWrite(i, 'markSent', client);
      r.onOk = () => {
        if (this.sentRecorded[i]) return;
        this.sentRecorded[i] = 1;
        this.moveCounts(i, this.unsentCnt, null);
      };
      return r;
    });
    return yield { op: 'all', reqs: marks, limit: concurrency };
  }

  // ------------------------------------------------------------ workers

  private startWorkers(): void {
    this.workStartedAt = this.now;
    for (let id = 0; id < this.simWorkers; id++) {
      const wk: WorkerState = {
        id,
        client: this.o.worker.clients === 'shared' ? this.sharedClient : { quota: SDK_RETRY.quota },
        backlog: [],
        executing: [],
        outcomes: [],
        owned: new Set(),
        itemMs: null,
        beating: false,
        stopped: false,
        reconcileDue: false,
        fruitless: 0,
        nextAskAt: this.now + stealBackoffMs(1, this.rand),
        epochReadAt: Number.NEGATIVE_INFINITY,
        batch: this.o.worker.receiveBatch,
        pauseMs: 0,
      };
      this.workers.push(wk);
      this.running++;
      // Heartbeat rounds tick from the worker's start, whatever it is doing.
      const period = this.o.worker.heartbeatMs / HEARTBEAT_ROUNDS;
      const beat = () => {
        if (wk.stopped || this.finished) return;
        if (!wk.beating) this.spawn(this.heartbeat(wk));
        this.ev.push(this.now + period, beat);
      };
      const phase = this.o.worker.heartbeatPhase === 'spread' ? this.rand() : 1;
      this.ev.push(this.now + phase * period, beat);
      this.spawn(this.worker(wk), () => {
        wk.stopped = true;
        if (--this.running === 0 && this.endAt === null) this.endAt = this.now;
      });
    }
  }

  /**
   * Worker.run: steps; a failed step (a request past its retries) backs off 250 ms doubling, and the loop goes on.
   * Every step that fails here failed on a refusal (StoreThrottledError: nothing applied): no reconcile, a slowDown.
   */
  private *worker(wk: WorkerState): Proc {
    let failures = 0;
    while (!this.finished) {
      const did = yield* this.step(wk);
      if (did === 'failed') {
        this.slowDown(wk);
        failures++;
        this.failedSteps += this.k;
        yield { op: 'sleep', ms: backoffMs(failures, this.rand) };
        continue;
      }
      failures = 0;
      // Idle: the benchmark's `finished` check (every result is in the ledger) stops everyone.
      if (did === 'idle' && this.doneItems >= this.simItems) this.finished = true;
    }
  }

  private *step(wk: WorkerState): Proc<'ran' | 'idle' | 'failed'> {
    const b = this.o.worker;
    if (wk.outcomes.length) return (yield* this.flush(wk)) ? 'ran' : 'failed';
    if (wk.backlog.length) return (yield* this.executeChunk(wk)) ? 'ran' : 'failed';
    // As Worker.step: reconcile only when due; ask at once on running dry, then by stealBackoffMs while nothing comes.
    const came = (): 'ran' => {
      wk.fruitless = 0;
      wk.nextAskAt = 0;
      return 'ran';
    };
    const got = yield* this.pull(wk, 0);
    if (got !== 0) return got < 0 ? 'failed' : came();
    if (wk.reconcileDue) {
      const adopted = yield* this.reconcile(wk);
      if (adopted < 0) return 'failed';
      wk.reconcileDue = false;
      if (adopted > 0) return came();
    }
    if (b.coordinator && this.now >= wk.nextAskAt) {
      // Known before the ask as lambdaStart will find it: a 429 (the account's concurrency spent) means the ask never ran.
      const refused = this.lambdaFull();
      const stolen = yield* this.askForWork(wk);
      this.o.trace?.({ kind: 'ask', at: this.now, worker: wk.id, stolen, refused });
      if (stolen > 0) return came();
      wk.nextAskAt = this.now + stealBackoffMs(++wk.fruitless, this.rand);
      // Worker.stealFailed: the step goes on to the long poll. The answer may be lost with items moved to us: the
      // ledger is read at the next idle step — not after a 429, which moved nothing.
      if (stolen < 0 && !refused) wk.reconcileDue = true;
    }
    if (b.waitSeconds > 0) {
      // As Worker.step: the poll ends by the next ask's time.
      const untilAsk = b.coordinator ? Math.max(1, Math.ceil((wk.nextAskAt - this.now) / 1000)) : b.waitSeconds;
      const more = yield* this.pull(wk, Math.min(b.waitSeconds, untilAsk));
      if (more !== 0) return more < 0 ? 'failed' : came();
    }
    return 'idle';
  }

  private hold(wk: WorkerState, i: number): void {
    this.heldBy[i] = wk.id;
  }

  /** Out of the worker's memory (no longer its), with its message's receipt. */
  private orphan(wk: WorkerState, i: number): void {
    if (this.heldBy[i] === wk.id) this.heldBy[i] = -1;
    this.msgRef[i] = 0;
  }

  /** Who the ledger says holds a Running item (-1: nobody). */
  private setOwner(i: number, id: number): void {
    const was = this.owner[i]!;
    if (was >= 0) this.workers[was]?.owned.delete(i);
    this.startUnknown[i] = 0;
    this.owner[i] = id;
    if (id >= 0) this.workers[id]?.owned.add(i);
  }

  /**
   * Worker.pull: after the pause a throttled round left (slowDown), receive up to the batch, read the run record (at
   * most once a minute), claim (casMany: every claim settles; those that landed are held, those refused by their
   * condition dropped or kept as the code does, those unanswered left to come back), extend. -1: the step failed.
   */
  private *pull(wk: WorkerState, waitSeconds: number): Proc<number> {
    const b = this.o.worker;
    if (wk.pauseMs > 0) yield { op: 'sleep', ms: wk.pauseMs };
    if (waitSeconds > 0) yield { op: 'poll', ms: waitSeconds * 1000 };
    yield { op: 'all', reqs: [this.sqs(wk.client)], limit: 1 };
    const room = Math.floor((this.o.sqsInFlightLimit - this.inFlight) / this.k);
    if (room <= 0 && this.queued() > 0) this.sqsOverLimit += this.k;
    const got = this.take(Math.min(b.receiveBatch, wk.batch, Math.max(0, room)));
    if (!got.length) return 0;
    const receivedAt = this.now;
    for (const i of got) {
      this.msgInFlight[i] = 1;
      this.knownVisible[i] = Number.NEGATIVE_INFINITY;
      this.invisibleFor(i, this.o.queueVisibilitySeconds * 1000);
    }
    this.inFlight += got.length * this.k;
    this.inFlightPeak = Math.max(this.inFlightPeak, this.inFlight);
    if (this.now - wk.epochReadAt >= RUN_RECORD_TTL_MS) {
      const at = this.now;
      const read = this.single(this.kRunRecord, 1, 1, 'sdk', wk.client);
      read.onOk = () => (wk.epochReadAt = at);
      this.runRecordReads += this.k;
      if (!(yield { op: 'all', reqs: [read], limit: 1 })) return -1;
    }
    const mine: number[] = [];
    const sent = this.now;
    const claims = got.map((i) => {
      if (this.state[i] !== 1) return this.failedWrite(i, wk.client);
      const r = this.itemWrite(i, 'claim', wk.client);
      r.onOk = () => {
        if (this.state[i] !== 1) return;
        this.state[i] = 2;
        this.setOwner(i, wk.id);
        this.started[i] = 0;
        this.lastBeat[i] = this.now;
        this.wrote[i] = sent;
        this.moveCounts(i, this.pendingCnt, this.runningCnt);
        mine.push(i);
      };
      return r;
    });
    const whole = yield { op: 'all', reqs: claims, limit: b.concurrency, settle: true };
    // None answered: the first error is thrown as it came; nothing landed, the messages come back.
    if (!whole && claims.every((r) => r.failed)) return -1;
    this.o.trace?.({
      kind: 'claims',
      receivedAt,
      at: this.now,
      worker: wk.id,
      received: got.length,
      landed: mine.slice(),
      unanswered: got.filter((_, j) => claims[j]!.failed),
    });
    const extend: number[] = [];
    const drop: number[] = [];
    got.forEach((i, j) => {
      // Not answered (refused past its retries): its message is left as it is and comes back after its visibility timeout.
      if (claims[j]!.failed) return;
      if (mine.includes(i)) {
        this.hold(wk, i);
        this.msgRef[i] = 1;
        wk.backlog.push(i);
        extend.push(i);
      } else if (this.state[i] === 2 && this.owner[i] === wk.id && this.heldBy[i] !== wk.id) {
        this.hold(wk, i); // ours already (a redelivery to us): when last written is not known
        this.msgRef[i] = 1;
        this.wrote[i] = Number.NEGATIVE_INFINITY;
        wk.backlog.push(i);
      } else if (this.state[i] !== 1) drop.push(i); // Running elsewhere, Done: the queue rule
    });
    yield {
      op: 'all',
      reqs: [...this.extendRequests(extend, wk.client), ...drop.map((i) => Object.assign(this.sqs(wk.client), { onOk: () => this.dropMessage(i) }))],
      limit: Infinity,
    };
    // Refused in part (a refusal applied nothing: no claim's fate unknown): slow down, the step goes on.
    if (whole) this.speedUp(wk);
    else this.slowDown(wk);
    return got.length;
  }

  /** The backend's time per item on this worker (`slowWorkers`: the last ones). */
  private itemMsOf(wk: WorkerState): number {
    const slow = this.o.slowWorkers;
    return slow && wk.id >= this.simWorkers - Math.round(slow.count / this.k) ? slow.itemMs : this.o.itemMs;
  }

  /** Worker.slowDown: the store refused part of a round, or a step failed on a refusal: half the batch (down to 1), pause 100 ms doubling to 2 s. */
  private slowDown(wk: WorkerState): void {
    wk.batch = Math.max(1, Math.floor(wk.batch / 2));
    wk.pauseMs = Math.min(2_000, Math.max(100, wk.pauseMs * 2));
    this.throttledRounds += this.k;
    this.o.trace?.({ kind: 'pace', at: this.now, worker: wk.id, throttled: true, batch: wk.batch, pauseMs: wk.pauseMs });
  }

  /** Worker.speedUp: a claim round answered in full adds one to the batch (up to receiveBatch) and ends the pause. */
  private speedUp(wk: WorkerState): void {
    wk.batch = Math.min(this.o.worker.receiveBatch, wk.batch + 1);
    wk.pauseMs = 0;
    this.o.trace?.({ kind: 'pace', at: this.now, worker: wk.id, throttled: false, batch: wk.batch, pauseMs: wk.pauseMs });
  }

  private chunkSize(wk: WorkerState): number {
    if (wk.itemMs === null) return 1;
    return Math.max(1, Math.min(this.o.worker.maxChunk, Math.floor(this.o.worker.chunkBudgetMs / Math.max(wk.itemMs, 0.01))));
  }

  /** Started as its holder knows it: the ledger's flag, unless it took the item back as unstarted (startUnknown). */
  private knownStarted(i: number): boolean {
    return this.started[i] === 1 && this.startUnknown[i] === 0;
  }

  /** Worker.executeChunk/runChunk: start the chunk in one round (items started already are run as they are), run, ack. */
  private *executeChunk(wk: WorkerState): Proc<boolean> {
    const b = this.o.worker;
    const preStarted = wk.backlog.findIndex((i) => !this.knownStarted(i));
    const chunk = wk.backlog.splice(0, preStarted === 0 ? this.chunkSize(wk) : preStarted === -1 ? wk.backlog.length : preStarted);
    const toStart = chunk.filter((i) => !this.knownStarted(i));
    const ok: number[] = chunk.filter((i) => this.knownStarted(i) && this.owner[i] === wk.id && this.state[i] === 2);
    const gone: number[] = [];
    const starts = toStart.map((i) => {
      if (this.owner[i] !== wk.id || this.state[i] !== 2 || this.started[i]) {
        this.startUnknown[i] = 0;
        gone.push(i);
        return this.failedWrite(i, wk.client); // stolen before we started it, or started already (its condition refuses it)
      }
      const r = this.itemWrite(i, 'start', wk.client);
      const sent = this.now;
      r.onOk = () => {
        if (this.owner[i] !== wk.id || this.state[i] !== 2) return;
        this.started[i] = 1;
        this.lastBeat[i] = this.now;
        this.wrote[i] = Math.max(this.wrote[i]!, sent);
      };
      return r;
    });
    if (!(yield { op: 'all', reqs: starts, limit: b.concurrency, settle: true })) {
      // Worker.startRound: the chunk goes back as the ledger has it, each item not known started read (one at a time):
      // started by us (run it), unstarted (start it again), else lost; unreadable, kept as unstarted.
      const back: number[] = [];
      for (const i of chunk) {
        if (!toStart.includes(i)) {
          back.push(i);
          continue;
        }
        const read = this.readItems([i], wk.client);
        if (!(yield { op: 'all', reqs: read, limit: 1 })) {
          if (this.started[i] && this.owner[i] === wk.id) this.startUnknown[i] = 1;
          back.push(i);
        } else if (this.state[i] === 2 && this.owner[i] === wk.id) back.push(i);
        else this.orphan(wk, i);
      }
      wk.backlog.unshift(...back);
      return false;
    }
    ok.push(...toStart.filter((i) => !gone.includes(i) && this.started[i] && this.owner[i] === wk.id));
    for (const i of gone) this.heldBy[i] = -1;
    const lostMsgs = gone.filter((i) => this.msgRef[i]);
    if (lostMsgs.length)
      yield { op: 'all', reqs: [Object.assign(this.sqs(wk.client), { onOk: () => lostMsgs.forEach((i) => this.dropMessage(i)) })], limit: 1 };
    wk.executing.push(...ok);
    let lastFlush = this.now;
    const itemMs = this.itemMsOf(wk);
    for (const i of ok) {
      if (itemMs > 0) yield { op: 'sleep', ms: itemMs };
      wk.executing.splice(wk.executing.indexOf(i), 1);
      wk.outcomes.push(i);
      wk.itemMs = wk.itemMs === null ? itemMs : wk.itemMs * 0.8 + itemMs * 0.2;
      if (wk.outcomes.length && this.now - lastFlush >= b.chunkBudgetMs) {
        if (!(yield* this.flush(wk))) {
          // The unrun items go back to the front of the line, still started.
          wk.backlog.unshift(...wk.executing.splice(0));
          return false;
        }
        lastFlush = this.now;
      }
    }
    return yield* this.flush(wk);
  }

  /** Worker.flushOnce: ack the outcomes (every ack settles); those answered leave the list, the others wait for a later flush. */
  private *flush(wk: WorkerState): Proc<boolean> {
    if (!wk.outcomes.length) return true;
    const batch = wk.outcomes.slice();
    const acks = batch.map((i) => {
      if (this.state[i] !== 2 || this.owner[i] !== wk.id) return this.failedWrite(i, wk.client); // acked by an earlier round, or lost
      const r = this.itemWrite(i, 'ack', wk.client);
      r.onOk = () => {
        if (this.state[i] !== 2) return;
        this.state[i] = 3;
        this.setOwner(i, -1);
        this.moveCounts(i, this.runningCnt, null);
        this.doneItems++;
        this.lastAck = this.now;
        if (this.doneItems >= this.simItems && this.o.producer.kind === 'streaming') {
          // A deployment's run ends with its last result; the workers idling after it are not the run.
          this.finished = true;
          this.endAt = this.now;
        }
      };
      return r;
    });
    const whole = yield { op: 'all', reqs: acks, limit: this.o.worker.concurrency, settle: true };
    const answered = batch.filter((_, j) => !acks[j]!.failed);
    this.o.trace?.({ kind: 'acks', at: this.now, worker: wk.id, sent: batch, unanswered: batch.filter((_, j) => acks[j]!.failed) });
    const left = new Set(answered);
    wk.outcomes = wk.outcomes.filter((i) => !left.has(i));
    const withMessage: number[] = [];
    for (const i of answered) {
      if (this.heldBy[i] === wk.id) this.heldBy[i] = -1;
      if (this.msgRef[i]) withMessage.push(i);
    }
    for (let j = 0; j < withMessage.length; j += 10) {
      const part = withMessage.slice(j, j + 10);
      yield { op: 'all', reqs: [Object.assign(this.sqs(wk.client), { onOk: () => part.forEach((i) => this.dropMessage(i)) })], limit: 1 };
    }
    return whole;
  }

  /** Worker.beatOnce: the held items heartbeatDue written, then (if that round got through) the messages extensionDue extended. */
  private *heartbeat(wk: WorkerState): Proc {
    const held = [...new Set([...wk.backlog, ...wk.executing, ...wk.outcomes])].filter((i) => this.owner[i] === wk.id && this.state[i] === 2);
    if (!held.length) return;
    wk.beating = true;
    const hb = this.o.worker.heartbeatMs;
    const sent = this.now;
    const due = held.filter((i) => heartbeatDue(sent, this.wrote[i]!, hb));
    const beats = due.map((i) =>
      Object.assign(this.itemWrite(i, 'heartbeat', wk.client), {
        onOk: () => {
          if (this.owner[i] !== wk.id || this.state[i] !== 2) return;
          this.lastBeat[i] = this.now;
          this.wrote[i] = Math.max(this.wrote[i]!, sent);
        },
      }),
    );
    const ok = beats.length ? yield { op: 'all', reqs: beats, limit: this.o.worker.concurrency, settle: true } : true;
    if (ok) {
      const extend = held.filter(
        (i) => this.msgRef[i] && this.msgInFlight[i] && extensionDue(this.now, this.knownVisible[i]!, this.o.worker.visibilitySeconds * 1000, hb),
      );
      if (extend.length) yield { op: 'all', reqs: this.extendRequests(extend, wk.client), limit: Infinity };
    }
    wk.beating = false;
  }

  /**
   * Worker.reconcile: read the running set; give back what we started in a
   * failed step (nack, counted, and a new message), adopt what we hold
   * unstarted. Returns how many it adopted; -1: the step failed.
   */
  private *reconcile(wk: WorkerState): Proc<number> {
    this.o.trace?.({ kind: 'reconcile', at: this.now, worker: wk.id });
    if (!(yield* this.readRunning(wk.client, this.o.worker.concurrency, this.k))) return -1;
    const mine = [...wk.owned].filter((i) => this.state[i] === 2 && this.heldBy[i] !== wk.id);
    // Whether each started: its items read (the entries do not say).
    if (mine.length && !(yield { op: 'all', reqs: this.readItems(mine, wk.client), limit: this.o.worker.concurrency })) return -1;
    const restarted = mine.filter((i) => this.started[i]);
    if (restarted.length) {
      const back: number[] = [];
      const nacks = restarted.map((i) => {
        // nack: the item goes back to Pending — its index entry moves from the RUNNING key to the PENDING key.
        const r = this.itemMove(i, { item: 1, pending: 1, running: 1 }, wk.client);
        r.onOk = () => {
          if (this.state[i] !== 2 || this.owner[i] !== wk.id) return;
          this.state[i] = 1;
          this.setOwner(i, -1);
          this.started[i] = 0;
          this.sentRecorded[i] = 0;
          this.moveCounts(i, this.runningCnt, this.pendingCnt);
          this.moveCounts(i, null, this.unsentCnt);
          back.push(i);
        };
        return r;
      });
      if (!(yield { op: 'all', reqs: nacks, limit: this.o.worker.concurrency, settle: true })) return -1;
      if (!(yield* this.dispatch(back, wk.client, this.o.worker.concurrency))) return -1;
    }
    const unstarted = mine.filter((i) => !this.started[i]);
    for (const i of unstarted) {
      this.hold(wk, i);
      this.wrote[i] = Number.NEGATIVE_INFINITY;
      wk.backlog.push(i);
    }
    return unstarted.length;
  }

  // ------------------------------------------------------------ the coordinator (Lambda)

  /** An invocation of the coordinator on a warm sandbox if one is free (the last freed), else a cold one; null: a 429. A process coordinator: its own. */
  private coordinatorStart(): { readonly began: number; readonly box: Sandbox } | null {
    if (this.processBox) return { began: this.now, box: this.processBox };
    const began = this.lambdaStart();
    if (began === null) return null;
    return { began, box: this.idleBoxes.pop() ?? { tokenUntil: 0, fencesSeen: false, turns: new Set(), waiting: [] } };
  }

  private coordinatorEnd(inv: { readonly began: number; readonly box: Sandbox }): void {
    if (inv.box === this.processBox) return;
    this.lambdaEnd(inv.began);
    this.idleBoxes.push(inv.box);
  }

  /**
   * The run's coordinator on this sandbox (functions/coordinator.ts
   * coordinatorOf): kept while its token has more than half the lease TTL
   * left — nothing read or written. Past half, a renewal from the row it last
   * saw, refused (and sent again from the row handed back) when another
   * sandbox renewed since; cold, or its token run out, the elector reads the
   * row first (readFirst: a consistent read, one unit) and leads on it
   * without a write while it has more than half its TTL left; else a renewal
   * (an acquire when there is no row yet), not sent again when refused
   * because another sandbox wrote first and the row is now fresh. Every
   * refused or landed write is a unit; the same holder keeps its epoch.
   */
  private *campaign(box: Sandbox, client: Client): Proc<boolean> {
    const fresh = (until: number) => until - this.now > COORDINATOR_LEASE_TTL_MS / 2;
    if (fresh(box.tokenUntil)) return true;
    let seen: number | null = box.tokenUntil > this.now ? box.tokenUntil : null;
    if (seen === null) {
      const read = this.single(this.kLease, 1, 1, 'sdk', client);
      read.onOk = () => (seen = this.leaseUntil === 0 ? null : this.leaseUntil);
      if (!(yield { op: 'all', reqs: [read], limit: 1 })) return false;
      if (seen !== null && fresh(seen)) {
        box.tokenUntil = seen;
        return true;
      }
    }
    for (let attempt = 0; attempt < 2; attempt++) {
      let landed = false;
      const write = this.single(this.kLease, 0, 1, 'sdk', client);
      write.onOk = () => {
        landed = seen === null ? this.leaseUntil === 0 : seen === this.leaseUntil;
        if (landed) {
          this.leaseUntil = this.now + COORDINATOR_LEASE_TTL_MS;
          this.leaseRenewals += this.k;
        }
        seen = this.leaseUntil;
      };
      this.leaseWrites += this.k;
      if (!(yield { op: 'all', reqs: [write], limit: 1 })) return false;
      if (landed) break;
      // Refused because another sandbox wrote first: fresh, led on as it stands (readFirst), not written again.
      if (fresh(this.leaseUntil)) break;
    }
    box.tokenUntil = this.leaseUntil;
    return true;
  }

  /** A process coordinator's elector renewing its lease: one conditional put, one real request. */
  private *renewLease(): Proc {
    const write = this.single(this.kLease, 0, 1, 'sdk', this.coordinatorClient, 1);
    write.onOk = () => (this.leaseRenewals += 1);
    this.leaseWrites += 1;
    yield { op: 'all', reqs: [write], limit: 1 };
  }

  /**
   * RunFences.ensure, before a sandbox's first fenced write of the epoch: the
   * marker read (consistent); none, the fences raised — every shard's, ≤ 99 a
   * transaction with the lease's ConditionCheck, one after another — then
   * the marker, in its own. Sandboxes that find none at once each raise
   * (the same holder and epoch: idempotent), conflicting on the lease.
   */
  private *ensureFences(box: Sandbox, client: Client): Proc<boolean> {
    if (box.fencesSeen) return true;
    if (box.ensuring) {
      const waiters = box.ensuring;
      yield { op: 'wait', register: (resume) => waiters.push(resume) };
      return box.fencesSeen;
    }
    const waiters: (() => void)[] = (box.ensuring = []);
    try {
      return yield* this.ensureFencesOnce(box, client);
    } finally {
      box.ensuring = undefined;
      for (const resume of waiters) resume();
    }
  }

  private *ensureFencesOnce(box: Sandbox, client: Client): Proc<boolean> {
    if (!(yield { op: 'all', reqs: [this.single(this.kMarker, 1, 1, 'sdk', client)], limit: 1 })) return false;
    if (!this.fencesUp) {
      const chunks: number[][] = [];
      for (let s = 0; s < this.n; s += 99) chunks.push(Array.from({ length: Math.min(99, this.n - s) }, (_, j) => this.kFence0 + s + j));
      chunks.push([this.kMarker]);
      for (const keys of chunks) {
        const raise = this.req('ddb', 'conflict', client, [this.kLease, ...keys], [0, ...keys.map(() => 0)], [2, ...keys.map(() => 2)], 1);
        raise.fences = [this.kLease];
        raise.box = box;
        if (keys[0] === this.kMarker) raise.onOk = () => (this.fencesUp = true);
        if (!(yield { op: 'all', reqs: [raise], limit: 1 })) return false;
      }
    }
    box.fencesSeen = true;
    return true;
  }

  /** The hint's real entries, ids each, busiest first: at most STEAL_HINT_VICTIMS (a simulated one stands for k); `except` left out. */
  private realEntries(except = -1): number[] {
    const ids: number[] = [];
    for (const [victim, items] of this.hint.victims) if (victim !== except) for (let j = 0; j < this.k; j++) ids.push(items.length);
    return ids.sort((a, b) => b - a).slice(0, STEAL_HINT_VICTIMS);
  }

  /** The hint as stored. */
  private hintBytes(): number {
    return stealHintBytes(this.realEntries());
  }

  /** What a read of the hint returns: its entries busiest first (ties in the order the rebuild listed them, busiest backlog first). */
  private readHint(): HintRead {
    const h = this.hint;
    return { builtAt: h.builtAt, claimedUntil: h.claimedUntil, order: takeOrder(h.victims) };
  }

  /**
   * An idle worker's requestWork: the coordinator Lambda reads the run's steal
   * hint; fresh (or stale with a live claim, or its claim lost) it answers
   * from it; stale, it claims the rebuild, and the winner rebuilds it and
   * answers from the new one. Items stolen; -1: the invocation failed.
   */
  private *askForWork(thief: WorkerState): Proc<number> {
    const inv = this.coordinatorStart();
    if (inv === null) return -1;
    const client = this.coordinatorClient;
    const fail = () => {
      this.coordinatorEnd(inv);
      return -1;
    };
    if (!this.processBox) yield { op: 'sleep', ms: this.o.latencyMs.lambda };
    if (!(yield* this.campaign(inv.box, client))) return fail();
    let read: HintRead | null = null;
    const get = this.single(this.kHint, 1, hintReadRru(this.hintBytes()), 'app', client);
    get.onOk = () => (read = this.readHint());
    if (!(yield { op: 'all', reqs: [get], limit: 1 })) return fail();
    let hint = (read as HintRead | null) ?? this.readHint();
    // Stale and nobody rebuilding: claim the rebuild; lost, answer from the hint read, as read.
    if (!hintFresh(hint.builtAt, this.now) && hint.claimedUntil <= this.now) {
      // The conditional claim: k asks try it (the herd that read the same stale hint), the first to land wins.
      const h = this.hint;
      const seen = hint.builtAt;
      let won = false;
      const claim = this.single(this.kHint, 0, hintWriteWcu(this.hintBytes()), 'app', client);
      claim.onOk = () => {
        if (h.builtAt !== seen || h.claimedUntil > this.now) return;
        h.claimedUntil = this.now + STEAL_HINT_REBUILD_MS;
        won = true;
      };
      this.hintClaims += this.k;
      if (!(yield { op: 'all', reqs: [claim], limit: 1 })) return fail();
      if (won) {
        if (!(yield* this.rebuildHint(client))) return fail();
        // The rebuilder answers from what it built.
        hint = this.readHint();
      }
    }
    const taken = yield* this.takeFromHint(thief, hint, inv.box, client);
    if (taken === null) return fail();
    this.steals += this.k;
    this.itemsStolen += taken.length * this.k;
    for (const i of taken) this.hold(thief, i);
    thief.backlog.push(...taken);
    this.coordinatorEnd(inv);
    return taken.length;
  }

  /**
   * The rebuild, once for the run: the running set's entries, then the items
   * of the workers holding most, one worker at a time, until no worker left
   * holds more than the smallest backlog kept or the read budget is spent;
   * the largest backlogs kept, each with the back half of its line, are put.
   */
  private *rebuildHint(client: Client): Proc<boolean> {
    if (!(yield* this.readRunning(client, 16, 1))) return false;
    // Real victims a hint lists, in simulated workers: the fraction drawn (k real ones move together).
    const share = STEAL_HINT_VICTIMS / this.k;
    const limit = Math.floor(share) + (this.rand() < share - Math.floor(share) ? 1 : 0);
    const budget = Math.max(1, Math.floor(STEAL_READ_ITEMS / this.k));
    const unstarted = (v: WorkerState) => v.backlog.filter((i) => this.owner[i] === v.id && !this.started[i] && this.state[i] === 2);
    const kept: { worker: WorkerState; line: number[] }[] = [];
    const floor = () => (kept.length < Math.max(1, limit) ? 0 : kept[kept.length - 1]!.line.length);
    let read = 0;
    for (const v of [...this.workers].filter((w) => w.owned.size > 0).sort((a, b) => b.owned.size - a.owned.size)) {
      if (v.owned.size <= floor() || read >= budget) break;
      read += v.owned.size;
      if (!(yield { op: 'all', reqs: this.readItems([...v.owned], client), limit: 16 })) return false;
      const line = unstarted(v);
      if (line.length <= floor()) continue;
      kept.push({ worker: v, line });
      kept.sort((a, b) => b.line.length - a.line.length);
      kept.splice(Math.max(1, limit));
    }
    // From the back of each line: its worker would reach them last.
    const victims = new Map(
      kept.slice(0, limit).map(({ worker, line }) => [worker.id, line.slice(-Math.min(Math.ceil(line.length / 2), MAX_STEAL_BATCH))] as const),
    );
    const bytes = stealHintBytes(
      [...victims.values()].flatMap((ids) => Array.from({ length: Math.min(this.k, STEAL_HINT_VICTIMS) }, () => ids.length)).slice(0, STEAL_HINT_VICTIMS),
    );
    // A put that replaces an item is paid at the larger of the two.
    const put = this.single(this.kHint, 0, hintWriteWcu(Math.max(bytes, this.hintBytes())), 'app', client, 1);
    put.onOk = () => {
      this.hint.builtAt = this.now;
      this.hint.claimedUntil = 0;
      this.hint.victims = victims;
      this.hintRebuilds++;
    };
    return yield { op: 'all', reqs: [put], limit: 1 };
  }

  /**
   * Answer from the hint as read (Coordinator.stealFor): its entries tried
   * busiest first, each a conditional take paid won or lost; a lost one (taken
   * by another thief, or the hint rebuilt) → the next. The entry won's ids are
   * moved one at a time, each a fenced transaction and a consistent read. A
   * thief the hint lists has a backlog of its own: nothing. Null: the invocation failed.
   */
  private *takeFromHint(thief: WorkerState, read: HintRead, box: Sandbox, client: Client): Proc<number[] | null> {
    if (read.order.some((e) => e.victim === thief.id)) return [];
    const h = this.hint;
    let got: number[] | null = null;
    let victimId = -1;
    for (const entry of read.order) {
      const live = h.builtAt === read.builtAt && h.victims.has(entry.victim);
      const cost = simulatedTake(this.k, entry.ids.length, live ? this.realEntries(entry.victim) : this.realEntries(), live);
      let ids: number[] | null = null;
      const take = this.single(this.kHint, 0, cost.wcu / cost.attempts, 'app', client, cost.attempts);
      take.onOk = () => {
        if (h.builtAt !== read.builtAt || !h.victims.has(entry.victim)) return;
        ids = h.victims.get(entry.victim)!;
        h.victims.delete(entry.victim);
      };
      this.hintTakes += cost.attempts;
      if (!(yield { op: 'all', reqs: [take], limit: 1 })) return null;
      if (ids === null) continue;
      got = ids;
      victimId = entry.victim;
      break;
    }
    if (got === null) return [];
    this.fruitfulSteals += this.k;
    if (!(yield* this.ensureFences(box, client))) return null;
    const victim = this.workers[victimId]!;
    const taken: number[] = [];
    for (const i of got as number[]) {
      const moved = yield { op: 'all', reqs: [this.stealWrite(i, box, client)], limit: 1 };
      if (moved && this.owner[i] === victim.id && !this.started[i] && this.state[i] === 2) {
        this.setOwner(i, thief.id);
        this.lastBeat[i] = this.now;
        this.wrote[i] = Number.NEGATIVE_INFINITY;
        const at = victim.backlog.indexOf(i);
        if (at >= 0) victim.backlog.splice(at, 1);
        // The victim finds it gone at its next heartbeat and deletes its message; the thief holds it without one.
        if (this.msgRef[i]) this.dropMessage(i);
        taken.push(i);
      }
      const read = yield { op: 'all', reqs: [this.single(F_ITEM * this.n + this.slotShard[this.slotStart[i]!]!, 1, 1, 'app', client)], limit: 1 };
      if (!moved || !read) {
        // What moved is the thief's in the ledger; its reconcile finds it.
        return null;
      }
    }
    return taken;
  }

  /**
   * Coordinator.failureScan: Running items whose heartbeat has not moved for
   * the failure timeout, at two looks in a row, go back to Pending (a fenced
   * transaction each on its shard's fence, a batch of 100 at a time, the
   * ledger's 16 in flight; at most 1,000 a scan) and on the queue. A worker
   * still holding one finds its ack refused.
   */
  private *failureScan(box: Sandbox, client: Client): Proc {
    const timeout = this.o.failureTimeoutSeconds * 1000;
    const stale: number[] = [];
    for (const w of this.workers) {
      for (const i of w.owned) {
        const silent = this.now - this.lastBeat[i]! >= timeout;
        if (silent && this.staleSeen[i] && stale.length * this.k < 1000) stale.push(i);
        this.staleSeen[i] = silent ? 1 : 0;
      }
    }
    if (stale.length && !(yield* this.ensureFences(box, client))) return;
    const batch = Math.max(1, Math.floor(100 / this.k));
    for (let j = 0; j < stale.length; j += batch) {
      const back: number[] = [];
      const repends = stale.slice(j, j + batch).map((i) => {
        // repend: the item ×2, its index entry RUNNING → PENDING (delete + put) ×2, its shard fence's ConditionCheck.
        const r = this.fenced(this.itemMove(i, { item: 2, pending: 2, running: 2 }, client, 'conflict'), i, box);
        r.onOk = () => {
          if (this.state[i] !== 2 || this.now - this.lastBeat[i]! < timeout) return;
          // A worker that still has it waiting drops it at its next heartbeat; one running it finds its ack refused.
          const holder = this.heldBy[i]! >= 0 ? this.workers[this.heldBy[i]!] : undefined;
          const waiting = holder ? holder.backlog.indexOf(i) : -1;
          if (holder && waiting >= 0) {
            holder.backlog.splice(waiting, 1);
            this.heldBy[i] = -1;
          }
          this.state[i] = 1;
          this.setOwner(i, -1);
          this.started[i] = 0;
          this.staleSeen[i] = 0;
          this.sentRecorded[i] = 0;
          this.moveCounts(i, this.runningCnt, this.pendingCnt);
          this.moveCounts(i, null, this.unsentCnt);
          back.push(i);
          this.repended += this.k;
        };
        return r;
      });
      const ok = yield { op: 'all', reqs: repends, limit: 16 };
      // What landed goes on the queue even when the batch failed (the next scan's resend would send it).
      if (back.length) yield* this.dispatch(back, client, 16);
      if (!ok) break;
    }
  }

  /** The schedule's scan-all: open runs (one probe of every PENDING and RUNNING key), then this run's failure scan and unsent re-send. */
  private *scan(): Proc {
    const inv = this.coordinatorStart();
    if (inv === null) return;
    const client = this.coordinatorClient;
    yield { op: 'sleep', ms: this.o.latencyMs.lambda };
    yield { op: 'all', reqs: [this.single(this.kRuns, 1, 0.5, 'sdk', client)], limit: 1 };
    const probes: Req[] = [];
    for (let s = 0; s < this.n; s++)
      probes.push(this.single(F_PENDING * this.n + s, 1, 0.5, 'app', client), this.single(F_RUNNING * this.n + s, 1, 0.5, 'app', client));
    yield { op: 'all', reqs: probes, limit: 16 };
    const lead = yield* this.campaign(inv.box, client);
    // ledger.running: the entries, then every running item (their heartbeats are not in the index).
    const runningItems: number[] = [];
    for (let i = 0; i < this.simItems; i++) if (this.state[i] === 2) runningItems.push(i);
    if (lead && (yield* this.readRunning(client, 16, 1)) && (yield { op: 'all', reqs: this.readItems(runningItems, client), limit: 16 }))
      yield* this.failureScan(inv.box, client);
    // Unsent items (stored, message not yet recorded): at most 1,000 a key.
    const unsent: Req[] = [];
    for (let s = 0; s < this.n; s++) unsent.push(...this.queryPages(F_PENDING * this.n + s, Math.min(1000, this.unsentCnt[s]! / this.k), client));
    yield { op: 'all', reqs: unsent, limit: 16 };
    yield { op: 'all', reqs: [this.single(this.kRunRecord, 1, 1, 'sdk', client)], limit: 1 };
    this.coordinatorEnd(inv);
  }

  // ------------------------------------------------------------ results

  private familyName(key: number): string {
    const sharded = this.o.shards !== null;
    if (key === this.kRunRecord) return sharded ? 'RUN#*' : 'RUN#*';
    if (key === this.kLease) return 'LEASE#*';
    if (key === this.kRuns) return 'gsi1:RUNS';
    if (key === this.kHint) return 'STEAL#*';
    if (key === this.kMarker) return 'FENCE#*';
    if (key >= this.kFence0) return 'FENCE#*#*';
    const f = Math.floor(key / this.n);
    const suffix = sharded ? '#*#*' : '#*';
    return f === F_ITEM ? `RUN${suffix}` : f === F_PENDING ? `gsi1:PENDING${suffix}` : `gsi1:RUNNING${suffix}`;
  }

  private familyOf(key: number): Family {
    if (key === this.kLease) return 'lease';
    if (key === this.kRuns) return 'runs';
    if (key === this.kHint) return 'hint';
    if (key === this.kMarker || key >= this.kFence0) return 'fence';
    if (key === this.kRunRecord && this.o.shards !== null) return 'runRecord';
    const f = Math.floor(key / this.n);
    return f === F_ITEM ? 'item' : f === F_PENDING ? 'pending' : 'running';
  }

  private unfinished(): Record<string, number> {
    const out: Record<string, number> = {};
    const held = new Set(this.workers.flatMap((w) => [...w.backlog, ...w.executing, ...w.outcomes]));
    const orphans = new Set(this.workers.flatMap((w) => [...w.owned].filter((i) => this.heldBy[i] !== w.id)));
    for (let i = 0; i < this.simItems; i++) {
      if (this.state[i] === 3) continue;
      const where =
        this.state[i] === 0
          ? this.stored[i]
            ? 'stored, no message'
            : 'not stored'
          : this.state[i] === 1
            ? this.msgInFlight[i]
              ? 'pending, message in flight'
              : this.hasMsg[i]
                ? 'pending, message queued'
                : 'pending, no message'
            : held.has(i)
              ? `running, held${this.started[i] ? ' (started)' : ''}`
              : orphans.has(i)
                ? `running, orphaned${this.started[i] ? ' (started)' : ''}`
                : `running, lost${this.started[i] ? ' (started)' : ''}`;
      out[where] = (out[where] ?? 0) + this.k;
    }
    return out;
  }

  private result(end: number): ModelResult {
    const seconds = end / 1000;
    const families: Family[] = ['item', 'pending', 'running', 'runRecord', 'lease', 'runs', 'hint', 'fence'];
    const peakPerKey = Object.fromEntries(families.map((f) => [f, { key: '', wcu: 0, rcu: 0 }])) as Record<Family, { key: string; wcu: number; rcu: number }>;
    let hottest = { family: '', wcu: -1 };
    for (let key = 0; key < this.keyCount; key++) {
      const f = this.familyOf(key);
      const p = peakPerKey[f];
      // Named by its most written key (the fence family has the marker and the shard fences).
      if (p.key === '' || this.peak[0][key]! > p.wcu) p.key = this.familyName(key);
      p.wcu = Math.max(p.wcu, this.peak[0][key]!);
      p.rcu = Math.max(p.rcu, this.peak[1][key]!);
      if (this.peak[0][key]! > hottest.wcu) hottest = { family: this.familyName(key), wcu: this.peak[0][key]! };
    }
    const perSecond = 1000 / this.o.limits.windowMs;
    return {
      seconds,
      itemsPerSecond: seconds > 0 ? (this.doneItems * this.k) / seconds : 0,
      workStartedSeconds: this.workStartedAt / 1000,
      peakPerKey,
      hottest,
      throttledByFamily: Object.fromEntries([...this.refusedByFamily].sort((a, b) => b[1] - a[1])),
      throttledRequests: this.refusedRequests,
      tableThrottled: this.tableRefused,
      exhausted: this.exhaustedRequests,
      exhaustedByFamily: Object.fromEntries(this.exhaustedBy),
      failedSteps: this.failedSteps,
      throttledRounds: this.throttledRounds,
      enqueueRetries: this.enqueueRetries,
      enqueueLongestSeconds: this.enqueueLongestMs / 1000,
      repended: this.repended,
      requests: { dynamodb: this.ddbRequests, sqs: this.sqsRequests },
      units: { wcu: this.wcu, indexWcu: this.indexWcu, rcu: this.rcu },
      peakTable: { wcu: this.tablePeak[0]! * perSecond, indexWcu: this.tablePeak[2]! * perSecond, rcu: (this.tablePeak[1]! + this.tablePeak[3]!) * perSecond },
      sqsInFlightPeak: this.inFlightPeak,
      sqsOverLimit: this.sqsOverLimit,
      runRecordReads: this.runRecordReads,
      lambda: {
        invocations: this.lambdaInvocations,
        concurrencyPeak: this.lambdaConcurrencyPeak,
        throttled: this.lambdaThrottled,
        gbSeconds: this.lambdaGbSeconds,
        steals: this.steals,
        itemsStolen: this.itemsStolen,
        hintRebuilds: this.hintRebuilds,
        hintClaims: this.hintClaims,
        hintTakes: this.hintTakes,
        fruitfulSteals: this.fruitfulSteals,
        leaseWrites: this.leaseWrites,
        leaseRenewals: this.leaseRenewals,
        fenceConflicts: this.fenceConflicts,
      },
      weight: this.k,
      unfinished: this.unfinished(),
      timeline: this.timeline,
    };
  }
}

// ---------------------------------------------------------------------------
// The two scales: the benchmark's run, and a deployment's
// ---------------------------------------------------------------------------

/** The benchmark's loopback round trip (DynamoDB Local, fauxqs), before the machine's own queueing. Assumed, not measured. */
export const BENCH_LATENCY_MS = { dynamodb: 1, sqs: 1, lambda: 0 } as const;

export interface BenchParams {
  readonly items: number;
  readonly workers: number;
  readonly shards: number | null;
  /** false: the simulator meters but never refuses. */
  readonly limited: boolean;
  readonly wcu: number;
  readonly rcu: number;
  readonly windowMs: number;
  readonly machineRequestsPerSecond: number;
  readonly seed: number;
  /** The mock backend's time per item (default 0). */
  readonly itemMs?: number;
  /** The last `count` workers' backend takes this long an item instead (a mixed fleet). */
  readonly slowWorkers?: { readonly count: number; readonly itemMs: number };
  /** The steal comparison's run: its workers ask an in-process Coordinator for work (default: no coordinator). */
  readonly steals?: boolean;
}

/** The lease timings of the benchmark's in-process coordinator (the controller defaults): its elector renews every renewIntervalMs. */
export const BENCH_COORDINATOR_LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 } as const;

/** test/bench/scale.ts's run as the model sees it: its producer, its workers' options, one shared SDK client; no coordinator, or (`steals`) its in-process one. */
export function benchModelInput(p: BenchParams): ModelInput {
  const none = 1e12;
  return {
    items: p.items,
    workers: p.workers,
    shards: p.shards,
    itemKb: 1,
    itemMs: p.itemMs ?? 0,
    ...(p.slowWorkers ? { slowWorkers: p.slowWorkers } : {}),
    limits: p.limited ? { partitionWcu: p.wcu, partitionRcu: p.rcu, windowMs: p.windowMs } : { partitionWcu: none, partitionRcu: none, windowMs: p.windowMs },
    tableQuota: null,
    machineRequestsPerSecond: p.machineRequestsPerSecond,
    latencyMs: BENCH_LATENCY_MS,
    // The bench's Worker options (receiveBatch 10, maxChunk 10, waitSeconds 0) and DynamoLedgerStore concurrency 8.
    worker: {
      receiveBatch: 10,
      concurrency: 8,
      maxChunk: 10,
      chunkBudgetMs: 100,
      heartbeatMs: 5_000,
      heartbeatPhase: 'aligned',
      visibilitySeconds: 30,
      waitSeconds: 0,
      coordinator: p.steals ?? false,
      clients: 'shared',
    },
    queueVisibilitySeconds: 60,
    producer: { kind: 'phased', concurrency: 8 },
    scanEverySeconds: null,
    failureTimeoutSeconds: 30,
    lambdaMemoryMb: 512,
    lambdaConcurrencyLimit: Number.POSITIVE_INFINITY,
    sqsInFlightLimit: Number.POSITIVE_INFINITY,
    weight: 1,
    seed: p.seed,
    // The steal comparison's Coordinator, opened in the bench's process: it answers asks and runs no scan.
    ...(p.steals ? { coordinatorProcess: { renewEveryMs: BENCH_COORDINATOR_LEASE.renewIntervalMs } } : {}),
  };
}

/** What a deployment sets of the model's input as it is (the rest is the stack's fixed behaviour, below). */
type DeploymentPassThrough =
  | 'items'
  | 'workers'
  | 'itemKb'
  | 'tableQuota'
  | 'latencyMs'
  | 'lambdaMemoryMb'
  | 'lambdaConcurrencyLimit'
  | 'sqsInFlightLimit'
  | 'weight'
  | 'seed'
  | 'stopAfterSeconds';
export interface DeploymentParams extends Pick<ModelInput, DeploymentPassThrough> {
  readonly rate: number;
  readonly shards: number;
  readonly itemSeconds: number;
  readonly heartbeatSeconds: number;
  readonly apiRequestItems: number;
}

/** A deployment: AWS's per-partition limits, the workers' defaults (infra/worker-fleet.ts runs `rollout worker`), the coordinator Lambda, the API producing at the rate. */
export function deploymentModelInput(p: DeploymentParams): ModelInput {
  return {
    items: p.items,
    workers: p.workers,
    shards: p.shards,
    itemKb: p.itemKb,
    itemMs: p.itemSeconds * 1000,
    limits: { partitionWcu: PARTITION_WCU, partitionRcu: PARTITION_RCU, windowMs: 1_000 },
    tableQuota: p.tableQuota,
    machineRequestsPerSecond: Number.POSITIVE_INFINITY,
    latencyMs: p.latencyMs,
    worker: {
      receiveBatch: 10,
      concurrency: 16,
      maxChunk: 64,
      chunkBudgetMs: 100,
      heartbeatMs: p.heartbeatSeconds * 1000,
      heartbeatPhase: 'spread',
      visibilitySeconds: 30,
      waitSeconds: 20,
      coordinator: true,
      clients: 'per-worker',
    },
    queueVisibilitySeconds: 60,
    producer: { kind: 'streaming', itemsPerSecond: p.rate, requestItems: p.apiRequestItems, concurrency: 16 },
    scanEverySeconds: 60,
    // The coordinator Lambda's failure timeout is its lease TTL (functions/runtime.ts ROLLOUT_LEASE_TTL_MS, 30 s).
    failureTimeoutSeconds: 30,
    lambdaMemoryMb: p.lambdaMemoryMb,
    lambdaConcurrencyLimit: p.lambdaConcurrencyLimit,
    sqsInFlightLimit: p.sqsInFlightLimit,
    weight: p.weight,
    seed: p.seed,
    ...(p.stopAfterSeconds === undefined ? {} : { stopAfterSeconds: p.stopAfterSeconds }),
  };
}

/** The median run (by items/s) of the same input over `seeds`. */
export function medianRun(make: (seed: number) => ModelInput, seeds: readonly number[]): ModelResult {
  const runs = seeds.map((seed) => simulate(make(seed))).sort((a, b) => a.itemsPerSecond - b.itemsPerSecond);
  return runs[Math.floor((runs.length - 1) / 2)]!;
}

/**
 * The machine ceiling (requests/s) at which the model's median run reaches
 * `measuredItemsPerSecond`: bisection in log space (the rate grows with the
 * ceiling; seeds fixed, so the search is deterministic).
 */
export function calibrateMachine(
  measuredItemsPerSecond: number,
  make: (machineRequestsPerSecond: number, seed: number) => ModelInput,
  seeds: readonly number[],
): number {
  let lo = Math.log(10);
  let hi = Math.log(1e7);
  for (let i = 0; i < 40; i++) {
    const mid = (lo + hi) / 2;
    const r = medianRun((seed) => make(Math.exp(mid), seed), seeds);
    if (r.itemsPerSecond < measuredItemsPerSecond) lo = mid;
    else hi = mid;
  }
  return Math.exp((lo + hi) / 2);
}

/** What a run's counted requests cost at list prices (infra/cost.ts PRICES): DynamoDB units consumed, SQS requests, Lambda. EC2 is not priced there. */
export function modelCost(r: ModelResult): { usd: number; lines: Record<string, number> } {
  const lines = {
    dynamodb_writes: (r.units.wcu + r.units.indexWcu) * PRICES.dynamoWrite.usd,
    dynamodb_reads: r.units.rcu * PRICES.dynamoRead.usd,
    sqs: r.requests.sqs * PRICES.sqsRequest.usd,
    lambda: r.lambda.invocations * PRICES.lambdaRequest.usd + r.lambda.gbSeconds * PRICES.lambdaArmGbSecond.usd,
  };
  return { usd: Object.values(lines).reduce((a, b) => a + b, 0), lines };
}
