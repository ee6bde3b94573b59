/**
 * What the template cannot say: how long an invocation runs, how many units a
 * tick reads… each a named assumption with why, and what the code fixes
 * instead (the idle reads, the services behind the NAT gateway).
 */
import { providerGateSchema, type ProviderGate } from '../../shared/rollout/gate-spec.js';
import type { FunctionName } from '../../shared/topology.js';

export interface Assumptions {
  /** Busy column: rollout signals a month put on the rollout bus (`--events`). */
  readonly eventsPerMonth: number;
  /** A month is 30 days (43,200 minutes), as docs/operating/capacity-and-cost.md#monthly-cost counts; AWS's calculator uses 730 h, 1.4 % more. */
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
  /** One StreamingPromoter invocation: store the signal, load the rollout, evaluate (docs/operating/capacity-and-cost.md#monthly-cost: ~100 ms). */
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
  /** Busy: rollouts running at once (the BatchPromoter reads their gates and publishes each one's gauges a minute). */
  readonly rolloutsRunning: number;
  /**
   * The provider gates of each running rollout's active stage, as a spec writes them (`--spec FILE`: those of
   * the spec's costliest stage). Each is read every intervalSeconds (rounded up to a 10 s tick): by default
   * one threshold cloudwatchMetric gate at its default 60 s, one GetMetricData metric a minute.
   */
  readonly gates: readonly ProviderGate[];
  /** How long the active stage has run when a gate is read, on average: a sequential-rate Prometheus gate reads every step since it began. */
  readonly judgedStageSeconds: number;
  /** Samples a Prometheus query processes for each point it answers (a rate over [5m] of a series scraped every 15 s reads 20). */
  readonly promSamplesPerPoint: number;
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
  gates: [
    providerGateSchema.parse({
      type: 'cloudwatchMetric',
      name: 'errors',
      metric: { namespace: 'AWS/Lambda', metricName: 'Errors', stat: 'Sum', dimensions: { FunctionName: 'checkout', Resource: 'checkout:live' } },
      comparison: '<',
      threshold: 5,
    }),
  ],
  judgedStageSeconds: 1_800,
  promSamplesPerPoint: 20,
  figureBlobBytes: 400,
  rruPerRolloutRead: 1,
  accessLogBytes: 250,
  logCompression: 0.15,
  xrayReservoirPerSecond: 1,
  xrayFixedRate: 0.05,
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
