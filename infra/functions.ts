import { Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import type { CfnTable, ITable } from 'aws-cdk-lib/aws-dynamodb';
import { Rule, RuleTargetInput, Schedule, type IEventBus } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime, Tracing, type Function as LambdaFunctionResource } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Trigger } from 'aws-cdk-lib/triggers';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { LEADING_KEYS } from '../shared/adapters/dynamodb/table.js';
import type { TargetsConfig } from '../shared/actuation/targets.js';
import { CLOUDWATCH_SOURCE } from '../shared/rollout/inbound.js';
import { FUNCTIONS, MIGRATOR, type FunctionName, type FunctionSpec } from '../shared/topology.js';
import type { AuroraStore } from './aurora.js';
import { functionOf } from './code.js';
import type { FunctionOverrides } from './control-plane-props.js';
import { grantItems } from './grants.js';

/** Newest Node.js runtime aws-cdk-lib offers; the code also runs on the local Node 20. */
export const LAMBDA_RUNTIME = Runtime.NODEJS_24_X;

/**
 * Aurora: who touches the activity flags (functions/activity.ts). What may
 * start work raises them before it writes; the schedules read theirs before
 * they probe the database, and lower it when it shows nothing to do.
 */
const ACTIVITY: Partial<Record<FunctionName, 'raise' | 'probe'>> = { api: 'raise', streamingPromoter: 'raise', batchPromoter: 'probe', coordinator: 'probe' };

/** On Aurora, the database role a function logs in as (topology.ts); none: it never opens the database there. */
export function databaseRoleOf(name: FunctionName): string | undefined {
  return (FUNCTIONS[name] as FunctionSpec).databaseRole;
}

/**
 * Aurora: the functions that never open the database (topology.ts gives them
 * no database role), so get neither a login nor a place in the VPC.
 * spotDrain writes the worker registry, and no worker registers on Aurora
 * (workers need the DynamoDB store), so its rule is left out too: a Spot
 * notice would find no one.
 */
export const AURORA_WITHOUT_DATABASE: readonly FunctionName[] = (Object.keys(FUNCTIONS) as FunctionName[]).filter((name) => !databaseRoleOf(name));

/** What every function of the control plane is wired to: the construct's resources and the checked configuration. */
export interface FunctionContext {
  /** The DynamoDB store, or null on Aurora. */
  readonly table: ITable | null;
  readonly aurora: AuroraStore | null;
  readonly bus: IEventBus;
  /** The account's default bus (AWS service events). */
  readonly defaultBus: IEventBus;
  readonly eventsDlq: Queue;
  readonly workQueue: Queue;
  /** Every function's environment. */
  readonly env: Record<string, string>;
  readonly targets: TargetsConfig;
  readonly gateRegions: readonly string[];
  readonly gateNamespaces: readonly string[];
  readonly gateAlarms: readonly string[];
  /** The Secrets Manager secrets the outbound credentials name. */
  readonly outboundSecrets: readonly string[];
  /** The function with an `http` trigger: put the HTTP API in front of it. */
  readonly onHttp: (fn: LambdaFunctionResource) => void;
}

