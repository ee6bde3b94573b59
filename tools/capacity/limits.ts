/**
 * The AWS limits a work run meets (dated, each with its page) and the
 * assumptions the capacity plan makes where the code fixes nothing.
 */
import { PARTITION_RCU, PARTITION_WCU } from '../../shared/ledger/capacity.js';

// ---------------------------------------------------------------------------
// AWS limits (read 2026-11-24 through the docs search; each with its page)
// ---------------------------------------------------------------------------

export const LIMITS_READ_ON = '2026-11-24';

export interface Limit {
  readonly value: number;
  readonly unit: string;
  readonly adjustable: boolean | 'unknown';
  readonly source: string;
}

export const AWS_LIMITS = {
  partitionWcu: {
    value: PARTITION_WCU,
    unit: 'write units/s per partition (a key cannot spread over partitions; a GSI key throttles the table writes that write it)',
    adjustable: false,
    source:
      'docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html ("each individual partition is limited to 1,000 write units per second and 3,000 read units per second")',
  },
  partitionRcu: { value: PARTITION_RCU, unit: 'read units/s per partition', adjustable: false, source: 'same page' },
  tableOnDemandWcu: {
    value: 40_000,
    unit: 'write request units/s per on-demand table (the table-level quota; this plan applies it to the table and to its GSI each — the excerpts read do not say how an on-demand GSI counts)',
    adjustable: true,
    source:
      'docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html ("bounded by 40,000 table-level read and write throughput AWS service quota ... you can request an increase"); Limits.html (per table, on-demand: 40,000 RRU and 40,000 WRU); throttling-account-limit-exceeded-mitigation.html (AccountLimitExceeded throttling reason)',
  },
  tableOnDemandRcu: { value: 40_000, unit: 'read request units/s per on-demand table', adjustable: true, source: 'same pages' },
  warmNewTableWcu: {
    value: 4_000,
    unit: 'writes/s a new on-demand table sustains at once (warm throughput); it scales past that on its own only up to twice its previous peak within 30 minutes',
    adjustable: true,
    source:
      'docs.aws.amazon.com/amazondynamodb/latest/developerguide/pre-warming-on-demand-capacity-mode.html; warm-throughput.html (raise it with CreateTable/UpdateTable WarmThroughput, table and each GSI; pre-warming is billed)',
  },
  warmNewTableRcu: { value: 12_000, unit: 'reads/s a new on-demand table sustains at once', adjustable: true, source: 'same pages' },
  itemBytes: {
    value: 400 * 1024,
    unit: 'bytes per DynamoDB item (payload, result and bookkeeping together)',
    adjustable: false,
    source: 'Limits.html; shared/ledger/model.ts MAX_RESULT_BYTES says the same',
  },
  transactionActions: {
    value: 100,
    unit: 'actions per TransactWriteItems (aggregate at most 4 MB)',
    adjustable: false,
    source: 'docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html',
  },
  sqsInFlight: {
    value: 120_000,
    unit: 'in-flight messages per standard queue (received, not yet deleted); past it short polls get OverLimit, long polls return nothing',
    adjustable: true,
    source: 'docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html (increase by support request)',
  },
  sqsBatch: {
    value: 10,
    unit: 'messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch',
    adjustable: false,
    source: 'SQS API reference; shared/adapters/sqs/queue.ts batches by 10',
  },
  lambdaConcurrency: {
    value: 1_000,
    unit: 'concurrent executions per account and Region (every function together)',
    adjustable: true,
    source: 'serverlessland.com AWS Lambda Operator Guide, scaling-concurrency ("default concurrent limit of 1000 per Region ... a soft limit")',
  },
  lambdaScaling: {
    value: 1_000,
    unit: 'new execution environments per function every 10 s',
    adjustable: false,
    source: 'docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html',
  },
} as const satisfies Record<string, Limit>;

// ---------------------------------------------------------------------------
// Assumptions: what the code does not fix
// ---------------------------------------------------------------------------

export const PLAN_ASSUMPTIONS = {
  /** Messages a worker receives at once (worker `--batch`, default 10). */
  receiveBatch: 10,
  /** A chunk of started items lasts about this long (worker `--chunk-budget-ms`). */
  chunkBudgetMs: 100,
  /** Worker maxChunk default (worker.ts). */
  maxChunk: 64,
  /** Requests in flight per ledger call (DynamoLedgerStore default). */
  ledgerConcurrency: 16,
  /** Visibility a worker sets on a held message (worker `--visibility-seconds`, default 30). */
  visibilitySeconds: 30,
  /** DynamoDB answers in "single-digit milliseconds" (on-demand-capacity-mode.html); 5 ms a request is assumed. */
  dynamodbMs: 5,
  /** An SQS request from EC2 in the same Region (assumed; not measured here). */
  sqsMs: 10,
  /** A warm Lambda Invoke's round trip besides the handler's own requests (assumed). */
  lambdaMs: 30,
  /** Items per enqueue request: the API's maximum (MAX_RUN_ITEMS in shared/api/handler.ts). */
  apiRequestItems: 10_000,
  /** The coordinator's scan-all schedule (shared/topology.ts: every minute). */
  scanEverySeconds: 60,
  /** One worker per instance: the fleet runs `rollout worker` as one systemd service (infra/worker-fleet.ts, c7g.large Spot). */
  workersPerInstance: 1,
  /** Asks that read the steal hint this long before a rebuild claim or a take lands read the same hint: a herd (each pays its writes; one wins each). */
  hintHerdMs: 50,
} as const;
