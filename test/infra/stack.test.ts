import { App, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, Table } from 'aws-cdk-lib/aws-dynamodb';
import { AccountRootPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAMBDA_RUNTIME, MAX_RECEIVE_COUNT, ControlPlaneStack } from '../../infra/stack.js';
import { AURORA_WITHOUT_DATABASE } from '../../infra/control-plane.js';
import type { RolloutControlPlaneProps } from '../../infra/control-plane-props.js';
import { synthStack, SYNTH_HOOK_TIMEOUT, VARIANT_TEST_TIMEOUT, type Synthesised } from './synth.js';
import { FUNCTIONS, MIGRATOR, type FunctionSpec } from '../../shared/topology.js';
import { METRICS } from '../../shared/api/metrics.js';
import { LEADING_KEYS, tableDefinition } from '../../shared/adapters/dynamodb/table.js';

/** The alarms the test stack's gates watch: a prefix and a name. */
const GATE_ALARMS = ['checkout-*', 'payments-5xx'];
const watched = { alarmName: [{ prefix: 'checkout-' }, 'payments-5xx'] };

/** The namespaces the test stack's metric gates may read. */
const GATE_NAMESPACES = ['AWS/ApplicationELB', 'Shop'];

describe('ControlPlaneStack', () => {
  let template: Template;
  let assembly: CloudAssembly;
  let stack: ControlPlaneStack;
  let json: Synthesised['json'];
  const ofType = (type: string) => Object.entries(json.Resources).filter(([, r]) => r.Type === type);
  const logicalId = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
  beforeAll(() => {
    // Throws on any unacknowledged cdk-nag finding; bundles every function.
    const made = synthStack('Test', { nodeId: 'test/eu-west-1', gateAlarms: GATE_ALARMS, gateNamespaces: GATE_NAMESPACES }, { bundle: true, nag: true });
    ({ template, stack, json } = made);
    assembly = made.assembly!;
  }, SYNTH_HOOK_TIMEOUT);
  // Unset when the synthesis failed: that failure is the one to read.
  afterAll(() => assembly && rmSync(assembly.directory, { recursive: true, force: true }));

  // Synthesises a second shape (indexProjection: all).
  it('declares the store table with the keys the code uses', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const def = tableDefinition('x');
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: def.KeySchema,
      AttributeDefinitions: Match.arrayWith(def.AttributeDefinitions!.map((a) => Match.objectLike(a))),
      BillingMode: 'PAY_PER_REQUEST',
      GlobalSecondaryIndexes: [
        Match.objectLike({
          IndexName: def.GlobalSecondaryIndexes![0]!.IndexName,
          KeySchema: def.GlobalSecondaryIndexes![0]!.KeySchema,
          Projection: def.GlobalSecondaryIndexes![0]!.Projection,
        }),
      ],
    });
    // What a stack deployed before the INCLUDE projection keeps (DynamoDB cannot change a projection in place).
    const kept = synthStack('AllProjected', { indexProjection: 'all' }).template;
    kept.hasResourceProperties('AWS::DynamoDB::Table', {
      GlobalSecondaryIndexes: [Match.objectLike({ IndexName: 'gsi1', Projection: { ProjectionType: 'ALL' } })],
    });
  });

  it('keeps lease rows safe: PITR, encryption, deletion protection, retained on stack delete', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
      DeletionProtectionEnabled: true,
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    });
    template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
  });

  it('every function as topology.ts declares it: newest Node.js runtime, arm64, its timeout, memory and reserved concurrency, tracing, the node id', () => {
    expect(LAMBDA_RUNTIME.name).toBe('nodejs24.x');
    expect([FUNCTIONS.batchPromoter.tracing, FUNCTIONS.coordinator.tracing]).toEqual(['passthrough', 'passthrough']);
    for (const [name, spec] of Object.entries(FUNCTIONS) as [string, FunctionSpec][]) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        Description: spec.description,
        Runtime: 'nodejs24.x',
        Architectures: ['arm64'],
        Timeout: spec.timeoutSeconds,
        MemorySize: spec.memoryMb,
        // The functions a schedule wakes every minute trace only what arrives traced (an idle stack records no traces).
        TracingConfig: { Mode: spec.tracing === 'active' ? 'Active' : 'PassThrough' },
        ...(spec.reservedConcurrency !== undefined ? { ReservedConcurrentExecutions: spec.reservedConcurrency } : {}),
        Environment: {
          Variables: Match.objectLike({
            ROLLOUT_STORE: 'dynamodb',
            ROLLOUT_NODE_ID: 'test/eu-west-1',
            POWERTOOLS_SERVICE_NAME: name,
            ROLLOUT_TABLE: Match.anyValue(),
          }),
        },
      });
    }
    expect(ofType('AWS::Lambda::Function')).toHaveLength(Object.keys(FUNCTIONS).length);
  });

  it('functions invoked by rules keep failed invocations: two async retries, then the events DLQ', () => {
    for (const [name, spec] of Object.entries(FUNCTIONS) as [keyof typeof FUNCTIONS, FunctionSpec][]) {
      if (!spec.triggers.some((t) => t.kind === 'rule' || t.kind === 'schedule')) continue;
      const fn = logicalId(stack.functions[name]);
      template.hasResourceProperties('AWS::Lambda::Function', {
        Description: spec.description,
        DeadLetterConfig: { TargetArn: { 'Fn::GetAtt': [logicalId(stack.eventsDlq), 'Arn'] } },
      });
      template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', { FunctionName: { Ref: fn }, MaximumRetryAttempts: 2 });
    }
  });

  // Synthesises a second shape (no gateAlarms).
  it('each rule carries the declared pattern on the right bus; every target has a retry policy and the events DLQ', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const dlq = logicalId(stack.eventsDlq);
    const bus = logicalId(stack.bus);
    const rules = ofType('AWS::Events::Rule').map(([, r]) => r.Properties);
    for (const [name, spec] of Object.entries(FUNCTIONS) as [keyof typeof FUNCTIONS, FunctionSpec][]) {
      const fn = logicalId(stack.functions[name]);
      for (const t of spec.triggers) {
        if (t.kind === 'invoke') continue;
        if (t.kind === 'http') {
          // Every route behind IAM (SigV4) authorization, proxied to the api function; split so a policy can grant read, operate and admin apart.
          expect(
            ofType('AWS::ApiGatewayV2::Route')
              .map(([, r]) => r.Properties.RouteKey)
              .sort(),
          ).toEqual([
            'GET /{proxy+}',
            'POST /rollouts',
            'POST /rollouts/{id}/abort',
            'POST /rollouts/{id}/gates/{gate}/test',
            'POST /rollouts/{id}/{command}',
            'POST /runs',
            'POST /runs/{id}/cancel',
          ]);
          for (const [, r] of ofType('AWS::ApiGatewayV2::Route')) expect(r.Properties.AuthorizationType).toBe('AWS_IAM');
          template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
            StageName: '$default',
            AutoDeploy: true,
            AccessLogSettings: Match.objectLike({ DestinationArn: Match.anyValue() }),
            DefaultRouteSettings: { ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 },
          });
          expect(JSON.stringify(ofType('AWS::ApiGatewayV2::Integration'))).toContain(fn);
          continue;
        }
        // The alarm rule matches the watched alarms only.
        const pattern =
          t.kind === 'rule' && t.bus === 'default' && JSON.stringify(t.pattern.source) === '["aws.cloudwatch"]'
            ? { ...t.pattern, detail: watched }
            : t.kind === 'rule'
              ? t.pattern
              : null;
        const rule = rules.find(
          (r) =>
            JSON.stringify(r.Targets).includes(fn) &&
            (t.kind === 'rule'
              ? JSON.stringify(r.EventPattern) === JSON.stringify(pattern)
              : r.ScheduleExpression === `rate(${t.everyMinutes} minute${t.everyMinutes === 1 ? '' : 's'})`),
        );
        expect(rule, `${name} ${t.kind}`).toBeDefined();
        if (t.kind === 'rule')
          expect(rule!.EventBusName ? JSON.stringify(rule!.EventBusName) : 'default').toBe(
            t.bus === 'rollout' ? JSON.stringify({ Ref: bus }) : JSON.stringify('default'),
          );
        const [target] = rule!.Targets as Record<string, unknown>[];
        expect(target).toMatchObject({
          RetryPolicy: { MaximumRetryAttempts: 4, MaximumEventAgeInSeconds: 3600 },
          DeadLetterConfig: { Arn: { 'Fn::GetAtt': [dlq, 'Arn'] } },
        });
        if (t.kind === 'schedule' && t.input) expect(JSON.parse(target!.Input as string)).toEqual(t.input);
      }
    }
    expect(rules).toHaveLength(5);
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: { source: ['aws.ec2'], 'detail-type': ['EC2 Spot Instance Interruption Warning', 'EC2 Instance Rebalance Recommendation'] },
    });
    // AWS's own alarm state changes, on the default bus, reach the StreamingPromoter: those of the watched alarms only.
    const alarmRule = rules.find(
      (r) =>
        JSON.stringify(r.EventPattern) === JSON.stringify({ source: ['aws.cloudwatch'], 'detail-type': ['CloudWatch Alarm State Change'], detail: watched }),
    );
    expect(alarmRule?.EventBusName ?? 'default').toBe('default');
    expect(JSON.stringify(alarmRule?.Targets)).toContain(logicalId(stack.functions.streamingPromoter));
    // Watching none, no rule: not every alarm flip in the account invokes a function.
    const unwatched = synthStack('NoGateAlarms').template;
    expect(JSON.stringify(unwatched.findResources('AWS::Events::Rule'))).not.toContain('aws.cloudwatch');
    expect(() => new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'BadGateAlarms', { gateAlarms: ['a*b'] })).toThrow(
      /gateAlarms: "a\*b": an alarm name/,
    );
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      Targets: [Match.objectLike({ Input: JSON.stringify({ action: 'scan-all' }) })],
    });
  });

  it('the rollout bus keeps an archive for replay', () => {
    template.hasResourceProperties('AWS::Events::Archive', { SourceArn: { 'Fn::GetAtt': [logicalId(stack.bus), 'Arn'] }, RetentionDays: 30 });
  });

  it('queues: SSE, TLS only, the work queue redrives to its DLQ after maxReceiveCount', () => {
    const queues = ofType('AWS::SQS::Queue');
    expect(queues).toHaveLength(3);
    for (const [, q] of queues) expect(q.Properties.SqsManagedSseEnabled).toBe(true);
    template.hasResourceProperties('AWS::SQS::Queue', {
      RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [logicalId(stack.workDlq), 'Arn'] }, maxReceiveCount: MAX_RECEIVE_COUNT },
      VisibilityTimeout: 60,
    });
    const policies = ofType('AWS::SQS::QueuePolicy');
    expect(policies).toHaveLength(3);
    for (const [, p] of policies) {
      expect(JSON.stringify(p.Properties.PolicyDocument)).toContain('"aws:SecureTransport":"false"');
    }
  });

  it('IAM: no wildcard actions; data actions only on this table, its index, the bus and the queues', () => {
    for (const [id, p] of ofType('AWS::IAM::Policy')) {
      const statements = (p.Properties.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement;
      for (const s of statements) {
        const actions = [s.Action].flat();
        for (const a of actions) expect(a, id).not.toMatch(/^\*$|:\*$/);
        if (actions.some((a) => a.startsWith('dynamodb:'))) expect(JSON.stringify(s.Resource)).toContain(logicalId(stack.table!));
        if (actions.some((a) => a.startsWith('sqs:')))
          expect(JSON.stringify(s.Resource)).toMatch(new RegExp(`${logicalId(stack.workQueue)}|${logicalId(stack.workDlq)}|${logicalId(stack.eventsDlq)}`));
      }
    }
    // Only the coordinator (re-pended items) and the API (new runs) send work; only the coordinator
    // reads the work DLQ (its scan drains it); the others may only put failed events into the events DLQ.
    const policyOf = (prefix: string) =>
      JSON.stringify(
        ofType('AWS::IAM::Policy')
          .filter(([id]) => id.startsWith(prefix))
          .map(([, p]) => p),
      );
    expect(policyOf('CoordinatorServiceRole')).toContain(logicalId(stack.workQueue));
    expect(policyOf('CoordinatorServiceRole')).toContain('sqs:ReceiveMessage');
    expect(policyOf('CoordinatorServiceRole')).toContain(logicalId(stack.workDlq));
    for (const [id, p] of ofType('AWS::IAM::Policy')) {
      const doc = JSON.stringify(p.Properties.PolicyDocument);
      if (!id.startsWith('CoordinatorServiceRole') && !id.startsWith('ApiServiceRole')) expect(doc, id).not.toContain(logicalId(stack.workQueue));
      if (!id.startsWith('CoordinatorServiceRole')) expect(doc, id).not.toContain('sqs:ReceiveMessage');
    }
    // Provider gates are read on the BatchPromoter's tick, and by the API's gate test: they alone may read CloudWatch, and DescribeAlarms only on this account's alarms.
    const cloudwatch = ofType('AWS::IAM::Policy').flatMap(([id, p]) =>
      (p.Properties.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement.filter((st) =>
        [st.Action].flat().some((a) => a.startsWith('cloudwatch:')),
      ).map((st) => ({ id, st })),
    );
    expect(cloudwatch.map(({ id }) => id.replace(/ServiceRole.*/, '')).sort()).toEqual(['Api', 'Api', 'BatchPromoter', 'BatchPromoter']);
    expect(cloudwatch.flatMap(({ st }) => [st.Action].flat()).sort()).toEqual([
      'cloudwatch:DescribeAlarms',
      'cloudwatch:DescribeAlarms',
      'cloudwatch:GetMetricData',
      'cloudwatch:GetMetricData',
    ]);
    // …in the gate regions only: the stack's own by default.
    for (const describeAlarms of cloudwatch.filter(({ st }) => [st.Action].flat().includes('cloudwatch:DescribeAlarms')))
      expect(JSON.stringify(describeAlarms.st.Resource)).toMatch(/cloudwatch:",\{"Ref":"AWS::Region"\},":",\{"Ref":"AWS::AccountId"\},":alarm:\*/);
    for (const { st } of cloudwatch.filter(({ st }) => [st.Action].flat().includes('cloudwatch:GetMetricData')))
      expect((st as { Condition?: unknown }).Condition).toEqual({ StringEquals: { 'aws:RequestedRegion': [{ Ref: 'AWS::Region' }] } });
  });

  it('IAM: each function reaches only its key families of the store (dynamodb:LeadingKeys), and never scans', () => {
    const itemStatements = (prefix: string) =>
      ofType('AWS::IAM::Policy')
        .filter(([id]) => id.startsWith(prefix))
        .flatMap(
          ([, p]) =>
            (p.Properties.PolicyDocument as { Statement: { Action: string | string[]; Condition?: Record<string, Record<string, string[]>> }[] }).Statement,
        )
        .filter((st) => [st.Action].flat().some((a) => a.startsWith('dynamodb:')));
    for (const [name, spec] of Object.entries(FUNCTIONS)) {
      const id = name[0]!.toUpperCase() + name.slice(1);
      const statements = itemStatements(`${id}ServiceRole`);
      expect(statements.length, name).toBeGreaterThan(0);
      for (const st of statements) {
        expect([st.Action].flat(), name).not.toContain('dynamodb:Scan');
        expect(st.Condition?.['ForAllValues:StringLike']?.['dynamodb:LeadingKeys']?.sort(), name).toEqual(
          [...new Set(spec.keys.flatMap((k) => LEADING_KEYS[k]))].sort(),
        );
      }
    }
    // The promoters never touch a run's items; the coordinator never a rollout's.
    expect(JSON.stringify(itemStatements('BatchPromoterServiceRole'))).not.toContain('RUN#');
    expect(JSON.stringify(itemStatements('CoordinatorServiceRole'))).not.toContain('ROLLOUT#');
  });

  // Synthesises two more stacks (their functions not bundled: only the archive is read).
  it("the event archive has a name within EventBridge's 48 characters, unique to its stack", { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const name = (id: string) =>
      (Object.values(synthStack(id).template.findResources('AWS::Events::Archive'))[0]!.Properties as { ArchiveName: string }).ArchiveName;
    const names = ['RolloutControlPlane', 'RolloutControlPlane-eu-west-1-secondary-region-stack'].map(name);
    for (const n of names) expect(n).toMatch(/^[.\-_A-Za-z0-9]{1,48}$/);
    expect(new Set(names).size).toBe(2);
  });

  // Synthesises a stack of its own, with roles added.
  it('grantApi gives a role exactly its routes: a reader cannot invoke a POST, an operator cannot abort', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const app2 = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const s2 = new ControlPlaneStack(app2, 'Grants', { env: { account: '123456789012', region: 'eu-west-1' } });
    const roles = Object.fromEntries(
      (['read', 'operate', 'admin'] as const).map((r) => [r, new Role(s2, `${r}Role`, { assumedBy: new AccountRootPrincipal() })]),
    );
    for (const [r, role] of Object.entries(roles)) s2.grantApi(role, r as 'read' | 'operate' | 'admin');
    const t = Template.fromStack(s2).toJSON() as {
      Resources: Record<string, { Type: string; Properties: { Roles?: { Ref: string }[]; PolicyDocument?: unknown } }>;
    };
    const granted = (role: string) =>
      JSON.stringify(
        Object.values(t.Resources)
          .filter((x) => x.Type === 'AWS::IAM::Policy' && JSON.stringify(x.Properties.Roles).includes(`${role}Role`))
          .map((x) => x.Properties.PolicyDocument),
      );
    expect(granted('read')).toContain('/GET/*');
    expect(granted('read')).not.toContain('/POST/');
    for (const c of ['promote', 'promote-full', 'pause', 'resume', 'retry']) expect(granted('operate')).toContain(`/POST/rollouts/*/${c}"`);
    expect(granted('operate')).not.toMatch(/abort|\/POST\/rollouts\/\*"/);
    expect(granted('admin')).toContain('/POST/rollouts/*/abort');
    expect(granted('admin')).toContain('/POST/runs/*/cancel');
    expect(granted('operate')).not.toContain('cancel');
  });

  // Synthesises a second shape (eventSenders).
  it(
    "the rollout bus: only named senders and the stack's own functions may put events; signals are matched on their source too",
    { timeout: VARIANT_TEST_TIMEOUT },
    () => {
      const policies = ofType('AWS::Events::EventBusPolicy').map(
        ([, p]) =>
          p.Properties as { Statement: { Effect: string; Action: string; Principal: unknown; Condition: { ArnNotLike: { 'aws:PrincipalArn': unknown[] } } } },
      );
      expect(policies).toHaveLength(1);
      const st = policies[0]!.Statement;
      expect(st).toMatchObject({ Effect: 'Deny', Action: 'events:PutEvents', Principal: { AWS: '*' }, Condition: { Null: { 'aws:PrincipalArn': 'false' } } });
      const allowed = JSON.stringify(st.Condition.ArnNotLike['aws:PrincipalArn']);
      for (const name of ['StreamingPromoter', 'BatchPromoter', 'Coordinator', 'Api']) expect(allowed).toContain(`${name}ServiceRole`);
      expect(allowed).not.toContain('SpotDrainServiceRole');
      const withSenders = synthStack('Senders', {
        env: { account: '123456789012', region: 'eu-west-1' },
        eventSenders: ['arn:aws:iam::123456789012:role/metrics-pipeline'],
      });
      expect(JSON.stringify(withSenders.template.findResources('AWS::Events::EventBusPolicy'))).toContain('arn:aws:iam::123456789012:role/metrics-pipeline');
      const signalRule = ofType('AWS::Events::Rule')
        .map(([, r]) => r.Properties as { EventPattern?: { source?: unknown; 'detail-type'?: string[] } })
        .find((r) => r.EventPattern?.['detail-type']?.includes('rollout.metrics_reported'));
      expect(signalRule?.EventPattern?.source).toEqual([{ prefix: 'rollout.' }]);
    },
  );

  it("alarms, one per concern and one metric each: the API's 5xx, events given up, dead letters, work waiting, a throttled run, leases changing hands, a rollout that needs a person; each says what to do and notifies someone", () => {
    type AlarmProps = {
      AlarmDescription?: string;
      MetricName?: string;
      Statistic?: string;
      Namespace?: string;
      Threshold?: number;
      EvaluationPeriods?: number;
      Period?: number;
      Dimensions?: { Name: string; Value: unknown }[];
      Metrics?: unknown[];
      AlarmActions?: unknown;
    };
    const alarms = new Map(ofType('AWS::CloudWatch::Alarm').map(([id, a]) => [id.replace(/[0-9A-F]{8}$/, ''), a.Properties as AlarmProps]));
    expect([...alarms.keys()].sort()).toEqual([
      'ApiErrors',
      'EventsDlqNotEmpty',
      'LeaseLost',
      'RolloutNeedsAttention',
      'RunThrottled',
      'WorkDeadLetters',
      'WorkQueueAge',
    ]);
    // An alarm is billed per metric it reads: none reads more than one (no metric math), and together they stay within the idle budget.
    for (const [id, a] of alarms) expect(a.Metrics, id).toBeUndefined();
    expect(alarms.size).toBeLessThanOrEqual(7);
    // The API's failures, its function's and its own 500s alike, as API Gateway counts them on the stage.
    const api = alarms.get('ApiErrors')!;
    expect(api).toMatchObject({ Namespace: 'AWS/ApiGateway', MetricName: '5xx', Statistic: 'Sum', Threshold: 0 });
    expect(JSON.stringify(api.Dimensions)).toContain('"Stage","Value":"$default"');
    expect(ofType('AWS::CloudWatch::Alarm').filter(([, a]) => (a.Properties as AlarmProps).Namespace === 'AWS/Lambda')).toHaveLength(0);
    // Every function a rule or a schedule invokes keeps what it failed in the events DLQ: that alarm covers their failures.
    expect(alarms.get('EventsDlqNotEmpty')).toMatchObject({ MetricName: 'ApproximateNumberOfMessagesVisible', Threshold: 0 });
    expect(JSON.stringify(alarms.get('EventsDlqNotEmpty')!.Dimensions)).toContain(logicalId(stack.eventsDlq));
    // Dead letters settled or not: the scan receives each one at least once.
    const dead = alarms.get('WorkDeadLetters')!;
    expect(dead).toMatchObject({ Namespace: 'AWS/SQS', MetricName: 'NumberOfMessagesReceived', Statistic: 'Sum', Threshold: 0 });
    expect(JSON.stringify(dead.Dimensions)).toContain(logicalId(stack.workDlq));
    expect(alarms.get('WorkQueueAge')).toMatchObject({ MetricName: 'ApproximateAgeOfOldestMessage', Threshold: 900 });
    expect(alarms.get('RunThrottled')).toMatchObject({ Namespace: 'Rollout', MetricName: 'RunsThrottled' });
    // A fenced coordinator and both promoters' failed renewals: one stack-wide count (one alarm metric), past 3 in 15 minutes (one change heals itself).
    expect(alarms.get('LeaseLost')).toMatchObject({ Namespace: 'Rollout', MetricName: 'LeasesLost', Statistic: 'Sum', Period: 900, Threshold: 3 });
    expect(alarms.get('LeaseLost')!.Dimensions ?? []).toEqual([]);
    // A rollout past its deadline or drifted: one stack-wide count the functions publish beside rollout_events_total.
    expect(alarms.get('RolloutNeedsAttention')).toMatchObject({ Namespace: 'Rollout', MetricName: 'RolloutsNeedingAttention', Statistic: 'Sum' });
    expect(alarms.get('RolloutNeedsAttention')!.Dimensions ?? []).toEqual([]);
    expect(alarms.get('RolloutNeedsAttention')!.AlarmDescription).toMatch(/progress_deadline_exceeded.*actuation_drift/);
    // Each says what it means and what to do.
    for (const [id, a] of alarms) expect(a.AlarmDescription, id).toMatch(/\. .{20,}/);
    // Every alarm notifies someone: with no actions given, the stack's own topic (its ARN an output, to subscribe to).
    const topics = ofType('AWS::SNS::Topic');
    expect(topics).toHaveLength(1);
    for (const [id, a] of alarms) expect(a.AlarmActions, id).toEqual([{ Ref: topics[0]![0] }]);
    expect(Object.keys(json.Outputs ?? {})).toContain('AlarmTopicArn');
  });

  // Synthesises a second shape (dashboard: true).
  it(
    'the dashboard, only when asked for, shows the Grafana dashboard’s figures from the EMF metrics (SEARCH over the per-rollout dimensions), with the functions, queues and alarms',
    { timeout: VARIANT_TEST_TIMEOUT },
    () => {
      // US$ 3 a month beyond an account's first three: opt-in.
      expect(ofType('AWS::CloudWatch::Dashboard')).toHaveLength(0);
      const withDashboard = synthStack('WithDashboard', { dashboard: true }).stack;
      const dashboards = Object.values(Template.fromStack(withDashboard).findResources('AWS::CloudWatch::Dashboard'));
      expect(dashboards).toHaveLength(1);
      // The body as deployed, its tokens (region, alarm ARNs) written as their logical ids.
      const joined = (dashboards[0]!.Properties as { DashboardBody: { 'Fn::Join': [string, unknown[]] } }).DashboardBody['Fn::Join'][1];
      const text = joined.map((p) => (typeof p === 'string' ? p : JSON.stringify(p).replace(/"/g, ''))).join('');
      type Widget = { type: string; properties: { title?: string; metrics?: unknown[][]; alarms?: string[] } };
      const widgets = (JSON.parse(text) as { widgets: Widget[] }).widgets;
      const byTitle = new Map(widgets.map((w) => [w.properties.title ?? '', w]));
      const expressions = (title: string) =>
        (byTitle.get(title)?.properties.metrics ?? []).flatMap((m) =>
          m.flatMap((x) => (typeof x === 'object' && x !== null && 'expression' in x ? [(x as { expression: string }).expression] : [])),
        );
      const names = (title: string) => (byTitle.get(title)?.properties.metrics ?? []).flatMap((m) => m.filter((x): x is string => typeof x === 'string'));
      // The Grafana dashboard's figures, from SEARCH on each figure's exact dimension set in the Rollout namespace.
      expect(expressions('Rollouts in flight')).toEqual([`SUM(SEARCH('{Rollout,rollout} MetricName="rollout_info"', 'Maximum', 60))`]);
      expect(names('Rollouts in flight')).toEqual(['Rollout', 'rollout_metrics_left_out', 'kind', 'rollouts']);
      expect(names('Dead letters (1 h)')).toEqual(['Rollout', 'rollout_dead_letters_total']);
      expect(expressions('Percent on the new version')).toEqual([`SEARCH('{Rollout,rollout} MetricName="rollout_percent"', 'Maximum', 60)`]);
      expect(expressions('Active stage')).toEqual([`SEARCH('{Rollout,rollout} MetricName="rollout_stage_index"', 'Maximum', 60)`]);
      expect(expressions('Gate values against thresholds')).toEqual([
        `SEARCH('{Rollout,gate,rollout} MetricName="rollout_gate_value"', 'Maximum', 60)`,
        `SEARCH('{Rollout,gate,rollout} MetricName="rollout_gate_threshold"', 'Maximum', 60)`,
      ]);
      expect(expressions('Gate readings in the current period')).toEqual([
        `SEARCH('{Rollout,gate,outcome,rollout} MetricName="rollout_gate_readings"', 'Maximum', 60)`,
      ]);
      expect(expressions('Time in stage against the progress deadline (s)')).toEqual([
        `SEARCH('{Rollout,rollout} MetricName="rollout_stage_seconds"', 'Maximum', 60)`,
        `SEARCH('{Rollout,rollout} MetricName="rollout_progress_deadline_seconds"', 'Maximum', 60)`,
      ]);
      expect(expressions('Transitions (per 5 min)')).toEqual([`SEARCH('{Rollout,type} MetricName="rollout_events_total"', 'Sum', 300)`]);
      expect(expressions('Run progress')).toEqual([`SEARCH('{Rollout,run} MetricName="rollout_run_steals"', 'Sum', 300)`]);
      expect(names('Run progress')).toEqual(expect.arrayContaining(['ApproximateNumberOfMessagesVisible', 'ApproximateNumberOfMessagesNotVisible']));
      expect(names('Throughput (items a minute)')).toEqual(expect.arrayContaining(['NumberOfMessagesDeleted', 'ItemsRepended', 'ItemsFailed']));
      // Every figure the functions publish under a node's name is on it, and the SEARCH schemas are the figures' dimensions.
      for (const name of [
        'rollout_info',
        'rollout_percent',
        'rollout_stage_index',
        'rollout_stage_seconds',
        'rollout_progress_deadline_seconds',
        'rollout_gate_value',
        'rollout_gate_threshold',
        'rollout_gate_readings',
        'rollout_events_total',
        'rollout_run_steals',
        'rollout_dead_letters_total',
        'rollout_metrics_left_out',
      ] as const) {
        expect(text, name).toContain(name);
        for (const e of widgets.flatMap((w) => expressions(w.properties.title ?? '')).filter((x) => x.includes(`"${name}"`))) {
          expect(e, name).toContain(`{Rollout,${[...METRICS[name].dimensions].sort().join(',')}}`);
        }
      }
      // And what it showed before: the functions, the queues, every alarm.
      for (const title of ['Invocations', 'Errors', 'Work queue']) expect(byTitle.has(title), title).toBe(true);
      expect(byTitle.get('Alarms')!.properties.alarms).toHaveLength(withDashboard.controlPlane.alarms.length);
      for (const alarm of withDashboard.controlPlane.alarms)
        expect(byTitle.get('Alarms')!.properties.alarms!.join(' ')).toContain(withDashboard.getLogicalId(alarm.node.defaultChild as never));
    },
  );

  it('outputs the table, bus, work queue, coordinator function and API URL', () => {
    for (const out of ['StoreTableName', 'RolloutBusName', 'WorkQueueUrl', 'CoordinatorFunctionName', 'ApiUrl'])
      template.hasOutput(out, { Value: Match.anyValue() });
  });

  it('each bundled function loads on its own (no package from this checkout) and exports its handler', async () => {
    const assets = readdirSync(assembly.directory).filter((d) => d.startsWith('asset.'));
    expect(assets).toHaveLength(Object.keys(FUNCTIONS).length);
    // Outside the project: no package.json says "module", no node_modules to fall back on — as in Lambda.
    const dir = mkdtempSync(join(tmpdir(), 'rollout-bundle-'));
    try {
      for (const a of assets) {
        cpSync(join(assembly.directory, a), join(dir, a), { recursive: true });
        const mod = createRequire(join(dir, a, 'index.js'))(join(dir, a, 'index.js')) as { handler?: unknown };
        expect(typeof mod.handler, a).toBe('function');
      }
      // The bundled spot-drain handler refuses a malformed event before touching any store.
      const drainAsset = assets.find((a) => (createRequire(join(dir, a, 'index.js'))(join(dir, a, 'index.js')) as Record<string, unknown>).spotDrainHandler);
      const drain = createRequire(join(dir, drainAsset!, 'index.js'))(join(dir, drainAsset!, 'index.js')) as { handler: (e: unknown) => Promise<unknown> };
      await expect(drain.handler({ source: 'aws.ec2' })).rejects.toThrow(/not an EC2 spot notice/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('cdk-nag at synth', () => {
  // Synthesises a stack of its own under cdk-nag.
  it('fails the synth on an unacknowledged finding', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const app = new App();
    const stack = new Stack(app, 'Bad');
    new Table(stack, 'NoPitr', { partitionKey: { name: 'pk', type: AttributeType.STRING } });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow(/AwsSolutions-DDB3/);
  });
});

describe('ControlPlaneStack with the Aurora store (-c store=aurora)', () => {
  let template: Template;
  let json: Synthesised['json'];
  // cdk-nag clean for this variant too.
  beforeAll(() => ({ template, json } = synthStack('AuroraTest', { store: 'aurora' }, { nag: true })), SYNTH_HOOK_TIMEOUT);

  it('an encrypted, deletion-protected Aurora PostgreSQL Serverless v2 cluster in private subnets that pauses when idle, credentials in a rotated secret', () => {
    template.hasResourceProperties('AWS::RDS::DBCluster', {
      Engine: 'aurora-postgresql',
      StorageEncrypted: true,
      DeletionProtection: true,
      EnableIAMDatabaseAuthentication: true,
      // 0 ACU: paused after 5 minutes without a connection.
      ServerlessV2ScalingConfiguration: { MinCapacity: 0, MaxCapacity: 8, SecondsUntilAutoPause: 300 },
      BackupRetentionPeriod: 7,
    });
    // An engine version with auto-pause (Aurora PostgreSQL 16.3 or later in the 16 line).
    const version = (Object.values(template.findResources('AWS::RDS::DBCluster'))[0]!.Properties as { EngineVersion: string }).EngineVersion;
    expect(version).toMatch(/^16\.(\d+)/);
    expect(Number(version.split('.')[1])).toBeGreaterThanOrEqual(3);
    template.hasResource('AWS::RDS::DBCluster', { DeletionPolicy: 'Snapshot' });
    template.resourceCountIs('AWS::SecretsManager::RotationSchedule', 1);
    template.hasResourceProperties('AWS::EC2::FlowLog', { TrafficType: 'REJECT' });
    // As described before the stack held a RolloutControlPlane: a new description would replace the group.
    template.hasResourceProperties('AWS::EC2::SecurityGroup', { GroupDescription: 'AuroraTest/Aurora/Cluster/RotationSingleUser/SecurityGroup' });
  });

  // Synthesises a second shape (auroraMinCapacity).
  it('a minimum of 0.5 ACU or more when asked for (auroraMinCapacity): it never pauses', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const awake = synthStack('AuroraAwake', { store: 'aurora', auroraMinCapacity: 0.5 }).template;
    awake.hasResourceProperties('AWS::RDS::DBCluster', {
      ServerlessV2ScalingConfiguration: { MinCapacity: 0.5, MaxCapacity: 8, SecondsUntilAutoPause: Match.absent() },
    });
    for (const bad of [-1, 0.3, 9])
      expect(
        () =>
          new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), `Bad${String(bad).replace(/\W/g, '')}`, {
            store: 'aurora',
            auroraMinCapacity: bad,
          }),
      ).toThrow(/auroraMinCapacity: 0 to 8 in steps of 0.5/);
    expect(() => new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'NoAuroraCapacity', { auroraMinCapacity: 1 })).toThrow(
      /auroraMinCapacity: only with store: aurora/,
    );
  });

  it('the activity flags: a small table the writers raise and the scheduled probes read before the database, reached through a free gateway endpoint', () => {
    const tables = Object.entries(json.Resources).filter(([, r]) => r.Type === 'AWS::DynamoDB::Table');
    expect(tables).toHaveLength(1);
    const [flagsId, flags] = tables[0]!;
    expect(flags.Properties).toMatchObject({ KeySchema: [{ AttributeName: 'flag', KeyType: 'HASH' }], BillingMode: 'PAY_PER_REQUEST' });
    // The AWS owned key: no KMS request billed for the probes' reads.
    expect((flags.Properties.SSESpecification as { SSEEnabled?: boolean; KMSMasterKeyId?: unknown } | undefined)?.SSEEnabled ?? false).toBe(false);
    const fns = Object.entries(json.Resources).filter(
      ([, r]) => r.Type === 'AWS::Lambda::Function' && typeof r.Properties.Description === 'string' && r.Properties.Description.length,
    );
    const byName = new Map(
      fns.map(([id, r]) => [
        (r.Properties.Environment as { Variables: Record<string, unknown> }).Variables.POWERTOOLS_SERVICE_NAME as string,
        { id, env: (r.Properties.Environment as { Variables: Record<string, unknown> }).Variables },
      ]),
    );
    const uses = {
      api: ['dynamodb:UpdateItem'],
      streamingPromoter: ['dynamodb:UpdateItem'],
      batchPromoter: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      coordinator: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
    } as Record<string, string[]>;
    for (const name of Object.keys(FUNCTIONS)) {
      const fn = byName.get(name)!;
      const actions = Object.entries(json.Resources)
        .filter(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.toLowerCase().startsWith(name.toLowerCase()))
        .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement)
        .filter((st) => [st.Action].flat().some((a) => a.startsWith('dynamodb:')));
      if (uses[name]) {
        expect(fn.env.ROLLOUT_ACTIVITY_TABLE, name).toEqual({ Ref: flagsId });
        expect(actions.flatMap((st) => [st.Action].flat()).sort(), name).toEqual(uses[name]);
        for (const st of actions) expect(JSON.stringify(st.Resource), name).toContain(flagsId);
      } else {
        expect(fn.env.ROLLOUT_ACTIVITY_TABLE, name).toBeUndefined();
        expect(actions, name).toEqual([]);
      }
    }
    template.hasResourceProperties('AWS::EC2::VPCEndpoint', {
      VpcEndpointType: 'Gateway',
      ServiceName: Match.objectLike({ 'Fn::Join': Match.arrayWith([Match.arrayWith(['.dynamodb'])]) }),
    });
  });

  // Synthesises a second shape (auroraReader).
  it('one instance, the writer, unless a reader is asked for (auroraReader: true)', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    template.resourceCountIs('AWS::RDS::DBInstance', 1);
    synthStack('AuroraReader', { store: 'aurora', auroraReader: true }).template.resourceCountIs('AWS::RDS::DBInstance', 2);
    expect(() => new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'NoAurora', { auroraReader: true })).toThrow(
      /auroraReader: only with store: aurora/,
    );
  });

  it('every function that uses the database runs in the VPC on the pg path: its own database user (IAM), the RDS CA bundle, no secret, no DynamoDB grants; the others get neither login nor VPC', () => {
    const fns = Object.entries(json.Resources).filter(
      ([, r]) =>
        r.Type === 'AWS::Lambda::Function' && (r.Properties.Description as string | undefined)?.length && r.Properties.Description !== MIGRATOR.description,
    );
    expect(fns).toHaveLength(Object.keys(FUNCTIONS).length);
    expect([...AURORA_WITHOUT_DATABASE].sort()).toEqual(['spotDrain']);
    for (const [, fn] of fns) {
      const env = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      const name = env.POWERTOOLS_SERVICE_NAME as keyof typeof FUNCTIONS;
      expect(env.ROLLOUT_STORE, name).toBe('postgres');
      expect(env.ROLLOUT_TABLE, name).toBeUndefined();
      if (AURORA_WITHOUT_DATABASE.includes(name)) {
        expect(env.ROLLOUT_DB_SECRET_ARN, name).toBeUndefined();
        expect(fn.Properties.VpcConfig, name).toBeUndefined();
      } else {
        expect(env.ROLLOUT_DB_SECRET_ARN, name).toBeUndefined();
        expect(env.ROLLOUT_DB_USER, name).toBe((FUNCTIONS[name] as FunctionSpec).databaseRole);
        expect(env.NODE_EXTRA_CA_CERTS, name).toBe('/var/runtime/ca-cert.pem');
        expect(fn.Properties.VpcConfig, name).toBeDefined();
      }
    }
    const functionPolicies = Object.entries(json.Resources).filter(
      ([id, r]) => r.Type === 'AWS::IAM::Policy' && Object.keys(FUNCTIONS).some((n) => id.toLowerCase().startsWith(n.toLowerCase())),
    );
    expect(functionPolicies.length).toBe(Object.keys(FUNCTIONS).length);
    // The cluster's one secret, as CDK names it once attached to the cluster (the attachment's Ref is the secret's ARN).
    const secrets = Object.keys(json.Resources).filter((id) => json.Resources[id]!.Type === 'AWS::SecretsManager::SecretTargetAttachment');
    expect(secrets).toHaveLength(1);
    for (const [id, p] of functionPolicies) {
      const doc = JSON.stringify(p.Properties.PolicyDocument);
      const name = Object.keys(FUNCTIONS).find((n) => id.toLowerCase().startsWith(n.toLowerCase())) as keyof typeof FUNCTIONS;
      // The master secret is the migrator's alone (test/infra/database-roles.test.ts).
      expect(doc, id).not.toContain('secretsmanager:');
      expect(doc, id).not.toContain(secrets[0]);
      if (AURORA_WITHOUT_DATABASE.includes(name)) expect(doc, id).not.toContain('rds-db:');
      else expect(doc, id).toContain('rds-db:connect');
      // No store grant: the only table is the activity flags' (below).
      expect(doc, id).not.toMatch(/dynamodb:(Query|PutItem|DeleteItem|BatchWriteItem|TransactWriteItems|ConditionCheckItem)/);
    }
    // No worker registers on Aurora: no rule sends it Spot notices (each would find no one).
    expect(JSON.stringify(Object.values(json.Resources).filter((r) => r.Type === 'AWS::Events::Rule'))).not.toContain('aws.ec2');
  });

  it('only the functions’ security group reaches the database port', () => {
    const ingress = Object.values(json.Resources).filter((r) => r.Type === 'AWS::EC2::SecurityGroupIngress');
    expect(ingress.some((r) => r.Properties.FromPort === 5433 && r.Properties.SourceSecurityGroupId !== undefined)).toBe(true);
    expect(JSON.stringify(ingress)).not.toContain('0.0.0.0/0');
  });
});

describe('two stacks sharing one store (-c sharedTable=…)', () => {
  let a: ControlPlaneStack;
  let tb: Template;
  beforeAll(() => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    a = new ControlPlaneStack(app, 'StackA', { nodeId: 'a/eu-west-1' });
    const b = new ControlPlaneStack(app, 'StackB', { nodeId: 'b/eu-west-1', sharedTableName: 'rollout-store-a' });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    app.synth();
    tb = Template.fromStack(b);
  }, SYNTH_HOOK_TIMEOUT);

  it('the second stack creates no table, points every function at the shared one, and keeps its own node id', () => {
    expect(Template.fromStack(a).findResources('AWS::DynamoDB::Table')).not.toEqual({});
    tb.resourceCountIs('AWS::DynamoDB::Table', 0);
    const fns = Object.values(tb.findResources('AWS::Lambda::Function')).filter((r) => (r.Properties as { Description?: string }).Description);
    expect(fns).toHaveLength(Object.keys(FUNCTIONS).length);
    for (const fn of fns)
      expect((fn.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment.Variables).toMatchObject({
        ROLLOUT_TABLE: 'rollout-store-a',
        ROLLOUT_NODE_ID: 'b/eu-west-1',
      });
    expect(JSON.stringify(tb.findResources('AWS::IAM::Policy'))).toContain(':table/rollout-store-a/index/*');
  });
});

describe('the optional Spot worker fleet (-c workerRun=…)', () => {
  let template: Template;
  let assembly: CloudAssembly;
  beforeAll(() => {
    const made = synthStack('FleetTest', { workerFleet: { runId: 'run-42', desired: 3 } }, { bundle: true, nag: true });
    ({ template } = made);
    assembly = made.assembly!;
  }, SYNTH_HOOK_TIMEOUT);
  // Unset when the synthesis failed: that failure is the one to read.
  afterAll(() => assembly && rmSync(assembly.directory, { recursive: true, force: true }));

  it('an arm64 Spot group (price-capacity-optimized, capacity rebalance) of the desired size, IMDSv2 only, encrypted disk', () => {
    template.hasResourceProperties('AWS::AutoScaling::AutoScalingGroup', {
      DesiredCapacity: '3',
      CapacityRebalance: true,
      MixedInstancesPolicy: Match.objectLike({
        InstancesDistribution: { OnDemandPercentageAboveBaseCapacity: 0, SpotAllocationStrategy: 'price-capacity-optimized' },
      }),
    });
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({
        MetadataOptions: { HttpTokens: 'required' },
        BlockDeviceMappings: [Match.objectLike({ Ebs: Match.objectLike({ Encrypted: true }) })],
      }),
    });
  });

  it('each instance runs `rollout worker` for the run as a systemd service that drains on stop', () => {
    const lt = Object.values(template.findResources('AWS::EC2::LaunchTemplate'))[0]!;
    const userData = JSON.stringify((lt.Properties as { LaunchTemplateData: { UserData: unknown } }).LaunchTemplateData.UserData);
    expect(userData).toContain('rollout.mjs worker --run run-42 --store dynamodb');
    expect(userData).toContain('--provider aws --instance-id ${ROLLOUT_INSTANCE_ARN}');
    expect(userData).toContain('TimeoutStopSec=75');
  });

  it('the instance role: the table, the work queue, invoking the coordinator, reading its one bundle; no wildcard actions', () => {
    const policies = template.findResources('AWS::IAM::Policy');
    const worker = Object.entries(policies).find(([id]) => id.startsWith('WorkersRole'))![1];
    const statements = (worker.Properties as { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } }).PolicyDocument.Statement;
    for (const s of statements) for (const a of [s.Action].flat()) expect(a).not.toMatch(/^\*$|:\*$/);
    const doc = JSON.stringify(statements);
    expect(doc).toContain('lambda:InvokeFunction');
    expect(doc).toContain('sqs:ReceiveMessage');
    expect(doc).toContain('"s3:GetObject"');
    expect(doc).not.toContain('s3:List');
  });

  it('the bundled command runs on its own (no package from this checkout)', () => {
    const dir = readdirSync(assembly.directory).find((d) => d.startsWith('asset.') && readdirSync(join(assembly.directory, d)).includes('rollout.mjs'));
    expect(dir).toBeDefined();
    const out = mkdtempSync(join(tmpdir(), 'rollout-cmd-'));
    try {
      cpSync(join(assembly.directory, dir!, 'rollout.mjs'), join(out, 'rollout.mjs'));
      const help = spawnSync(process.execPath, [join(out, 'rollout.mjs'), 'worker', '--help'], { encoding: 'utf8', cwd: out });
      expect(help.status).toBe(0);
      expect(help.stdout).toMatch(/Usage: rollout worker/);
      const bad = spawnSync(process.execPath, [join(out, 'rollout.mjs'), 'worker', '--run', 'r', '--store', 'dynamodb', '--table', 't', '--queue', 'ledger'], {
        encoding: 'utf8',
        cwd: out,
      });
      expect(bad.status).toBe(2);
      expect(bad.stderr).toMatch(/--queue: the ledger-backed queue needs --store postgres/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('targets a rollout may move (targets prop)', () => {
  const env = { account: '123456789012', region: 'eu-west-1' };
  const rule = 'arn:aws:elasticloadbalancing:eu-west-1:123456789012:listener-rule/app/shop/50dc6c495c0c9188/f2f7dc8efc522ab2/9683b2d02a6cabee';
  const tg = (n: string) => `arn:aws:elasticloadbalancing:eu-west-1:123456789012:targetgroup/${n}/6d0ecf831eec9f09`;
  const targets = {
    api: { type: 'lambdaAlias' as const, functionName: 'checkout', alias: 'live' },
    edge: { type: 'albWeights' as const, ruleArn: rule, stableTargetGroupArn: tg('blue'), canaryTargetGroupArn: tg('green') },
  };
  let json: Synthesised['json'];
  // cdk-nag clean with targets too.
  beforeAll(() => ({ json } = synthStack('Targets', { env, targets }, { nag: true })), SYNTH_HOOK_TIMEOUT);
  const policyOf = (fn: string) =>
    JSON.stringify(
      Object.entries(json.Resources)
        .filter(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.toLowerCase().startsWith(fn.toLowerCase()))
        .map(([, r]) => r.Properties.PolicyDocument),
    );

  it('the functions that actuate may update exactly the declared alias and rule; no other function may', () => {
    for (const fn of ['StreamingPromoter', 'BatchPromoter', 'Api']) {
      const doc = policyOf(fn);
      expect(doc, fn).toContain('"Action":["lambda:GetAlias","lambda:UpdateAlias"]');
      expect(doc, fn).toContain(':function:checkout:live');
      expect(doc, fn).toContain(rule);
      expect(doc, fn).not.toMatch(/lambda:UpdateAlias[^\]]*\],"Effect":"Allow","Resource":"\*"/);
    }
    for (const fn of ['Coordinator', 'SpotDrain']) expect(policyOf(fn), fn).not.toMatch(/lambda:UpdateAlias|elasticloadbalancing:/);
    const variables = Object.values(json.Resources)
      .filter((r) => r.Type === 'AWS::Lambda::Function')
      .map((r) => (r.Properties.Environment as { Variables: Record<string, string> } | undefined)?.Variables ?? {});
    expect(variables.some((v) => v.ROLLOUT_TARGETS && (JSON.parse(v.ROLLOUT_TARGETS) as { api: { alias: string } }).api.alias === 'live')).toBe(true);
  });

  // Constructs two stacks (each refused before synthesis).
  it('a bad target, or an nginx one the functions cannot reach, fails the synth naming it', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    expect(
      () =>
        new ControlPlaneStack(new App(), 'BadTarget', {
          env,
          targets: { edge: { type: 'albWeights', ruleArn: rule, stableTargetGroupArn: tg('x'), canaryTargetGroupArn: tg('x') } },
        }),
    ).toThrow(/edge\.canaryTargetGroupArn: must differ/);
    expect(
      () =>
        new ControlPlaneStack(new App(), 'Nginx', {
          env,
          // A JavaScript app (or a targets file) can pass one; TypeScript refuses it (test/types/inputs.ts).
          targets: JSON.parse(
            JSON.stringify({ web: { type: 'nginx', include: '/etc/nginx/x.conf', config: '/etc/nginx/nginx.conf', stableUpstream: 'a', canaryUpstream: 'b' } }),
          ) as RolloutControlPlaneProps['targets'],
        }),
    ).toThrow(/targets\.web: an nginx target/);
  });
});
