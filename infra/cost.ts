/**
 * The stack's monthly cost, recomputed from its synthesized CloudFormation
 * template so that README's "Monthly cost" table cannot drift from what
 * deploys: it counts the resources the template holds (functions, schedules,
 * alarms, the dashboard, queues and their event source mappings, the table or
 * the Aurora cluster with its VPC) and the invocations they imply (a
 * `rate(1 minute)` schedule is 43,200 a month), and prices them at us-east-1
 * list prices. Free tiers are not subtracted.
 *
 * Two columns: idle (no rollout running, no work run) and busy (rollouts
 * running all month, `eventsPerMonth` rollout signals). What the template
 * cannot say — how long an invocation runs, how many DynamoDB units a tick
 * reads — is a named assumption in DEFAULT_ASSUMPTIONS, each with why.
 *
 *   npm run cost [-- --store dynamodb|aurora|both] [--dashboard] [--events N] [--markdown]
 *
 * Both stores by default, the DynamoDB one first.
 *
 * `estimateCost` is pure: the CLI at the end synthesizes the stack in-process.
 */
import { App } from 'aws-cdk-lib';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isEntryPoint } from './entry.js';
import { BATCH_TICK_SECONDS, FUNCTIONS, type FunctionName } from '../shared/topology.js';
import { METRICS, ROLLOUT_METRICS } from '../shared/api/figures.js';

// ---------------------------------------------------------------------------
// Prices
// ---------------------------------------------------------------------------

/** Every price below is a us-east-1 on-demand list price. */
export const PRICE_REGION = 'us-east-1';
/** When the prices below were read. A price is only as good as this date: re-read the pages and update both. */
export const PRICES_READ_ON = '2026-11-24';

export interface Price {
  /** US$ per one `unit`. */
  readonly usd: number;
  readonly unit: string;
  /** Where it was read, and whether it was confirmed there. */
  readonly source: string;
}

/**
 * List prices, us-east-1, read 2026-11-24 (PRICES_READ_ON). The official
 * pricing pages' paid-tier tables are not all in the stored copies this was
 * read from; where a figure comes from a secondary page citing the official
 * one, or could not be confirmed at all, the source says so.
 */
export const PRICES = {
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    unit: 'GB-second, arm64 (first 7.5 billion GB-s a month)',
    source: 'aws.amazon.com/lambda/pricing; figure confirmed on secondary pages citing it (cloudchipr.com Lambda pricing guide, 2024)',
  },
  lambdaRequest: { usd: 0.2 / 1e6, unit: 'request', source: 'aws.amazon.com/lambda/pricing; US$ 0.20 per million, confirmed on secondary pages' },
  dynamoWrite: {
    usd: 0.625 / 1e6,
    unit: 'write request unit, on-demand',
    source: 'aws.amazon.com/dynamodb/pricing/on-demand after the November 2024 cut; US$ 0.625 per million confirmed on airbyte.com (2025)',
  },
  dynamoRead: { usd: 0.125 / 1e6, unit: 'read request unit, on-demand', source: 'same page; US$ 0.125 per million confirmed on airbyte.com (2025)' },
  dynamoStorage: {
    usd: 0.25,
    unit: 'GB-month of table storage (Standard class)',
    source: 'aws.amazon.com/dynamodb/pricing/on-demand; NOT confirmed in the copies read (the long-standing list price)',
  },
  dynamoPitr: {
    usd: 0.2,
    unit: 'GB-month of table size with continuous backups (PITR)',
    source: 'aws.amazon.com/dynamodb/pricing; US$ 0.20 confirmed on finops.com.py (secondary)',
  },
  kmsRequest: { usd: 0.03 / 1e4, unit: 'KMS request', source: 'aws.amazon.com/kms/pricing; US$ 0.03 per 10,000 confirmed on wring.co and cloudburn.io (2026)' },
  eventBridgeCustomEvent: {
    usd: 1 / 1e6,
    unit: 'custom event put on a bus (per 64 KB chunk)',
    source: 'aws.amazon.com/eventbridge/pricing (64 KB chunking confirmed there); US$ 1.00 per million confirmed on wring.co and factualminds.com (June 2026)',
  },
  eventBridgeArchiveGb: {
    usd: 0.1,
    unit: 'GB of events archived',
    source:
      'aws.amazon.com/eventbridge/pricing; US$ 0.10/GB on factualminds.com and wring.co, which disagree on whether it is per GB processed or per GB-month: counted here per GB processed, plus storage below',
  },
  eventBridgeArchiveStorage: {
    usd: 0.023,
    unit: 'GB-month of archived events',
    source: 'aws.amazon.com/eventbridge/pricing; NOT confirmed in the copies read',
  },
  sqsRequest: {
    usd: 0.4 / 1e6,
    unit: 'SQS standard request (per 64 KB chunk)',
    source: 'aws.amazon.com/sqs/pricing; US$ 0.40 per million confirmed on cloudburn.io (March 2026)',
  },
  alarmStandard: { usd: 0.1, unit: 'standard-resolution alarm metric-month', source: 'aws.amazon.com/cloudwatch/pricing; US$ 0.10 confirmed on c3x.dev' },
  alarmHighResolution: { usd: 0.3, unit: 'high-resolution (period < 60 s) alarm metric-month', source: 'same; US$ 0.30 confirmed on c3x.dev' },
  customMetric: {
    usd: 0.3,
    unit: 'custom metric-month (first 10,000), prorated by the hour it has data',
    source: 'aws.amazon.com/cloudwatch/pricing; US$ 0.30 confirmed on signoz.io (Feb 2026)',
  },
  dashboard: { usd: 3, unit: 'dashboard-month', source: 'aws.amazon.com/cloudwatch/pricing; US$ 3 confirmed on factualminds.com (June 2026)' },
  logsIngest: {
    usd: 0.5,
    unit: 'GB of log data ingested (standard class; bytes + 26 bytes per event)',
    source:
      'aws.amazon.com/cloudwatch/pricing; US$ 0.50/GB confirmed on factualminds.com and cloudburn.io (2026); the 26-byte overhead NOT confirmed in the copies read',
  },
  logsStorage: { usd: 0.03, unit: 'GB-month of logs stored (compressed)', source: 'aws.amazon.com/cloudwatch/pricing; NOT confirmed in the copies read' },
  getMetricData: {
    usd: 0.01 / 1000,
    unit: 'metric requested by GetMetricData',
    source: 'aws.amazon.com/cloudwatch/pricing (its free tier excludes GetMetricData, confirmed); US$ 0.01 per 1,000 NOT confirmed in the copies read',
  },
  cloudWatchApiRequest: {
    usd: 0.01 / 1000,
    unit: 'other CloudWatch API request (DescribeAlarms)',
    source: 'aws.amazon.com/cloudwatch/pricing; NOT confirmed in the copies read',
  },
  xrayTrace: { usd: 5 / 1e6, unit: 'trace recorded', source: 'aws.amazon.com/xray/pricing (US$ 0.000005 per trace, confirmed on the stored page)' },
  httpApiRequest: {
    usd: 1 / 1e6,
    unit: 'HTTP API request (first 300 million, per 512 KB)',
    source: 'aws.amazon.com/api-gateway/pricing; NOT confirmed in the copies read (README says US$ 1 per million)',
  },
  natGatewayHour: {
    usd: 0.045,
    unit: 'NAT gateway-hour',
    source: 'aws.amazon.com/vpc/pricing; US$ 0.045 confirmed on cloudburn.io (Feb 2026) and basavytix.com',
  },
  natGatewayGb: { usd: 0.045, unit: 'GB processed by a NAT gateway', source: 'same' },
  publicIpv4Hour: {
    usd: 0.005,
    unit: 'public IPv4 address-hour (an EIP, attached or not)',
    source: 'aws.amazon.com/vpc/pricing; US$ 0.005 confirmed on cloudburn.io (Feb 2026)',
  },
  interfaceEndpointHour: {
    usd: 0.01,
    unit: 'interface VPC endpoint-hour per AZ',
    source: 'aws.amazon.com/privatelink/pricing; US$ 7.20/AZ-month on egresscost.com (secondary)',
  },
  auroraAcuHour: {
    usd: 0.12,
    unit: 'Aurora Serverless v2 ACU-hour (Aurora Standard)',
    source: 'aws.amazon.com/rds/aurora/pricing; US$ 0.12 confirmed on c3x.dev, awsnegotiations.com and factualminds.com (2026)',
  },
  auroraStorage: { usd: 0.1, unit: 'GB-month of Aurora Standard storage', source: 'same; US$ 0.10 on awsnegotiations.com (May 2026)' },
  auroraIo: {
    usd: 0.2 / 1e6,
    unit: 'Aurora Standard I/O request',
    source: 'aws.amazon.com/rds/aurora/pricing; US$ 0.20 per million NOT confirmed in the copies read',
  },
  secret: { usd: 0.4, unit: 'secret-month', source: 'aws.amazon.com/secrets-manager/pricing; US$ 0.40 confirmed on hivebook.wiki (secondary)' },
  secretApiCall: { usd: 0.05 / 1e4, unit: 'Secrets Manager API call', source: 'same; US$ 0.05 per 10,000' },
} as const satisfies Record<string, Price>;

