/**
 * `cdk deploy` for real: the CDK CLI bootstraps an environment, deploys the
 * stack (DynamoDB variant) and destroys it, against moto, an AWS emulator
 * (docs/development/testing.md#testing-against-aws-emulators). What the stack wires is then
 * read back through the services' own APIs, not from the template.
 *
 * Where moto falls short of AWS, the test works around it and says what AWS
 * does:
 * - moto reads a change set's template from S3 by parsing its URL, and takes
 *   the first label of any host but `localhost` for the bucket: the CLI is
 *   pointed at http://localhost:<port>.
 * - moto's CloudFormation cannot create AWS::Events::EventBusPolicy (it
 *   refuses the change set): the bus policy is taken out of the template
 *   before deploying, and stays covered by the template test
 *   (stack.test.ts: "only named senders…"). AWS creates it.
 * - moto's CloudFormation fails on an AWS::Events::Archive whose EventPattern
 *   is an object (it expects a string; the template type is Json, and AWS
 *   takes either): the archive is deployed without its pattern (it then
 *   keeps every event of the bus, where AWS keeps this account's).
 * - moto resolves `{Ref: <an event bus>}` to its own bus object instead of
 *   the bus's name (AWS gives the name), and fails where a rule or an output
 *   uses it: the deployed copy names the bus literally.
 * - moto's CloudFormation has no AWS::CloudWatch::Alarm, AWS::ApiGatewayV2::*,
 *   AWS::SQS::QueuePolicy, AWS::SNS::TopicPolicy or AWS::Lambda::EventInvokeConfig: it reports them
 *   CREATE_COMPLETE and creates nothing. The test names exactly those as
 *   skipped (so a type moto starts to support, or one that silently fails,
 *   shows here); the alarms, the API's routes and authorizer, the queue
 *   policies and the retry settings are asserted on the template
 *   (stack.test.ts) and listed in docs/development/testing.md#testing-against-aws-emulators as untested on an emulator.
 * - Lambda functions cannot be invoked without Docker: a rule's target is
 *   checked by name, and delivery is shown through a queue target that the
 *   test adds beside the deployed rule, with the deployed rule's pattern.
 */
import { CloudFormationClient, DescribeStackResourcesCommand, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import {
  EventBridgeClient,
  ListRulesCommand,
  ListTargetsByRuleCommand,
  PutEventsCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from '@aws-sdk/client-eventbridge';
import { GetFunctionConfigurationCommand, LambdaClient, ListEventSourceMappingsCommand, ListFunctionsCommand } from '@aws-sdk/client-lambda';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FUNCTIONS } from '../../shared/topology.js';

const root = resolve(import.meta.dirname, '../..');
const REGION = 'us-east-1';
const ACCOUNT = '123456789012';
const STACK = 'RolloutDeployTest';
const moto = process.env.ROLLOUT_MOTO_URL;
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');
// moto parses a template URL's bucket from its path only when the host is localhost (see above).
const endpoint = moto.replace('127.0.0.1', 'localhost');
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
const client = { region: REGION, endpoint: moto, credentials };
const cdkEnv = {
  ...process.env,
  AWS_ENDPOINT_URL: endpoint,
  AWS_ACCESS_KEY_ID: 'test',
  AWS_SECRET_ACCESS_KEY: 'test',
  AWS_REGION: REGION,
  AWS_DEFAULT_REGION: REGION,
  CDK_DISABLE_VERSION_CHECK: '1',
};

function cdk(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((done) => {
    const child = spawn(join(root, 'node_modules/.bin/cdk'), args, { cwd: root, env: cdkEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => done({ code, out }));
  });
}

const cfn = new CloudFormationClient(client);
const events = new EventBridgeClient(client);
const sqs = new SQSClient(client);
const lambda = new LambdaClient(client);
const assembly = mkdtempSync(join(tmpdir(), 'rollout-deploy-'));
let resources: { LogicalResourceId?: string; ResourceType?: string; ResourceStatus?: string; PhysicalResourceId?: string }[] = [];
let templateTypes = new Map<string, string>();
/** What moto's CloudFormation does not create (see the header); AWS creates all of them. */
const NOT_ON_MOTO = [
  'AWS::ApiGatewayV2::Api',
  'AWS::ApiGatewayV2::Integration',
  'AWS::ApiGatewayV2::Route',
  'AWS::ApiGatewayV2::Stage',
  'AWS::CloudWatch::Alarm',
  'AWS::Lambda::EventInvokeConfig',
  'AWS::SNS::TopicPolicy',
  'AWS::SQS::QueuePolicy',
];
const BUS = `${STACK}-rollout`;

beforeAll(async () => {
  const boot = await cdk(['bootstrap', `aws://${ACCOUNT}/${REGION}`]);
  expect(boot.code, boot.out).toBe(0);
  const synth = await cdk(['synth', '--quiet', '-o', assembly, '-c', `stackName=${STACK}`, '-c', 'gateAlarms=checkout-*']);
  expect(synth.code, synth.out).toBe(0);
  // moto cannot create AWS::Events::EventBusPolicy; AWS does (see the header).
  const file = join(assembly, `${STACK}.template.json`);
  const template = JSON.parse(readFileSync(file, 'utf8')) as { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };
  for (const [id, r] of Object.entries(template.Resources)) {
    if (r.Type === 'AWS::Events::EventBusPolicy') delete template.Resources[id];
    if (r.Type === 'AWS::Events::Archive') delete r.Properties?.EventPattern;
  }
  const busNames = new Map(Object.entries(template.Resources).flatMap(([id, r]) => (r.Type === 'AWS::Events::EventBus' ? [[id, r.Properties!.Name]] : [])));
  const named = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(named);
    if (v === null || typeof v !== 'object') return v;
    const ref = (v as { Ref?: unknown }).Ref;
    if (Object.keys(v).length === 1 && typeof ref === 'string' && busNames.has(ref)) return busNames.get(ref);
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, named(x)]));
  };
  writeFileSync(file, JSON.stringify(named(template)));
  templateTypes = new Map(Object.entries(template.Resources).map(([id, r]) => [id, r.Type]));
  const deployed = await cdk(['deploy', '--app', assembly, '--require-approval', 'never', STACK]);
  expect(deployed.code, deployed.out).toBe(0);
  expect((await cfn.send(new DescribeStacksCommand({ StackName: STACK }))).Stacks?.[0]?.StackStatus).toBe('CREATE_COMPLETE');
  resources = (await cfn.send(new DescribeStackResourcesCommand({ StackName: STACK }))).StackResources ?? [];
}, 600_000);

