/**
 * End-to-end over AWS-compatible endpoints, through the unmodified SDK
 * clients (endpoints only from AWS_ENDPOINT_URL_*): DynamoDB Local, the work
 * queues on fauxqs, and EventBridge and CloudWatch on moto. The rules of the
 * synthesized stack are put on moto, which matches and routes every event;
 * the handlers run in-process where AWS would invoke them (moto cannot run a
 * function without Docker: test/support/eventbridge/moto.ts plays Lambda's
 * asynchronous invocation, retries and DLQ). CloudWatch's DescribeAlarms is
 * moto's, on alarms the test puts and sets there.
 *
 * Judged gates: the stack declares Lambda aliases on moto (behind the
 * RevisionId proxy, test/support/lambda/revision-proxy.ts) as targets and
 * `AWS/Lambda` as a gate namespace; the functions get the environment the
 * template gives them. Lambda's per-version metrics (`ExecutedVersion`) are
 * put on moto's CloudWatch by the test, one point a second around now, since
 * nothing runs the functions; moto cannot read a gzipped large PutMetricData,
 * so the test's own client sends them uncompressed.
 *
 * Emulator liberty: real EventBridge refuses PutEvents with an `aws.*`
 * source; the Spot notice and the CloudWatch alarm state change here are put
 * the way AWS itself would deliver them.
 *
 * The file works in a region of its own on moto: the deployment test's stack
 * has Lambda targets on the default bus, which moto cannot deliver to.
 */
import { CreateEventBusCommand, EventBridgeClient, PutEventsCommand, PutRuleCommand, PutTargetsCommand } from '@aws-sdk/client-eventbridge';
import { CloudWatchClient, PutMetricAlarmCommand, PutMetricDataCommand, SetAlarmStateCommand, type MetricDatum } from '@aws-sdk/client-cloudwatch';
import { GetAliasCommand } from '@aws-sdk/client-lambda';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { App } from 'aws-cdk-lib';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';
import { apiLambdaHandler } from '../../functions/api.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseElector } from '../../shared/lease/elector.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { batchPromoterHandler } from '../../functions/batch-promoter.js';
import { coordinatorHandler } from '../../functions/coordinator.js';
import { lazy, runtimeFrom, type Runtime } from '../../functions/runtime.js';
import { spotDrainHandler } from '../../functions/spot-drain.js';
import { streamingPromoterHandler } from '../../functions/streaming-promoter.js';
import { ControlPlaneStack } from '../../infra/stack.js';
import type { FUNCTIONS } from '../../shared/topology.js';
import { WorkerAgent } from '../../shared/ledger/agent.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { dynamoTable, uniqueName } from '../support/backends.js';
import type { Handler } from '../support/eventbridge/server.js';
import { MotoEventBridge } from '../support/eventbridge/moto.js';
import { alarmStateChange } from '../support/cloudwatch/events.js';
import { setupLambdaAlias, type LambdaAliasUnderTest } from '../support/actuators/lambda-alias.js';
import { LambdaRevisionProxy } from '../support/lambda/revision-proxy.js';
import { normals } from '../support/normals.js';

const SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10, maxErrorRate: 0.05 } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
  ],
};
const moto = process.env.ROLLOUT_MOTO_URL;
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');
const REGION = 'eu-west-3';
const ACCOUNT = '123456789012'; // moto's
process.env.AWS_REGION = REGION; // before any client is made
const quiet = { addMetric: () => undefined, hasStoredMetrics: () => false, publishStoredMetrics: () => undefined } as never;
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;

