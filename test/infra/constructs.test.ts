/**
 * The constructs as a user nests them in a stack of their own
 * (`rollout-control-plane/cdk`): existing resources used rather than
 * created, alarm actions, per-function overrides, the grant methods, and a
 * WorkerFleet running the user's own module. cdk-nag stays clean.
 */
import { App, CfnResource, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { EventBus } from 'aws-cdk-lib/aws-events';
import { AccountRootPrincipal, Role, User } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { SYNTH_HOOK_TIMEOUT, VARIANT_TEST_TIMEOUT } from './synth.js';
import { RolloutControlPlane, WorkerFleet } from '../../infra/cdk.js';
import { GSI1, KEY } from '../../shared/adapters/dynamodb/table.js';

const env = { account: '123456789012', region: 'eu-west-1' };

describe('RolloutControlPlane and WorkerFleet in a stack of your own', () => {
  let moduleDir: string;
  let module: string;
  let stack: Stack;
  let table: Table;
  let plane: RolloutControlPlane;
  let roles: Record<'reader' | 'operator' | 'admin' | 'pipeline', Role>;
  let fleet: WorkerFleet;
  let assembly: CloudAssembly;
  let template: Template;
  let key: Key;
  let topic: Topic;
  let json: { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> };
  // One synthesis for the file, its functions and the fleet's command and module bundled.
  beforeAll(() => {
    const outdir = mkdtempSync(join(tmpdir(), 'rollout-constructs-'));
    moduleDir = mkdtempSync(join(tmpdir(), 'rollout-module-'));
    module = join(moduleDir, 'my-worker.mjs');
    writeFileSync(module, "export default async function (item) { return { echoed: item.payload, marker: 'my-worker-module' }; }\n");
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': ['Platform'] } });
    stack = new Stack(app, 'Platform', { env });
    key = new Key(stack, 'Key', { enableKeyRotation: true });
    table = new Table(stack, 'Existing', {
      partitionKey: { name: KEY.pk, type: AttributeType.STRING },
      sortKey: { name: KEY.sk, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: key,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    });
    table.addGlobalSecondaryIndex({
      indexName: GSI1.name,
      partitionKey: { name: GSI1.pk, type: AttributeType.STRING },
      sortKey: { name: GSI1.sk, type: AttributeType.STRING },
    });
    topic = new Topic(stack, 'Pager', { enforceSSL: true, masterKey: key });
    plane = new RolloutControlPlane(stack, 'Rollouts', {
      table,
      encryptionKey: key,
      alarmTopic: topic,
      functions: {
        api: { memoryMb: 1024, logRetention: RetentionDays.THREE_MONTHS, reservedConcurrency: 20 },
        streamingPromoter: { reservedConcurrency: 50 },
        batchPromoter: { reservedConcurrency: 5 },
      },
      apiUrlOutput: { exportName: 'platform-rollouts-api' },
    });
    const assume = () => new AccountRootPrincipal();
    roles = {
      reader: new Role(stack, 'Reader', { assumedBy: assume() }),
      operator: new Role(stack, 'Operator', { assumedBy: assume() }),
      admin: new Role(stack, 'Admin', { assumedBy: assume() }),
      pipeline: new Role(stack, 'Pipeline', { assumedBy: assume() }),
    };
    plane.grantRead(roles.reader);
    plane.grantOperate(roles.operator);
    plane.grantAdmin(roles.admin);
    plane.grantSignal(roles.pipeline);
    fleet = new WorkerFleet(stack, 'Fleet', {
      controlPlane: plane,
      runs: ['nightly'],
      module,
      instanceTypes: ['c7i.large', 'm7i.large'],
      desiredCapacity: 4,
      workerArgs: ['--item-timeout', '30m', '--worker-id', '$(reboot)%h'],
    });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    assembly = app.synth(); // throws on any cdk-nag finding left unacknowledged
    template = Template.fromStack(stack);
    json = template.toJSON() as { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> };
  }, SYNTH_HOOK_TIMEOUT);
  const id = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
  const policyOf = (role: Role) =>
    JSON.stringify(
      Object.values(json.Resources)
        .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(id(role)))
        .map((r) => r.Properties.PolicyDocument),
    );
  afterAll(() => {
    // Unset when the synthesis failed: that failure is the one to read.
    if (assembly) rmSync(assembly.directory, { recursive: true, force: true });
    if (moduleDir) rmSync(moduleDir, { recursive: true, force: true });
  });

  it('uses the table it is given and creates none; its queues are encrypted with the given key', () => {
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    expect(plane.table).toBe(table);
    for (const fn of [plane.functions.api, plane.functions.coordinator])
      expect(JSON.stringify(json.Resources[id(fn)]!.Properties.Environment)).toContain(id(table));
    for (const q of [plane.workQueue, plane.workDlq, plane.eventsDlq])
      expect(json.Resources[id(q)]!.Properties.KmsMasterKeyId).toEqual({ 'Fn::GetAtt': [id(key), 'Arn'] });
    // Every function that reads the table may use its key (a promoter sends to no queue, so no queue grant gives it that).
    for (const name of ['streamingPromoter', 'batchPromoter', 'spotDrain', 'api', 'coordinator'] as const) {
      const role = plane.functions[name].role as Role;
      expect(policyOf(role), name).toContain('kms:Decrypt');
    }
  });

  it("the API's URL: a property, and the output asked for with its export; a name CloudFormation would refuse is refused before anything is made", () => {
    expect(JSON.stringify(stack.resolve(plane.apiUrl))).toContain('execute-api');
    const outputs = Object.values(template.findOutputs('*')).filter((o) => (o as { Export?: unknown }).Export);
    expect(outputs).toEqual([expect.objectContaining({ Export: { Name: 'platform-rollouts-api' }, Value: stack.resolve(plane.apiUrl) as unknown })]);
    const s = new Stack(new App(), 'Named', { env });
    expect(() => new RolloutControlPlane(s, 'Rollouts', { apiUrlOutput: { exportName: 'rollouts api' } })).toThrow(
      /apiUrlOutput\.exportName: "rollouts api" is not an export name/,
    );
    expect(s.node.findAll().filter((c) => c instanceof CfnResource).length).toBe(0);
  });

  it('every alarm notifies the topic', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms.length).toBe(plane.alarms.length);
    expect(alarms.length).toBeGreaterThanOrEqual(7);
    for (const a of alarms) expect((a.Properties as { AlarmActions: unknown[] }).AlarmActions).toEqual([{ Ref: id(topic) }]);
  });

  it('per-function overrides: memory, log retention and reserved concurrency; the batch promoter keeps its one at a time', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: Match.absent(),
      MemorySize: 1024,
      ReservedConcurrentExecutions: 20,
      Description: Match.stringLikeRegexp('HTTP API'),
    });
    const logs = json.Resources[id(plane.functions.api)]!.Properties.LoggingConfig as { LogGroup: { Ref: string } };
    expect(json.Resources[logs.LogGroup.Ref]!.Properties.RetentionInDays).toBe(90);
    expect(json.Resources[id(plane.functions.streamingPromoter)]!.Properties.ReservedConcurrentExecutions).toBe(50);
    expect(json.Resources[id(plane.functions.batchPromoter)]!.Properties.ReservedConcurrentExecutions).toBe(1);
    expect(() => new RolloutControlPlane(new Stack(new App(), 'Bad'), 'X', { functions: { apii: {} } as never })).toThrow(/functions\.apii: no such function/);
  });

  it('grants: read is GETs only, operate adds the commands but not abort, admin adds creating, aborting and cancelling; signal is PutEvents and a place on the bus policy', () => {
    expect(policyOf(roles.reader)).toContain('/GET/*');
    expect(policyOf(roles.reader)).not.toContain('/POST/');
    expect(policyOf(roles.operator)).toContain('/POST/rollouts/*/pause');
    expect(policyOf(roles.operator)).not.toMatch(/abort|cancel/);
    for (const p of ['/POST/rollouts"', '/POST/runs"', '/POST/rollouts/*/abort"', '/POST/runs/*/cancel"']) expect(policyOf(roles.admin)).toContain(p);
    expect(policyOf(roles.pipeline)).toContain('events:PutEvents');
    const busPolicy = JSON.stringify(Object.values(template.findResources('AWS::Events::EventBusPolicy'))[0]);
    expect(busPolicy).toContain(id(roles.pipeline));
    expect(busPolicy).not.toContain(id(roles.reader));
    expect(() => plane.grantSignal(new User(stack, 'Someone'))).toThrow(/grant a role/);
  });

  it("the fleet: x86 instances of the types given, its run, the user's module bundled beside the command, and the extra flags as systemd reads them (nothing expanded)", () => {
    template.hasResourceProperties('AWS::AutoScaling::AutoScalingGroup', {
      DesiredCapacity: '4',
      MixedInstancesPolicy: Match.objectLike({
        LaunchTemplate: Match.objectLike({ Overrides: [{ InstanceType: 'c7i.large' }, { InstanceType: 'm7i.large' }] }),
      }),
    });
    const lt = Object.values(template.findResources('AWS::EC2::LaunchTemplate'))[0]!;
    const userData = JSON.stringify((lt.Properties as { LaunchTemplateData: { UserData: unknown } }).LaunchTemplateData.UserData);
    expect(userData).toContain('worker --run nightly --store dynamodb');
    expect(userData).toContain(String.raw`--module /opt/rollout/worker.mjs \"--item-timeout\" \"30m\" \"--worker-id\" \"$$(reboot)%%h\" --json`);
    expect(userData).toContain("<<'UNIT'");
    expect(JSON.stringify(template.toJSON())).toContain('al2023-ami-kernel-6.1-x86_64');
    const policy = policyOf(fleet.role as Role);
    expect(policy).toContain('RUN#nightly');
    const asset = readdirSync(assembly.directory).find((d) => d.startsWith('asset.') && readdirSync(join(assembly.directory, d)).includes('worker.mjs'));
    expect(asset).toBeDefined();
    expect(readFileSync(join(assembly.directory, asset!, 'worker.mjs'), 'utf8')).toContain('my-worker-module');
    expect(readdirSync(join(assembly.directory, asset!))).toContain('rollout.mjs');
    expect(() => new WorkerFleet(stack, 'Mixed', { controlPlane: plane, runs: ['r'], instanceTypes: ['c7g.large', 'c7i.large'] })).toThrow(
      /mixes arm64 and x86/,
    );
    expect(() => new WorkerFleet(stack, 'NoRun', { controlPlane: plane, runs: [] })).toThrow(/runs: at least one run/);
    expect(() => new WorkerFleet(stack, 'TwoRuns', { controlPlane: plane, runs: ['a', 'b'] })).toThrow(/one run per fleet/);
    expect(() => new WorkerFleet(stack, 'Newline', { controlPlane: plane, runs: ['a'], workerArgs: ['x\ny'] })).toThrow(/holds a line break/);
    // Graviton however it is spelt (a1, g5g, is4gen) is one architecture with c7g; g5 is x86.
    expect(
      () =>
        new WorkerFleet(stack, 'Arm', {
          controlPlane: plane,
          runs: ['a'],
          instanceTypes: ['c7g.large', 'g5g.xlarge', 'a1.large', 'is4gen.large', 'm6gd.large'],
        }),
    ).not.toThrow();
    expect(() => new WorkerFleet(stack, 'Gpu', { controlPlane: plane, runs: ['a'], instanceTypes: ['g5g.xlarge', 'g5.xlarge'] })).toThrow(
      /mixes arm64 and x86/,
    );
  });

  // Synthesises a stack of its own.
  it('the Aurora store in a VPC of your own, and refusing a table beside it', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const s = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'AuroraOwnVpc', { env });
    const vpc = new Vpc(s, 'Mine', {
      maxAzs: 2,
      natGateways: 1,
      subnetConfiguration: [
        { name: 'pub', subnetType: SubnetType.PUBLIC },
        { name: 'app', subnetType: SubnetType.PRIVATE_WITH_EGRESS },
        { name: 'db', subnetType: SubnetType.PRIVATE_ISOLATED },
      ],
    });
    const cp = new RolloutControlPlane(s, 'Rollouts', { store: 'aurora', vpc });
    const t = Template.fromStack(s);
    t.resourceCountIs('AWS::EC2::VPC', 1);
    expect(cp.aurora!.vpc).toBe(vpc);
    expect(() => new RolloutControlPlane(s, 'Both', { store: 'aurora', table })).toThrow(/the Aurora store keeps no table/);
  });

  // Synthesises a stack of its own.
  it(
    "an existing event bus: signals are taken from it and events put on it; its policy and archive stay its owner's",
    { timeout: VARIANT_TEST_TIMEOUT },
    () => {
      const s = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'OwnBus', { env });
      const bus = EventBus.fromEventBusName(s, 'Platform', 'platform-events');
      const cp = new RolloutControlPlane(s, 'Rollouts', { bus });
      const pipeline = new Role(s, 'Pipeline', { assumedBy: new AccountRootPrincipal() });
      cp.grantSignal(pipeline);
      const t = Template.fromStack(s);
      t.resourceCountIs('AWS::Events::EventBus', 0);
      t.resourceCountIs('AWS::Events::Archive', 0);
      t.resourceCountIs('AWS::Events::EventBusPolicy', 0);
      expect(cp.bus).toBe(bus);
      // The signal rule listens on it, and the functions put their events on it.
      const rules = Object.values(t.findResources('AWS::Events::Rule')).map(
        (r) => r.Properties as { EventBusName?: unknown; EventPattern?: { 'detail-type'?: string[] } },
      );
      expect(rules.find((r) => r.EventPattern?.['detail-type']?.includes('rollout.metrics_reported'))?.EventBusName).toBe('platform-events');
      const envs = Object.values(t.findResources('AWS::Lambda::Function')).map(
        (f) => (f.Properties as { Environment?: { Variables?: Record<string, unknown> } }).Environment?.Variables?.ROLLOUT_EVENT_BUS,
      );
      expect(envs.filter((v) => v !== undefined).every((v) => v === 'platform-events')).toBe(true);
      expect(JSON.stringify(t.findResources('AWS::IAM::Policy'))).toContain(':event-bus/platform-events');
      expect(() => new RolloutControlPlane(s, 'Locked', { bus, eventSenders: ['arn:aws:iam::123456789012:role/x'] })).toThrow(
        /eventSenders: the control plane locks only a bus it creates/,
      );
    },
  );
});
