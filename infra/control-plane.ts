import { parseConfig } from '../shared/config.js';
import { retentionSchema, type Retention } from '../shared/retention.js';
import { CfnOutput, Duration, Lazy, Names, RemovalPolicy, Stack, Token, Validations, type CfnElement } from 'aws-cdk-lib';
import {
  Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  MathExpression,
  Metric,
  SingleValueWidget,
  TextWidget,
  TreatMissingData,
  type IAlarmAction,
  type IMetric,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Topic, type ITopic } from 'aws-cdk-lib/aws-sns';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { CfnSecurityGroup, type IVpc } from 'aws-cdk-lib/aws-ec2';
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption, type CfnTable, type ITable } from 'aws-cdk-lib/aws-dynamodb';
import { Archive, EventBus, Rule, RuleTargetInput, Schedule, type IEventBus } from 'aws-cdk-lib/aws-events';
import { CLOUDWATCH_SOURCE } from '../shared/rollout/inbound.js';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { HttpApi, HttpMethod, HttpStage, LogGroupLogDestination, type HttpRoute } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { AnyPrincipal, Effect, PolicyStatement, type IGrantable, type IRole } from 'aws-cdk-lib/aws-iam';
import { Alias, Architecture, Runtime, Tracing, type Function as LambdaFunctionResource } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption, type QueueProps } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { GSI1, GSI1_PROJECTED, KEY, LEADING_KEYS } from '../shared/adapters/dynamodb/table.js';
import { grantItems } from './grants.js';
import { AuroraStore } from './aurora.js';
import { functionOf } from './code.js';
import { FUNCTIONS, type FunctionName, type FunctionSpec } from '../shared/topology.js';
import { OutboundPolicy, type OutboundConfigInput } from '../shared/outbound/policy.js';
import { parseTargets, targetOutboundIssues, type TargetsConfig } from '../shared/actuation/targets.js';
import { COMMANDS } from '../shared/rollout/commands.js';
import { MAX_ROLLOUTS, METRICS_NAMESPACE } from '../shared/api/figures.js';

/** Newest Node.js runtime aws-cdk-lib offers; the code also runs on the local Node 20. */
export const LAMBDA_RUNTIME = Runtime.NODEJS_24_X;

/** How many receives before a work item's message goes to the DLQ (and the item to Failed). */
export const MAX_RECEIVE_COUNT = 5;

/** The HTTP API's routes, by the role an IAM policy grants: what the shared API (shared/api/handler.ts) answers. */
export const API_ROUTES = {
  read: [['GET', '/{proxy+}']],
  operate: [['POST', '/rollouts/{id}/{command}']],
  // API Gateway takes the literal segment first: abort is admin's, the other commands operate's.
  admin: [
    ['POST', '/rollouts'],
    ['POST', '/runs'],
    ['POST', '/rollouts/{id}/abort'],
    ['POST', '/runs/{id}/cancel'],
  ],
} as const satisfies Record<string, readonly (readonly ['GET' | 'POST', string])[]>;
export type ApiRole = keyof typeof API_ROUTES;

/**
 * Aurora: who touches the activity flags (functions/activity.ts). What may
 * start work raises them before it writes; the schedules read theirs before
 * they probe the database, and lower it when it shows nothing to do.
 */
const ACTIVITY: Partial<Record<FunctionName, 'raise' | 'probe'>> = { api: 'raise', streamingPromoter: 'raise', batchPromoter: 'probe', coordinator: 'probe' };

/**
 * Aurora: the functions that never open the database, so get neither its
 * secret nor a place in the VPC. deadLetters has no trigger (the
 * coordinator's scan settles dead letters); spotDrain writes the worker
 * registry, and no worker registers on Aurora (workers need the DynamoDB
 * store), so its rule is left out too: a Spot notice would find no one.
 */
export const AURORA_WITHOUT_DATABASE: readonly FunctionName[] = ['deadLetters', 'spotDrain'];

/** What a Secrets Manager ARN ends with: the secret's name, `-`, and the six characters Secrets Manager adds. */
const SECRET_ARN = /^arn:[^:]+:secretsmanager:[^:]*:\d{12}:secret:.+-[A-Za-z0-9]{6}$/;

/** A CloudWatch namespace as GetMetricData takes it (1-255 characters, not starting with `:`), without wildcards. */
const NAMESPACE = /^[^:*][^*]{0,254}$/;

/** The coordinator's aliases that worker fleets invoke: `fleet-` and a name unique to the fleet (functions/coordinator.ts checks requests by it). */
export const FLEET_ALIAS_PREFIX = 'fleet-';

/** Per function: what to change from topology.ts's defaults. */
export interface FunctionOverrides {
  readonly memoryMb?: number;
  readonly logRetention?: RetentionDays;
  /** Reserved concurrency; a function topology.ts pins keeps its own (the batch promoter's 1: one tick at a time). */
  readonly reservedConcurrency?: number;
}

/** What CDK's grants on a queue or table encrypted with a customer-managed key add: the key's data-key and re-encrypt families. */
export const KMS_GRANT_FINDINGS = ['kms:GenerateDataKey*', 'kms:ReEncrypt*'].map((action) => ({
  id: `AwsSolutions::AwsSolutions-IAM5[Action::${action}]`,
  reason: `CDK's grant on the resources encrypted with the given key: ${action} on that key only`,
}));

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
   * place: keep `all` on such a stack (the code runs on either; README,
   * "Upgrading a deployed table").
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
   * after the run finished (README, "What is kept"). A WorkerFleet's workers
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
   * The targets a rollout spec may move, by name (README "Moving traffic"):
   * Lambda aliases and ALB rules. The functions that actuate are granted
   * exactly these resources. None by default: a spec naming one is refused.
   */
  readonly targets?: Readonly<Record<string, unknown>>;
}

/**
 * The control plane in AWS, as one construct to put in your own stack: the
 * store table (or an Aurora cluster), the rollout event bus (with an archive
 * for replay), the work queue and its DLQ, and the functions of
 * `topology.ts` wired to their rules and schedules, each rule target with a
 * retry policy and a DLQ; the HTTP API (IAM-authorized); alarms and an
 * optional dashboard. `grantRead`, `grantSignal`, `grantOperate` and
 * `grantAdmin` give a principal what each role may do.
 */
