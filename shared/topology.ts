import { REBALANCE_RECOMMENDATION, SPOT_INTERRUPTION } from './drain/sources.js';
import { CLOUDWATCH_ALARM_DETAIL_TYPE, CLOUDWATCH_SOURCE } from './rollout/inbound.js';

/**
 * One declaration of each function and what triggers it. The CDK stack
 * builds from this, and the local runtime wires its triggers from it
 * (shared/runtimes/node/triggers.ts: a rule is a route of the in-process bus
 * through the same pattern matcher, a schedule a timer, an invocation a call,
 * http the node's server); the tests' EventBridge stand-in reads the
 * synthesized rules. So the rule that deploys is the rule that runs.
 */

/** An EventBridge event pattern (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html). */
export type EventPattern = Readonly<Record<string, unknown>>;

export type Trigger =
  /** A rule on the stack's own bus (`rollout`) or the account's default bus (AWS service events). */
  | { readonly kind: 'rule'; readonly bus: 'rollout' | 'default'; readonly pattern: EventPattern }
  /** An EventBridge schedule; `input` is the event the function receives. */
  | { readonly kind: 'schedule'; readonly everyMinutes: number; readonly input?: Readonly<Record<string, unknown>> }
  /** Invoked directly (Lambda Invoke by workers). */
  | { readonly kind: 'invoke' }
  /** The HTTP API (API Gateway, IAM authorization): every route. */
  | { readonly kind: 'http' };

export interface FunctionSpec {
  /** Source file under functions/, exporting `handler`. */
  readonly entry: string;
  readonly description: string;
  readonly triggers: readonly Trigger[];
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** Why: see each function. Undefined = the account's unreserved pool. */
  readonly reservedConcurrency?: number;
  /**
   * X-Ray: `active` samples every invocation; `passthrough` traces only what
   * arrives traced. The functions a schedule invokes every minute pass
   * through: active, they would record some 43,000 traces a month each while
   * nothing happens.
   */
  readonly tracing: 'active' | 'passthrough';
  /** What it may touch. */
  readonly grants: readonly ('store:read' | 'store:write' | 'bus:put' | 'queue:send' | 'cloudwatch:read' | 'targets:actuate')[];
  /**
   * Which families of the store's items (DynamoDB: the partition keys, held
   * to them by `dynamodb:LeadingKeys`): a function that only promotes cannot
   * read or write a run's items, and the reverse.
   */
  readonly keys: readonly KeyFamily[];
  /**
   * On Aurora, the database role it logs in as with IAM tokens
   * (shared/adapters/postgres/roles.ts says what each may do); none: it
   * never opens the database there, and gets no access to it.
   */
  readonly databaseRole?: string;
}

/** The store's items by what they are: the promotion lease, the run leases, rollouts and their signals, runs and their items, the worker registry. */
export type KeyFamily = 'promotionLease' | 'runLeases' | 'rollouts' | 'runs' | 'registry';

/** What the source of a rollout signal on the bus starts with (`rollout.cli`, `rollout.api`, `rollout.<your pipeline>`). */
export const SIGNAL_SOURCE_PREFIX = 'rollout.';

/** Rollout signals sent to the bus by users and integrations (detail-type = the inbound event type). */
export const ROLLOUT_SIGNAL_TYPES = ['rollout.created', 'rollout.metrics_reported', 'rollout.alarm_changed', 'rollout.command'] as const;

/**
 * The BatchPromoter's cadence. Lambda runs it as ticks within a once-a-minute
 * invocation (a schedule cannot fire every 10 s); a local node runs the loop.
 */
export const BATCH_TICK_SECONDS = 10;

