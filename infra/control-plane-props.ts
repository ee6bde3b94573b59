import type { IAlarmAction } from 'aws-cdk-lib/aws-cloudwatch';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IVpc } from 'aws-cdk-lib/aws-ec2';
import type { IEventBus } from 'aws-cdk-lib/aws-events';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { TargetInput } from '../shared/actuation/targets.js';
import type { OutboundConfigInput } from '../shared/outbound/policy.js';
import type { Retention } from '../shared/retention.js';
import type { FunctionName } from '../shared/topology.js';

/** What RolloutControlPlane (control-plane.ts) takes. */

/** Per function: what to change from topology.ts's defaults. */
export interface FunctionOverrides {
  readonly memoryMb?: number;
  readonly logRetention?: RetentionDays;
  /** Reserved concurrency; a function topology.ts pins keeps its own (the batch promoter's 1: one tick at a time). */
  readonly reservedConcurrency?: number;
}

export interface RolloutControlPlaneProps {
  /** This stack's node identity (lease holder). Two stacks sharing a store elect one leader. Default: the stack name. */
  readonly nodeId?: string;
  /** Where leases, rollouts and ledgers live. Default: DynamoDB. */
  readonly store?: 'dynamodb' | 'aurora';
  /**
   * DynamoDB: use this existing table (another stack's, or your own with the
   * same key schema and the gsi1 index) instead of creating one; two control
   * planes sharing one store elect one leader.
   */
  readonly table?: ITable;
  /** The same, by name. */
  readonly sharedTableName?: string;
  /**
   * The table this construct creates: what gsi1 projects. `include` (the
   * default) projects only what its readers need; `all` is what stacks
   * deployed before it have, and DynamoDB cannot change a projection in
   * place: keep `all` on such a stack (the code runs on either;
   * docs/operating/upgrades.md#upgrading-a-deployed-table).
   */
  readonly indexProjection?: 'include' | 'all';
  /** Aurora: the VPC to put the cluster and the functions in (private subnets with egress, isolated subnets). Default: a new one. */
  readonly vpc?: IVpc;
  /**
   * Aurora: a reader instance in a second AZ, promoted in about a minute if
   * the writer fails. Default off: nothing reads from it and it doubles the
   * idle cost; without one a failed writer is replaced by a new instance
   * (several minutes, writes refused meanwhile).
   */
  readonly auroraReader?: boolean;
  /**
   * Aurora: the cluster's minimum ACUs. Default 0: the cluster pauses after
   * 5 minutes without a connection (no compute billed), and nothing on a
   * schedule wakes it; the first request after a pause waits for it to resume
   * (about 15 s, longer after a day). 0.5 or more: it never pauses.
   */
  readonly auroraMinCapacity?: number;
  /** A customer-managed key for the table and the queues it creates (default: AWS-managed keys). */
  readonly encryptionKey?: IKey;
  /**
   * What each alarm does when it fires: these actions, and/or a notification
   * to `alarmTopic`. Default: a topic the stack creates (`alarmTopic` on the
   * construct, output `AlarmTopicArn`): subscribe your pager or e-mail to it.
   */
  readonly alarmActions?: readonly IAlarmAction[];
  readonly alarmTopic?: ITopic;
  /** Per-function memory, log retention and reserved concurrency. */
  readonly functions?: Partial<Readonly<Record<FunctionName, FunctionOverrides>>>;
  /**
   * A CloudWatch dashboard with the figures of the Grafana one
   * (infra/observability/grafana-dashboard.json: rollouts in flight, percent
   * and stage over time, gates against thresholds, transitions, run progress
   * and throughput) from the functions' EMF, beside invocations, errors, the
   * queues and the alarms. Off by default: a dashboard is US$ 3 a month beyond an account's first
   * three, more than the rest of an idle stack together.
   */
  readonly dashboard?: boolean;
  /**
   * A stack output of the HTTP API's URL (`apiUrl`), for `cdk deploy
   * --outputs-file` and your pipeline: `true` for an output named by the
   * construct's path, or `{ exportName }` to export it too (another stack
   * reads it with `Fn.importValue`). Default: none; `apiUrl` is there either way.
   */
  readonly apiUrlOutput?: boolean | { readonly exportName: string };
  /**
   * What a rollout spec may make the stack request: the origins its gates may
   * read and the credentials bound to them (secrets in Secrets Manager; the
   * functions that read gates may read those secrets, nothing else). None by
   * default: a spec naming an origin is refused.
   */
  readonly outbound?: OutboundConfigInput;
  /**
   * How long what ended is kept, in days: a rollout that ended is deleted
   * whole `rolloutDays` (90) after it ended; a finished run's items
   * `runDays` (30) after each finished (TTL), the run's record that long
   * after the run finished (docs/operating/retention.md#what-is-kept). A WorkerFleet's workers
   * stamp the items they finish with the same `runDays`.
   */
  readonly retention?: Partial<Retention>;
  /**
   * Who may put rollout signals on the stack's bus besides its own functions:
   * IAM principal ARNs (roles, users; `*` wildcards as in ArnLike). Everyone
   * else is denied `events:PutEvents` by the bus's resource policy. None by
   * default: name your pipelines' and operators' roles.
   */
  readonly eventSenders?: readonly string[];
  /**
   * An existing event bus to take signals from and put rollout events on,
   * instead of one the control plane creates. Its policy (who may put
   * events) and archive are its owner's: the control plane neither locks nor
   * archives it, and `eventSenders` cannot be given with it.
   */
  readonly bus?: IEventBus;
  /** The regions whose CloudWatch alarms and metrics gates may read (default: the stack's own). */
  readonly gateRegions?: readonly string[];
  /**
   * The CloudWatch namespaces `cloudwatchMetric` gates may read (exact
   * names, e.g. `AWS/ApplicationELB`, `MyService`). IAM cannot hold
   * GetMetricData to a namespace (its `cloudwatch:namespace` key applies to
   * PutMetricData only), so the functions refuse a gate naming any other, and
   * a metric math expression that could reach past its own metrics (SEARCH,
   * Metrics Insights SELECT). None by default: GetMetricData is not granted
   * and every cloudwatchMetric gate is refused.
   */
  readonly gateNamespaces?: readonly string[];
  /**
   * The CloudWatch alarms `cloudwatchAlarm` gates watch, by name (a name
   * ending in `*` is a prefix): their state changes reach the
   * StreamingPromoter through a rule on the account's default bus that
   * matches these names only, and a gate breached is acted on within one
   * delivery. Any other alarm a gate names is read on the BatchPromoter's
   * tick (every 10 s). Default: none, and no rule on the default bus (every
   * alarm flip in the account would otherwise invoke a function).
   */
  readonly gateAlarms?: readonly string[];
  /**
   * The targets a rollout spec may move, by name (docs/concepts/actuators-and-assignment.md#moving-traffic-actuators):
   * Lambda aliases and ALB rules. The functions that actuate are granted
   * exactly these resources, and webhooks (an nginx target is a file on a
   * node's machine: refused). None by default: a spec naming one is refused.
   */
  readonly targets?: Readonly<Record<string, Exclude<TargetInput, { readonly type: 'nginx' }>>>;
}