/** Free tiers, printed beside a line; never subtracted (the totals are list prices). */
const FREE_TIER = {
  lambda: '1M requests and 400,000 GB-s a month free',
  dynamo: '25 GB of storage free',
  sqs: '1M requests a month free',
  alarms: '10 alarm metrics free',
  metrics: '10 custom metrics free',
  dashboard: '3 dashboards (up to 50 metrics each) free',
  logs: '5 GB of ingestion, storage and scans free',
  xray: '100,000 traces recorded a month free',
  kms: '20,000 requests a month free',
  cloudwatchApi: '1M API requests free (GetMetricData excluded)',
} as const;

// ---------------------------------------------------------------------------
// Assumptions: what the template cannot say
// ---------------------------------------------------------------------------

export interface Assumptions {
  /** Busy column: rollout signals a month put on the rollout bus (`--events`). */
  readonly eventsPerMonth: number;
  /** A month is 30 days (43,200 minutes), as README counts; AWS's calculator uses 730 h, 1.4 % more. */
  readonly daysPerMonth: number;
  /** An idle BatchPromoter invocation: two small DynamoDB queries in parallel on a warm connection, plus the handler's own work. */
  readonly idleBatchInvocationMs: number;
  /** Any other idle scheduled invocation (coordinator scan-all): a short poll of the work DLQ, and one index query that finds no open run (on Aurora, a flag read instead). */
  readonly idleScheduledInvocationMs: number;
  /** One invocation of a function a rule invokes on events other than rollout signals (a Spot notice): a store write or two. */
  readonly eventInvocationMs: number;
  /** Sandboxes Lambda recycles even when invoked every minute; one cold start a function-hour is generous. */
  readonly coldStartsPerFunctionHour: number;
  /** The INIT phase of the bundled, minified handler (billed like the handler since August 2025; not confirmed in the copies read). */
  readonly initMs: number;
  /** One busy BatchPromoter tick's own work (reads, one campaign write, maybe an evaluation): only its last tick adds to the ~60 s. */
  readonly tickMs: number;
  /** One StreamingPromoter invocation: store the signal, load the rollout, evaluate (README's ~100 ms). */
  readonly signalInvocationMs: number;
  /** Busy: HTTP API requests a month (operators and CI reading status, creating rollouts). */
  readonly apiRequestsPerMonth: number;
  /** One API invocation. */
  readonly apiInvocationMs: number;
  /** Rollout events (`ai.rollout.*`) published per signal: only transitions publish (shared/rollout/transitions.ts), a stage promotes after many reports. */
  readonly promotionEventsPerSignal: number;
  /** Size of one event on the bus, for the archive. */
  readonly eventBytes: number;
  /** DynamoDB per signal without a transition: one conditional write of the stage's metrics, a consistent query of the rollout's partition, a lease read. */
  readonly wruPerSignal: number;
  readonly rruPerSignal: number;
  /** DynamoDB per transition: a fenced TransactWriteItems (2 WRU per item: the fence's ConditionCheck, the rollout, a stage, an outbox event), then the event marked published (index delete included). */
  readonly wruPerTransition: number;
  /** Transitions per signal (streaming or batch). */
  readonly transitionsPerSignal: number;
  /** DynamoDB per busy tick: one campaign write on the lease; reads of the outbox index, the RUNNING partition, one running rollout's partition, and hasWork's two queries. */
  readonly wruPerTick: number;
  readonly rruPerTick: number;
  /** Table size idle (leases, a few hundred finished rollouts and ledgers) and busy (gate readings kept 30 days, event history). */
  readonly tableGbIdle: number;
  readonly tableGbBusy: number;
  /** DynamoDB asks KMS for an AWS managed table key again about every 5 minutes per caller (function) it serves (not confirmed in the copies read). */
  readonly kmsRequestsPerCallerHour: number;
  /** Pollers an SQS event source keeps on an idle standard queue: "scales back to five concurrent batches, and can optimize to as few as 2" (Lambda developer guide, services-sqs-scaling). Five is the upper figure. */
  readonly sqsPollers: number;
  /** Each poller's long poll waits this long on an empty queue (SQS's maximum; the Lambda guide says "long polling" without the figure). */
  readonly sqsLongPollSeconds: number;
  /** START, END and REPORT lines of one invocation (text format), without the per-event overhead. */
  readonly platformLogBytes: number;
  readonly platformLogEvents: number;
  /** A busy invocation's own log line plus its EMF metrics blob. */
  readonly appLogBytesBusy: number;
  /** Busy: rollouts running at once (the BatchPromoter publishes each one's gauges a minute), and the provider gates of each one's active stage. */
  readonly rolloutsRunning: number;
  readonly providerGatesPerRollout: number;
  /** One EMF blob of those gauges (one dimension set: a rollout, a gate, a reading outcome). */
  readonly figureBlobBytes: number;
  /** Reading the running rollouts for their gauges, once a busy BatchPromoter invocation: the RUNNING partition, then each rollout's partition. */
  readonly rruPerRolloutRead: number;
  /** One HTTP API access log line. */
  readonly accessLogBytes: number;
  /** How far CloudWatch compresses stored logs (storage is billed compressed). */
  readonly logCompression: number;
  /** X-Ray's default sampling: the first request each second, then 5 % (quoted on awsnegotiations.com; not confirmed on an AWS page in the copies read). */
  readonly xrayReservoirPerSecond: number;
  readonly xrayFixedRate: number;
  /** Busy gate reads: one cloudwatchMetric gate at its default 60 s interval (gate-spec.ts) is one GetMetricData metric a minute. */
  readonly gateMetricsPerMinute: number;
  /** cloudwatchAlarm gates are read every tick (10 s): DescribeAlarms requests a minute; none by default. */
  readonly alarmGateReadsPerMinute: number;
  /** Aurora: average ACUs of each instance while busy (~0.4 signals/s at 1M a month). */
  readonly auroraBusyAcu: number;
  readonly auroraStorageGb: number;
  /** Aurora Standard I/O per signal (log writes of one small transaction, pages read past the buffer cache). */
  readonly auroraIosPerSignal: number;
  /** Bytes a signal sends through the NAT gateway (X-Ray segments, PutEvents of transitions); the store is inside the VPC. */
  readonly natBytesPerSignal: number;
  /**
   * Aurora with a 0 ACU minimum: an awake instance runs at 0.5 ACU at least (the lowest capacity above paused; NOT
   * confirmed in the copies read). Each wake costs the work that woke it plus the auto-pause delay at that floor.
   */
  readonly auroraAwakeMinAcu: number;
  readonly auroraWakeWorkMinutes: number;
  /** Wakes of an idle cluster a month: the probes' daily sweep (functions/activity.ts SWEEP_EVERY_MS: both probes in the same minute after 00:00 UTC), and the secret's rotation. */
  readonly auroraSweepsPerMonth: number;
  /** Raises of the activity flags a month, busy: at most one per sandbox of a writer (API, streaming promoter) every 5 minutes (RAISE_GRACE_MS / 2); two sandboxes. */
  readonly flagRaisesPerMonth: number;
  /** A new connection re-reads the database secret once it is 30 s old (functions/runtime.ts): at most this many reads a minute per busy function. */
  readonly secretReadsPerFunctionMinute: number;
  /** Rejected-traffic flow log records a month (scanners knocking on the NAT's address). */
  readonly flowLogGbPerMonth: number;
  /** PostgreSQL's own log exported to CloudWatch (checkpoint lines every 5 minutes on two instances). */
  readonly dbLogGbPerMonth: number;
}