/** The declared targets, and nothing else: each alias, each rule or listener by its ARN. */
function grantTargets(fn: LambdaFunctionResource, targets: TargetsConfig): void {
  const stack = Stack.of(fn);
  const aliases: string[] = [];
  const writes: string[] = [];
  const regions = new Set<string>();
  for (const t of Object.values(targets)) {
    if (t.type === 'lambdaAlias') {
      const region = t.region ?? stack.region;
      // A function ARN (arn:…:function:NAME, any qualifier dropped) or a name in this account.
      const fnArn = t.functionName.startsWith('arn:')
        ? t.functionName.split(':').slice(0, 7).join(':')
        : `arn:${stack.partition}:lambda:${region}:${stack.account}:function:${t.functionName}`;
      aliases.push(`${fnArn}:${t.alias}`);
    } else if (t.type === 'albWeights') {
      writes.push((t.ruleArn ?? t.listenerArn)!);
      regions.add(t.region ?? stack.region);
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

export function controlPlaneFunction(
  scope: Construct,
  name: FunctionName,
  spec: FunctionSpec,
  c: FunctionContext,
  o: FunctionOverrides,
): LambdaFunctionResource {
  const stack = Stack.of(scope);
  const id = name[0]!.toUpperCase() + name.slice(1);
  const reserved = spec.reservedConcurrency ?? o.reservedConcurrency;
  const role = databaseRoleOf(name);
  const database = c.aurora && role ? c.aurora : null;
  const readsMetrics = spec.grants.some((g) => g === 'cloudwatch:read') && c.gateNamespaces.length > 0;
  const fn = functionOf(scope, id, name, spec, {
    runtime: LAMBDA_RUNTIME,
    architecture: Architecture.ARM_64,
    description: spec.description,
    timeout: Duration.seconds(spec.timeoutSeconds),
    memorySize: o.memoryMb ?? spec.memoryMb,
    ...(reserved !== undefined ? { reservedConcurrentExecutions: reserved } : {}),
    environment: { ...c.env, POWERTOOLS_SERVICE_NAME: name },
    tracing: spec.tracing === 'active' ? Tracing.ACTIVE : Tracing.PASS_THROUGH,
    ...(database ? { vpc: database.vpc, vpcSubnets: database.subnets, securityGroups: [database.clientGroup] } : {}),
    // Rules invoke asynchronously: a failed invocation is retried twice by Lambda, then kept in the
    // events DLQ with its error (the rule target's own DLQ only sees delivery failures).
    ...(spec.triggers.some((t) => t.kind === 'rule' || t.kind === 'schedule') ? { deadLetterQueue: c.eventsDlq, retryAttempts: 2 } : {}),
    logGroup: new LogGroup(scope, `${id}Logs`, { retention: o.logRetention ?? RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
  });
  if (database) {
    database.grantConnect(fn, role!);
    const use = ACTIVITY[name];
    if (use) database.grantActivity(fn, use);
  }
  for (const grant of spec.grants) {
    if (c.table && (grant === 'store:read' || grant === 'store:write')) {
      grantItems(
        fn,
        c.table,
        grant === 'store:read' ? 'read' : 'write',
        spec.keys.flatMap((k) => LEADING_KEYS[k]),
      );
    }
    if (grant === 'bus:put') c.bus.grantPutEventsTo(fn);
    if (grant === 'queue:send') c.workQueue.grantSendMessages(fn);
    if (grant === 'cloudwatch:read' && c.outboundSecrets.length) {
      // The gate readers send the operator's credentials: those secrets, and no others.
      // A whole ARN as it is; a name with the six characters Secrets Manager appends (-??????), so that no
      // other secret whose name starts the same (NAME-old, NAME-prod) matches.
      const arn = (id: string) => (id.startsWith('arn:') ? id : `arn:${stack.partition}:secretsmanager:${stack.region}:${stack.account}:secret:${id}-??????`);
      fn.addToRolePolicy(new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: c.outboundSecrets.map(arn) }));
    }
    if (grant === 'targets:actuate') grantTargets(fn, c.targets);
    if (grant === 'cloudwatch:read') {
      // GetMetricData takes no resource and no namespace condition: held to the gate regions by the requested region, and granted only
      // when the operator named namespaces (the functions refuse any other, ROLLOUT_GATE_NAMESPACES). DescribeAlarms: this account's alarms in those regions.
      if (readsMetrics)
        fn.addToRolePolicy(
          new PolicyStatement({
            actions: ['cloudwatch:GetMetricData'],
            resources: ['*'],
            conditions: { StringEquals: { 'aws:RequestedRegion': [...c.gateRegions] } },
          }),
        );
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ['cloudwatch:DescribeAlarms'],
          resources: c.gateRegions.map((r) => `arn:${stack.partition}:cloudwatch:${r}:${stack.account}:alarm:*`),
        }),
      );
    }
  }
  // Every rule target: retried for up to an hour, then kept in the events DLQ with the reason.
  const target = (input?: Readonly<Record<string, unknown>>) =>
    new LambdaFunction(fn, {
      deadLetterQueue: c.eventsDlq,
      retryAttempts: 4,
      maxEventAge: Duration.hours(1),
      ...(input ? { event: RuleTargetInput.fromObject(input) } : {}),
    });
  spec.triggers.forEach((t, i) => {
    if (t.kind === 'rule') {
      if (c.aurora && !database) return;
      // CloudWatch's alarm changes: those of the watched alarms only, or no rule at all.
      const alarms = JSON.stringify(t.pattern.source) === JSON.stringify([CLOUDWATCH_SOURCE]) ? c.gateAlarms : null;
      if (alarms && !alarms.length) return;
      const eventPattern = alarms ? { ...t.pattern, detail: { alarmName: alarms.map((n) => (n.endsWith('*') ? { prefix: n.slice(0, -1) } : n)) } } : t.pattern;
      new Rule(scope, `${id}Rule${i}`, {
        eventBus: t.bus === 'rollout' ? c.bus : c.defaultBus,
        eventPattern: eventPattern,
        targets: [target()],
        description: spec.description,
      });
    } else if (t.kind === 'http') {
      c.onHttp(fn);
    } else if (t.kind === 'schedule') {
      new Rule(scope, `${id}Schedule${i}`, {
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
      reason: `X-Ray PutTraceSegments/PutTelemetryRecords${readsMetrics ? ', CloudWatch GetMetricData (held to the gate regions; namespaces checked by the function)' : ''}${spec.grants.some((g) => g === 'targets:actuate') && Object.values(c.targets).some((t) => t.type === 'albWeights') ? ', ELBv2 DescribeRules/DescribeListeners/DescribeTags (held to the targets’ regions)' : ''} cannot be scoped to a resource`,
    },
    ...(spec.grants.some((g) => g === 'cloudwatch:read')
      ? c.gateRegions.map((r) => ({
          // As cdk-nag prints the resource: a token as <AWS::…>, a stack with an explicit env as its literal region and account.
          id: `AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudwatch:${r === stack.region && Token.isUnresolved(stack.region) ? '<AWS::Region>' : r}:${Token.isUnresolved(stack.account) ? '<AWS::AccountId>' : stack.account}:alarm:*]`,
          reason:
            'A cloudwatchAlarm gate names its alarms in the rollout spec, known only at run time: DescribeAlarms on this account’s alarms in the gate regions',
        }))
      : []),
    ...(c.table
      ? [
          {
            id: `AwsSolutions::AwsSolutions-IAM5[Resource::${indexResource(c.table)}]`,
            reason: 'The table grant covers the table’s own indexes (gsi1), nothing else',
          },
        ]
      : []),
  );
  return fn;
}

/**
 * Aurora: the migrator, run at deploy (a CDK Trigger) once the cluster is up
 * and before `functions` are created or updated, and again whenever its code
 * or configuration changes (so with every new migration): the schema
 * migrated and the functions' database roles set up as the master user. A
 * migration that fails fails the deployment, before any function runs new
 * code against an old schema.
 */
export function auroraMigrator(scope: Construct, aurora: AuroraStore, functions: readonly LambdaFunctionResource[]): LambdaFunctionResource {
  const fn = functionOf(scope, 'Migrator', 'migrator', MIGRATOR, {
    runtime: LAMBDA_RUNTIME,
    architecture: Architecture.ARM_64,
    description: MIGRATOR.description,
    timeout: Duration.seconds(MIGRATOR.timeoutSeconds),
    memorySize: MIGRATOR.memoryMb,
    environment: { POWERTOOLS_SERVICE_NAME: 'migrator', POWERTOOLS_LOG_LEVEL: 'INFO' },
    tracing: Tracing.PASS_THROUGH,
    vpc: aurora.vpc,
    vpcSubnets: aurora.subnets,
    securityGroups: [aurora.clientGroup],
    logGroup: new LogGroup(scope, 'MigratorLogs', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
  });
  aurora.grantMaster(fn);
  new Trigger(scope, 'Migrate', {
    handler: fn,
    // Longer than the function's own: a paused cluster resumes first.
    timeout: Duration.seconds(MIGRATOR.timeoutSeconds + 60),
    executeAfter: [aurora.cluster],
    executeBefore: [...functions],
  });
  Validations.of(fn).acknowledge(
    {
      id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      reason: 'AWSLambdaBasicExecutionRole only lets the function write its own logs',
    },
    {
      id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
      reason: 'AWSLambdaVPCAccessExecutionRole only lets the function manage its own network interfaces in the VPC, and write its logs',
    },
    { id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]', reason: 'X-Ray PutTraceSegments/PutTelemetryRecords cannot be scoped to a resource' },
  );
  return fn;
}

/** How cdk-nag names the table's index ARN pattern in a policy. */
function indexResource(table: ITable): string {
  const stack = Stack.of(table);
  const cfn = table.node.defaultChild as CfnTable | undefined;
  return cfn ? `<${stack.getLogicalId(cfn)}.Arn>/index/*` : `arn:<AWS::Partition>:dynamodb:<AWS::Region>:<AWS::AccountId>:table/${table.tableName}/index/*`;
}