export class RolloutControlPlane extends Construct {
  /** The DynamoDB store (created, or shared from another stack); null with the Aurora store. */
  readonly table: ITable | null;
  /** Where rollout signals arrive and rollout events go: the bus given, or the one created (locked to its senders, archived 30 days). */
  readonly bus: IEventBus;
  /** The bus this construct created; null when an existing one was given. */
  private readonly ownBus: EventBus | null;
  readonly workQueue: Queue;
  readonly workDlq: Queue;
  /** Events a rule could not deliver to its target after its retries. */
  readonly eventsDlq: Queue;
  readonly functions: Record<FunctionName, LambdaFunctionResource>;
  /** The HTTP API's URL. */
  readonly apiUrl: string;
  /** Every alarm, for your own actions or dashboards. */
  readonly alarms: readonly Alarm[];
  /** Where the alarms notify: the topic given, or the one the stack created (undefined when only `alarmActions` were given). */
  readonly alarmTopic: ITopic | undefined;
  /** Set with `store: 'aurora'`. */
  readonly aurora: AuroraStore | null;
  /** The HTTP API's stage (its 5xx answers are an alarm's). */
  private apiStage: HttpStage | undefined;
  /** The HTTP API's routes by what they do, for `grantApi`. */
  readonly apiRoutes: Record<ApiRole, HttpRoute[]> = { read: [], operate: [], admin: [] };
  /** The Secrets Manager secrets the outbound credentials name. */
  private readonly outboundSecrets: readonly string[];
  /** The targets rollouts may move (validated at synth). */
  private readonly targets: TargetsConfig;
  /** Where CloudWatch gates may read. */
  private readonly gateRegions: readonly string[];
  private readonly gateNamespaces: readonly string[];
  /** The coordinator's alias for each worker fleet, with the runs it serves (ROLLOUT_COORDINATOR_FLEETS, read when synthesised). */
  private readonly fleetAliases = new Map<string, readonly string[]>();
  /** Each worker fleet's run and the fleet's own work queue (ROLLOUT_RUN_QUEUES, read when synthesised). */
  private readonly runQueues = new Map<string, Queue>();
  /** What the shared work queue is built with, for each fleet's own queue. */
  private readonly workQueueProps: QueueProps;
  /** Whom the alarms notify: a fleet queue's alarm too. */
  private readonly alarmActions: readonly IAlarmAction[];
  private readonly gateAlarms: readonly string[];
  /** Roles granted signal after construction: the bus's deny lists them too (read when synthesised). */
  private readonly signallers: string[] = [];
  private readonly stack: Stack;

