/** What the model takes (ModelInput) and what it answers (ModelResult), and what a trace is told as a run goes. */

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