describe('the deployed topology over AWS-compatible endpoints', () => {
  const sqs = sqsClient();
  const queues: string[] = [];
  let table: Awaited<ReturnType<typeof dynamoTable>>;
  let eb: MotoEventBridge;
  let cloudwatch: CloudWatchClient;
  let events: EventBridgeClient;
  let rt: () => Promise<Runtime>;
  let observed: string; // a queue subscribed to the rollout bus's ai.rollout events
  let eventsDlq: string;
  let batchPromoterTemplate: { template: { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> }; id: string };
  let workQueue: string;
  let workDlq: string;
  const busName = uniqueName('bus');
  /** Lambda aliases the stack may move (functions with versions 1 and 2, `live` → 1), by target name; the proxy the functions reach Lambda through. */
  const aliases: Record<'judged-slow' | 'judged-same' | 'judged-errors', LambdaAliasUnderTest> = {} as never;
  let lambdaProxy: LambdaRevisionProxy;
  const lambdaArn = (name: string) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${name}`;
  /** An alarm on moto, in the state given (created on first use). */
  async function setAlarm(name: string, state: 'OK' | 'ALARM', reason = `set by the test: ${state}`): Promise<void> {
    await cloudwatch.send(
      new PutMetricAlarmCommand({
        AlarmName: name,
        Namespace: 'Checkout',
        MetricName: name,
        Statistic: 'Sum',
        Period: 60,
        EvaluationPeriods: 1,
        Threshold: 1,
        ComparisonOperator: 'GreaterThanThreshold',
      }),
    );
    await cloudwatch.send(new SetAlarmStateCommand({ AlarmName: name, StateValue: state, StateReason: reason }));
  }

  async function queue(name: string): Promise<string> {
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName(name) }))).QueueUrl!;
    queues.push(url);
    return url;
  }
  /** What arrives on a queue of moto's (a rule's target, the events DLQ). */
  async function receiveAll(
    url: string,
    until: (bodies: unknown[]) => boolean,
    client: SQSClient = eb.sqs,
  ): Promise<{ body: unknown; attributes: Record<string, string> }[]> {
    const got: { body: unknown; attributes: Record<string, string> }[] = [];
    for (let i = 0; i < 50 && !until(got.map((g) => g.body)); i++) {
      const res = await client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }));
      for (const m of res.Messages ?? [])
        got.push({
          body: JSON.parse(m.Body!) as unknown,
          attributes: Object.fromEntries(Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue ?? ''])),
        });
    }
    return got;
  }

  beforeAll(async () => {
    table = await dynamoTable();
    // Before any CloudWatch client is made (the gate providers make theirs on first use).
    process.env.AWS_ENDPOINT_URL_CLOUDWATCH = moto;
    cloudwatch = new CloudWatchClient({});
    [workQueue, workDlq] = await Promise.all([queue('work'), queue('work-dlq')]);
    for (const name of ['judged-slow', 'judged-same', 'judged-errors'] as const) aliases[name] = await setupLambdaAlias(moto);
    lambdaProxy = await new LambdaRevisionProxy(moto).start();
    // Before any runtime is made: its actuators make their Lambda clients then.
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambdaProxy.url;
    // The stack as it deploys (bundling skipped: the handlers run in-process here).
    const outdir = mkdtempSync(join(tmpdir(), 'rollout-e2e-cdk-'));
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new ControlPlaneStack(app, 'E2e', {
      gateAlarms: ['checkout-*'],
      gateNamespaces: ['AWS/Lambda'],
      targets: Object.fromEntries(
        Object.entries(aliases).map(([name, a]) => [name, { type: 'lambdaAlias' as const, functionName: a.functionName, alias: a.alias, region: REGION }]),
      ),
    });
    // The template file of the cloud assembly, as `cdk deploy` would upload it.
    const template = JSON.parse(readFileSync(join(app.synth().directory, stack.templateFile), 'utf8')) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    rmSync(outdir, { recursive: true, force: true });
    const id = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
    batchPromoterTemplate = { template, id: id(stack.functions.batchPromoter) };
    // The targets and gate namespaces as the template hands them to the functions.
    const deployed = (template.Resources[id(stack.functions.batchPromoter)]!.Properties.Environment as { Variables: Record<string, string> }).Variables;
    const env = {
      ...process.env,
      ROLLOUT_TARGETS: deployed.ROLLOUT_TARGETS,
      ROLLOUT_GATE_NAMESPACES: deployed.ROLLOUT_GATE_NAMESPACES,
      ROLLOUT_STORE: 'dynamodb',
      ROLLOUT_TABLE: table.table,
      ROLLOUT_NODE_ID: 'e2e',
      ROLLOUT_EVENT_BUS: busName,
      ROLLOUT_TICK_INTERVAL_MS: '40',
      ROLLOUT_WORK_QUEUE_URL: workQueue,
      ROLLOUT_WORK_DLQ_URL: workDlq,
    };
    rt = lazy(() => runtimeFrom(env));
    const handlers: Record<keyof typeof FUNCTIONS, Handler> = {
      streamingPromoter: streamingPromoterHandler(rt, silent, quiet),
      // One tick per scheduled invocation here (AWS would keep ticking through its minute).
      batchPromoter: (e) => batchPromoterHandler(rt, silent, quiet)(e, { getRemainingTimeInMillis: () => 0 }),
      coordinator: coordinatorHandler(rt, { onFenced: () => undefined }, silent, quiet),
      spotDrain: spotDrainHandler(rt, silent, quiet),
      // Behind API Gateway, driven by the test below with HTTP API (payload 2.0) events.
      api: (e) => apiLambdaHandler(rt, {}, silent, quiet)(e as APIGatewayProxyEventV2WithIAMAuthorizer),
    };
    const lambdas: Record<string, { handler: Handler; retries: number; dlqArn?: string }> = {};
    eb = new MotoEventBridge({ moto, region: REGION, account: ACCOUNT, lambdas });
    const eventsDlqQueue = await eb.queue('events-dlq');
    const observedQueue = await eb.queue('observed');
    [eventsDlq, observed] = [eventsDlqQueue.url, observedQueue.url];
    const names: Record<string, string> = { [id(stack.bus)]: busName, [id(stack.eventsDlq)]: eventsDlqQueue.arn };
    for (const [name, fn] of Object.entries(stack.functions) as [keyof typeof FUNCTIONS, (typeof stack.functions)[keyof typeof FUNCTIONS]][]) {
      names[id(fn)] = lambdaArn(name);
      // Retries as the function's EventInvokeConfig says, failures to its DLQ (the stack's events DLQ).
      const invokeConfig = Object.values(template.Resources).find(
        (r) => r.Type === 'AWS::Lambda::EventInvokeConfig' && JSON.stringify(r.Properties.FunctionName).includes(id(fn)),
      );
      lambdas[lambdaArn(name)] = { handler: handlers[name], retries: Number(invokeConfig?.Properties.MaximumRetryAttempts ?? 2), dlqArn: eventsDlqQueue.arn };
    }
    await eb.start();
    // Before the first handler call: the runtime's EventBridge client reads it when it is made.
    process.env.AWS_ENDPOINT_URL_EVENTBRIDGE = eb.url;
    events = new EventBridgeClient({});
    await events.send(new CreateEventBusCommand({ Name: busName }));
    await eb.loadTemplate(template, names);
    // A subscriber of our own, through the SDK: every ai.rollout event on the bus lands on a queue.
    await events.send(new PutRuleCommand({ Name: `observe-${busName}`, EventBusName: busName, EventPattern: JSON.stringify({ source: ['ai.rollout'] }) }));
    await events.send(new PutTargetsCommand({ Rule: `observe-${busName}`, EventBusName: busName, Targets: [{ Id: 'q', Arn: observedQueue.arn }] }));
  });
  afterAll(async () => {
    for (const q of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
    await eb?.stop();
    for (const a of Object.values(aliases)) await a.close();
    await lambdaProxy?.stop();
    delete process.env.AWS_ENDPOINT_URL_LAMBDA;
    cloudwatch?.destroy();
    await table?.close();
    delete process.env.AWS_ENDPOINT_URL_EVENTBRIDGE;
    delete process.env.AWS_ENDPOINT_URL_CLOUDWATCH;
  });

  const put = (detailType: string, detail: object, bus = busName, source = 'rollout.signals') =>
    events.send(new PutEventsCommand({ Entries: [{ EventBusName: bus, Source: source, DetailType: detailType, Detail: JSON.stringify(detail) }] }));

  /** An HTTP API (payload 2.0) request as API Gateway hands it over after IAM authorization. */
  const http = (method: string, path: string, body?: unknown) =>
    apiLambdaHandler(
      rt,
      {},
      silent,
      quiet,
    )({
      version: '2.0',
      routeKey: `${method} /{proxy+}`,
      rawPath: path,
      rawQueryString: '',
      headers: { 'content-type': 'application/json' },
      isBase64Encoded: false,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      requestContext: {
        http: { method, path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' },
        requestId: uniqueName('req'),
        authorizer: { iam: { userArn: 'arn:aws:iam::000000000000:user/alice' } },
      },
    } as unknown as APIGatewayProxyEventV2WithIAMAuthorizer);

  it('a rollout created through the API, metrics put on the bus: the StreamingPromoter promotes through the deployed rule; the events arrive on a subscriber queue', async () => {
    const created = await http('POST', '/rollouts', { spec: SPEC });
    expect(created.statusCode).toBe(201);
    const { id } = JSON.parse(created.body!) as { id: string };
    const bad = await http('POST', '/rollouts', { spec: { ...SPEC, stages: [] } });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(/stages/);
    expect((await put('rollout.created', { rolloutId: id })).FailedEntryCount).toBe(0);
    await eb.idle();
    await put('rollout.metrics_reported', { rolloutId: id, stage: 'canary', requests: 50, errors: 0, observedAt: new Date().toISOString() });
    await eb.idle();
    const got = await receiveAll(observed, (bodies) => bodies.some((b) => JSON.stringify(b).includes(id) && JSON.stringify(b).includes('stage_promoted')));
    const mine = got.map((g) => g.body as { 'detail-type': string; detail: { rolloutId: string } }).filter((b) => b.detail.rolloutId === id);
    expect(mine.map((b) => b['detail-type'])).toEqual(expect.arrayContaining(['ai.rollout.stage_activated', 'ai.rollout.stage_promoted']));
    const view = JSON.parse((await http('GET', `/rollouts/${id}`)).body!) as { createdBy: string; stages: { phase: string }[] };
    expect(view.stages.map((s) => s.phase)).toEqual(['promoted', 'active']);
    // A manual command through the API: fenced by this stack's promotion lease, recorded with the caller.
    const abort = await http('POST', `/rollouts/${id}/abort`, { reason: 'smoke' });
    expect(abort.statusCode, abort.body).toBe(200);
    expect(JSON.parse(abort.body!)).toMatchObject({ action: { transition: 'abort', applied: true } });
    expect((await http('POST', `/rollouts/${id}/explode`)).statusCode).toBe(404);
    expect((await http('GET', '/cluster/leader')).statusCode).toBe(200);
  });

  it('the API refuses a body that is not UTF-8 (400), as a node does, and stores nothing', async () => {
    const id = uniqueName('bytes');
    const bytes = Buffer.concat([Buffer.from(`{"id":"${id}","spec":{"target":{"service":"`), Buffer.from([0xc3, 0x28]), Buffer.from('"}}}')]);
    const res = await apiLambdaHandler(
      rt,
      {},
      silent,
      quiet,
    )({
      version: '2.0',
      routeKey: 'POST /rollouts',
      rawPath: '/rollouts',
      rawQueryString: '',
      headers: { 'content-type': 'application/json' },
      isBase64Encoded: true,
      body: bytes.toString('base64'),
      requestContext: {
        http: { method: 'POST', path: '/rollouts', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' },
        requestId: uniqueName('req'),
        authorizer: { iam: { userArn: 'arn:aws:iam::000000000000:user/alice' } },
      },
    } as unknown as APIGatewayProxyEventV2WithIAMAuthorizer);
    expect(res).toMatchObject({ statusCode: 400, body: JSON.stringify({ error: 'request body is not valid UTF-8' }) });
    expect((await http('GET', `/rollouts/${id}`)).statusCode).toBe(404);
  });

  it('a dropped event is caught up by the scheduled BatchPromoter tick', async () => {
    const {
      engine,
      stores: { rollouts },
    } = await rt();
    const { id } = await createRollout(engine, { spec: SPEC, actor: 'alice' });
    await put('rollout.created', { rolloutId: id });
    await eb.idle();
    // The metrics reach the store but their event is lost before any evaluation (no PutEvents).
    await rollouts.recordMetrics(id, { stage: 'canary' }, { requests: 50, errors: 0, p99LatencyMs: null, observedAt: Date.now() });
    const phases = async () => (await rollouts.load(id))!.stages.map((s) => s.phase);
    expect(await phases()).toEqual(['active', 'pending']);
    await eb.tick(); // the schedule fires
    await eb.idle();
    expect(await phases()).toEqual(['promoted', 'active']);
  });

  describe('a stage gated on a CloudWatch alarm', () => {
    const gated = (alarm: string) => ({
      target: { service: 'checkout', version: 'v3' },
      stages: [
        {
          name: 'canary',
          percent: 10,
          bakeSeconds: 3_600,
          gates: { providers: [{ type: 'cloudwatchAlarm', name: 'health', alarms: [alarm], intervalSeconds: 1 }] },
        },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
    /** Scheduled BatchPromoter ticks (what the clock would fire), until `done` holds of the rollout. */
    const tickUntil = async (id: string, done: (v: { phases: string[]; gate: string | undefined }) => boolean) => {
      const {
        stores: { rollouts },
      } = await rt();
      const look = async () => {
        const v = (await rollouts.load(id))!;
        return { phases: v.stages.map((s) => s.phase), gate: v.gates.get(0)?.get('health')?.last.outcome };
      };
      await expect
        .poll(
          async () => {
            await eb.tick();
            await eb.idle();
            return done(await look());
          },
          { timeout: 20_000 },
        )
        .toBe(true);
    };

    it('going to ALARM rolls the active stage back within one event delivery through the deployed rule', async () => {
      const {
        engine,
        stores: { rollouts },
      } = await rt();
      await setAlarm('checkout-5xx', 'OK');
      const { id } = await createRollout(engine, { spec: gated('checkout-5xx'), actor: 'alice' });
      // The tick activates the stage and reads the alarm (DescribeAlarms): OK, a pass.
      await tickUntil(id, (v) => v.gate === 'pass');
      const delivered = eb.deliveries.length;
      const sample = alarmStateChange('checkout-5xx', 'ALARM', new Date().toISOString().replace('Z', '+0000'));
      // CloudWatch puts the state change on the account's default bus, in its own shape.
      await events.send(
        new PutEventsCommand({
          Entries: [{ Source: sample.source, DetailType: sample['detail-type'], Resources: sample.resources, Detail: JSON.stringify(sample.detail) }],
        }),
      );
      await eb.idle();
      // One delivery, by the StreamingPromoter's rule on the default bus, taken at the first attempt.
      const ofChange = eb.deliveries.slice(delivered).filter((d) => (d.event as { 'detail-type'?: string })['detail-type'] === 'CloudWatch Alarm State Change');
      expect(ofChange.map((d) => [d.rule.replace(/[0-9A-F]{8}$/, ''), d.ok, d.attempts])).toEqual([['StreamingPromoterRule1', true, 1]]);
      const v = (await rollouts.load(id))!;
      expect(v.rollout.state).toBe('rolled_back');
      expect(v.rollout.stateReason).toBe('gate health (cloudwatchAlarm): 1 failed reading > failureLimit 0; last: in ALARM: checkout-5xx');
      const rollback = (await rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.rollback_detected')!;
      expect(rollback.detail.readings).toEqual([expect.objectContaining({ gate: 'health', outcome: 'fail', source: 'event' })]);
      // Subscribers of the rollout bus get it too.
      const seen = await receiveAll(observed, (b) => b.some((x) => JSON.stringify(x).includes(id) && JSON.stringify(x).includes('rollback_detected')));
      expect(seen.some((m) => JSON.stringify(m.body).includes('"source":"event"'))).toBe(true);
    });

    it('a missed state change is caught up on the next tick through DescribeAlarms', async () => {
      const {
        engine,
        stores: { rollouts },
      } = await rt();
      await setAlarm('checkout-latency', 'OK');
      const { id } = await createRollout(engine, { spec: gated('checkout-latency'), actor: 'alice' });
      await tickUntil(id, (v) => v.gate === 'pass');
      // The alarm fires; its event never arrives.
      await setAlarm('checkout-latency', 'ALARM', 'Threshold Crossed: 3 datapoints were greater than the threshold (400.0)');
      await tickUntil(id, (v) => v.phases[0] === 'rolled_back');
      const rollback = (await rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.rollback_detected')!;
      expect(rollback.detail.readings).toEqual([
        expect.objectContaining({ gate: 'health', outcome: 'fail', source: 'poll', query: 'alarms checkout-latency' }),
      ]);
      // The reason lives on moto's alarm only: the reading came from DescribeAlarms.
      expect(rollback.detail.readings![0]!.answer).toContain('Threshold Crossed: 3 datapoints');
    });
  });

  describe('judged gates on a Lambda alias, by ExecutedVersion', () => {
    type AliasName = keyof typeof aliases;
    /** One point a second from a little before now to ten minutes ahead, for each alias's versions 1 (stable) and 2 (the canary). */
    beforeAll(async () => {
      const put = new CloudWatchClient({ disableRequestCompression: true });
      const from = Math.floor(Date.now() / 1000) - 5;
      const draw = normals(47);
      const data: MetricDatum[] = [];
      const datum = (name: AliasName, MetricName: string, version: string, s: number, Value: number, Unit: 'Milliseconds' | 'Count'): MetricDatum => ({
        MetricName,
        Dimensions: [
          { Name: 'ExecutedVersion', Value: version },
          { Name: 'FunctionName', Value: aliases[name].functionName },
          { Name: 'Resource', Value: `${aliases[name].functionName}:${aliases[name].alias}` },
        ],
        Timestamp: new Date((from + s) * 1000),
        Value,
        Unit,
      });
      for (let s = 0; s < 600; s++) {
        const stable = 100 + 10 * draw();
        // A canary twice as slow as the stable version, and one that answers exactly as it does.
        data.push(datum('judged-slow', 'Duration', '1', s, stable, 'Milliseconds'), datum('judged-slow', 'Duration', '2', s, 2 * stable, 'Milliseconds'));
        data.push(datum('judged-same', 'Duration', '1', s, stable, 'Milliseconds'), datum('judged-same', 'Duration', '2', s, stable, 'Milliseconds'));
        // The stage's 10 %: the stable version errs 1 %, the canary 2 %.
        data.push(datum('judged-errors', 'Invocations', '1', s, 9_000, 'Count'), datum('judged-errors', 'Errors', '1', s, 90, 'Count'));
        data.push(datum('judged-errors', 'Invocations', '2', s, 1_000, 'Count'), datum('judged-errors', 'Errors', '2', s, 20, 'Count'));
      }
      for (let i = 0; i < data.length; i += 500) await put.send(new PutMetricDataCommand({ Namespace: 'AWS/Lambda', MetricData: data.slice(i, i + 500) }));
      put.destroy();
    }, 60_000);

    const metric = (name: AliasName, metricName: string, stat: string) => ({
      namespace: 'AWS/Lambda',
      metricName,
      stat,
      dimensions: {
        FunctionName: aliases[name].functionName,
        Resource: `${aliases[name].functionName}:${aliases[name].alias}`,
        ExecutedVersion: '{{version}}',
      },
    });
    const spec = (name: AliasName, gate: Record<string, unknown>, bakeSeconds: number) => ({
      target: { service: aliases[name].functionName, version: '2', stableVersion: '1' },
      actuators: [name],
      stages: [
        {
          name: 'canary',
          percent: 10,
          bakeSeconds,
          // One-second periods, read every second; until a judge has its minimum sample the readings are inconclusive, which the limit allows.
          gates: { providers: [{ type: 'cloudwatchMetric', periodSeconds: 1, intervalSeconds: 1, inconclusiveLimit: 1_000, ...gate }] },
        },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
    const latency = (name: AliasName) => ({
      name: 'latency',
      metric: metric(name, 'Duration', 'Average'),
      windowSeconds: 60,
      judge: { kind: 'mann-whitney', direction: 'increase', minSamples: 8 },
    });
    /** Scheduled BatchPromoter ticks (what the clock would fire) until the rollout has ended; its view then. */
    const tickUntilEnded = async (id: string) => {
      const {
        stores: { rollouts },
      } = await rt();
      await expect
        .poll(
          async () => {
            await eb.tick();
            await eb.idle();
            return (await rollouts.load(id))!.rollout.state;
          },
          { timeout: 120_000, interval: 200 },
        )
        .toMatch(/^(completed|rolled_back|aborted|failed)$/);
      return (await rollouts.load(id))!;
    };
    const aliasNow = async (name: AliasName) => {
      const a = await aliases[name].onMoto.send(new GetAliasCommand({ FunctionName: aliases[name].functionName, Name: aliases[name].alias }));
      return { version: a.FunctionVersion, weights: a.RoutingConfig?.AdditionalVersionWeights ?? {} };
    };

    it('the BatchPromoter is granted GetMetricData and the declared aliases, and is handed the targets and namespaces', () => {
      const { template, id: fn } = batchPromoterTemplate;
      const role = JSON.stringify(template.Resources[fn]!.Properties.Role).match(/"Fn::GetAtt":\["([^"]+)"/)![1]!;
      const statements = Object.values(template.Resources)
        .filter((r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes(`"${role}"`))
        .flatMap((r) => (r.Properties.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement);
      const granted = (action: string) => statements.filter((s) => [s.Action].flat().includes(action));
      expect(granted('cloudwatch:GetMetricData')).toHaveLength(1);
      const aliasGrant = JSON.stringify(granted('lambda:UpdateAlias').map((s) => s.Resource));
      for (const a of Object.values(aliases)) expect(aliasGrant).toContain(`:function:${a.functionName}:${a.alias}`);
      expect(granted('lambda:GetAlias')).toHaveLength(1);
    });

    it('a canary twice as slow is rolled back by a mann-whitney gate through the scheduled tick; the alias returns to the stable version', async () => {
      const { engine, stores } = await rt();
      const { id } = await createRollout(engine, { spec: spec('judged-slow', latency('judged-slow'), 3_600), actor: 'alice' });
      const v = await tickUntilEnded(id);
      expect(v.rollout.state).toBe('rolled_back');
      expect(v.rollout.stateReason).toMatch(/^gate latency \(cloudwatchMetric\): 1 failed reading > failureLimit 0; last: the canary is higher: shift \d/);
      const rollback = (await stores.rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.rollback_detected')!;
      expect(rollback.detail.readings).toEqual([expect.objectContaining({ gate: 'latency', outcome: 'fail', source: 'poll' })]);
      expect(JSON.parse(rollback.detail.readings![0]!.answer)).toMatchObject({ classification: 'high' });
      // The alias carried the canary's 10 % and is back on version 1 alone.
      expect(await aliasNow('judged-slow')).toEqual({ version: '1', weights: {} });
      expect((await stores.rollouts.actuations(id)).map((r) => [r.target, r.state])).toEqual([['judged-slow', 'converged']]);
    }, 180_000);

    it('a canary that answers as the stable version does completes through the same gate; the alias is finalised on it', async () => {
      const { engine } = await rt();
      const { id } = await createRollout(engine, { spec: spec('judged-same', latency('judged-same'), 12), actor: 'alice' });
      const v = await tickUntilEnded(id);
      expect(v.rollout.state, v.rollout.stateReason ?? '').toBe('completed');
      const tally = v.gates.get(0)!.get('latency')!;
      expect(tally).toMatchObject({ failures: 0, last: { outcome: 'pass' } });
      expect(JSON.parse(tally.last.answer)).toMatchObject({ classification: 'pass' });
      expect(await aliasNow('judged-same')).toEqual({ version: '2', weights: {} });
    }, 180_000);

    it('a canary erring twice as often is rolled back by a sequential-rate gate on Errors and Invocations', async () => {
      const { engine } = await rt();
      const gate = {
        name: 'errors',
        metric: metric('judged-errors', 'Errors', 'Sum'),
        requestsMetric: metric('judged-errors', 'Invocations', 'Sum'),
        // Each one-second period is whole once it has ended: the points were put ahead.
        settleSeconds: 0,
        judge: { kind: 'sequential-rate', alpha: 0.05, minSamples: 1_000 },
      };
      const { id } = await createRollout(engine, { spec: spec('judged-errors', gate, 3_600), actor: 'alice' });
      const v = await tickUntilEnded(id);
      expect(v.rollout.state).toBe('rolled_back');
      expect(v.rollout.stateReason).toMatch(
        /^gate errors \(cloudwatchMetric\): 1 failed reading > failureLimit 0; last: the canary's error rate is higher: \d+\/\d+ against the baseline's \d+\/\d+/,
      );
      expect(await aliasNow('judged-errors')).toEqual({ version: '1', weights: {} });
    }, 180_000);
  });

  it('an invalid event is retried, then lands in the events DLQ with its reason', async () => {
    await put('rollout.metrics_reported', { rolloutId: 'r', stage: 0, requests: 5, errors: 9, observedAt: 1 });
    await eb.idle();
    const failed = eb.deliveries.filter((d) => !d.ok);
    expect(failed.at(-1)!.attempts).toBe(3); // the first call and Lambda's two async retries
    expect(failed.at(-1)!.error).toMatch(/errors: must not exceed requests/);
    const dead = await receiveAll(eventsDlq, (b) => b.length > 0);
    expect(dead).toHaveLength(1);
    expect(dead[0]!.body).toMatchObject({ 'detail-type': 'rollout.metrics_reported', detail: { rolloutId: 'r' } });
    expect(dead[0]!.attributes.ErrorMessage).toMatch(/errors: must not exceed requests/);
  });

  it('a Spot interruption event, as AWS sends it, drains a worker through the deployed rule; its items return to the queue', async () => {
    const {
      stores: { ledger },
      registry,
    } = await rt();
    const runId = uniqueName('run');
    const instanceId = `i-${randomBytes(9).toString('hex').slice(0, 17)}`; // an EC2 instance id: the drain Lambda refuses anything else
    const work = new SqsWorkQueue(sqs, workQueue);
    await ledger.createRun(runId, {}, Date.now());
    const { ids } = await ledger.enqueue(
      runId,
      Array.from({ length: 6 }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    await work.send(runId, ids);
    const worker = new Worker({ runId, workerId: 'spot-1', ledger, queue: work, backend: mockBackend({ durationMs: 60_000 }), waitSeconds: 0 });
    const agent = new WorkerAgent({
      worker,
      registry,
      ledger,
      registration: { workerId: 'spot-1', instanceId, provider: 'aws', runId },
      registryHeartbeatMs: 50,
    });
    const exit = agent.run(new AbortController().signal);
    await expect.poll(async () => (await ledger.running(runId)).some((i) => i.started), { interval: 20, timeout: 10_000 }).toBe(true);
    // The EventBridge event AWS emits two minutes before reclaiming the instance.
    await events.send(
      new PutEventsCommand({
        Entries: [
          {
            Source: 'aws.ec2',
            DetailType: 'EC2 Spot Instance Interruption Warning',
            Resources: [`arn:aws:ec2:us-east-1:000000000000:instance/${instanceId}`],
            Detail: JSON.stringify({ 'instance-id': instanceId, 'instance-action': 'terminate' }),
          },
        ],
      }),
    );
    const result = await exit;
    await eb.idle();
    expect(result.reason).toBe('drained');
    expect(eb.deliveries.some((d) => d.ok && JSON.stringify(d.event).includes(instanceId))).toBe(true);
    expect(await ledger.counts(runId)).toEqual({ pending: 6, running: 0, done: 0, failed: 0 });
    const attrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: workQueue, AttributeNames: ['ApproximateNumberOfMessages'] }));
    expect(Number(attrs.Attributes!.ApproximateNumberOfMessages)).toBeGreaterThanOrEqual(6); // back on the queue for other workers
  });

  it("the coordinator's scheduled scan drains the work DLQ: a settled letter is deleted, one of a run another stack coordinates stays for a later scan, a malformed one is dropped", async () => {
    const runtime = await rt();
    const { ledger } = runtime.stores;
    const dlq = new SqsWorkQueue(sqs, workDlq);
    const ours = uniqueName('run');
    const theirs = uniqueName('run');
    for (const r of [ours, theirs]) await ledger.createRun(r, {}, Date.now());
    const [mine] = (await ledger.enqueue(ours, [{ poison: 1 }], Date.now())).ids;
    const [other] = (await ledger.enqueue(theirs, [{ poison: 2 }], Date.now())).ids;
    // Another stack holds the coordinator lease of `theirs`.
    await new LeaseElector(runtime.stores.runLeases(theirs), {
      name: coordinatorLease(theirs),
      holderId: 'other-stack',
      ttlMs: 30_000,
      renewIntervalMs: 10_000,
      retryIntervalMs: 5_000,
    }).campaign();
    await dlq.send(ours, [mine!]);
    await dlq.send(theirs, [other!]);
    await sqs.send(new SendMessageCommand({ QueueUrl: workDlq, MessageBody: 'not json' }));
    // The schedule's input, as the deployed rule sends it; the DLQ from ROLLOUT_WORK_DLQ_URL, as deployed.
    const scan = coordinatorHandler(
      rt,
      { queue: () => new SqsWorkQueue(sqs, workQueue), onFenced: () => undefined, deadLetters: { sqs, queueUrl: workDlq }, activity: null },
      silent,
      quiet,
    );
    await scan({ action: 'scan-all' });
    const failedItem = (await ledger.get(ours, mine!))!;
    expect(failedItem.state).toBe('failed');
    expect(failedItem.error).toMatch(/^poison: delivered 5 times/);
    expect((await ledger.get(theirs, other!))!.state).toBe('pending'); // left for its own coordinator
    // Only the letter of `theirs` is left in the DLQ (hidden until its visibility timeout ends).
    const attrs = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: workDlq, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    expect(Number(attrs.Attributes!.ApproximateNumberOfMessages) + Number(attrs.Attributes!.ApproximateNumberOfMessagesNotVisible)).toBe(1);
  });
});