  constructor(scope: Construct, id: string, props: RolloutControlPlaneProps = {}) {
    super(scope, id);
    this.stack = Stack.of(this);
    const nodeId = props.nodeId ?? this.stack.stackName;

    if (props.store === 'aurora') {
      if (props.table || props.sharedTableName)
        throw new Error('invalid control plane config: table: the Aurora store keeps no table; leave out table and sharedTableName');
      this.table = null;
    } else if (props.table) this.table = props.table;
    else if (props.sharedTableName) {
      this.table = Table.fromTableAttributes(this, 'Store', { tableName: props.sharedTableName, globalIndexes: [GSI1.name] });
    } else {
      const table = new Table(this, 'Store', {
        partitionKey: { name: KEY.pk, type: AttributeType.STRING },
        sortKey: { name: KEY.sk, type: AttributeType.STRING },
        billingMode: BillingMode.PAY_PER_REQUEST,
        ...(props.encryptionKey
          ? { encryption: TableEncryption.CUSTOMER_MANAGED, encryptionKey: props.encryptionKey }
          : { encryption: TableEncryption.AWS_MANAGED }),
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        // Records that may expire carry `ttl`; lease items never do — a lease row
        // removed by TTL would come back at epoch 0 and break fencing.
        timeToLiveAttribute: 'ttl',
        deletionProtection: true,
        removalPolicy: RemovalPolicy.RETAIN,
      });
      table.addGlobalSecondaryIndex({
        indexName: GSI1.name,
        partitionKey: { name: GSI1.pk, type: AttributeType.STRING },
        sortKey: { name: GSI1.sk, type: AttributeType.STRING },
        // Only what the index's readers need, and nothing a start or a heartbeat changes: those writes skip the index.
        ...((props.indexProjection ?? 'include') === 'include'
          ? { projectionType: ProjectionType.INCLUDE, nonKeyAttributes: [...GSI1_PROJECTED] }
          : { projectionType: ProjectionType.ALL }),
      });
      this.table = table;
    }

    if (props.bus && props.eventSenders?.length)
      throw new Error(
        'invalid control plane config: eventSenders: the control plane locks only a bus it creates; with an existing bus, its own policy says who may put events on it',
      );
    this.ownBus = props.bus ? null : new EventBus(this, 'RolloutBus', { eventBusName: `${this.stack.stackName}-rollout` });
    this.bus = props.bus ?? this.ownBus!;
    // Named here, within EventBridge's 48 characters for an archive: a name generated from the stack's name and the
    // construct's id (RolloutControlPlane-RolloutArchive45992123-…) runs past it. Unique per stack: the stack's own name, hashed.
    // An existing bus is archived (or not) by whoever owns it.
    if (this.ownBus)
      new Archive(this, 'RolloutArchive', {
        archiveName: `${Names.uniqueResourceName(this, { maxLength: 39 })}-archive`,
        sourceEventBus: this.ownBus,
        eventPattern: { account: [this.stack.account] },
        retention: Duration.days(30),
        description: 'Every rollout event, for replay',
      });

    const queueProps = (extra: { deadLetterQueue?: { queue: Queue; maxReceiveCount: number }; visibilityTimeout?: Duration } = {}): QueueProps => ({
      ...(props.encryptionKey ? { encryption: QueueEncryption.KMS, encryptionMasterKey: props.encryptionKey } : { encryption: QueueEncryption.SQS_MANAGED }),
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      ...extra,
    });
    const queue = (name: string, extra: Parameters<typeof queueProps>[0] = {}) => new Queue(this, name, queueProps(extra));
    // Drained by the coordinator's scan every minute: a dead letter it cannot settle yet comes back three scans later.
    this.workDlq = queue('WorkDlq', { visibilityTimeout: Duration.seconds(180) });
    this.eventsDlq = queue('EventsDlq');
    Validations.of(this.eventsDlq).acknowledge({
      id: 'AwsSolutions::AwsSolutions-SQS3',
      reason: 'It is the dead-letter queue of every EventBridge rule target (set on the targets, which cdk-nag does not see)',
    });
    // Visibility: the worker extends it while an item runs (heartbeat); 60 s covers a missed extension or two.
    this.workQueueProps = queueProps({ deadLetterQueue: { queue: this.workDlq, maxReceiveCount: MAX_RECEIVE_COUNT }, visibilityTimeout: Duration.seconds(60) });
    this.workQueue = new Queue(this, 'WorkQueue', this.workQueueProps);

    if (props.auroraReader && props.store !== 'aurora') throw new Error('invalid control plane config: auroraReader: only with store: aurora');
    if (props.auroraMinCapacity !== undefined && props.store !== 'aurora')
      throw new Error('invalid control plane config: auroraMinCapacity: only with store: aurora');
    this.aurora =
      props.store === 'aurora'
        ? new AuroraStore(this, 'Aurora', {
            ...(props.vpc ? { vpc: props.vpc } : {}),
            ...(props.auroraReader ? { reader: true } : {}),
            ...(props.auroraMinCapacity !== undefined ? { minCapacity: props.auroraMinCapacity } : {}),
          })
        : null;
    // Checked at synth: a bad list fails `cdk synth`, not the first gate read.
    const outbound = new OutboundPolicy(props.outbound ?? {});
    this.targets = parseTargets(props.targets ?? {});
    for (const [name, t] of Object.entries(this.targets)) {
      if (t.type === 'nginx')
        throw new Error(`invalid stack config: targets.${name}: an nginx target is a file on a machine a node runs on; the stack's functions cannot reach it`);
    }
    const unreachable = targetOutboundIssues(this.targets, outbound);
    if (unreachable.length) throw new Error(`invalid stack config: targets: ${unreachable.join('; ')}`);
    this.gateRegions = props.gateRegions?.length ? props.gateRegions : [this.stack.region];
    this.gateAlarms = props.gateAlarms ?? [];
    this.gateNamespaces = [...new Set(props.gateNamespaces ?? [])];
    for (const ns of this.gateNamespaces) {
      if (!NAMESPACE.test(ns))
        throw new Error(
          `invalid control plane config: gateNamespaces: "${ns.slice(0, 300)}": a CloudWatch namespace (1-255 characters, not starting with :), named exactly (no *)`,
        );
    }
    for (const name of this.gateAlarms) {
      if (!/^[^*]{1,255}\*?$/.test(name))
        throw new Error(
          `invalid control plane config: gateAlarms: "${name.slice(0, 300)}": an alarm name (1-255 characters), or a prefix ending in *, with no other *`,
        );
    }
    this.outboundSecrets = Object.entries(outbound.credentials).flatMap(([name, c]) => {
      const ref = c.type === 'basic' ? c.password : c.type === 'bearer' ? c.token : c.type === 'hmac' ? c.secret : null;
      if (!ref || !('secretsManager' in ref)) return [];
      // A partial ARN would need a wildcard after it, and a wildcard reaches every secret whose name starts the same.
      if (ref.secretsManager.startsWith('arn:') && !SECRET_ARN.test(ref.secretsManager)) {
        throw new Error(
          `invalid control plane config: outbound.credentials.${name}: secretsManager: "${ref.secretsManager.slice(0, 300)}" is not a whole secret ARN (…:secret:NAME-XXXXXX); give the whole ARN or the secret's name`,
        );
      }
      return [ref.secretsManager];
    });
    const retention = parseConfig('retention', retentionSchema, props.retention ?? {});
    const env: Record<string, string> = {
      ...(this.table ? { ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: this.table.tableName } : { ROLLOUT_STORE: 'postgres' }),
      ROLLOUT_NODE_ID: nodeId,
      ROLLOUT_EVENT_BUS: this.bus.eventBusName,
      ROLLOUT_WORK_QUEUE_URL: this.workQueue.queueUrl,
      ROLLOUT_WORK_DLQ_URL: this.workDlq.queueUrl,
      ROLLOUT_MAX_RECEIVE_COUNT: String(MAX_RECEIVE_COUNT),
      ...(props.outbound ? { ROLLOUT_OUTBOUND: JSON.stringify({ origins: outbound.allowedOrigins, credentials: outbound.credentials }) } : {}),
      ...(Object.keys(this.targets).length ? { ROLLOUT_TARGETS: JSON.stringify(this.targets) } : {}),
      // Always set: a function of this stack reads only the namespaces named (none by default).
      ROLLOUT_GATE_NAMESPACES: JSON.stringify(this.gateNamespaces),
      ROLLOUT_RETAIN_ROLLOUTS_DAYS: String(retention.rolloutDays),
      ROLLOUT_RETAIN_RUNS_DAYS: String(retention.runDays),
      POWERTOOLS_METRICS_NAMESPACE: 'Rollout',
      POWERTOOLS_LOG_LEVEL: 'INFO',
    };
    const defaultBus = EventBus.fromEventBusName(this, 'DefaultBus', 'default');
    this.functions = {} as Record<FunctionName, LambdaFunctionResource>;
    this.apiUrl = '';
    for (const name of Object.keys(props.functions ?? {}))
      if (!(name in FUNCTIONS)) throw new Error(`invalid control plane config: functions.${name}: no such function (${Object.keys(FUNCTIONS).join(', ')})`);
    for (const [name, spec] of Object.entries(FUNCTIONS) as [FunctionName, FunctionSpec][]) {
      this.functions[name] = this.lambda(name, spec, env, defaultBus, props.functions?.[name] ?? {});
    }
    // The work DLQ's consumer is the coordinator's scan (see `lambda`): it alone may receive from it.
    this.workDlq.grantConsumeMessages(this.functions.coordinator);
    // Which alias serves which fleet's runs: read when synthesised, as fleets are added after construction.
    // Where each fleet's runs are sent (its own queue): read when synthesised, as fleets are added after construction.
    const runQueues = Lazy.string({
      produce: () => JSON.stringify(Object.fromEntries([...this.runQueues].sort(([a], [b]) => a.localeCompare(b)).map(([run, q]) => [run, q.queueUrl]))),
    });
    for (const name of this.workSenders()) this.functions[name].addEnvironment('ROLLOUT_RUN_QUEUES', runQueues);
    this.functions.coordinator.addEnvironment(
      'ROLLOUT_COORDINATOR_FLEETS',
      Lazy.string({ produce: () => JSON.stringify(Object.fromEntries([...this.fleetAliases].sort(([a], [b]) => a.localeCompare(b)))) }),
    );

    if (this.ownBus) this.lockBus(this.ownBus, props.eventSenders ?? []);
    if (props.encryptionKey || this.table?.encryptionKey) Validations.of(this).acknowledge(...KMS_GRANT_FINDINGS);
    // Every alarm notifies someone: the actions and topic given, else a topic of the stack's own.
    this.alarmTopic = props.alarmTopic ?? (props.alarmActions?.length ? undefined : this.ownAlarmTopic());
    const actions = [...(props.alarmActions ?? []), ...(this.alarmTopic ? [new SnsAction(this.alarmTopic)] : [])];
    this.alarmActions = actions;
    this.alarms = this.operations(props.dashboard ?? false);
    for (const alarm of this.alarms) alarm.addAlarmAction(...actions);
    if (id === 'Default') this.keepDescriptions();
  }

