import { App, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneStack, type ControlPlaneProps } from '../../infra/stack.js';
import { FUNCTIONS } from '../../shared/topology.js';
import { cloudwatchMetricGateSchema, type CloudwatchMetricGate } from '../../shared/rollout/gate-spec.js';
import type { GateContext } from '../../shared/rollout/gate-reader.js';
import { coordinatorHandler, fleetsFrom } from '../../functions/coordinator.js';
import { namespaceLimited } from '../../functions/gate-namespaces.js';
import { runQueuesFrom } from '../../functions/work-queue.js';
import { WorkerFleet } from '../../infra/worker-fleet.js';
import { policyText, synthStack, SYNTH_HOOK_TIMEOUT, VARIANT_TEST_TIMEOUT, type Synthesised } from './synth.js';

/**
 * What each principal of the stack may reach, grant by grant: the operator's
 * secrets by their exact ARNs, the metrics namespaces the operator named, and
 * a worker fleet bound to its own runs' steals.
 */

const env = { account: '123456789012', region: 'eu-west-1' };
const HMAC_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:hooks/hmac-AbC12d';
const outboundWith = (hmacSecret: string): NonNullable<ControlPlaneProps['outbound']> => ({
  origins: ['https://prometheus.example.com', 'https://hooks.example.com'],
  credentials: {
    prom: { type: 'basic', origin: 'https://prometheus.example.com', username: 'rollout', password: { secretsManager: 'prom/basic' } },
    hooks: { type: 'hmac', origin: 'https://hooks.example.com', keyId: 'k1', secret: { secretsManager: hmacSecret } },
  },
});
const outbound = outboundWith(HMAC_ARN);

