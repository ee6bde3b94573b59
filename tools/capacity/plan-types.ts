/** What the capacity plan takes (PlanInput) and what it answers (CapacityPlan): per path, per key, per service. */
import { DEFAULT_KEY_SHARE } from '../../shared/ledger/capacity.js';

export interface PlanInput {
  readonly items: number;
  /** Target items/s. */
  readonly rate: number;
  /** Workers deployed; default: as many as the rate needs. */
  readonly workers?: number;
  /** Size of an item as stored (payload, result, bookkeeping), KB. */
  readonly itemKb: number;
  /** How long the backend takes per item, s. */
  readonly itemSeconds: number;
  /** Worker heartbeat interval, s (worker `--heartbeat-ms`, default 5 s). */
  readonly heartbeatSeconds: number;
  /** Share of a partition's limit a key may reach. */
  readonly share: number;
}

export const PLAN_DEFAULTS: Omit<PlanInput, 'items' | 'rate'> = { itemKb: 1, itemSeconds: 1, heartbeatSeconds: 5, share: DEFAULT_KEY_SHARE };

/** One path of the ledger and what one pass of it costs. */
export interface PathRow {
  readonly path: string;
  /** How often: per item, per idle worker poll, per scan… */
  readonly per: string;
  readonly dynamodbRequests: number;
  /** Write units on the item's partition (or the key named), index write units, read units. */
  readonly wcu: number;
  readonly indexWcu: number;
  readonly rcu: number;
  readonly sqsRequests: number;
  readonly lambdaInvocations: number;
  readonly keys: string;
}

export interface Check {
  readonly what: string;
  readonly value: number;
  readonly limit: number;
  readonly ok: boolean;
  readonly note: string;
}

export interface CapacityPlan {
  readonly input: PlanInput;
  /** Derived timings: per item on one worker, held (claim to ack), heartbeats per item. */
  readonly timing: {
    readonly workerSecondsPerItem: number;
    readonly heldSeconds: number;
    readonly heartbeatsPerItem: number;
    readonly chunk: number;
    readonly deletesPerItem: number;
  };
  readonly paths: readonly PathRow[];
  readonly perItem: {
    readonly itemWcu: number;
    readonly pendingWcu: number;
    readonly runningWcu: number;
    readonly rcu: number;
    readonly sqsRequests: number;
    readonly lambdaInvocations: number;
  };
  readonly shards: { readonly needed: number; readonly apiDefault: number; readonly max: number; readonly fits: boolean; readonly perKey: readonly Check[] };
  readonly table: readonly Check[];
  readonly sqs: { readonly requestsPerSecond: number; readonly inFlight: number; readonly check: Check };
  readonly lambda: {
    readonly steady: { readonly invocationsPerSecond: number; readonly concurrency: number };
    readonly tail: { readonly invocationsPerSecond: number; readonly concurrency: number };
    readonly checks: readonly Check[];
  };
  readonly workers: { readonly needed: number; readonly deployed: number; readonly achievableRate: number; readonly instances: number };
  /** The run's duration at the achievable rate. */
  readonly runSeconds: number;
  /** Idle fleet and tail: what idle workers' asks cost (the steal hint, its rebuilds, the lease), first idle minute and settled. */
  readonly idle: IdleFleet;
  readonly cost: {
    readonly perItemUsd: number;
    readonly perMillionUsd: number;
    readonly perHourUsd: number;
    readonly runUsd: number;
    readonly storageUsdMonth: number;
    readonly lines: readonly { readonly what: string; readonly perMillionUsd: number; readonly basis: string }[];
    readonly unpriced: readonly string[];
  };
  readonly limits: readonly string[];
  readonly warnings: readonly string[];
  readonly beforeRun: readonly string[];
}

export interface IdleFleet {
  /** What reading the running set's entries costs (a hint rebuild, a reconcile). */
  readonly runningSetRcu: number;
  /** Reads on each RUNNING key: the hint's rebuilds only. */
  readonly perKeyRcuPerSecond: number;
  readonly tableRcuPerSecond: number;
  readonly settledTableRcuPerSecond: number;
  /** The lease item's writes: renewals only (none per ask), at most two per sandbox per half TTL. */
  readonly leaseWcuPerSecond: number;
  readonly emptyTableRcuPerSecond: number;
  readonly emptySettledTableRcuPerSecond: number;
  readonly hint: {
    readonly bytes: number;
    readonly readRru: number;
    readonly writeWcu: number;
    readonly rebuildsPerSecond: number;
    /** The running set's entries and the candidates' items a rebuild reads. */
    readonly rebuildRcu: number;
    readonly claimsPerRebuild: number;
    /** Asks that read the same fresh hint, all trying its busiest entry first. */
    readonly herd: number;
    /** Take attempts (won or lost) and the WCU they cost, per rebuild; entries won. */
    readonly takesPerRebuild: number;
    readonly takeWcuPerRebuild: number;
    readonly takesWonPerRebuild: number;
    readonly wcuPerSecond: number;
    /** The same were every entry MAX_STEAL_BATCH ids long (≈ 8.4 KB full, whatever the shape). */
    readonly wcuPerSecondAtLargest: number;
    /** At most STEAL_HINT_VICTIMS per rebuild. */
    readonly fruitfulStealsPerSecond: number;
    readonly itemsStolenPerSecond: number;
  };
  /** A shard fence's ConditionChecks from the steal path (its shard's share of the items moved). */
  readonly fenceWcuPerSecond: number;
  readonly hottestStealItem: { readonly key: string; readonly wcuPerSecond: number };
  /** The same were every entry MAX_STEAL_BATCH ids long. */
  readonly hottestStealItemAtLargest: { readonly key: string; readonly wcuPerSecond: number };
  readonly checks: readonly Check[];
}

export const check = (what: string, value: number, limit: number, note: string): Check => ({ what, value, limit, ok: value <= limit, note });