afterAll(async () => {
  const destroyed = await cdk(['destroy', '--app', assembly, '--force', STACK]);
  expect(destroyed.code, destroyed.out).toBe(0);
}, 300_000);

/** The physical id of the resource whose logical id starts with `prefix`. */
const physical = (prefix: string) => resources.find((r) => r.LogicalResourceId?.startsWith(prefix))?.PhysicalResourceId ?? '';

describe('cdk deploy against moto', () => {
  it('every resource reached CREATE_COMPLETE; those moto does not create are exactly the types it lacks', () => {
    expect(resources.filter((r) => r.ResourceStatus !== 'CREATE_COMPLETE').map((r) => `${r.LogicalResourceId} ${r.ResourceStatus}`)).toEqual([]);
    const created = new Set(resources.flatMap((r) => (r.LogicalResourceId ? [r.LogicalResourceId] : [])));
    const skipped = [...templateTypes].filter(([id]) => !created.has(id)).map(([, type]) => type);
    expect([...new Set(skipped)].sort()).toEqual(NOT_ON_MOTO);
    expect(created.size).toBe(templateTypes.size - skipped.length);
    expect(physical('Store')).toMatch(new RegExp(`^${STACK}-Store`));
  });

  it('the functions exist, each rule carries its pattern and targets its function, and the schedules run every minute', async () => {
    const functions = (await lambda.send(new ListFunctionsCommand({}))).Functions ?? [];
    const deployed = functions.filter((f) => f.FunctionName?.startsWith(STACK));
    expect(deployed).toHaveLength(Object.keys(FUNCTIONS).length);
    for (const f of deployed) expect(f.Runtime).toBe('nodejs24.x');
    const bus = BUS;
    const rules = [
      ...((await events.send(new ListRulesCommand({ EventBusName: bus }))).Rules ?? []),
      ...((await events.send(new ListRulesCommand({}))).Rules ?? []),
    ].filter((r) => r.Name?.startsWith(STACK));
    const signal = rules.find((r) => r.EventPattern?.includes('rollout.metrics_reported'));
    expect(JSON.parse(signal!.EventPattern!)).toEqual({
      source: [{ prefix: 'rollout.' }],
      'detail-type': ['rollout.created', 'rollout.metrics_reported', 'rollout.alarm_changed', 'rollout.command'],
    });
    const targets = (await events.send(new ListTargetsByRuleCommand({ Rule: signal!.Name!, EventBusName: bus }))).Targets ?? [];
    expect(targets.map((t) => t.Arn)).toEqual([expect.stringContaining('StreamingPromoter')]);
    expect(targets[0]!.RetryPolicy).toMatchObject({ MaximumRetryAttempts: 4, MaximumEventAgeInSeconds: 3_600 });
    expect(targets[0]!.DeadLetterConfig?.Arn).toContain('EventsDlq');
    const spot = rules.find((r) => r.EventPattern?.includes('EC2 Spot Instance Interruption Warning'));
    expect(JSON.parse(spot!.EventPattern!)).toMatchObject({ source: ['aws.ec2'] });
    const alarms = rules.find((r) => r.EventPattern?.includes('CloudWatch Alarm State Change'));
    expect(JSON.parse(alarms!.EventPattern!)).toMatchObject({ source: ['aws.cloudwatch'], detail: { alarmName: [{ prefix: 'checkout-' }] } });
    const schedules = rules.filter((r) => r.ScheduleExpression);
    expect(schedules.map((r) => r.ScheduleExpression).sort()).toEqual(['rate(1 minute)', 'rate(1 minute)']);
  });

  it("the work queue sends to its DLQ after 5 receives; no event source mapping polls the DLQ: the coordinator's scan drains it", async () => {
    const queueUrl = physical('WorkQueue');
    const attrs = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }))).Attributes ?? {};
    const redrive = JSON.parse(attrs.RedrivePolicy ?? '{}') as { maxReceiveCount?: number | string; deadLetterTargetArn?: string };
    expect(Number(redrive.maxReceiveCount)).toBe(5);
    expect(redrive.deadLetterTargetArn).toContain('WorkDlq');
    const mappings = (await lambda.send(new ListEventSourceMappingsCommand({}))).EventSourceMappings ?? [];
    expect(mappings.filter((m) => m.EventSourceArn === redrive.deadLetterTargetArn || m.FunctionArn?.includes(STACK))).toEqual([]);
    const fn = resources.find((r) => r.ResourceType === 'AWS::Lambda::Function' && r.LogicalResourceId?.startsWith('Coordinator'))!;
    const coordinator = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: fn.PhysicalResourceId! }));
    expect(coordinator.Environment?.Variables?.ROLLOUT_WORK_DLQ_URL).toContain('WorkDlq');
  });

  it('a rollout signal put on the deployed bus is delivered by the deployed rule; our own events are not', async () => {
    const rules = (await events.send(new ListRulesCommand({ EventBusName: BUS }))).Rules ?? [];
    const signal = rules.find((r) => r.EventPattern?.includes('rollout.metrics_reported'))!;
    // moto raises on delivering to a Lambda target (AWS invokes the function): the deployed rule gets a queue in its place.
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'deployed-signals' }))).QueueUrl!;
    const queueArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
    const functions = (await events.send(new ListTargetsByRuleCommand({ Rule: signal.Name!, EventBusName: BUS }))).Targets ?? [];
    await events.send(new RemoveTargetsCommand({ Rule: signal.Name!, EventBusName: BUS, Ids: functions.map((t) => t.Id!) }));
    await events.send(new PutTargetsCommand({ Rule: signal.Name!, EventBusName: BUS, Targets: [{ Id: 'queue', Arn: queueArn }] }));
    const put = await events.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: BUS,
            Source: 'rollout.cli',
            DetailType: 'rollout.metrics_reported',
            Detail: JSON.stringify({ rolloutId: 'ro-1', stage: 0, requests: 10, errors: 0, observedAt: Date.now() }),
          },
          { EventBusName: BUS, Source: 'ai.rollout', DetailType: 'rollout.metrics_reported', Detail: JSON.stringify({ rolloutId: 'ro-2' }) },
          { EventBusName: BUS, Source: 'rollout.cli', DetailType: 'rollout.unheard_of', Detail: JSON.stringify({ rolloutId: 'ro-3' }) },
        ],
      }),
    );
    expect(put.FailedEntryCount).toBe(0);
    const got = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2 }))).Messages ?? [];
    expect(got.map((m) => (JSON.parse(m.Body!) as { source: string; detail: { rolloutId: string } }).detail.rolloutId)).toEqual(['ro-1']);
  });
});