export const DEFAULT_ASSUMPTIONS: Assumptions = {
  eventsPerMonth: 1_000_000,
  daysPerMonth: 30,
  idleBatchInvocationMs: 30,
  idleScheduledInvocationMs: 30,
  eventInvocationMs: 100,
  coldStartsPerFunctionHour: 1,
  initMs: 600,
  tickMs: 200,
  signalInvocationMs: 100,
  apiRequestsPerMonth: 10_000,
  apiInvocationMs: 100,
  promotionEventsPerSignal: 0.1,
  eventBytes: 1024,
  wruPerSignal: 1,
  rruPerSignal: 4,
  wruPerTransition: 10,
  transitionsPerSignal: 0.1,
  wruPerTick: 1,
  rruPerTick: 6,
  tableGbIdle: 0.1,
  tableGbBusy: 1,
  kmsRequestsPerCallerHour: 12,
  sqsPollers: 5,
  sqsLongPollSeconds: 20,
  platformLogBytes: 350,
  platformLogEvents: 3,
  appLogBytesBusy: 800,
  rolloutsRunning: 1,
  providerGatesPerRollout: 1,
  figureBlobBytes: 400,
  rruPerRolloutRead: 1,
  accessLogBytes: 250,
  logCompression: 0.15,
  xrayReservoirPerSecond: 1,
  xrayFixedRate: 0.05,
  gateMetricsPerMinute: 1,
  alarmGateReadsPerMinute: 0,
  auroraBusyAcu: 1,
  auroraStorageGb: 1,
  auroraIosPerSignal: 5,
  natBytesPerSignal: 2_000,
  auroraAwakeMinAcu: 0.5,
  auroraWakeWorkMinutes: 1,
  auroraSweepsPerMonth: 30,
  flagRaisesPerMonth: 2 * 8_640,
  secretReadsPerFunctionMinute: 2,
  flowLogGbPerMonth: 0.05,
  dbLogGbPerMonth: 0.01,
};

/**
 * Read units of one idle invocation, from the code rather than assumed: the
 * BatchPromoter's `hasWork` (shared/rollout/promoters.ts) is a consistent
 * Query with Limit 1 on the RUNNING partition (1 RRU) and a Query with Limit 1
 * on the gsi1 OUTBOX index (eventually consistent: 0.5 RRU); the
 * coordinator's scan-all (`openRuns`, ledger-store.ts) one gsi1 Query that
 * finds no run (0.5 RRU). No write, no metric.
 */
export const IDLE_READ_UNITS: Partial<Record<FunctionName, number>> = { batchPromoter: 1.5, coordinator: 0.5 };

/** On Aurora an idle probe reads its activity flag instead (functions/activity.ts): one strongly consistent GetItem of a small item, 1 RRU. */
export const FLAG_READ_UNITS = 1;

/**
 * The services the functions in the VPC call through the NAT gateway, and so
 * the interface endpoints a VPC without one would need (X-Ray and the
 * actuators' APIs aside); gate origins and targets outside AWS would stay
 * unreachable.
 */
export const ENDPOINT_SERVICES = ['SQS', 'EventBridge', 'Secrets Manager', 'CloudWatch'] as const;

/**
 * The custom metrics each function's code can publish (namespace Rollout,
 * dimension `service`; grep `addMetric` in functions/ and shared/): `busy`
 * have data every hour while rollouts run, `onEvent` only when what they
 * count happens (failures, work runs, Spot notices). An idle invocation
 * publishes none (functions/handler.ts `publishIfAny`). test/infra/cost.test.ts
 * checks this list against the code.
 */
export const METRICS_BY_SERVICE: Readonly<Record<string, { readonly busy: readonly string[]; readonly onEvent: readonly string[] }>> = {
  'streaming-promoter': {
    busy: ['EventsHandled', 'Transitions'],
    onEvent: [
      'NotLeader',
      'InvalidEvents',
      'Errors',
      'Throttled',
      'LeaseRenewalFailures',
      'TransactionConflicts',
      'TransactionRetries',
      'TransactionRetriesExhausted',
    ],
  },
  'batch-promoter': {
    busy: ['TickMs', 'Transitions'],
    onEvent: ['Errors', 'Throttled', 'LeaseRenewalFailures', 'TransactionConflicts', 'TransactionRetries', 'TransactionRetriesExhausted'],
  },
  coordinator: {
    busy: [],
    onEvent: [
      'NotCoordinator',
      'ItemsStolen',
      'ItemsRepended',
      'ItemsFailed',
      'ItemsResent',
      'RunsThrottled',
      'InvalidDeadLetters',
      'DeadLettersDropped',
      'Fenced',
      'RefusedRequests',
      'Errors',
      'Throttled',
    ],
  },
  'dead-letters': { busy: [], onEvent: ['InvalidDeadLetters', 'ItemsFailed', 'DeadLettersDropped', 'Errors', 'Throttled'] },
  'spot-drain': { busy: [], onEvent: ['DrainsRequested', 'DuplicateNotices', 'UnknownInstances', 'LateNotices', 'InvalidNotices', 'Errors', 'Throttled'] },
  api: { busy: ['Responses2xx'], onEvent: ['Responses4xx', 'Responses5xx', 'Throttled'] },
};

/** Counts of the whole stack, with no dimension (functions/figures.ts `StackCount`): only when what they count happens. */
export const STACK_METRICS: readonly string[] = ['LeasesLost', 'RolloutsNeedingAttention'];

/**
 * The gauges the BatchPromoter publishes for one running rollout while it
 * leads (functions/batch-promoter.ts; shared/api/figures.ts), and the EMF
 * blobs they take: those whose one dimension is the rollout share a blob;
 * each provider gate of the active stage adds its value and threshold (one
 * blob) and its readings by outcome (a blob each). Drift is never among them
 * (a drifted rollout is paused, and paused ones are not published).
 */
export function rolloutGauges(providerGates: number): { readonly metrics: number; readonly blobs: number } {
  const rolloutOnly = ROLLOUT_METRICS.filter((n) => METRICS[n].dimensions.join() === 'rollout').length;
  const outcomes = 3;
  return { metrics: rolloutOnly + providerGates * (2 + outcomes), blobs: 1 + providerGates * (1 + outcomes) };
}

// ---------------------------------------------------------------------------
// The estimate
// ---------------------------------------------------------------------------

export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}
export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
}

export interface LineItem {
  readonly what: string;
  /** US$ a month. */
  readonly idle: number;
  readonly busy: number;
  /** How the figures follow from the template and the assumptions. */
  readonly basis: string;
  readonly freeTier?: string;
}

export interface ScheduleCount {
  readonly rule: string;
  readonly expression: string;
  /** Logical ids of the functions it invokes. */
  readonly targets: readonly string[];
  readonly perMonth: number;
}

export interface CostEstimate {
  readonly store: 'dynamodb' | 'aurora';
  readonly lines: readonly LineItem[];
  readonly idle: number;
  readonly busy: number;
  /** Logical ids of the resources each line counted, by type: what a test compares with the template. */
  readonly counted: Readonly<Record<string, readonly string[]>>;
  readonly schedules: readonly ScheduleCount[];
  /** Invocations a month of every function, by logical id. */
  readonly invocations: Readonly<Record<string, { readonly idle: number; readonly busy: number }>>;
  /** Resource types in the template this estimate neither prices nor knows to be free: a new billable resource to add here. */
  readonly unpriced: readonly string[];
  readonly assumptions: Assumptions;
}

/** Resource types with no charge of their own (what they carry is priced on another line, or nothing). */
const NO_CHARGE_OF_THEIR_OWN: Readonly<Record<string, string>> = {
  'AWS::IAM::Role': 'free',
  'AWS::IAM::Policy': 'free',
  'AWS::Lambda::Permission': 'free',
  'AWS::Lambda::EventInvokeConfig': 'free',
  'AWS::SQS::Queue': 'billed by request: the SQS line',
  'AWS::SQS::QueuePolicy': 'free',
  // The alarm topic: a standing topic costs nothing; an alarm notification is US$ 0.50 per million publishes (plus the subscriber's own: e-mail, SMS), and alarms fire rarely.
  'AWS::SNS::Topic': 'free to keep; US$ 0.50 per million notifications',
  'AWS::SNS::TopicPolicy': 'free',
  'AWS::Events::EventBus': 'billed by event: the EventBridge line',
  'AWS::Events::EventBusPolicy': 'free',
  'AWS::Logs::LogGroup': 'billed by ingestion and storage: the logs line',
  'AWS::ApiGatewayV2::Api': 'billed by request: the HTTP API line',
  'AWS::ApiGatewayV2::Integration': 'free',
  'AWS::ApiGatewayV2::Route': 'free',
  'AWS::ApiGatewayV2::Stage': 'free (its access logs: the logs line)',
  'AWS::EC2::VPC': 'free',
  'AWS::EC2::Subnet': 'free',
  'AWS::EC2::RouteTable': 'free',
  'AWS::EC2::SubnetRouteTableAssociation': 'free',
  'AWS::EC2::Route': 'free',
  'AWS::EC2::InternetGateway': 'free',
  'AWS::EC2::VPCGatewayAttachment': 'free',
  'AWS::EC2::SecurityGroup': 'free',
  'AWS::EC2::SecurityGroupIngress': 'free',
  'AWS::EC2::SecurityGroupEgress': 'free',
  'AWS::EC2::FlowLog': 'billed as logs: the flow logs line',
  'AWS::RDS::DBSubnetGroup': 'free',
  'AWS::SecretsManager::SecretTargetAttachment': 'free',
  'AWS::SecretsManager::ResourcePolicy': 'free',
  'AWS::SecretsManager::RotationSchedule': 'its rotation function runs once a month: the secret line (and the Aurora line: it wakes the cluster)',
  'AWS::Serverless::Application': 'the rotation function of the secret (SAR): runs once a month',
  'Custom::LogRetention': 'runs at deploy only',
  'AWS::CDK::Metadata': 'free',
};

