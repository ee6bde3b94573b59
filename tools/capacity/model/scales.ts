/** The model's two scales: the benchmark's run (test/bench/scale.ts) and a deployment's; the median of seeded runs, the machine's calibration, the cost of a run. */
import { PARTITION_RCU, PARTITION_WCU } from '../../../shared/ledger/capacity.js';
import { PRICES } from '../../cost/prices.js';
import { simulate } from './simulation.js';
import type { ModelInput, ModelResult } from './types.js';

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
    // The coordinator Lambda's failure timeout is its lease TTL (shared/runtimes/lambda-env.ts ROLLOUT_LEASE_TTL_MS, 30 s).
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

/** What a run's counted requests cost at list prices (tools/cost/prices.ts PRICES): DynamoDB units consumed, SQS requests, Lambda. EC2 is not priced there. */
export function modelCost(r: ModelResult): { usd: number; lines: Record<string, number> } {
  const lines = {
    dynamodb_writes: (r.units.wcu + r.units.indexWcu) * PRICES.dynamoWrite.usd,
    dynamodb_reads: r.units.rcu * PRICES.dynamoRead.usd,
    sqs: r.requests.sqs * PRICES.sqsRequest.usd,
    lambda: r.lambda.invocations * PRICES.lambdaRequest.usd + r.lambda.gbSeconds * PRICES.lambdaArmGbSecond.usd,
  };
  return { usd: Object.values(lines).reduce((a, b) => a + b, 0), lines };
}