type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };
const statementsOf = (json: Synthesised['json'], fn: string): Statement[] =>
  Object.entries(json.Resources)
    .filter(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.toLowerCase().startsWith(`${fn.toLowerCase()}servicerole`))
    .flatMap(([, r]) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
const variables = (json: Synthesised['json']) =>
  Object.values(json.Resources)
    .filter((r) => r.Type === 'AWS::Lambda::Function' && (r.Properties.Description as string | undefined)?.length)
    .map((r) => (r.Properties.Environment as { Variables: Record<string, unknown> }).Variables);

describe('outbound secrets and CloudWatch namespaces', () => {
  let json: Synthesised['json'];
  let closed: Synthesised['json'];
  beforeAll(() => {
    // cdk-nag clean with the secrets' `-??????` and the GetMetricData grant.
    ({ json } = synthStack('Outbound', { env, outbound, gateNamespaces: ['AWS/ApplicationELB', 'Shop'] }, { nag: true }));
    ({ json: closed } = synthStack('NoNamespaces', { env }, { nag: true }));
  }, SYNTH_HOOK_TIMEOUT);

  it('the gate readers may read exactly the operator’s secrets: a name with the six characters Secrets Manager appends, an ARN as it is', () => {
    // The batch promoter reads gates on its tick; the API reads one on demand (POST /rollouts/{id}/gates/{gate}/test).
    for (const reader of ['BatchPromoter', 'Api']) {
      const reads = statementsOf(json, reader).filter((st) => [st.Action].flat().includes('secretsmanager:GetSecretValue'));
      expect(reads, reader).toHaveLength(1);
      const resources = [reads[0]!.Resource].flat().map((r) => JSON.stringify(r));
      expect(resources).toHaveLength(2);
      // A name: NAME-?????? (never NAME-*, which also matches NAME-old-… and NAME-prod-…).
      expect(resources.find((r) => r.includes('prom/basic'))).toMatch(/:secret:prom\/basic-\?{6}"\]\]\}$/);
      expect(resources).toContain(JSON.stringify(HMAC_ARN));
      expect(JSON.stringify(reads)).not.toContain('*');
    }
    // No other function reads them.
    for (const fn of Object.keys(FUNCTIONS).filter((n) => n !== 'batchPromoter' && n !== 'api'))
      expect(policyText(json, fn), fn).not.toContain('secretsmanager:');
  });

  // Constructs a stack that is refused before synthesis.
  it('a partial secret ARN (no six-character suffix) fails the synth naming the credential', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const partial = outboundWith('arn:aws:secretsmanager:eu-west-1:123456789012:secret:hooks/hmac');
    expect(() => new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'PartialArn', { env, outbound: partial })).toThrow(
      /outbound\.credentials\.hooks: secretsManager: .* is not a whole secret ARN/,
    );
  });

  it('GetMetricData only with namespaces named, in the gate regions, and the functions told which namespaces (IAM has no namespace key for it)', () => {
    const metricData = statementsOf(json, 'BatchPromoter').filter((st) => [st.Action].flat().includes('cloudwatch:GetMetricData'));
    expect(metricData).toEqual([
      { Action: 'cloudwatch:GetMetricData', Effect: 'Allow', Resource: '*', Condition: { StringEquals: { 'aws:RequestedRegion': ['eu-west-1'] } } },
    ]);
    for (const v of variables(json)) expect(JSON.parse(v.ROLLOUT_GATE_NAMESPACES as string)).toEqual(['AWS/ApplicationELB', 'Shop']);
    // None named (the default): no function may call GetMetricData, and every one is told so.
    for (const fn of Object.keys(FUNCTIONS)) expect(policyText(closed, fn), fn).not.toContain('cloudwatch:GetMetricData');
    expect(policyText(closed, 'BatchPromoter')).toContain('cloudwatch:DescribeAlarms');
    for (const v of variables(closed)) expect(v.ROLLOUT_GATE_NAMESPACES).toBe('[]');
  });

  // Constructs a stack that is refused before synthesis.
  it('a namespace with a wildcard fails the synth naming it', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    expect(() => new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'WildNamespace', { env, gateNamespaces: ['AWS/*'] })).toThrow(
      /gateNamespaces: "AWS\/\*": a CloudWatch namespace .* \(no \*\)/,
    );
  });

  it('the functions read a metric gate only in the namespaces named: any other (a judged gate’s requests metric too), or a search past its own metrics, is an error reading never sent', async () => {
    const gate = (g: Record<string, unknown>): CloudwatchMetricGate =>
      cloudwatchMetricGateSchema.parse({ type: 'cloudwatchMetric', name: 'g', comparison: '<', threshold: 1, ...g });
    const allowed = gate({ metric: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' } });
    const other = gate({ metric: { namespace: 'AWS/RDS', metricName: 'CPUUtilization', stat: 'Average' } });
    const mathOk = gate({
      expression: 'e / r',
      metrics: { e: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' }, r: { namespace: 'AWS/ApplicationELB', metricName: 'RequestCount', stat: 'Sum' } },
    });
    const mathOther = gate({
      expression: 'e / r',
      metrics: {
        e: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' },
        r: { namespace: 'AWS/Billing', metricName: 'EstimatedCharges', stat: 'Maximum' },
      },
    });
    const search = gate({
      expression: "SUM(SEARCH('{AWS/RDS} MetricName=\"CPUUtilization\"', 'Average', 60)) + e",
      metrics: { e: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' } },
    });
    const insights = gate({
      expression: 'select max(CPUUtilization) from "AWS/EC2"',
      metrics: { e: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum' } },
    });
    // A judged gate's requests metric is read too: it is held to the same namespaces.
    const byVersion = { FunctionName: 'api', ExecutedVersion: '{{version}}' };
    const judged = (requestsNamespace: string): CloudwatchMetricGate =>
      cloudwatchMetricGateSchema.parse({
        type: 'cloudwatchMetric',
        name: 'j',
        metric: { namespace: 'Shop', metricName: 'Errors', stat: 'Sum', dimensions: byVersion },
        requestsMetric: { namespace: requestsNamespace, metricName: 'Invocations', stat: 'Sum', dimensions: byVersion },
        judge: { kind: 'sequential-rate' },
      });
    const judgedOk = judged('Shop');
    const judgedOther = judged('AWS/Lambda');
    const sent: { gates: CloudwatchMetricGate[]; contexts: readonly GateContext[] }[] = [];
    const limited = namespaceLimited(
      {
        cloudwatchMetric: {
          read: (gates, o) => {
            sent.push({ gates: [...gates], contexts: o.contexts });
            return Promise.resolve(gates.map((_, i) => ({ kind: 'number' as const, value: i, answer: '' })));
          },
        },
      },
      ['AWS/ApplicationELB', 'Shop'],
    );
    const gates = [allowed, other, mathOk, mathOther, search, insights, judgedOk, judgedOther];
    const contexts = gates.map((_, i) => ({ rolloutId: `r${i}` }) as GateContext);
    const results = await limited.cloudwatchMetric!.read(gates, { now: 0, signal: new AbortController().signal, contexts });
    // Only the two within the namespaces were sent, each with its own context.
    expect(sent).toEqual([{ gates: [allowed, mathOk, judgedOk], contexts: [contexts[0], contexts[2], contexts[6]] }]);
    expect(results[0]).toEqual({ kind: 'number', value: 0, answer: '' });
    expect(results[2]).toEqual({ kind: 'number', value: 1, answer: '' });
    expect(results[1]).toMatchObject({ kind: 'error' });
    expect((results[1] as { message: string }).message).toMatch(
      /metric\.namespace: "AWS\/RDS" is not a namespace this deployment's gates may read \(AWS\/ApplicationELB, Shop\)/,
    );
    expect(results[3]).toMatchObject({ kind: 'error' });
    expect((results[3] as { message: string }).message).toMatch(/metrics\.r\.namespace: "AWS\/Billing"/);
    expect(results[4]).toMatchObject({ kind: 'error' });
    expect((results[4] as { message: string }).message).toMatch(/expression: SEARCH reads beyond the gate's own metrics/);
    expect(results[5]).toMatchObject({ kind: 'error' });
    expect((results[5] as { message: string }).message).toMatch(/expression: select reads beyond/);
    expect(results[6]).toEqual({ kind: 'number', value: 2, answer: '' });
    expect(results[7]).toMatchObject({ kind: 'error' });
    expect((results[7] as { message: string }).message).toMatch(/requestsMetric\.namespace: "AWS\/Lambda" is not a namespace this deployment's gates may read/);
  });
});

describe('a worker fleet is bound to its own runs', () => {
  let json: Synthesised['json'];
  let stack: ControlPlaneStack;
  // cdk-nag clean with the fleet's alias grant.
  beforeAll(() => ({ json, stack } = synthStack('FleetBounds', { env, workerFleet: { runId: 'run-42', desired: 1 } }, { nag: true })), SYNTH_HOOK_TIMEOUT);
  const coordinatorId = () => stack.getLogicalId(stack.functions.coordinator.node.defaultChild as never);
  const aliases = () => Object.entries(json.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Alias');

  it('the fleet may invoke its own alias of the coordinator, not the function: the schedule’s scan-all goes to the function itself', () => {
    expect(aliases()).toHaveLength(1);
    const [aliasId, alias] = aliases()[0]!;
    expect(alias.Properties).toMatchObject({ FunctionName: { Ref: coordinatorId() }, FunctionVersion: '$LATEST' });
    expect(alias.Properties.Name).toMatch(/^fleet-[A-Za-z0-9]+$/);
    const worker = Object.entries(json.Resources).find(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.startsWith('WorkersRole'))![1];
    const invokes = (worker.Properties.PolicyDocument as { Statement: Statement[] }).Statement.filter((st) =>
      [st.Action].flat().some((a) => a.startsWith('lambda:')),
    );
    expect(invokes).toEqual([{ Action: 'lambda:InvokeFunction', Effect: 'Allow', Resource: { Ref: aliasId } }]);
    // Nothing else in the stack grants invoking the coordinator, nor the function's ARN with a qualifier wildcard.
    expect(JSON.stringify(json)).not.toContain(`{"Fn::GetAtt":["${coordinatorId()}","Arn"]},":*"`);
    const schedule = Object.values(json.Resources).find((r) => r.Type === 'AWS::Events::Rule' && JSON.stringify(r.Properties.Targets).includes('scan-all'))!;
    expect((schedule.Properties.Targets as { Arn: unknown }[])[0]!.Arn).toEqual({ 'Fn::GetAtt': [coordinatorId(), 'Arn'] });
    // The workers call it through the alias.
    const lt = Object.values(json.Resources).find((r) => r.Type === 'AWS::EC2::LaunchTemplate')!;
    expect(JSON.stringify(lt.Properties)).toContain(`:${alias.Properties.Name as string} --provider aws`);
  });

  it('the coordinator answers through the fleet’s alias only steals for the fleet’s runs: no scan, no scan-all (retention), no other run', async () => {
    const name = aliases()[0]![1].Properties.Name as string;
    const coordinatorEnv = variables(json).find((v) => v.POWERTOOLS_SERVICE_NAME === 'coordinator')!;
    const fleets = fleetsFrom({ ROLLOUT_COORDINATOR_FLEETS: coordinatorEnv.ROLLOUT_COORDINATOR_FLEETS as string });
    expect(fleets).toEqual({ [name]: ['run-42'] });
    const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;
    const quiet = { addMetric: () => undefined, hasStoredMetrics: () => false, publishStoredMetrics: () => undefined } as never;
    // A request that passes the check goes on to open the store: that it got there is what this shows.
    const handler = coordinatorHandler(() => Promise.reject(new Error('store opened')), { fleets, deadLetters: null, activity: null }, silent, quiet);
    const through = (alias: string) => ({ invokedFunctionArn: `arn:aws:lambda:eu-west-1:123456789012:function:coordinator:${alias}` });
    await expect(handler({ action: 'scan-all' }, through(name))).rejects.toThrow(
      /refused: a worker fleet \(alias fleet-\w+\) may ask for steals only, not scan-all/,
    );
    await expect(handler({ action: 'scan', runId: 'run-42' }, through(name))).rejects.toThrow(/may ask for steals only, not scan/);
    await expect(handler({ action: 'steal', runId: 'run-7', workerId: 'w' }, through(name))).rejects.toThrow(/serves runs run-42, not run-7/);
    await expect(handler({ action: 'steal', runId: 'run-42', workerId: 'w' }, through('fleet-unknown'))).rejects.toThrow(
      /alias fleet-unknown serves no worker fleet/,
    );
    await expect(handler({ action: 'steal', runId: 'run-42', workerId: 'w' }, through(name))).rejects.toThrow('store opened');
    // The schedule (the function itself, unqualified) and a process with no Lambda context: everything.
    await expect(handler({ action: 'scan-all' }, { invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:coordinator' })).rejects.toThrow(
      'store opened',
    );
    await expect(handler({ action: 'scan-all' })).rejects.toThrow('store opened');
  });

  it('the fleet’s role writes the registry only under its own instance’s ARN (dynamodb:LeadingKeys bound to ec2:SourceInstanceARN), and reaches no other instance’s records', () => {
    const policy = Object.entries(json.Resources).find(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.startsWith('WorkersRole'))![1];
    const document = policy.Properties.PolicyDocument as { Version: string; Statement: Statement[] };
    // Policy variables resolve only in a policy of version 2012-10-17.
    expect(document.Version).toBe('2012-10-17');
    const dynamo = document.Statement.filter((st) => [st.Action].flat().some((a) => a.startsWith('dynamodb:')));
    const leading = (st: Statement) =>
      Object.values((st.Condition ?? {}) as Record<string, Record<string, string[]>>).flatMap((c) => c['dynamodb:LeadingKeys'] ?? []);
    // Every item grant of the role is held to leading keys, and only one of them names the registry.
    for (const st of dynamo) expect(leading(st).length, JSON.stringify(st)).toBeGreaterThan(0);
    const registry = dynamo.filter((st) => leading(st).some((k) => k.startsWith('INSTANCE')));
    expect(registry).toHaveLength(1);
    expect(registry[0]!.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['INSTANCE#${ec2:SourceInstanceARN}'] } });
    expect([registry[0]!.Action].flat().sort()).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:BatchWriteItem',
      'dynamodb:ConditionCheckItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
    ]);
    const tableId = stack.getLogicalId(stack.table!.node.defaultChild as never);
    expect(registry[0]!.Resource).toEqual({ 'Fn::GetAtt': [tableId, 'Arn'] });
    // The others: this run's keys alone, no pattern that matches an instance's partition (INSTANCE#…, or a bare wildcard).
    for (const st of dynamo.filter((x) => x !== registry[0]))
      for (const k of leading(st)) expect(k, k).toMatch(/^(RUN|PENDING|RUNNING|FAILED)#run-42(#\*)?$|^LEASE#coordinator:run-42$/);
    // Each instance registers its workers under that ARN: written at boot from the instance metadata, in this stack's account and region.
    const lt = Object.values(json.Resources).find((r) => r.Type === 'AWS::EC2::LaunchTemplate')!;
    const userData = JSON.stringify(lt.Properties);
    expect(userData).toContain('--provider aws --instance-id ${ROLLOUT_INSTANCE_ARN}');
    expect(userData).toContain('EnvironmentFile=/etc/rollout-worker.env');
    expect(userData).toContain(
      'echo \\"ROLLOUT_INSTANCE_ARN=arn:",{"Ref":"AWS::Partition"},":ec2:eu-west-1:123456789012:instance/$INSTANCE_ID\\" > /etc/rollout-worker.env',
    );
    // The control plane's spot drain still reaches every instance's records (it drains whichever instance a notice names).
    const drain = statementsOf(json, 'SpotDrain').filter((st) => [st.Action].flat().includes('dynamodb:UpdateItem'));
    expect(drain.flatMap(leading)).toEqual(['INSTANCE#*']);
  });

  it('a fleet’s workerArgs may not name another instance to register under', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const s = new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'OwnInstance', { env });
    expect(() => new WorkerFleet(s, 'Fleet', { controlPlane: s.controlPlane, runs: ['run-a'], workerArgs: ['--instance-id', 'i-0abc1234'] })).toThrow(
      /workerArgs: --instance-id is the fleet's: each instance registers under its own ARN/,
    );
  });

  it('a malformed fleet list in the environment is refused naming the variable', () => {
    expect(() => fleetsFrom({ ROLLOUT_COORDINATOR_FLEETS: '{' })).toThrow(/ROLLOUT_COORDINATOR_FLEETS: not JSON/);
    expect(() => fleetsFrom({ ROLLOUT_COORDINATOR_FLEETS: '{"live":["r"]}' })).toThrow(/ROLLOUT_COORDINATOR_FLEETS: live: /);
    expect(fleetsFrom({})).toEqual({});
  });
});

describe('each worker fleet receives and deletes only its own runs’ messages', () => {
  let json: Synthesised['json'];
  let stack: ControlPlaneStack;
  // Two fleets in one stack, cdk-nag clean (the same checks `npm run synth` applies).
  beforeAll(() => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    stack = new ControlPlaneStack(app, 'TwoFleets', { env, workerFleet: { runId: 'run-a', desired: 1 } });
    new WorkerFleet(stack, 'Others', { controlPlane: stack.controlPlane, runs: ['run-b'], desiredCapacity: 1 });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    app.synth();
    json = Template.fromStack(stack).toJSON() as Synthesised['json'];
  }, SYNTH_HOOK_TIMEOUT);
  const logicalId = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
  const roleStatements = (prefix: string): Statement[] =>
    Object.entries(json.Resources)
      .filter(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.startsWith(prefix))
      .flatMap(([, r]) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
  /** The queues a role may do `action` on, by logical id. */
  const queuesFor = (statements: Statement[], action: string) =>
    statements
      .filter((st) => [st.Action].flat().includes(action))
      .flatMap((st) => [st.Resource].flat().map((r) => (r as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]));
  /** A fleet role's own queue: the one it may receive from. */
  const ownQueue = (prefix: string) => queuesFor(roleStatements(prefix), 'sqs:ReceiveMessage');
  /** ROLLOUT_RUN_QUEUES as a function would read it, each queue URL standing for its queue's logical id. */
  const runQueuesOf = (service: string) => {
    const value = variables(json).find((v) => v.POWERTOOLS_SERVICE_NAME === service)!.ROLLOUT_RUN_QUEUES as {
      'Fn::Join': [string, (string | { Ref: string })[]];
    };
    const text = value['Fn::Join'][1].map((p) => (typeof p === 'string' ? p : `https://sqs.eu-west-1.amazonaws.com/123456789012/${p.Ref}`)).join('');
    return Object.fromEntries(Object.entries(runQueuesFrom({ ROLLOUT_RUN_QUEUES: text })).map(([run, url]) => [run, url.split('/').pop()]));
  };

  it('a fleet’s role may receive, delete and send only on its own queue: not the shared work queue, not another fleet’s', () => {
    const [a, b] = [ownQueue('WorkersRole'), ownQueue('OthersRole')];
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(1);
    expect(a[0]).not.toBe(b[0]);
    const shared = logicalId(stack.workQueue);
    for (const [prefix, own] of [
      ['WorkersRole', a[0]],
      ['OthersRole', b[0]],
    ] as const) {
      const statements = roleStatements(prefix);
      for (const action of ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:SendMessage'])
        expect(queuesFor(statements, action), `${prefix} ${action}`).toEqual([own]);
      const text = JSON.stringify(statements);
      expect(text, prefix).not.toContain(shared);
      expect(text, prefix).not.toContain(own === a[0] ? b[0] : a[0]);
    }
    // The workers are told their own queue's URL.
    const templates = Object.entries(json.Resources).filter(([, r]) => r.Type === 'AWS::EC2::LaunchTemplate');
    expect(templates).toHaveLength(2);
    for (const [id, lt] of templates) {
      const own = id.startsWith('Workers') ? a[0]! : b[0]!;
      const text = JSON.stringify(lt.Properties);
      expect(text, id).toContain(`--queue ",{"Ref":"${own}"}`);
      expect(text, id).not.toContain(`{"Ref":"${shared}"}`);
    }
  });

  it('each fleet queue is built as the shared work queue is (visibility, retention, encryption, the work DLQ after maxReceiveCount) and pages when work waits', () => {
    const shared = json.Resources[logicalId(stack.workQueue)]!;
    for (const q of [...ownQueue('WorkersRole'), ...ownQueue('OthersRole')]) {
      expect(json.Resources[q]!.Type).toBe('AWS::SQS::Queue');
      expect(json.Resources[q]!.Properties).toEqual(shared.Properties);
      const ages = Object.values(json.Resources).filter(
        (r) =>
          r.Type === 'AWS::CloudWatch::Alarm' &&
          JSON.stringify(r.Properties.Dimensions) === JSON.stringify([{ Name: 'QueueName', Value: { 'Fn::GetAtt': [q, 'QueueName'] } }]),
      );
      expect(ages, q).toHaveLength(1);
      expect(ages[0]!.Properties).toMatchObject({
        MetricName: 'ApproximateAgeOfOldestMessage',
        Threshold: 900,
        EvaluationPeriods: 3,
        ComparisonOperator: 'GreaterThanThreshold',
      });
      expect((ages[0]!.Properties.AlarmActions as unknown[]).length).toBeGreaterThan(0);
    }
  });

  it('the api and the coordinator send each fleet’s run to its queue (ROLLOUT_RUN_QUEUES) and may send there; other runs go to the shared queue', () => {
    const expected = { 'run-a': ownQueue('WorkersRole')[0], 'run-b': ownQueue('OthersRole')[0] };
    for (const [service, role] of [
      ['api', 'ApiServiceRole'],
      ['coordinator', 'CoordinatorServiceRole'],
    ] as const) {
      expect(runQueuesOf(service), service).toEqual(expected);
      expect(
        queuesFor(roleStatements(role), 'sqs:SendMessage')
          .filter((q) => q !== logicalId(stack.eventsDlq))
          .sort(),
        service,
      ).toEqual([logicalId(stack.workQueue), ...Object.values(expected)].sort());
    }
    // No other function is told of them, nor may send there.
    for (const v of variables(json).filter((x) => x.POWERTOOLS_SERVICE_NAME !== 'api' && x.POWERTOOLS_SERVICE_NAME !== 'coordinator'))
      expect(v.ROLLOUT_RUN_QUEUES, String(v.POWERTOOLS_SERVICE_NAME)).toBeUndefined();
  });

  it('two fleets naming one run fail the synth naming the run', { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const s = new ControlPlaneStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'SameRun', { env, workerFleet: { runId: 'run-a', desired: 1 } });
    expect(() => new WorkerFleet(s, 'Again', { controlPlane: s.controlPlane, runs: ['run-a'] })).toThrow(
      /runs: "run-a" is already served by another worker fleet/,
    );
  });

  it('a malformed run-queue map in the environment is refused naming the variable', () => {
    expect(() => runQueuesFrom({ ROLLOUT_RUN_QUEUES: '[' })).toThrow(/ROLLOUT_RUN_QUEUES: not JSON/);
    expect(() => runQueuesFrom({ ROLLOUT_RUN_QUEUES: '{"r":"not a url"}' })).toThrow(/ROLLOUT_RUN_QUEUES: r: /);
    expect(runQueuesFrom({})).toEqual({});
  });
});