const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
const num = (v: unknown, fallback: number): number =>
  typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : fallback;

/** Minutes between two firings of `rate(…)`; null for a cron expression. */
export function rateMinutes(expression: string): number | null {
  const m = /^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2]!.replace(/s$/, '');
  return n * (unit === 'minute' ? 1 : unit === 'hour' ? 60 : 1440);
}

/** Traces X-Ray records of `perMonth` requests arriving evenly, under the default sampling rule. */
function sampledTraces(perMonth: number, monthSeconds: number, a: Assumptions): number {
  const perSecond = perMonth / monthSeconds;
  const traced = Math.min(perSecond, a.xrayReservoirPerSecond) + a.xrayFixedRate * Math.max(0, perSecond - a.xrayReservoirPerSecond);
  return traced * monthSeconds;
}

const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');

interface FnInfo {
  readonly id: string;
  /** Its topology.ts name, when the stack built it from there. */
  readonly role: FunctionName | null;
  readonly label: string;
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  readonly active: boolean;
  readonly store: string | null;
  /** Its IAM role's logical id. */
  readonly roleId: string | null;
  /** The activity flags table it uses (ROLLOUT_ACTIVITY_TABLE), by logical id: on Aurora, what keeps a schedule from waking the cluster. */
  readonly activityTable: string | null;
}

/**
 * The monthly cost of the stack `template` describes, idle and busy, as line
 * items and totals. Pure: no network, no clock.
 */