  /** The topic the alarms notify when none is given: subscribe to it (its ARN is an output). */
  private ownAlarmTopic(): Topic {
    const topic = new Topic(this, 'AlarmTopic', { displayName: 'Rollout control plane alarms', enforceSSL: true });
    new CfnOutput(this, 'AlarmTopicArn', { value: topic.topicArn, description: 'Subscribe to be told when an alarm of the control plane fires' });
    Validations.of(topic).acknowledge({
      id: 'AwsSolutions::AwsSolutions-SNS2',
      reason:
        'Alarm notifications carry alarm names and states only; CloudWatch cannot publish to a topic under the AWS-managed SNS key. Pass alarmTopic with a key of yours to encrypt them.',
    });
    return topic;
  }

  /**
   * Under the id `Default` (the repository's stack), logical ids are as they
   * were before this construct existed; a security group CDK describes by its
   * construct path (the secret rotation's) would still change its description,
   * and a new description replaces a security group. Described as before.
   */
  private keepDescriptions(): void {
    const mine = `${this.node.path}/`;
    const before = `${this.node.scope!.node.path}/`;
    for (const c of this.node.findAll()) {
      if (!(c instanceof CfnSecurityGroup) || typeof c.groupDescription !== 'string' || !c.groupDescription.startsWith(mine)) continue;
      c.groupDescription = before + c.groupDescription.slice(mine.length);
    }
  }

  /** What workers of a run need, for a fleet of your own (WorkerFleet uses it): the table, the queue, the coordinator. */
  get workerResources(): { readonly table: ITable; readonly workQueue: Queue; readonly coordinator: LambdaFunctionResource } {
    if (!this.table) throw new Error('workers need the DynamoDB store (workers on Aurora are not wired yet)');
    return { table: this.table, workQueue: this.workQueue, coordinator: this.functions.coordinator };
  }

  /**
   * The coordinator as a worker fleet reaches it: an alias of its own (on
   * $LATEST) that the fleet's role alone is granted. Through it the
   * coordinator answers steals for `runs` only (functions/coordinator.ts);
   * a scan, the scan of every run and retention stay the schedule's, which
   * invokes the function itself, and no fleet may invoke that.
   */
  fleetCoordinator(fleet: Construct, runs: readonly string[]): Alias {
    const aliasName = `${FLEET_ALIAS_PREFIX}${Names.uniqueResourceName(fleet, { maxLength: 100 })}`;
    if (this.fleetAliases.has(aliasName)) throw new Error(`invalid worker fleet config: ${fleet.node.path}: already has a coordinator alias`);
    this.fleetAliases.set(aliasName, [...runs]);
    return new Alias(this, `CoordinatorFor${Names.uniqueId(fleet)}`, {
      aliasName,
      version: this.functions.coordinator.latestVersion,
      description: `Coordinator requests of worker fleet ${fleet.node.path}: steals for its runs only`,
    });
  }

  /** The functions that send work items (the `queue:send` grant): the api (new runs) and the coordinator (re-pended items, dead letters). */
  private workSenders(): FunctionName[] {
    return (Object.entries(FUNCTIONS) as [FunctionName, FunctionSpec][]).filter(([, spec]) => spec.grants.includes('queue:send')).map(([name]) => name);
  }

