import { CfnOutput, Duration, Lazy, Names, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import type { HttpRoute, HttpStage } from 'aws-cdk-lib/aws-apigatewayv2';
import { Alarm, ComparisonOperator, TreatMissingData, type IAlarmAction } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption, type ITable } from 'aws-cdk-lib/aws-dynamodb';
import { CfnSecurityGroup } from 'aws-cdk-lib/aws-ec2';
import { Archive, EventBus, type IEventBus } from 'aws-cdk-lib/aws-events';
import { AnyPrincipal, Effect, PolicyStatement, type IGrantable, type IRole } from 'aws-cdk-lib/aws-iam';
import { Alias, type Function as LambdaFunctionResource } from 'aws-cdk-lib/aws-lambda';
import { Topic, type ITopic } from 'aws-cdk-lib/aws-sns';
import { Queue, QueueEncryption, type QueueProps } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { parseTargets, targetOutboundIssues, type TargetsConfig } from '../shared/actuation/targets.js';
import { GSI1, GSI1_PROJECTED, KEY } from '../shared/adapters/dynamodb/table.js';
import { MAX_ATTEMPTS } from '../shared/ledger/model.js';
import { parseConfig } from '../shared/config.js';
import { OutboundPolicy } from '../shared/outbound/policy.js';
import { retentionSchema } from '../shared/retention.js';
import { FUNCTIONS, type FunctionName, type FunctionSpec } from '../shared/topology.js';
import { controlPlaneAlarms } from './alarms.js';
import { AuroraStore } from './aurora.js';
import type { RolloutControlPlaneProps } from './control-plane-props.js';
import { auroraMigrator, controlPlaneFunction, type FunctionContext } from './functions.js';
import { grantApi, httpApi, type ApiRole } from './http-api.js';

/*
 * The construct, split at its seams: its props (control-plane-props.ts), the
 * functions and their grants (functions.ts), the HTTP API (http-api.ts), the
 * alarms and dashboard (alarms.ts), the Aurora store (aurora.ts).
 */
export type { FunctionOverrides, RolloutControlPlaneProps } from './control-plane-props.js';
export { AURORA_WITHOUT_DATABASE, LAMBDA_RUNTIME } from './functions.js';
export { API_ROUTES, type ApiRole } from './http-api.js';

/** How many receives before a work item's message goes to the DLQ (and the item to Failed): MAX_ATTEMPTS, the figure workers and coordinators read too. */
export const MAX_RECEIVE_COUNT = MAX_ATTEMPTS;

/** What a Secrets Manager ARN ends with: the secret's name, `-`, and the six characters Secrets Manager adds. */
const SECRET_ARN = /^arn:[^:]+:secretsmanager:[^:]*:\d{12}:secret:.+-[A-Za-z0-9]{6}$/;

/** A CloudWatch namespace as GetMetricData takes it (1-255 characters, not starting with `:`), without wildcards. */
const NAMESPACE = /^[^:*][^*]{0,254}$/;

/** The coordinator's aliases that worker fleets invoke: `fleet-` and a name unique to the fleet (functions/coordinator.ts checks requests by it). */
export const FLEET_ALIAS_PREFIX = 'fleet-';

/** What CDK's grants on a queue or table encrypted with a customer-managed key add: the key's data-key and re-encrypt families. */
export const KMS_GRANT_FINDINGS = ['kms:GenerateDataKey*', 'kms:ReEncrypt*'].map((action) => ({
  id: `AwsSolutions::AwsSolutions-IAM5[Action::${action}]`,
  reason: `CDK's grant on the resources encrypted with the given key: ${action} on that key only`,
}));

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
  /** Aurora: the function that migrates the schema and sets up the functions' database roles at deploy (the one that reads the master secret); null on DynamoDB. */
  readonly migrator: LambdaFunctionResource | null;
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

    // Refused before anything is made.
    const exportName = typeof props.apiUrlOutput === 'object' ? props.apiUrlOutput.exportName : undefined;
    // CloudFormation's rule for an export's name; a token (the stack's name in it, say) is CloudFormation's to check.
    if (exportName !== undefined && !Token.isUnresolved(exportName) && !/^[A-Za-z0-9:-]{1,255}$/.test(exportName))
      throw new Error(
        `invalid control plane config: apiUrlOutput.exportName: ${JSON.stringify(exportName)} is not an export name (letters, digits, ':' and '-', at most 255)`,
      );
    if (props.bus && props.eventSenders?.length)
      throw new Error(
        'invalid control plane config: eventSenders: the control plane locks only a bus it creates; with an existing bus, its own policy says who may put events on it',
      );

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
    const context: FunctionContext = {
      table: this.table,
      aurora: this.aurora,
      bus: this.bus,
      defaultBus: EventBus.fromEventBusName(this, 'DefaultBus', 'default'),
      eventsDlq: this.eventsDlq,
      workQueue: this.workQueue,
      env,
      targets: this.targets,
      gateRegions: this.gateRegions,
      gateNamespaces: this.gateNamespaces,
      gateAlarms: this.gateAlarms,
      outboundSecrets: this.outboundSecrets,
      onHttp: (fn) => {
        this.apiStage = httpApi(this, fn, this.apiRoutes);
        (this as { apiUrl: string }).apiUrl = this.apiStage.url;
      },
    };
    this.functions = {} as Record<FunctionName, LambdaFunctionResource>;
    this.apiUrl = '';
    for (const name of Object.keys(props.functions ?? {}))
      if (!(name in FUNCTIONS)) throw new Error(`invalid control plane config: functions.${name}: no such function (${Object.keys(FUNCTIONS).join(', ')})`);
    for (const [name, spec] of Object.entries(FUNCTIONS) as [FunctionName, FunctionSpec][]) {
      this.functions[name] = controlPlaneFunction(this, name, spec, context, props.functions?.[name] ?? {});
    }
    if (props.apiUrlOutput)
      new CfnOutput(this, 'ApiUrl', { value: this.apiUrl, description: "The control plane's HTTP API", ...(exportName ? { exportName } : {}) });
    // Aurora: the schema and the functions' database roles, set up at deploy before the functions change.
    this.migrator = this.aurora ? auroraMigrator(this, this.aurora, Object.values(this.functions)) : null;
    // The work DLQ's consumer is the coordinator's scan (no event source mapping: its pollers would long-poll the DLQ
    // all month, more than the rest of an idle stack's functions): it alone may receive from it.
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
    const sources = { apiStage: this.apiStage, eventsDlq: this.eventsDlq, workQueue: this.workQueue, workDlq: this.workDlq, functions: this.functions };
    this.alarms = controlPlaneAlarms(this, sources, props.dashboard ?? false);
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
   * Lets `grantee` call what each role named may (execute-api:Invoke). Written
   * path by path rather than per route: a `*` in an execute-api ARN crosses
   * `/`, so a grant of `rollouts/*` would let an operator abort.
   */
  grantApi(grantee: IGrantable, ...roles: ApiRole[]): void {
    grantApi(this.apiRoutes, grantee, roles);
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
}