export function estimateCost(template: CfnTemplate, assumptions: Assumptions = DEFAULT_ASSUMPTIONS): CostEstimate {
  const a = assumptions;
  const monthHours = a.daysPerMonth * 24;
  const monthMinutes = monthHours * 60;
  const monthSeconds = monthMinutes * 60;
  const resources = Object.entries(template.Resources);
  const ofType = (type: string) => resources.filter(([, r]) => r.Type === type);
  const props = (r: CfnResource) => r.Properties ?? {};
  const counted: Record<string, string[]> = {};
  const count = (type: string, ids: readonly string[]) => (counted[type] = [...(counted[type] ?? []), ...ids]);
  const lines: LineItem[] = [];
  const line = (l: LineItem) => lines.push(l);
  const mentions = (r: CfnResource, id: string) => JSON.stringify(r.Properties ?? {}).includes(`"${id}"`);

  // Functions, by what topology.ts calls them (the service name the stack sets).
  const fns: FnInfo[] = ofType('AWS::Lambda::Function').map(([id, r]) => {
    const p = props(r);
    const env: Record<string, unknown> = (p.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
    const service = typeof env.POWERTOOLS_SERVICE_NAME === 'string' ? env.POWERTOOLS_SERVICE_NAME : null;
    const role = service && service in FUNCTIONS ? (service as FunctionName) : null;
    return {
      id,
      role,
      // Not one of topology.ts's: a CDK helper (log retention), named without its hash.
      label: role ? kebab(role) : id.replace(/[0-9a-fA-F]{8,}$/, ''),
      memoryMb: num(p.MemorySize, 128),
      timeoutSeconds: num(p.Timeout, 3),
      active: (p.TracingConfig as { Mode?: string } | undefined)?.Mode === 'Active',
      store: typeof env.ROLLOUT_STORE === 'string' ? env.ROLLOUT_STORE : null,
      roleId: (p.Role as { 'Fn::GetAtt'?: [string, string] } | undefined)?.['Fn::GetAtt']?.[0] ?? null,
      activityTable: (env.ROLLOUT_ACTIVITY_TABLE as { Ref?: string } | undefined)?.Ref ?? null,
    };
  });
  count(
    'AWS::Lambda::Function',
    fns.map((f) => f.id),
  );
  const aurora = ofType('AWS::RDS::DBCluster').length > 0;
  const store: CostEstimate['store'] = aurora ? 'aurora' : 'dynamodb';
  const onDynamo = fns.some((f) => f.store === 'dynamodb');

  // Schedules: rate(…) rules and the functions they invoke.
  const unpriced = new Set<string>();
  const schedules: ScheduleCount[] = [];
  for (const [id, r] of ofType('AWS::Events::Rule')) {
    const p = props(r);
    if (typeof p.ScheduleExpression !== 'string') continue;
    const minutes = rateMinutes(p.ScheduleExpression);
    if (minutes === null) {
      unpriced.add(`AWS::Events::Rule (${p.ScheduleExpression}: only rate() schedules are counted)`);
      continue;
    }
    const targets = fns.filter((f) => JSON.stringify(p.Targets ?? []).includes(`"${f.id}"`)).map((f) => f.id);
    schedules.push({ rule: id, expression: p.ScheduleExpression, targets, perMonth: monthMinutes / minutes });
  }
  const customBuses = ofType('AWS::Events::EventBus').map(([id]) => id);
  const busRules = ofType('AWS::Events::Rule').filter(([, r]) => typeof props(r).ScheduleExpression !== 'string');
  count('AWS::Events::Rule', [...schedules.map((s) => s.rule), ...busRules.map(([id]) => id)]);
  const onCustomBus = (r: CfnResource) => customBuses.some((b) => str(props(r).EventBusName).includes(`"${b}"`));
  const signalTargets = new Set(
    fns.filter((f) => busRules.some(([, r]) => onCustomBus(r) && JSON.stringify(props(r).Targets ?? []).includes(`"${f.id}"`))).map((f) => f.id),
  );
  const apiTargets = new Set(fns.filter((f) => ofType('AWS::ApiGatewayV2::Integration').some(([, r]) => mentions(r, f.id))).map((f) => f.id));

  // Invocations a month, and each function's compute.
  const invocations: Record<string, { idle: number; busy: number }> = {};
  const lambdaCost = (n: number, ms: number, memoryMb: number) =>
    n * ((ms / 1000) * (memoryMb / 1024) * PRICES.lambdaArmGbSecond.usd + PRICES.lambdaRequest.usd);
  const coldStarts = (memoryMb: number) => a.coldStartsPerFunctionHour * monthHours * (a.initMs / 1000) * (memoryMb / 1024) * PRICES.lambdaArmGbSecond.usd;
  /**
   * A busy BatchPromoter invocation ticks every BATCH_TICK_SECONDS while its remaining time covers a wait and a tick,
   * and only while the next tick starts before the schedule's next invocation (functions/batch-promoter.ts): ticks at
   * 0, 10, … — by the timeout, up to the last start t with timeout − t ≥ 2 intervals and one more; by the schedule,
   * up to the last start before period − half an interval.
   */
  const busyTicks = (timeout: number, periodSeconds: number) =>
    Math.min(
      Math.floor((timeout - 2 * BATCH_TICK_SECONDS) / BATCH_TICK_SECONDS) + 2,
      Math.floor((periodSeconds - BATCH_TICK_SECONDS / 2) / BATCH_TICK_SECONDS) + 1,
    );
  let ticksPerMonth = 0;
  /** Busy BatchPromoter invocations: each ends reading the running rollouts and publishing their gauges. */
  let gaugeReads = 0;
  let idleReadUnits = 0;
  const mappings = ofType('AWS::Lambda::EventSourceMapping');
  const isScheduled = (f: FnInfo) => schedules.some((s) => s.targets.includes(f.id));
  /** Whether its role may receive from a queue: a scheduled one polls it once an invocation (the coordinator, the work DLQ). */
  const receives = (f: FnInfo) =>
    f.roleId !== null &&
    ofType('AWS::IAM::Policy').some(
      ([, p]) =>
        JSON.stringify(props(p).Roles ?? []).includes(`"${f.roleId}"`) && JSON.stringify(props(p).PolicyDocument ?? {}).includes('"sqs:ReceiveMessage"'),
    );
  for (const f of fns) {
    const scheduled = schedules.filter((s) => s.targets.includes(f.id)).reduce((n, s) => n + s.perMonth, 0);
    const rate = schedules
      .filter((s) => s.targets.includes(f.id))
      .map((s) => s.expression)
      .join(' + ');
    const mem = `${f.memoryMb} MB`;
    if (scheduled > 0) {
      const idleMs = f.role === 'batchPromoter' ? a.idleBatchInvocationMs : a.idleScheduledInvocationMs;
      let busyMs = idleMs;
      let busyBasis = 'same as idle (no work run open)';
      const looksAt = [
        ...(receives(f) ? ['a short poll of the work DLQ'] : []),
        f.activityTable ? 'its activity flag (the database only when it is raised)' : f.role === 'batchPromoter' ? "hasWork's two reads" : 'the open runs',
      ];
      if (f.role === 'batchPromoter') {
        const period = Math.min(...schedules.filter((x) => x.targets.includes(f.id)).map((x) => (30 * 24 * 60 * 60) / x.perMonth));
        const ticks = busyTicks(f.timeoutSeconds, period);
        busyMs = (ticks - 1) * BATCH_TICK_SECONDS * 1000 + a.tickMs;
        ticksPerMonth += scheduled * ticks;
        gaugeReads += scheduled;
        busyBasis = `${fmtInt(scheduled)} × ~${Math.round(busyMs / 1000)} s (${ticks} ticks ${BATCH_TICK_SECONDS} s apart, timeout ${f.timeoutSeconds} s) × ${mem}`;
      }
      idleReadUnits += scheduled * (f.role ? (IDLE_READ_UNITS[f.role] ?? 0) : 0);
      invocations[f.id] = { idle: scheduled, busy: scheduled };
      line({
        what: `${f.label}, ${rate}`,
        idle: lambdaCost(scheduled, idleMs, f.memoryMb) + coldStarts(f.memoryMb),
        busy: lambdaCost(scheduled, busyMs, f.memoryMb) + coldStarts(f.memoryMb),
        basis: `idle: ${fmtInt(scheduled)} × ~${idleMs} ms × ${mem} + requests (${looksAt.join(', then ')}); busy: ${busyBasis}`,
        freeTier: FREE_TIER.lambda,
      });
    } else if (signalTargets.has(f.id)) {
      invocations[f.id] = { idle: 0, busy: a.eventsPerMonth };
      line({
        what: `${f.label}, rollout signals`,
        idle: 0,
        busy: lambdaCost(a.eventsPerMonth, a.signalInvocationMs, f.memoryMb) + coldStarts(f.memoryMb),
        basis: `busy: ${fmtInt(a.eventsPerMonth)} × ~${a.signalInvocationMs} ms × ${mem} + requests`,
        freeTier: FREE_TIER.lambda,
      });
    } else if (apiTargets.has(f.id)) {
      invocations[f.id] = { idle: 0, busy: a.apiRequestsPerMonth };
      line({
        what: `${f.label}, HTTP API`,
        idle: 0,
        busy: lambdaCost(a.apiRequestsPerMonth, a.apiInvocationMs, f.memoryMb),
        basis: `busy: ${fmtInt(a.apiRequestsPerMonth)} requests × ~${a.apiInvocationMs} ms × ${mem}`,
        freeTier: FREE_TIER.lambda,
      });
    } else {
      // Every function has a line: what invokes it, and what an invocation costs when nothing in either column does.
      invocations[f.id] = { idle: 0, busy: 0 };
      const rules = busRules.filter(([, r]) => JSON.stringify(props(r).Targets ?? []).includes(`"${f.id}"`));
      const mapped = mappings.some(([, r]) => JSON.stringify(props(r).FunctionName ?? '').includes(`"${f.id}"`));
      const per1000 = lambdaCost(1000, a.eventInvocationMs, f.memoryMb);
      const onEvents = `~${a.eventInvocationMs} ms × ${mem} + request: US$ ${per1000.toFixed(4)} per 1,000 invocations; none idle, none from rollout signals`;
      line({
        what: f.role ? `${f.label}, ${rules.length || mapped ? 'on its events' : 'no trigger'}` : `${f.label} (CDK helper)`,
        idle: 0,
        busy: 0,
        basis: rules.length
          ? `when its rule matches (${rules.map(([, r]) => str(props(r).Description ?? '')).join('; ')}): ${onEvents}`
          : mapped
            ? `for each batch its queue delivers: ${onEvents}`
            : f.role
              ? `nothing in this stack invokes it${f.role === 'deadLetters' ? " (the coordinator's scan drains the work DLQ; deployed while topology.ts declares the function)" : ''}`
              : 'runs at deploy only',
        freeTier: FREE_TIER.lambda,
      });
    }
  }

  // X-Ray: only Active functions record traces of their own; a schedule's event carries no trace header to pass through.
  const traced = fns.filter((f) => f.active);
  const traces = (col: 'idle' | 'busy') => traced.reduce((n, f) => n + sampledTraces(invocations[f.id]![col], monthSeconds, a), 0);
  line({
    what: 'X-Ray traces',
    idle: traces('idle') * PRICES.xrayTrace.usd,
    busy: traces('busy') * PRICES.xrayTrace.usd,
    basis: `${traced.length} Active function(s) (${traced.map((f) => f.label).join(', ')}): idle ${fmtInt(traces('idle'))}, busy ${fmtInt(traces('busy'))} traces (1/s + 5 % sampled); PassThrough ones record none`,
    freeTier: FREE_TIER.xray,
  });

  // The store.
  const transitions = a.eventsPerMonth * a.transitionsPerSignal;
  if (onDynamo) {
    const idleRru = idleReadUnits;
    const busyRru = idleRru + a.eventsPerMonth * a.rruPerSignal + ticksPerMonth * a.rruPerTick + gaugeReads * a.rruPerRolloutRead * (1 + a.rolloutsRunning);
    const busyWru = a.eventsPerMonth * a.wruPerSignal + transitions * a.wruPerTransition + ticksPerMonth * a.wruPerTick;
    line({
      what: 'DynamoDB on-demand requests',
      idle: idleRru * PRICES.dynamoRead.usd,
      busy: busyRru * PRICES.dynamoRead.usd + busyWru * PRICES.dynamoWrite.usd,
      basis: `idle: ${fmtInt(idleRru)} RRU (the scheduled functions' empty reads, no write); busy: + ${a.rruPerSignal} RRU/${a.wruPerSignal} WRU a signal, ${a.wruPerTransition} WRU a transition, ${a.rruPerTick} RRU/${a.wruPerTick} WRU a tick (${fmtInt(ticksPerMonth)} ticks), ${a.rruPerRolloutRead * (1 + a.rolloutsRunning)} RRU a minute reading the running rollouts' gauges`,
    });
  }
  // Aurora: the activity flags, read by each scheduled probe, raised by the writers.
  const flagProbes = fns.filter((f) => f.activityTable !== null && isScheduled(f));
  const flagReads = flagProbes.reduce((n, f) => n + invocations[f.id]!.idle * FLAG_READ_UNITS, 0);
  if (!onDynamo && flagProbes.length) {
    line({
      what: 'DynamoDB on-demand requests (activity flags)',
      idle: flagReads * PRICES.dynamoRead.usd,
      busy: flagReads * PRICES.dynamoRead.usd + a.flagRaisesPerMonth * PRICES.dynamoWrite.usd,
      basis: `idle: ${fmtInt(flagReads)} RRU (${flagProbes.map((f) => f.label).join(' and ')} read their flag each invocation, ${FLAG_READ_UNITS} RRU), no write; busy: + ${fmtInt(a.flagRaisesPerMonth)} WRU of raises (at most one per writer sandbox every 5 minutes)`,
    });
  }
  const activityTables = new Set(fns.flatMap((f) => (f.activityTable ? [f.activityTable] : [])));
  const tables = ofType('AWS::DynamoDB::Table');
  count(
    'AWS::DynamoDB::Table',
    tables.map(([id]) => id),
  );
  for (const [id, r] of tables) {
    const p = props(r);
    if (activityTables.has(id)) {
      line({
        what: `DynamoDB storage (${id})`,
        idle: 0,
        busy: 0,
        basis: 'the activity flags: two items of a few bytes; the AWS owned key (no KMS request billed), no backups',
        freeTier: FREE_TIER.dynamo,
      });
      continue;
    }
    const pitr = (p.PointInTimeRecoverySpecification as { PointInTimeRecoveryEnabled?: boolean } | undefined)?.PointInTimeRecoveryEnabled === true;
    const perGb = PRICES.dynamoStorage.usd + (pitr ? PRICES.dynamoPitr.usd : 0);
    line({
      what: `DynamoDB storage${pitr ? ' + PITR' : ''} (${id})`,
      idle: a.tableGbIdle * perGb,
      busy: a.tableGbBusy * perGb,
      basis: `${a.tableGbIdle} GB idle, ${a.tableGbBusy} GB busy × US$ ${perGb.toFixed(2)}/GB-month`,
      freeTier: FREE_TIER.dynamo,
    });
    // SSEEnabled without a key: the AWS managed key (aws/dynamodb), whose requests KMS bills; the default (AWS owned key) costs nothing.
    const sse = p.SSESpecification as { SSEEnabled?: boolean; KMSMasterKeyId?: unknown } | undefined;
    if (sse?.SSEEnabled) {
      // Callers: the functions on this store that run in that column.
      const callers = (col: 'idle' | 'busy') => fns.filter((f) => f.store === 'dynamodb' && invocations[f.id]![col] > 0).length;
      const requests = (col: 'idle' | 'busy') => callers(col) * a.kmsRequestsPerCallerHour * monthHours;
      const cmk = sse.KMSMasterKeyId !== undefined ? 1 : 0; // a customer managed key is US$ 1 a month as well (not in this stack)
      line({
        what: `KMS requests of the table's ${cmk ? 'customer managed' : 'AWS managed'} key`,
        idle: requests('idle') * PRICES.kmsRequest.usd + cmk,
        busy: requests('busy') * PRICES.kmsRequest.usd + cmk,
        basis: `~${a.kmsRequestsPerCallerHour}/h per function using the table: ${callers('idle')} idle, ${callers('busy')} busy; an AWS owned key would cost nothing`,
        freeTier: FREE_TIER.kms,
      });
    }
  }

  // EventBridge: signals in, promotion events out, the archive; schedules and AWS service events are free.
  const promotionEvents = a.eventsPerMonth * a.promotionEventsPerSignal;
  const busEvents = a.eventsPerMonth + promotionEvents;
  line({
    what: 'EventBridge custom events',
    idle: 0,
    busy: busEvents * PRICES.eventBridgeCustomEvent.usd,
    basis: `busy: ${fmtInt(a.eventsPerMonth)} signals in + ${fmtInt(promotionEvents)} rollout events out; ${schedules.length} schedule(s) and ${busRules.length - busRules.filter(([, r]) => onCustomBus(r)).length} default-bus rule(s) on AWS events are free`,
  });
  const archives = ofType('AWS::Events::Archive');
  count(
    'AWS::Events::Archive',
    archives.map(([id]) => id),
  );
  for (const [id, r] of archives) {
    const gb = (busEvents * a.eventBytes) / 1e9;
    // Held steadily: a month's events times the months they are kept (kept forever: counted as one month, and growing).
    const days = num(props(r).RetentionDays, 0);
    const heldGb = gb * (days > 0 ? days / a.daysPerMonth : 1);
    line({
      what: `EventBridge archive (${id})`,
      idle: 0,
      busy: gb * PRICES.eventBridgeArchiveGb.usd + heldGb * PRICES.eventBridgeArchiveStorage.usd,
      basis: `busy: ${gb.toFixed(2)} GB archived a month, kept ${days > 0 ? `${days} days` : 'forever'}`,
    });
  }

  // SQS: an event source mapping long-polls its queue whether or not anything arrives; a schedule that drains one polls once an invocation.
  count(
    'AWS::Lambda::EventSourceMapping',
    mappings.map(([id]) => id),
  );
  const sqsMappings = mappings.filter(([, r]) => ofType('AWS::SQS::Queue').some(([q]) => str(props(r).EventSourceArn).includes(`"${q}"`)));
  if (sqsMappings.length < mappings.length) unpriced.add('AWS::Lambda::EventSourceMapping (not on a queue of this stack)');
  const longPolls = a.sqsPollers * (monthSeconds / a.sqsLongPollSeconds);
  if (sqsMappings.length) {
    const polls = sqsMappings.length * longPolls;
    line({
      what: `SQS: ${sqsMappings.length} event source mapping(s) polling`,
      idle: polls * PRICES.sqsRequest.usd,
      busy: polls * PRICES.sqsRequest.usd,
      basis: `${sqsMappings.length} × ${a.sqsPollers} pollers × one ${a.sqsLongPollSeconds} s long poll each = ${fmtInt(polls)} empty ReceiveMessage a month (Lambda guide: five pollers, as few as two when traffic is low)`,
      freeTier: FREE_TIER.sqs,
    });
  }
  const drainers = fns.filter((f) => isScheduled(f) && receives(f));
  if (drainers.length) {
    const polls = drainers.reduce((n, f) => n + invocations[f.id]!.idle, 0);
    line({
      what: `SQS: ${drainers.map((f) => f.label).join(', ')} polling the work DLQ on its schedule`,
      idle: polls * PRICES.sqsRequest.usd,
      busy: polls * PRICES.sqsRequest.usd,
      basis: `${fmtInt(polls)} short-poll ReceiveMessage a month, one an invocation (an event source mapping on the queue would make ${fmtInt(longPolls)} long polls: US$ ${(longPolls * PRICES.sqsRequest.usd).toFixed(2)}); the work queue's own requests are the runs' (see shards)`,
      freeTier: FREE_TIER.sqs,
    });
  }

  // CloudWatch alarms: per alarm metric; high resolution below a 60 s period.
  const alarms = ofType('AWS::CloudWatch::Alarm');
  count(
    'AWS::CloudWatch::Alarm',
    alarms.map(([id]) => id),
  );
  let alarmUsd = 0;
  let alarmMetrics = 0;
  let highRes = 0;
  for (const [, r] of alarms) {
    const p = props(r);
    const metrics = Array.isArray(p.Metrics)
      ? (p.Metrics as { MetricStat?: { Period?: number } }[]).filter((m) => m.MetricStat)
      : [{ MetricStat: { Period: num(p.Period, 60) } }];
    for (const m of metrics) {
      const fast = num(m.MetricStat?.Period, 60) < 60;
      highRes += fast ? 1 : 0;
      alarmMetrics++;
      alarmUsd += fast ? PRICES.alarmHighResolution.usd : PRICES.alarmStandard.usd;
    }
  }
  line({
    what: `CloudWatch alarms (${alarms.length})`,
    idle: alarmUsd,
    busy: alarmUsd,
    basis: `${alarms.length} alarm(s) reading ${alarmMetrics} metric(s) (a metric-math alarm is billed for each metric it reads), ${highRes} high-resolution, US$ ${PRICES.alarmStandard.usd.toFixed(2)} per standard alarm metric`,
    freeTier: FREE_TIER.alarms,
  });

  // Custom metrics (EMF): none while idle; the busy ones every hour, and each running rollout's gauges (dimension `rollout`).
  const services = fns.filter((f) => f.role).map((f) => kebab(f.role!));
  const busyMetrics = services.flatMap((s) => (METRICS_BY_SERVICE[s]?.busy ?? []).map((m) => `${s}/${m}`));
  const possible =
    services.reduce((n, s) => n + (METRICS_BY_SERVICE[s]?.busy.length ?? 0) + (METRICS_BY_SERVICE[s]?.onEvent.length ?? 0), 0) + STACK_METRICS.length;
  const gauges = gaugeReads ? a.rolloutsRunning * rolloutGauges(a.providerGatesPerRollout).metrics : 0;
  line({
    what: 'CloudWatch custom metrics (Rollout namespace)',
    idle: 0,
    busy: (busyMetrics.length + gauges) * PRICES.customMetric.usd,
    basis: `idle: none (an invocation that counted nothing publishes nothing); busy: ${busyMetrics.length} with data every hour (${busyMetrics.join(', ')}), and ${gauges} rollout gauges (${a.rolloutsRunning} rollout(s) running, ${a.providerGatesPerRollout} provider gate(s) each: a metric per dimension combination while it runs); ${possible} possible counts, the others only when what they count happens (all ${possible} every hour: US$ ${(possible * PRICES.customMetric.usd).toFixed(2)}), and rollout_events_total per event type the same way`,
    freeTier: FREE_TIER.metrics,
  });

  const dashboards = ofType('AWS::CloudWatch::Dashboard');
  count(
    'AWS::CloudWatch::Dashboard',
    dashboards.map(([id]) => id),
  );
  if (dashboards.length)
    line({
      what: `CloudWatch dashboard (${dashboards.length})`,
      idle: dashboards.length * PRICES.dashboard.usd,
      busy: dashboards.length * PRICES.dashboard.usd,
      basis: `${dashboards.length} × US$ ${PRICES.dashboard.usd} a month (opt-in: -c dashboard=true)`,
      freeTier: FREE_TIER.dashboard,
    });

  // Logs: every invocation's platform lines; a busy one's own line and EMF blob; access logs; flow and database logs (Aurora).
  const perInvocation = a.platformLogBytes + a.platformLogEvents * 26;
  const invocationLogs = (col: 'idle' | 'busy') =>
    fns.reduce(
      (n, f) =>
        n + invocations[f.id]![col] * (perInvocation + (col === 'busy' && (signalTargets.has(f.id) || apiTargets.has(f.id)) ? a.appLogBytesBusy + 2 * 26 : 0)),
      0,
    );
  const gaugeBlobs = a.rolloutsRunning * rolloutGauges(a.providerGatesPerRollout).blobs;
  const batchBusyLogs = fns
    .filter((f) => f.role === 'batchPromoter')
    .reduce((n, f) => n + invocations[f.id]!.busy * (a.appLogBytesBusy + 2 * 26 + gaugeBlobs * (a.figureBlobBytes + 26)), 0);
  const accessLogs = apiTargets.size ? a.apiRequestsPerMonth * (a.accessLogBytes + 26) : 0;
  const logGb = { idle: invocationLogs('idle') / 1e9, busy: (invocationLogs('busy') + batchBusyLogs + accessLogs) / 1e9 };
  const logUsd = (gb: number) => gb * PRICES.logsIngest.usd + gb * a.logCompression * PRICES.logsStorage.usd;
  line({
    what: `CloudWatch Logs (${ofType('AWS::Logs::LogGroup').length} log groups)`,
    idle: logUsd(logGb.idle),
    busy: logUsd(logGb.busy),
    basis: `idle ${logGb.idle.toFixed(3)} GB, busy ${logGb.busy.toFixed(3)} GB ingested a month (START/END/REPORT of every invocation; busy adds each one's log line and EMF blob, the rollout gauges' blobs, and access logs); kept one month`,
    freeTier: FREE_TIER.logs,
  });

  // Gate reads: provider gates are read on the BatchPromoter's ticks only while rollouts run.
  if (fns.some((f) => f.role === 'batchPromoter')) {
    const metricsRead = a.gateMetricsPerMinute * monthMinutes;
    const alarmReads = a.alarmGateReadsPerMinute * monthMinutes;
    line({
      what: 'CloudWatch GetMetricData / DescribeAlarms (gates)',
      idle: 0,
      busy: metricsRead * PRICES.getMetricData.usd + alarmReads * PRICES.cloudWatchApiRequest.usd,
      basis: `busy: ${fmtInt(metricsRead)} metrics read (one cloudwatchMetric gate a minute), ${fmtInt(alarmReads)} DescribeAlarms; an alarm gate read every 10 s tick would be ${fmtInt(6 * monthMinutes)} requests (US$ ${(6 * monthMinutes * PRICES.cloudWatchApiRequest.usd).toFixed(2)})`,
      freeTier: FREE_TIER.cloudwatchApi,
    });
  }

  const apis = ofType('AWS::ApiGatewayV2::Api');
  if (apis.length)
    line({
      what: 'HTTP API requests',
      idle: 0,
      busy: a.apiRequestsPerMonth * PRICES.httpApiRequest.usd,
      basis: `busy: ${fmtInt(a.apiRequestsPerMonth)} requests; US$ 1 per million`,
    });

  // Aurora Serverless v2 and its VPC.
  if (aurora) {
    const clusters = ofType('AWS::RDS::DBCluster');
    count(
      'AWS::RDS::DBCluster',
      clusters.map(([id]) => id),
    );
    const instances = ofType('AWS::RDS::DBInstance');
    count(
      'AWS::RDS::DBInstance',
      instances.map(([id]) => id),
    );
    const rotations = ofType('AWS::SecretsManager::RotationSchedule').length;
    // Scheduled functions on the database without an activity flag read it every invocation: the cluster never pauses.
    const wakers = fns.filter((f) => f.store === 'postgres' && isScheduled(f) && f.activityTable === null);
    const wakes = a.auroraSweepsPerMonth + rotations;
    for (const [cid, c] of clusters) {
      const scaling = props(c).ServerlessV2ScalingConfiguration as { MinCapacity?: number; MaxCapacity?: number; SecondsUntilAutoPause?: number } | undefined;
      const min = num(scaling?.MinCapacity, 0.5);
      const mine = instances.filter(([, r]) => mentions(r, cid));
      const serverless = mine.filter(([, r]) => props(r).DBInstanceClass === 'db.serverless');
      if (serverless.length < mine.length) unpriced.add('AWS::RDS::DBInstance (provisioned class: only db.serverless is priced)');
      const acuUsd = (acu: number, hours = monthHours) => serverless.length * acu * hours * PRICES.auroraAcuHour.usd;
      const floor = min > 0 ? min : a.auroraAwakeMinAcu;
      const busyAcu = Math.max(floor, a.auroraBusyAcu);
      const pauseMinutes = num(scaling?.SecondsUntilAutoPause, 300) / 60;
      const wakeHours = (wakes * (a.auroraWakeWorkMinutes + pauseMinutes)) / 60;
      const idleHours = min > 0 || wakers.length ? monthHours : wakeHours;
      const idleBasis =
        min > 0
          ? `${serverless.length} × ${min} ACU × ${monthHours} h idle (the minimum runs whether or not anything happens)`
          : wakers.length
            ? `0 ACU minimum, but ${wakers.map((f) => f.label).join(' and ')} read the database every minute: it never pauses (${serverless.length} × ${floor} ACU × ${monthHours} h)`
            : `paused (0 ACU) but for ${wakes} wakes a month (the probes' daily sweep, the secret's rotation), each ~${a.auroraWakeWorkMinutes} min of work and ${pauseMinutes} min until it pauses again, at ${floor} ACU: ${wakeHours.toFixed(1)} h`;
      line({
        what: `Aurora Serverless v2: ${serverless.length} instance(s), min ${min} ACU`,
        idle: acuUsd(floor, idleHours),
        busy: acuUsd(busyAcu),
        basis: `${idleBasis}; busy ${busyAcu} ACU each, awake all month (a reader that scales with the writer follows it)`,
      });
      const ios = a.eventsPerMonth * a.auroraIosPerSignal;
      line({
        what: 'Aurora storage and I/O',
        idle: a.auroraStorageGb * PRICES.auroraStorage.usd,
        busy: a.auroraStorageGb * PRICES.auroraStorage.usd + ios * PRICES.auroraIo.usd,
        basis: `${a.auroraStorageGb} GB; busy ${fmtInt(ios)} I/O (${a.auroraIosPerSignal} a signal); backups up to the cluster's size are not charged`,
      });
    }
    const secrets = ofType('AWS::SecretsManager::Secret');
    count(
      'AWS::SecretsManager::Secret',
      secrets.map(([id]) => id),
    );
    // Each invocation that uses the database opens a connection (pools end with the invocation), which re-reads the secret once it is 30 s old.
    const opens = (f: FnInfo, col: 'idle' | 'busy') => {
      if (f.store !== 'postgres') return 0;
      if (isScheduled(f) && f.activityTable !== null) return col === 'busy' && f.role === 'batchPromoter' ? invocations[f.id]!.busy : a.auroraSweepsPerMonth;
      return invocations[f.id]![col];
    };
    const fetches = (col: 'idle' | 'busy') => fns.reduce((n, f) => n + Math.min(opens(f, col), a.secretReadsPerFunctionMinute * monthMinutes), 0);
    const secretUsd = (col: 'idle' | 'busy') => secrets.length * PRICES.secret.usd + fetches(col) * PRICES.secretApiCall.usd;
    if (secrets.length)
      line({
        what: `Secrets Manager (${secrets.length} secret)`,
        idle: secretUsd('idle'),
        busy: secretUsd('busy'),
        basis: `${secrets.length} × US$ ${PRICES.secret.usd}; GetSecretValue when an invocation opens a connection and the secret it holds is 30 s old (at most ${a.secretReadsPerFunctionMinute} a minute a function): ${fmtInt(fetches('idle'))} idle, ${fmtInt(fetches('busy'))} busy; rotated monthly by its rotation function (${rotations} schedule)`,
      });
  }
  const nats = ofType('AWS::EC2::NatGateway');
  count(
    'AWS::EC2::NatGateway',
    nats.map(([id]) => id),
  );
  if (nats.length) {
    const gbBusy = (a.eventsPerMonth * a.natBytesPerSignal) / 1e9;
    const azs = Math.max(1, ofType('AWS::EC2::Subnet').filter(([, r]) => props(r).MapPublicIpOnLaunch === true).length);
    const endpointsUsd = ENDPOINT_SERVICES.length * azs * monthHours * PRICES.interfaceEndpointHour.usd;
    line({
      what: `NAT gateway (${nats.length})`,
      idle: nats.length * monthHours * PRICES.natGatewayHour.usd,
      busy: nats.length * monthHours * PRICES.natGatewayHour.usd + gbBusy * PRICES.natGatewayGb.usd,
      basis: `${nats.length} × ${monthHours} h × US$ ${PRICES.natGatewayHour.usd}; busy + ${gbBusy.toFixed(1)} GB processed. The functions in the VPC reach ${ENDPOINT_SERVICES.join(', ')}, X-Ray, gate origins and targets through it; interface endpoints for those ${ENDPOINT_SERVICES.length} services in ${azs} AZs instead would be US$ ${endpointsUsd.toFixed(2)} a month, and leave origins and targets outside AWS unreachable`,
    });
  }
  const eips = ofType('AWS::EC2::EIP');
  count(
    'AWS::EC2::EIP',
    eips.map(([id]) => id),
  );
  if (eips.length)
    line({
      what: `public IPv4 (${eips.length} EIP)`,
      idle: eips.length * monthHours * PRICES.publicIpv4Hour.usd,
      busy: eips.length * monthHours * PRICES.publicIpv4Hour.usd,
      basis: `${eips.length} × ${monthHours} h × US$ ${PRICES.publicIpv4Hour.usd}`,
    });
  const endpoints = ofType('AWS::EC2::VPCEndpoint');
  count(
    'AWS::EC2::VPCEndpoint',
    endpoints.map(([id]) => id),
  );
  const interfaceAzs = endpoints
    .filter(([, r]) => props(r).VpcEndpointType === 'Interface')
    .reduce((n, [, r]) => n + Math.max(1, (props(r).SubnetIds as unknown[] | undefined)?.length ?? 1), 0);
  if (endpoints.length)
    line({
      what: `VPC endpoints (${endpoints.length})`,
      idle: interfaceAzs * monthHours * PRICES.interfaceEndpointHour.usd,
      busy: interfaceAzs * monthHours * PRICES.interfaceEndpointHour.usd,
      basis: `${interfaceAzs} interface endpoint-AZ(s) × ${monthHours} h; gateway endpoints are free`,
    });
  const flowLogs = ofType('AWS::EC2::FlowLog');
  if (flowLogs.length || aurora) {
    const gb = flowLogs.length * a.flowLogGbPerMonth + (aurora ? a.dbLogGbPerMonth : 0);
    line({
      what: 'VPC flow logs and database logs',
      idle: logUsd(gb),
      busy: logUsd(gb),
      basis: `~${gb.toFixed(2)} GB a month (rejected traffic only; PostgreSQL's own log)`,
    });
  }

  // Whatever else the template holds must be known to be free, or it is reported.
  const priced = new Set([
    'AWS::Lambda::Function',
    'AWS::Events::Rule',
    'AWS::Events::Archive',
    'AWS::Lambda::EventSourceMapping',
    'AWS::CloudWatch::Alarm',
    'AWS::CloudWatch::Dashboard',
    'AWS::DynamoDB::Table',
    'AWS::RDS::DBCluster',
    'AWS::RDS::DBInstance',
    'AWS::SecretsManager::Secret',
    'AWS::EC2::NatGateway',
    'AWS::EC2::EIP',
    'AWS::EC2::VPCEndpoint',
  ]);
  for (const [, r] of resources) if (!priced.has(r.Type) && !(r.Type in NO_CHARGE_OF_THEIR_OWN)) unpriced.add(r.Type);

  const total = (col: 'idle' | 'busy') => lines.reduce((n, l) => n + l[col], 0);
  return { store, lines, idle: total('idle'), busy: total('busy'), counted, schedules, invocations, unpriced: [...unpriced].sort(), assumptions: a };
}

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

export function usd(x: number): string {
  if (x === 0) return '—';
  if (x < 0.005) return '< US$ 0.01';
  return `US$ ${x.toFixed(2)}`;
}

/** The table README's "Monthly cost" section holds: one row a line, its basis in parentheses. */
export function markdownTable(e: CostEstimate): string {
  const head = `| ${e.store === 'aurora' ? 'Aurora store' : 'DynamoDB store'} | idle | ${fmtInt(e.assumptions.eventsPerMonth)} rollout events/month |\n|---|---|---|`;
  const rows = e.lines.map((l) => `| ${l.what} (${l.basis.replace(/\|/g, '/')}) | ${usd(l.idle)} | ${usd(l.busy)} |`);
  return [head, ...rows, `| **total** | **${usd(e.idle)}** | **${usd(e.busy)}** |`].join('\n');
}

/** The JSON line the CLI ends with. */
export function jsonLine(e: CostEstimate): string {
  const r = (x: number) => Math.round(x * 100) / 100;
  return JSON.stringify({
    cost: `monthly, ${PRICE_REGION} list prices read ${PRICES_READ_ON}, no free tier`,
    store: e.store,
    idle_usd_month: r(e.idle),
    busy_usd_month: r(e.busy),
    lines: e.lines.map((l) => ({ what: l.what, idle: r(l.idle), busy: r(l.busy), basis: l.basis })),
  });
}

function details(estimates: readonly CostEstimate[]): string {
  const freeTiers = new Map(estimates.flatMap((e) => e.lines.flatMap((l) => (l.freeTier ? [[l.what, l.freeTier] as const] : []))));
  const out = [
    '',
    '#### Lines',
    ...[...freeTiers].map(([what, free]) => `- ${what}: free tier (not subtracted): ${free}`),
    '',
    '#### Assumptions (what the template cannot say; see DEFAULT_ASSUMPTIONS in infra/cost.ts for why each)',
  ];
  for (const [k, v] of Object.entries(estimates[0]!.assumptions)) out.push(`- ${k}: ${v}`);
  out.push('', `#### Prices (${PRICE_REGION}, read ${PRICES_READ_ON})`);
  const price = (p: Price) => (p.usd < 0.001 ? `US$ ${+(p.usd * 1e6).toPrecision(6)} per million (${p.unit})` : `US$ ${+p.usd.toPrecision(6)} per ${p.unit}`);
  for (const [k, p] of Object.entries(PRICES) as [string, Price][]) out.push(`- ${k}: ${price(p)} — ${p.source}`);
  return out.join('\n');
}

// ---------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------

export interface CliOptions {
  /** Both by default. */
  readonly store: 'dynamodb' | 'aurora' | 'both';
  readonly dashboard: boolean;
  readonly events: number;
  readonly markdown: boolean;
}

export function parseArgs(argv: readonly string[]): CliOptions {
  let store: CliOptions['store'] = 'both';
  let dashboard = false;
  let markdown = false;
  let events = DEFAULT_ASSUMPTIONS.eventsPerMonth;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`invalid arguments: ${flag}: needs a value`);
      return v;
    };
    if (flag === '--store') {
      const v = value();
      if (v !== 'dynamodb' && v !== 'aurora' && v !== 'both') throw new Error(`invalid arguments: --store: dynamodb, aurora or both, got ${v}`);
      store = v;
    } else if (flag === '--events') {
      const v = value().replace(/[,_]/g, '');
      if (!/^\d+$/.test(v)) throw new Error(`invalid arguments: --events: a whole number of rollout events a month, got ${v}`);
      events = Number(v);
    } else if (flag === '--dashboard') dashboard = true;
    else if (flag === '--markdown') markdown = true;
    else throw new Error(`invalid arguments: unknown option ${arg} (--store dynamodb|aurora|both, --dashboard, --events N, --markdown)`);
  }
  return { store, dashboard, events, markdown };
}