  /**
   * A worker fleet's own work queue (the shared work queue's settings, and
   * its dead-letter queue): `runs` are sent there and nowhere else, so the
   * fleet's role is granted this queue alone and its workers never receive
   * another run's items. The functions that send work may send to it; it
   * pages as the shared queue does when work waits.
   */
  fleetQueue(fleet: Construct, runs: readonly string[]): Queue {
    for (const r of runs) {
      if (this.runQueues.has(r))
        throw new Error(
          `invalid worker fleet config: ${fleet.node.path}: runs: "${r}" is already served by another worker fleet (a run's items go to one fleet's queue)`,
        );
    }
    const id = Names.uniqueId(fleet);
    const q = new Queue(this, `WorkQueueFor${id}`, this.workQueueProps);
    for (const r of runs) this.runQueues.set(r, q);
    for (const name of this.workSenders()) q.grantSendMessages(this.functions[name]);
    const alarm = new Alarm(this, `WorkQueueAgeFor${id}`, {
      alarmDescription: `Work of worker fleet ${fleet.node.path} (runs ${runs.join(', ')}) waits more than 15 minutes: too few workers, or none. Check the fleet (its Auto Scaling group and the workers' logs) and \`rollout runs get RUN\`.`,
      metric: q.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1) }),
      threshold: 900,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    alarm.addAlarmAction(...this.alarmActions);
    (this.alarms as Alarm[]).push(alarm);
    return q;
  }

  /** GET routes: rollouts, runs, items and results, assignment, the cluster. */
  grantRead(grantee: IGrantable): void {
    this.grantApi(grantee, 'read');
  }

  /** Reading, and commands on rollouts (promote, pause, resume, retry…; not abort). */
  grantOperate(grantee: IGrantable): void {
    this.grantApi(grantee, 'read', 'operate');
  }

  /** Everything: creating rollouts and runs, aborting rollouts, cancelling runs, besides operating. */
  grantAdmin(grantee: IGrantable): void {
    this.grantApi(grantee, 'read', 'operate', 'admin');
  }

  /**
   * Putting rollout signals (metrics, alarm changes) on the bus: events:PutEvents,
   * and, on the bus the control plane created, a place on its policy's list of
   * senders (everyone else is denied).
   * A role's ARN is needed for that list: grant a role, not a user or a service.
   */
  grantSignal(grantee: IGrantable): void {
    const role = grantee.grantPrincipal as Partial<IRole>;
    if (typeof role.roleArn !== 'string') throw new Error('grantSignal: grant a role (the bus policy names its senders by role ARN)');
    this.bus.grantPutEventsTo(grantee);
    this.signallers.push(role.roleArn);
  }

  /** The declared targets, and nothing else: each alias, each rule or listener by its ARN. */
  private grantTargets(fn: LambdaFunctionResource): void {
    const aliases: string[] = [];
    const writes: string[] = [];
    const regions = new Set<string>();
    for (const t of Object.values(this.targets)) {
      if (t.type === 'lambdaAlias') {
        const region = t.region ?? this.stack.region;
        // A function ARN (arn:…:function:NAME, any qualifier dropped) or a name in this account.
        const fnArn = t.functionName.startsWith('arn:')
          ? t.functionName.split(':').slice(0, 7).join(':')
          : `arn:${this.stack.partition}:lambda:${region}:${this.stack.account}:function:${t.functionName}`;
        aliases.push(`${fnArn}:${t.alias}`);
      } else if (t.type === 'albWeights') {
        writes.push((t.ruleArn ?? t.listenerArn)!);
        regions.add(t.region ?? this.stack.region);
      }
    }
    if (aliases.length) fn.addToRolePolicy(new PolicyStatement({ actions: ['lambda:GetAlias', 'lambda:UpdateAlias'], resources: aliases }));
    if (writes.length) {
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ['elasticloadbalancing:ModifyRule', 'elasticloadbalancing:ModifyListener', 'elasticloadbalancing:AddTags'],
          resources: writes,
        }),
      );
      // ELBv2's Describe* take no resource: held to the targets' regions.
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ['elasticloadbalancing:DescribeRules', 'elasticloadbalancing:DescribeListeners', 'elasticloadbalancing:DescribeTags'],
          resources: ['*'],
          conditions: { StringEquals: { 'aws:RequestedRegion': [...regions] } },
        }),
      );
    }
  }

  private lambda(name: FunctionName, spec: FunctionSpec, env: Record<string, string>, defaultBus: IEventBus, o: FunctionOverrides): LambdaFunctionResource {
    const id = name[0]!.toUpperCase() + name.slice(1);
    const reserved = spec.reservedConcurrency ?? o.reservedConcurrency;
    const database = this.aurora && !AURORA_WITHOUT_DATABASE.includes(name) ? this.aurora : null;
    const readsMetrics = spec.grants.some((g) => g === 'cloudwatch:read') && this.gateNamespaces.length > 0;
    const fn = functionOf(this, id, name, spec, {
      runtime: LAMBDA_RUNTIME,
      architecture: Architecture.ARM_64,
      description: spec.description,
      timeout: Duration.seconds(spec.timeoutSeconds),
      memorySize: o.memoryMb ?? spec.memoryMb,
      ...(reserved !== undefined ? { reservedConcurrentExecutions: reserved } : {}),
      environment: { ...env, POWERTOOLS_SERVICE_NAME: name },
      tracing: spec.tracing === 'active' ? Tracing.ACTIVE : Tracing.PASS_THROUGH,
      ...(database ? { vpc: database.vpc, vpcSubnets: database.subnets, securityGroups: [database.clientGroup] } : {}),
      // Rules invoke asynchronously: a failed invocation is retried twice by Lambda, then kept in the
      // events DLQ with its error (the rule target's own DLQ only sees delivery failures).
      ...(spec.triggers.some((t) => t.kind === 'rule' || t.kind === 'schedule') ? { deadLetterQueue: this.eventsDlq, retryAttempts: 2 } : {}),
      logGroup: new LogGroup(this, `${id}Logs`, { retention: o.logRetention ?? RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
    });
    if (database) {
      database.grant(fn);
      const use = ACTIVITY[name];
      if (use) database.grantActivity(fn, use);
    }
    for (const grant of spec.grants) {
      if (this.table && (grant === 'store:read' || grant === 'store:write')) {
        grantItems(
          fn,
          this.table,
          grant === 'store:read' ? 'read' : 'write',
          spec.keys.flatMap((k) => LEADING_KEYS[k]),
        );
      }
      if (grant === 'bus:put') this.bus.grantPutEventsTo(fn);
      if (grant === 'queue:send') this.workQueue.grantSendMessages(fn);
      // 'dlq:consume': the coordinator's scan consumes the work DLQ, granted it in the constructor.
      if (grant === 'cloudwatch:read' && this.outboundSecrets.length) {
        // The gate readers send the operator's credentials: those secrets, and no others.
        // A whole ARN as it is; a name with the six characters Secrets Manager appends (-??????), so that no
        // other secret whose name starts the same (NAME-old, NAME-prod) matches.
        const arn = (id: string) =>
          id.startsWith('arn:') ? id : `arn:${this.stack.partition}:secretsmanager:${this.stack.region}:${this.stack.account}:secret:${id}-??????`;
        fn.addToRolePolicy(new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: this.outboundSecrets.map(arn) }));
      }
      if (grant === 'targets:actuate') this.grantTargets(fn);
      if (grant === 'cloudwatch:read') {
        // GetMetricData takes no resource and no namespace condition: held to the gate regions by the requested region, and granted only
        // when the operator named namespaces (the functions refuse any other, ROLLOUT_GATE_NAMESPACES). DescribeAlarms: this account's alarms in those regions.
        if (readsMetrics)
          fn.addToRolePolicy(
            new PolicyStatement({
              actions: ['cloudwatch:GetMetricData'],
              resources: ['*'],
              conditions: { StringEquals: { 'aws:RequestedRegion': [...this.gateRegions] } },
            }),
          );
        fn.addToRolePolicy(
          new PolicyStatement({
            actions: ['cloudwatch:DescribeAlarms'],
            resources: this.gateRegions.map((r) => `arn:${this.stack.partition}:cloudwatch:${r}:${this.stack.account}:alarm:*`),
          }),
        );
      }
    }
    // Every rule target: retried for up to an hour, then kept in the events DLQ with the reason.
    const target = (input?: Readonly<Record<string, unknown>>) =>
      new LambdaFunction(fn, {
        deadLetterQueue: this.eventsDlq,
        retryAttempts: 4,
        maxEventAge: Duration.hours(1),
        ...(input ? { event: RuleTargetInput.fromObject(input) } : {}),
      });
    spec.triggers.forEach((t, i) => {
      if (t.kind === 'rule') {
        if (this.aurora && !database) return;
        // CloudWatch's alarm changes: those of the watched alarms only, or no rule at all.
        const alarms = JSON.stringify(t.pattern.source) === JSON.stringify([CLOUDWATCH_SOURCE]) ? this.gateAlarms : null;
        if (alarms && !alarms.length) return;
        const eventPattern = alarms
          ? { ...t.pattern, detail: { alarmName: alarms.map((n) => (n.endsWith('*') ? { prefix: n.slice(0, -1) } : n)) } }
          : t.pattern;
        new Rule(this, `${id}Rule${i}`, {
          eventBus: t.bus === 'rollout' ? this.bus : defaultBus,
          eventPattern: eventPattern,
          targets: [target()],
          description: spec.description,
        });
      } else if (t.kind === 'http') {
        this.httpApi(fn);
      } else if (t.kind === 'queue') {
        // No event source mapping: its pollers would long-poll the work DLQ all month (about US$ 0.26 idle, more than
        // the rest of the functions together). The coordinator's scan drains it every minute instead, with the same
        // settling (functions/coordinator.ts), as a node's coordinators drain theirs on a timer. A function with no
        // other trigger is still deployed while topology.ts declares it, with nothing to invoke it.
      } else if (t.kind === 'schedule') {
        new Rule(this, `${id}Schedule${i}`, {
          schedule: Schedule.rate(Duration.minutes(t.everyMinutes)),
          targets: [target(t.input)],
          description: `${spec.description} (schedule)`,
        });
      }
    });
    if (database) {
      Validations.of(fn).acknowledge({
        id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
        reason: 'AWSLambdaVPCAccessExecutionRole only lets the function manage its own network interfaces in the VPC, and write its logs',
      });
    }
    Validations.of(fn).acknowledge(
      {
        id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        reason: 'AWSLambdaBasicExecutionRole only lets the function write its own logs',
      },
      {
        id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]',
        reason: `X-Ray PutTraceSegments/PutTelemetryRecords${readsMetrics ? ', CloudWatch GetMetricData (held to the gate regions; namespaces checked by the function)' : ''}${spec.grants.some((g) => g === 'targets:actuate') && Object.values(this.targets).some((t) => t.type === 'albWeights') ? ', ELBv2 DescribeRules/DescribeListeners/DescribeTags (held to the targets’ regions)' : ''} cannot be scoped to a resource`,
      },
      ...(spec.grants.some((g) => g === 'cloudwatch:read')
        ? this.gateRegions.map((r) => ({
            // As cdk-nag prints the resource: a token as <AWS::…>, a stack with an explicit env as its literal region and account.
            id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudwatch:${r === this.stack.region && Token.isUnresolved(this.stack.region) ? '<AWS::Region>' : r}:${Token.isUnresolved(this.stack.account) ? '<AWS::AccountId>' : this.stack.account}:alarm:*]`,
            reason:
              'A cloudwatchAlarm gate names its alarms in the rollout spec, known only at run time: DescribeAlarms on this account’s alarms in the gate regions',
          }))
        : []),
      ...(this.table
        ? [
            {
              id: `AwsSolutions::AwsSolutions-IAM5[Resource::${this.indexResource(this.table)}]`,
              reason: 'The table grant covers the table’s own indexes (gsi1), nothing else',
            },
          ]
        : []),
    );
    return fn;
  }

  /**
   * Only the named senders and the stack's own functions may put events on
   * the rollout bus: a Deny for every other principal (a same-account role
   * with events:PutEvents on `*` included). The signal rule also matches on
   * `source` (topology.ts), so our own ai.rollout events are never signals.
   */
  private lockBus(bus: EventBus, senders: readonly string[]): void {
    const own = Object.entries(this.functions)
      .filter(([name]) => FUNCTIONS[name as FunctionName].grants.some((g) => g === 'bus:put'))
      .map(([, fn]) => fn.role!.roleArn);
    bus.addToResourcePolicy(
      new PolicyStatement({
        sid: 'OnlyNamedSendersPutEvents',
        effect: Effect.DENY,
        principals: [new AnyPrincipal()],
        actions: ['events:PutEvents'],
        resources: [bus.eventBusArn],
        // Only requests made by an IAM principal: EventBridge's own (an archive replay) carry none and are not denied.
        // Lazy: roles given grantSignal after construction are read at synth.
        conditions: {
          ArnNotLike: { 'aws:PrincipalArn': Lazy.list({ produce: () => [...senders, ...own, ...this.signallers] }) },
          Null: { 'aws:PrincipalArn': 'false' },
        },
      }),
    );
  }

  /**
   * Lets `grantee` call what each role named may (execute-api:Invoke). Written
   * path by path rather than per route: a `*` in an execute-api ARN crosses
   * `/`, so a grant of `rollouts/*` would let an operator abort.
   */
  grantApi(grantee: IGrantable, ...roles: ApiRole[]): void {
    const api = this.apiRoutes.read[0]?.httpApi;
    if (!api) throw new Error('grantApi: this stack has no HTTP API');
    const arn = (method: string, path: string) =>
      `arn:${this.stack.partition}:execute-api:${this.stack.region}:${this.stack.account}:${api.apiId}/*/${method}${path}`;
    const paths: Record<ApiRole, string[]> = {
      read: [arn('GET', '/*')],
      operate: COMMANDS.filter((c) => c !== 'abort').map((c) => arn('POST', `/rollouts/*/${c}`)),
      admin: [arn('POST', '/rollouts'), arn('POST', '/runs'), arn('POST', '/rollouts/*/abort'), arn('POST', '/runs/*/cancel')],
    };
    grantee.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ actions: ['execute-api:Invoke'], resources: roles.flatMap((r) => paths[r]) }));
    // The * after the API id is the stage; the others are one path segment each (a rollout or run id): say so to cdk-nag.
    if (Construct.isConstruct(grantee)) {
      const literal = (v: string, token: string) => (Token.isUnresolved(v) ? token : v);
      const nag = (path: string) =>
        `arn:<AWS::Partition>:execute-api:${literal(this.stack.region, '<AWS::Region>')}:${literal(this.stack.account, '<AWS::AccountId>')}:<${this.stack.getLogicalId(api.node.defaultChild as CfnElement)}>/*/${path}`;
      const granted = roles.flatMap((r) => paths[r].map((arn) => arn.split('/*/').slice(1).join('/*/')));
      Validations.of(grantee).acknowledge(
        ...granted.map((path) => ({
          id: `AwsSolutions::AwsSolutions-IAM5[Resource::${nag(path)}]`,
          reason: 'The control plane API: any stage, and one rollout or run id per path segment; routes no other role of it grants',
        })),
      );
    }
  }

  /** How cdk-nag names the table's index ARN pattern in a policy. */
  private indexResource(table: ITable): string {
    const cfn = table.node.defaultChild as CfnTable | undefined;
    return cfn
      ? `<${this.stack.getLogicalId(cfn)}.Arn>/index/*`
      : `arn:<AWS::Partition>:dynamodb:<AWS::Region>:<AWS::AccountId>:table/${table.tableName}/index/*`;
  }

  /**
   * An HTTP API in front of `fn`: IAM authorization on every route, access
   * logs, throttling. The routes are split by what they do, so an IAM policy
   * can grant reading, operating and administering separately (`grantApi`);
   * a path no route names is refused by API Gateway before the function runs.
   * Signals go on the bus, not through the API: `eventSenders`.
   */
  private httpApi(fn: LambdaFunctionResource): void {
    const api = new HttpApi(this, 'HttpApi', { description: 'Rollout control plane API (SigV4-signed requests only)', createDefaultStage: false });
    const integration = new HttpLambdaIntegration('ApiIntegration', fn);
    const authorizer = new HttpIamAuthorizer();
    for (const [role, routes] of Object.entries(API_ROUTES) as [ApiRole, (typeof API_ROUTES)[ApiRole]][]) {
      for (const [method, path] of routes)
        this.apiRoutes[role].push(...api.addRoutes({ path, methods: [method === 'GET' ? HttpMethod.GET : HttpMethod.POST], integration, authorizer }));
    }
    const logs = new LogGroup(this, 'ApiAccessLogs', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
    const stage = new HttpStage(this, 'ApiStage', {
      httpApi: api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: 50, burstLimit: 100 },
      accessLogSettings: { destination: new LogGroupLogDestination(logs) },
    });
    (this as { apiUrl: string }).apiUrl = stage.url;
    this.apiStage = stage;
  }

  /**
   * The alarms, one per concern, each for something a person must act on
   * (README "Operating" says what to do); and the opt-in dashboard. An alarm
   * is billed per metric it reads, so where two would read the same failure
   * one does: a function invoked by a rule or a schedule that keeps failing
   * lands in the events DLQ once its retries are used up (EventsDlqNotEmpty),
   * the API's failures are API Gateway's 5xx answers (ApiErrors); a dead
   * letter settled and one left unsettled are both messages received from
   * the work DLQ (WorkDeadLetters); a rollout past its deadline and one
   * drifted are both rollouts that need a person (RolloutNeedsAttention).
   */
  private operations(dashboard: boolean): Alarm[] {
    const fiveMinutes = Duration.minutes(5);
    const custom = (metricName: string, statistic: string, dimensionsMap: Record<string, string> = {}, period = fiveMinutes) =>
      new Metric({ namespace: METRICS_NAMESPACE, metricName, statistic, period, dimensionsMap });
    const alarm = (id: string, alarmDescription: string, metric: IMetric, o: { threshold?: number; evaluationPeriods?: number } = {}) =>
      new Alarm(this, id, {
        alarmDescription,
        metric,
        threshold: o.threshold ?? 0,
        comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: o.evaluationPeriods ?? 1,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      });
    const alarms = [
      ...(this.apiStage
        ? [
            alarm(
              'ApiErrors',
              'The API answered 5xx: the api function failed, timed out or ran out of memory, or answered 500 itself. Its log group says why (Logs Insights `filter level = "error"`; a 500 carries the requestId of its line). On Aurora, a request that finds the cluster paused waits for it to resume (about 15 s, longer after a day) and may time out once. The other functions\' failures page through EventsDlqNotEmpty once their retries are used up.',
              this.apiStage.metricServerError({ period: fiveMinutes, statistic: 'Sum' }),
            ),
          ]
        : []),
      alarm(
        'EventsDlqNotEmpty',
        'An event was given up: a rule could not deliver it, or its function failed it three times (a malformed signal, a store that kept failing, a batch promoter or coordinator scan that kept failing, a Spot notice). Each message carries its error (ErrorMessage attribute), and the function\'s log group the failures (Logs Insights `filter level = "error"`). Fix the sender or the cause, then redrive the queue to the bus or delete the messages.',
        this.eventsDlq.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
      ),
      alarm(
        'WorkDeadLetters',
        "Work items' messages reached the work DLQ: they were given back maxReceiveCount times (they kept killing or failing their workers). The coordinator's scan marks each item Failed within a minute: `rollout runs items RUN --state failed` shows why; fix the handler or the input, then create a run of those items again. If the alarm stays in ALARM, some cannot be settled: the coordinator's log says why (another stack coordinates the run, or the store fails).",
        // Every letter is received at least once by the scan, settled or not; one left unsettled is received again every few minutes.
        this.workDlq.metricNumberOfMessagesReceived({ period: fiveMinutes, statistic: 'Sum' }),
      ),
      alarm(
        'WorkQueueAge',
        "Work waits more than 15 minutes: too few workers, or none. Check the worker fleet (its Auto Scaling group and the workers' logs) and `rollout runs get RUN`.",
        this.workQueue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1) }),
        { threshold: 900, evaluationPeriods: 3 },
      ),
      alarm(
        'RunThrottled',
        'A work run is throttled by DynamoDB (a hot key): it runs slower than it could. `rollout runs status RUN` names the key family; create such runs with more shards (itemsPerSecond).',
        custom('RunsThrottled', 'Maximum', { service: 'coordinator' }),
        { evaluationPeriods: 2 },
      ),
      alarm(
        'LeaseLost',
        'Leases keep changing hands: more than 3 times in 15 minutes a promoter could not renew promotion_leader or a coordinator was fenced mid-request (LeasesLost; by function: LeaseRenewalFailures, Fenced). Fencing kept every write safe, but promotions and coordination stall at each change. Another stack sharing the store, or a store that is slow or failing: look at its latency and throttling, and at which stacks share it.',
        custom('LeasesLost', 'Sum', {}, Duration.minutes(15)),
        { threshold: 3 },
      ),
      alarm(
        'RolloutNeedsAttention',
        'A running rollout needs a person (RolloutsNeedingAttention): it made no progress for its progressDeadlineSeconds (ai.rollout.progress_deadline_exceeded; aborted if progressDeadlineAbort), or a target it moves was changed outside the control plane (ai.rollout.actuation_drift; the rollout is paused). `rollout rollouts history ID` says which. Past its deadline: read its gates (`rollout rollouts get ID`), a gate that never passes or a stage waiting on a manual promote; promote, abort, or fix the signal. Drifted: put the target back and resume, or abort.',
        custom('RolloutsNeedingAttention', 'Sum'),
      ),
    ];
    if (dashboard) this.dashboard(alarms);
    return alarms;
  }

  /**
   * The figures of infra/observability/grafana-dashboard.json, from the EMF
   * the functions publish under the same names. Per-rollout series are known
   * only at run time: SEARCH finds them (`{Rollout,rollout}` is the namespace
   * and the exact dimension set).
   */
  private dashboard(alarms: readonly Alarm[]): void {
    const search = (schema: string, metricName: string, statistic: string, label: string, period = Duration.minutes(1)) =>
      new MathExpression({
        expression: `SEARCH('{${METRICS_NAMESPACE},${schema}} MetricName="${metricName}"', '${statistic}', ${period.toSeconds()})`,
        usingMetrics: {},
        label,
        period,
      });
    const metric = (metricName: string, statistic: string, label: string, dimensionsMap: Record<string, string> = {}, period = Duration.minutes(1)) =>
      new Metric({ namespace: METRICS_NAMESPACE, metricName, statistic, period, dimensionsMap, label });
    const rollout = "${PROP('Dim.rollout')}";
    const gate = `${rollout} ${"${PROP('Dim.gate')}"}`;
    const hour = Duration.hours(1);
    new Dashboard(this, 'Dashboard', { dashboardName: `${this.stack.stackName}-control-plane` }).addWidgets(
      new TextWidget({
        markdown: `**Rollouts** (one point a minute per running rollout, from the BatchPromoter while this stack leads; at most ${MAX_ROLLOUTS}) and **work runs**. The same figures as infra/observability/grafana-dashboard.json, under the same metric names.`,
        width: 24,
        height: 2,
      }),
      new SingleValueWidget({
        title: 'Rollouts in flight',
        metrics: [
          new MathExpression({
            expression: `SUM(SEARCH('{${METRICS_NAMESPACE},rollout} MetricName="rollout_info"', 'Maximum', 60))`,
            usingMetrics: {},
            label: 'running',
            period: Duration.minutes(1),
          }),
          metric('rollout_metrics_left_out', 'Maximum', 'past the cap', { kind: 'rollouts' }),
        ],
        width: 8,
      }),
      new SingleValueWidget({
        title: 'Dead letters (1 h)',
        metrics: [metric('rollout_dead_letters_total', 'Sum', 'items failed as dead letters', {}, hour)],
        width: 8,
      }),
      new AlarmStatusWidget({ title: 'Alarms', alarms: [...alarms], width: 8 }),
      new GraphWidget({
        title: 'Percent on the new version',
        left: [search('rollout', 'rollout_percent', 'Maximum', rollout)],
        leftYAxis: { min: 0, max: 100 },
        width: 12,
      }),
      new GraphWidget({ title: 'Active stage', left: [search('rollout', 'rollout_stage_index', 'Maximum', rollout)], leftYAxis: { min: 0 }, width: 12 }),
      new GraphWidget({
        title: 'Gate values against thresholds',
        left: [
          search('gate,rollout', 'rollout_gate_value', 'Maximum', `${gate} value`),
          search('gate,rollout', 'rollout_gate_threshold', 'Maximum', `${gate} threshold`),
        ],
        width: 12,
      }),
      new GraphWidget({
        title: 'Gate readings in the current period',
        left: [search('gate,outcome,rollout', 'rollout_gate_readings', 'Maximum', `${gate} ${"${PROP('Dim.outcome')}"}`)],
        width: 12,
      }),
      new GraphWidget({
        title: 'Time in stage against the progress deadline (s)',
        left: [
          search('rollout', 'rollout_stage_seconds', 'Maximum', `${rollout} in stage`),
          search('rollout', 'rollout_progress_deadline_seconds', 'Maximum', `${rollout} deadline`),
        ],
        width: 12,
      }),
      new GraphWidget({
        title: 'Transitions (per 5 min)',
        left: [search('type', 'rollout_events_total', 'Sum', "${PROP('Dim.type')}", Duration.minutes(5))],
        width: 12,
      }),
      // Item counts by state are the node's (a count reads every open item's index entry: too dear once a minute on DynamoDB); here the queue says it.
      new GraphWidget({
        title: 'Run progress',
        left: [
          this.workQueue.metricApproximateNumberOfMessagesVisible({ label: 'pending (messages waiting)', period: Duration.minutes(1) }),
          this.workQueue.metricApproximateNumberOfMessagesNotVisible({ label: 'running (messages held)', period: Duration.minutes(1) }),
          this.workDlq.metricApproximateNumberOfMessagesVisible({ label: 'dead letters waiting', period: Duration.minutes(1) }),
        ],
        right: [search('run', 'rollout_run_steals', 'Sum', `${"${PROP('Dim.run')}"} stolen`, Duration.minutes(5))],
        width: 12,
      }),
      new GraphWidget({
        title: 'Throughput (items a minute)',
        left: [this.workQueue.metricNumberOfMessagesDeleted({ label: 'items ended (messages deleted)', period: Duration.minutes(1), statistic: 'Sum' })],
        right: [
          metric('ItemsRepended', 'Sum', 're-pended', { service: 'coordinator' }),
          metric('ItemsFailed', 'Sum', 'failed by the coordinator', { service: 'coordinator' }),
        ],
        width: 12,
      }),
      new GraphWidget({ title: 'Invocations', left: Object.values(this.functions).map((f) => f.metricInvocations()), width: 12 }),
      new GraphWidget({ title: 'Errors', left: Object.values(this.functions).map((f) => f.metricErrors()), width: 12 }),
      new GraphWidget({
        title: 'Work queue',
        left: [this.workQueue.metricApproximateNumberOfMessagesVisible(), this.workDlq.metricApproximateNumberOfMessagesVisible()],
        right: [this.workQueue.metricApproximateAgeOfOldestMessage()],
        width: 12,
      }),
    );
  }
}