export const FUNCTIONS = {
  streamingPromoter: {
    entry: 'functions/streaming-promoter.ts',
    description: 'Stores a rollout signal or an alarm state change and, when this stack leads, evaluates the rollout at once',
    triggers: [
      // Signals only from our senders' sources (rollout.cli, rollout.api, your pipeline's rollout.<name>): never our own ai.rollout telemetry.
      { kind: 'rule', bus: 'rollout', pattern: { source: [{ prefix: SIGNAL_SOURCE_PREFIX }], 'detail-type': [...ROLLOUT_SIGNAL_TYPES] } },
      // CloudWatch puts every alarm's state changes on the account's default bus: a cloudwatchAlarm gate breached is acted on within one delivery.
      { kind: 'rule', bus: 'default', pattern: { source: [CLOUDWATCH_SOURCE], 'detail-type': [CLOUDWATCH_ALARM_DETAIL_TYPE] } },
    ],
    // One evaluation is a few store round trips; 30 s covers a slow store with retries.
    timeoutSeconds: 30,
    memoryMb: 512,
    tracing: 'active',
    // Each transition it commits is carried out to the rollout's targets at once.
    grants: ['store:read', 'store:write', 'bus:put', 'targets:actuate'],
    keys: ['promotionLease', 'rollouts'],
    databaseRole: 'rollout_promoter',
  },
  batchPromoter: {
    entry: 'functions/batch-promoter.ts',
    description: 'Ticks every 10 s within a once-a-minute invocation: reads due gates, promotes what is due, catches up on dropped events',
    triggers: [{ kind: 'schedule', everyMinutes: 1 }],
    // Ticks through one minute and ends before the next invocation; concurrency 1 so ticks never overlap.
    // Mostly waiting between ticks, so memory (and CPU, which scales with it) is kept small; see docs/operating/capacity-and-cost.md#monthly-cost.
    timeoutSeconds: 70,
    memoryMb: 256,
    reservedConcurrency: 1,
    tracing: 'passthrough',
    // Provider gates are read on its tick (and by the API's gate test, which has the same grant).
    grants: ['store:read', 'store:write', 'bus:put', 'cloudwatch:read', 'targets:actuate'],
    keys: ['promotionLease', 'rollouts'],
    // It alone deletes ended rollouts past their retention.
    databaseRole: 'rollout_batch_promoter',
  },
  coordinator: {
    entry: 'functions/coordinator.ts',
    description: 'Coordinator of work runs: steals for idle workers (invoked), failure scan of open runs (scheduled)',
    // The schedule's scan drains the work DLQ first (dead letters' items failed under each run's lease): no function of its own.
    triggers: [{ kind: 'invoke' }, { kind: 'schedule', everyMinutes: 1, input: { action: 'scan-all' } }],
    timeoutSeconds: 60,
    memoryMb: 512,
    tracing: 'passthrough',
    grants: ['store:read', 'store:write', 'bus:put', 'queue:send'],
    keys: ['runLeases', 'runs', 'registry'],
    databaseRole: 'rollout_coordinator',
  },
  spotDrain: {
    entry: 'functions/spot-drain.ts',
    description: 'Asks the workers of an instance to drain on a Spot interruption or rebalance notice',
    triggers: [{ kind: 'rule', bus: 'default', pattern: { source: ['aws.ec2'], 'detail-type': [SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION] } }],
    // A notice gives 120 s; the handler only writes the registry, so a short timeout fails fast into the retry policy.
    timeoutSeconds: 15,
    memoryMb: 256,
    tracing: 'active',
    grants: ['store:read', 'store:write'],
    keys: ['registry'],
  },
  api: {
    entry: 'functions/api.ts',
    description: 'HTTP API: cluster status, rollouts (create, read, commands) and runs (create, status)',
    triggers: [{ kind: 'http' }],
    timeoutSeconds: 29,
    memoryMb: 512,
    tracing: 'active',
    // cloudwatch:read: `POST /rollouts/{id}/gates/{gate}/test` reads a gate as the batch promoter does.
    grants: ['store:read', 'store:write', 'bus:put', 'queue:send', 'cloudwatch:read', 'targets:actuate'],
    // Commands campaign for the promotion lease; a run's status reads its items' index.
    keys: ['promotionLease', 'rollouts', 'runs'],
    databaseRole: 'rollout_api',
  },
} as const satisfies Record<string, FunctionSpec>;

export type FunctionName = keyof typeof FUNCTIONS;

/**
 * Aurora only, and no trigger of the topology: migrates the schema and sets
 * up the functions' database roles as the master user (the one function that
 * reads the master secret), run at deploy before the functions are updated.
 * A node migrates its own store when it opens it.
 */
export const MIGRATOR = {
  entry: 'functions/migrator.ts',
  description: 'Migrates the Aurora schema and sets the database role of each function (run at deploy)',
  triggers: [],
  // A paused cluster takes about 15 s to resume (longer after a day); a migration takes seconds.
  timeoutSeconds: 120,
  memoryMb: 256,
  tracing: 'passthrough',
  grants: [],
  keys: [],
} as const satisfies FunctionSpec;

/** What is bundled and deployed as a function: the topology's and the migrator. */
export type BundleName = FunctionName | 'migrator';