/** The template `cdk deploy` would upload, synthesized in-process without bundling (as test/integration/aws-endpoints.test.ts does). */
export async function synthesizeTemplate(o: { readonly store: 'dynamodb' | 'aurora'; readonly dashboard: boolean }): Promise<CfnTemplate> {
  // Imported here: the stack pulls in all of aws-cdk-lib, which estimateCost itself does not need.
  const { ControlPlaneStack } = await import('./stack.js');
  const outdir = mkdtempSync(join(tmpdir(), 'rollout-cost-'));
  try {
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new ControlPlaneStack(app, 'RolloutControlPlane', { store: o.store, dashboard: o.dashboard });
    return JSON.parse(readFileSync(join(app.synth().directory, stack.templateFile), 'utf8')) as CfnTemplate;
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const o = parseArgs(argv);
  const stores = o.store === 'both' ? (['dynamodb', 'aurora'] as const) : [o.store];
  const estimates: CostEstimate[] = [];
  for (const store of stores)
    estimates.push(estimateCost(await synthesizeTemplate({ store, dashboard: o.dashboard }), { ...DEFAULT_ASSUMPTIONS, eventsPerMonth: o.events }));
  console.log(`### Monthly cost (${PRICE_REGION} list prices read ${PRICES_READ_ON}, arm64, no free tier; \`npm run cost\` recomputes it from the template)`);
  for (const estimate of estimates) {
    console.log(`\n${markdownTable(estimate)}`);
    if (estimate.unpriced.length) console.log(`\nNot priced (add them to infra/cost.ts): ${estimate.unpriced.join(', ')}`);
  }
  // The lines' free tiers, the assumptions and the prices are the same for both stores: printed once.
  if (!o.markdown) console.log(details(estimates));
  console.log('');
  for (const estimate of estimates) console.log(jsonLine(estimate));
}

if (isEntryPoint(import.meta.url)) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(err instanceof Error && err.message.startsWith('invalid arguments') ? 2 : 1);
  });
}
