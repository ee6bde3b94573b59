/**
 * One chaos schedule over the emulated AWS path, attacked as a whole:
 *
 *   DynamoDB Local ← observing proxy (ddb-proxy.ts) ← every process
 *   SQS on fauxqs (the work queue with its redrive to the work DLQ)
 *   the EventBridge stand-in, loaded with the synthesized stack's rules
 *   two stacks sharing the table (active/passive, as two regions would):
 *     stack-a: every function; its rules and schedules come from the template
 *     stack-b: the scheduled BatchPromoter and coordinator scan
 *   each function a pool of sandbox processes (lambda.ts); workers are
 *   `rollout worker` processes (workers.ts) that ask the coordinator Lambda
 *   for work through the Lambda Invoke API.
 *
 * The workload (rollouts created and commanded through the API Lambda,
 * metrics put on the bus, work runs created through the API) runs while the
 * seeded nemesis (plan.ts) injects its faults; then everything is healed and
 * a bounded quiet period follows in which the schedules keep firing and the
 * signals keep coming, until every run has finished and every rollout has
 * left `running`, or the bound. Every client call is an Op, every fault a
 * FaultRecord; the store's side comes from the proxy's observer and a plain
 * Scan at the end. Nothing the system says about itself is used.
 */
import { DeleteTableCommand, DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { SPOT_INTERRUPTION } from '../../../shared/drain/sources.js';
import { ensureTable } from '../../../shared/adapters/dynamodb/table.js';
import { startServices } from '../../harness/services.js';
import { EventBridgeStandIn, type Handler } from '../../support/eventbridge/server.js';
import type { ChaosHistory, FaultKind, FaultRecord, Op, Outcome, ProcessSpan } from '../history.js';
import { onScheduleClock, readStallDir, StallWatch, worstStall } from '../stalls.js';
import { ObservingProxy, type MidWriteFate, type StoreFaults } from './ddb-proxy.js';
import { ChaosBackend } from './backend.js';
import { rowsOf, scanTable } from './dump.js';
import { InvokeEndpoint, LambdaFunction, type InvokeOutcome } from './lambda.js';
import { DEFAULT_SHAPE, describePlan, makePlan, rng, type FaultStep, type Shape } from './plan.js';
import { WorkerFleet, type Slot } from './workers.js';

export interface AwsScheduleOptions {
  readonly seed: string;
  readonly schedule: number;
  /** The deliberately broken variant the caller switched on (recorded; the caller's loader does the switching). */
  readonly variant?: string | null;
  /** The most the quiet period may last. */
  readonly quietMs?: number;
  readonly shape?: Partial<Shape>;
  /** `--import` flags for every child process (default: preload.ts, the variant loader and stall recorder). */
  readonly imports?: readonly string[];
  /** Where process logs go (default: a fresh directory under the system's temp dir, kept). */
  readonly logDir?: string;
  readonly log?: (line: string) => void;
}

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
/** Preloaded into every process: it records the process's scheduling stalls, and applies a broken variant's edits when one is on (variants.ts). */
const PRELOAD = resolve(root, 'test/chaos/preload.ts');

export const NODE_A = 'stack-a/us-east-1';
export const NODE_B = 'stack-b/eu-west-1';
/** Lease timings scaled down from AWS's 30 / 10 / 5 s, so leadership moves within a schedule; the elector validates them. */
export const LEASE = { ttlMs: 5_000, renewMs: 1_500, retryMs: 1_000, skewMs: 1_000 } as const;
const TICK_INTERVAL_MS = 500;
/** How often the schedules fire (a minute in AWS; the lease TTL here is 5 s, not 30); a BatchPromoter invocation ticks for most of it. */
const SCHEDULE_EVERY_MS = 2_000;
const SIGNAL_EVERY_MS = 500;
const WORKER_HEARTBEAT_MS = 1_000;
/** The stack's 60 s, halved: a worker that stops extending loses its messages sooner (the scan re-sends anyway). */
const VISIBILITY_S = 30;
const MAX_RECEIVE_COUNT = 5;
/** How long a spot notice's fault lasts at most: until its worker has drained and left, or this. */
const NOTICE_EFFECT_MS = 20_000;
/**
 * Time-outs (AWS: 30, 70, 60, 29, 15, 30 s). The BatchPromoter's bounds how long it
 * ticks; the others leave room for a loaded machine, so a time-out is a fault the
 * plan chose (invoke-killed), not the host's.
 */
const TIMEOUTS: Record<string, number> = {
  streamingPromoter: 10_000,
  batchPromoter: 2_500,
  coordinator: 10_000,
  api: 10_000,
  spotDrain: 10_000,
};
/**
 * Concurrency per function and stack. The stack reserves 1 for the BatchPromoter;
 * 2 here, so a duplicated tick can overlap the scheduled one, as the design says
 * concurrent invocations of one node must be safe.
 */
const CONCURRENCY: Record<string, number> = { streamingPromoter: 3, batchPromoter: 2, coordinator: 4, api: 2, spotDrain: 2 };
/**
 * Sandboxes kept warm (provisioned concurrency): a cold start loads the SDK and the
 * project from source, seconds of CPU on a busy host, which would otherwise turn
 * every kill into a run of time-outs and throttles that no fault plan asked for.
 */
const WARM: Record<string, number> = { streamingPromoter: 3, batchPromoter: 2, coordinator: 3, api: 1, spotDrain: 1 };
const MODULES: Record<string, string> = {
  streamingPromoter: 'functions/streaming-promoter.ts',
  batchPromoter: 'functions/batch-promoter.ts',
  coordinator: 'functions/coordinator.ts',
  api: 'functions/api.ts',
  spotDrain: 'functions/spot-drain.ts',
};
/**
 * Stack-b's share: its schedules (BatchPromoter, coordinator scan; the scan
 * drains the work DLQ). Both stacks use one work queue and DLQ here, so a
 * dead letter one stack's scan cannot settle (the other coordinates the run)
 * comes back after the DLQ's visibility timeout, to either stack's next scan
 * (docs/guides/multi-region.md: the second stack has queues of its own).
 */
const STACK_B_FUNCTIONS = ['batchPromoter', 'coordinator'];
/** Short codes for the sandboxes' names at the store proxy (`a.sp.3`: stack-a's StreamingPromoter, third sandbox). */
const CODES: Record<string, string> = { streamingPromoter: 'sp', batchPromoter: 'bp', coordinator: 'co', api: 'api', spotDrain: 'sd' };
const stackCode = (tag: string) => tag.slice('stack-'.length);

// ─────────────────────────────────────────── per process: services and the template

let services: Promise<void> | undefined;
let stopServices: (() => Promise<void>) | undefined;

/** DynamoDB Local and fauxqs: the ones the harness gave, else started once for this process. */
export function awsServices(): Promise<void> {
  services ??= (async () => {
    if (process.env.AWS_ENDPOINT_URL_DYNAMODB && process.env.AWS_ENDPOINT_URL_SQS) return;
    const s = await startServices({ dynamodb: true, sqs: true });
    Object.assign(process.env, s.env);
    stopServices = () => s.stop();
  })();
  return services;
}

/** Stops what awsServices started (nothing when the harness gave the endpoints). */
export async function stopAwsServices(): Promise<void> {
  await stopServices?.();
  services = undefined;
  stopServices = undefined;
}

interface Synth {
  readonly template: { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }> };
  readonly busId: string;
  readonly dlqId: string;
  readonly functionIds: Record<string, string>;
}
let synth: Promise<Synth> | undefined;

/** The stack's template, synthesized once per process (bundling skipped: the handlers run from source here). */
function synthesized(): Promise<Synth> {
  synth ??= (async () => {
    const { App } = await import('aws-cdk-lib');
    const { ControlPlaneStack } = await import('../../../infra/stack.js');
    const outdir = mkdtempSync(join(tmpdir(), 'rollout-chaos-cdk-'));
    try {
      const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
      const stack = new ControlPlaneStack(app, 'Chaos');
      const template = JSON.parse(readFileSync(join(app.synth().directory, stack.templateFile), 'utf8')) as Synth['template'];
      const id = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
      const functionIds = Object.fromEntries(Object.entries(stack.functions).map(([name, fn]) => [name, id(fn)]));
      return { template, busId: id(stack.bus), dlqId: id(stack.eventsDlq), functionIds };
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  })();
  return synth;
}

/** For `npm run chaos -- --topology aws` (test/chaos/cli.ts): the services and the template once, then schedules. */
export async function startAwsHarness(o: { variant: string | null; log?: (line: string) => void; quietMs?: number }): Promise<{
  runSchedule(s: { seed: string; schedule: number; variant?: string | null; faultsPerSchedule: number; items: number }): Promise<ChaosHistory>;
  stop(): Promise<void>;
}> {
  await awsServices();
  await synthesized();
  return {
    runSchedule: (s) =>
      runAwsSchedule({
        seed: s.seed,
        schedule: s.schedule,
        variant: s.variant ?? o.variant,
        ...(o.quietMs ? { quietMs: o.quietMs } : {}),
        ...(o.log ? { log: o.log } : {}),
        shape: { faultCount: s.faultsPerSchedule, faultsMs: Math.max(12_000, s.faultsPerSchedule * 5_000), runs: [{ items: s.items, workers: 3 }] },
      }),
    stop: () => stopAwsServices(),
  };
}

// ─────────────────────────────────────────── the history as it is recorded

class Recorder {
  readonly ops: Op[] = [];
  readonly faults: FaultRecord[] = [];
  readonly spans: ProcessSpan[] = [];
  private nextOp = 0;
  private readonly open = new Map<string, ProcessSpan & { to: number | null }>();

  constructor(readonly now: () => number) {}

  begin(o: { client: string; kind: string; via: string; target?: string; key?: string }): Op {
    const op: Op = { id: ++this.nextOp, ...o, invokedAt: this.now(), completedAt: null, outcome: 'unknown' };
    this.ops.push(op);
    return op;
  }

  end(op: Op, outcome: Outcome, f: { status?: number; node?: string; detail?: string; result?: Record<string, unknown> } = {}): void {
    op.completedAt = this.now();
    op.outcome = outcome;
    Object.assign(op, f);
  }

  fault(kind: FaultKind, target: string, detail: string): FaultRecord {
    const f: FaultRecord = { kind, target, startAt: this.now(), endAt: null, detail };
    this.faults.push(f);
    return f;
  }

  process(name: string, role: ProcessSpan['role'], event: 'start' | 'end', end?: ProcessSpan['end']): void {
    if (event === 'start') {
      const span: ProcessSpan & { to: number | null } = { process: name, role, from: this.now(), to: null };
      this.spans.push(span);
      this.open.set(name, span);
      return;
    }
    const span = this.open.get(name);
    if (!span) return;
    this.open.delete(name);
    span.to = this.now();
    if (end) Object.assign(span, { end });
  }
}

// ─────────────────────────────────────────── the schedule

const BAKE_S = 1;
/** The labels carry what the checker matches on: the create's key, what to expect of it, its bake. */
const SPEC = (ro: { key: string; stages: readonly string[]; expect: string }) => ({
  target: { service: 'checkout', version: `v-${ro.key}`, labels: { key: ro.key, expect: ro.expect, bakeMs: String(BAKE_S * 1000) } },
  stages: ro.stages.map((name, i) => ({
    name,
    percent: i === ro.stages.length - 1 ? 100 : ([10, 50][i] ?? 50),
    bakeSeconds: i === ro.stages.length - 1 ? 0 : BAKE_S,
    gates: { minRequests: 10, maxErrorRate: 0.05 },
  })),
});

export async function runAwsSchedule(o: AwsScheduleOptions): Promise<ChaosHistory> {
  await awsServices();
  const shape: Shape = { ...DEFAULT_SHAPE, ...o.shape };
  const plan = makePlan(o.seed, o.schedule, shape, LEASE.ttlMs);
  const log = o.log ?? ((line: string) => console.log(line));
  log(describePlan(plan));
  const { template, busId, dlqId, functionIds } = await synthesized();

  // The schedule's clock starts when the workload does (below); until then it counts from here, and what it
  // stamps before (sandboxes started ahead) is moved to 0.
  let t0 = performance.now();
  let epochMs = Date.now();
  const now = () => Math.round(performance.now() - t0);
  const rec = new Recorder(now);
  const logDir = o.logDir ?? mkdtempSync(join(tmpdir(), `rollout-chaos-aws-${plan.salt}-`));
  mkdirSync(logDir, { recursive: true });
  // Every process records its scheduling stalls there; the harness its own, in memory.
  const stallDir = mkdtempSync(join(logDir, 'stalls-'));
  const watch = new StallWatch();
  log(`process logs: ${logDir}`);

  const ddbUrl = new URL(process.env.AWS_ENDPOINT_URL_DYNAMODB!);
  const sqsUrl = process.env.AWS_ENDPOINT_URL_SQS!;
  const region = process.env.AWS_REGION ?? 'us-east-1';
  const plainDdb = new DynamoDBClient({ endpoint: ddbUrl.toString(), region });
  const sqs = new SQSClient({ endpoint: sqsUrl, region, useQueueUrlAsEndpoint: false });
  const cleanups: (() => Promise<unknown>)[] = [];
  const background = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    const q = p.catch(() => undefined);
    background.add(q);
    void q.finally(() => background.delete(q));
    return p;
  };

  const random = rng(`proxy:${o.seed}:${o.schedule}`);
  const proxy = await new ObservingProxy(ddbUrl, { now, random: () => random.next() }).start();
  rec.process('dynamodb-local', 'store', 'start');
  rec.process('ddb-proxy', 'proxy', 'start');
  // A node here is a deployed stack: it can be invoked throughout, whatever becomes of its sandboxes.
  for (const node of [NODE_A, NODE_B]) rec.process(node, 'node', 'start');
  cleanups.push(() => proxy.stop());
  const backend = await new ChaosBackend({ itemMs: shape.itemMs, now }).start();
  cleanups.push(() => backend.stop());

  const table = `chaos-${plan.salt}-${Date.now().toString(36)}`;
  await ensureTable(plainDdb, table);
  cleanups.push(() => plainDdb.send(new DeleteTableCommand({ TableName: table })));
  const queue = async (name: string, attributes: Record<string, string> = {}) => {
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: `${name}-${plan.salt}-${Date.now().toString(36)}`, Attributes: attributes }))).QueueUrl!;
    cleanups.push(() => sqs.send(new DeleteQueueCommand({ QueueUrl: url })));
    return url;
  };
  const workDlq = await queue('work-dlq', { VisibilityTimeout: '3' });
  const workDlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: workDlq, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
  const workQueue = await queue('work', {
    VisibilityTimeout: String(VISIBILITY_S),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: workDlqArn, maxReceiveCount: MAX_RECEIVE_COUNT }),
  });
  const eventsDlq = await queue('events-dlq');
  const bus = `chaos-${plan.salt}-rollout`;

  // ── EventBridge, with the stack's rules; Lambda targets go to stack-a's pools.
  const arn = (name: string) => `arn:aws:lambda:${region}:000000000000:function:${name}`;
  const dlqArn = `arn:aws:sqs:${region}:000000000000:events-dlq`;
  const lambdas: Record<string, { handler: Handler; retries: number; dlqUrl: string }> = {};
  const eb = await new EventBridgeStandIn({ sqs, lambdas, queues: { [dlqArn]: eventsDlq } }).start();
  cleanups.push(() => eb.stop());
  const events = new EventBridgeClient({ endpoint: eb.url, region });

  // ── the stacks' functions
  const childEnv = {
    ROLLOUT_STORE: 'dynamodb',
    ROLLOUT_TABLE: table,
    ROLLOUT_EVENT_BUS: bus,
    ROLLOUT_LEASE_TTL_MS: String(LEASE.ttlMs),
    ROLLOUT_LEASE_RENEW_MS: String(LEASE.renewMs),
    ROLLOUT_LEASE_RETRY_MS: String(LEASE.retryMs),
    ROLLOUT_TICK_INTERVAL_MS: String(TICK_INTERVAL_MS),
    ROLLOUT_WORK_QUEUE_URL: workQueue,
    ROLLOUT_WORK_DLQ_URL: workDlq,
    ROLLOUT_MAX_RECEIVE_COUNT: String(MAX_RECEIVE_COUNT),
    AWS_ENDPOINT_URL_DYNAMODB: proxy.url,
    AWS_ENDPOINT_URL_SQS: sqsUrl,
    AWS_ENDPOINT_URL_EVENTBRIDGE: eb.url,
    AWS_REGION: region,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_LOG_LEVEL: 'INFO',
    POWERTOOLS_DEV: 'false',
    ...(o.variant ? { CHAOS_VARIANT: o.variant } : {}),
    CHAOS_STALL_DIR: stallDir,
  };
  const imports = o.imports ?? [PRELOAD];
  const stacks = { 'stack-a': NODE_A, 'stack-b': NODE_B } as const;
  const pools = new Map<string, LambdaFunction>();
  for (const [tag, node] of Object.entries(stacks)) {
    for (const name of tag === 'stack-a' ? Object.keys(MODULES) : STACK_B_FUNCTIONS) {
      pools.set(
        `${tag}/${name}`,
        new LambdaFunction({
          stack: node,
          stackTag: tag,
          name,
          appPrefix: `${stackCode(tag)}.${CODES[name]}`,
          module: MODULES[name]!,
          env: childEnv,
          timeoutMs: TIMEOUTS[name]!,
          maxSandboxes: CONCURRENCY[name]!,
          warmSandboxes: tag === 'stack-a' ? WARM[name]! : Math.min(2, WARM[name]!),
          imports,
          logDir,
          onProcess: (p, event, end) => rec.process(p, 'lambda', event, end),
        }),
      );
    }
  }
  cleanups.push(async () => {
    for (const p of pools.values()) await p.stop();
  });
  const pool = (label: string) => pools.get(label)!;

  // ── invoking a function, as a client of it: one Op per invocation
  const duplicating = new Set<string>();
  const timeoutNext = new Map<string, { afterMs: number; step: FaultStep }>();
  async function invoke(label: string, event: unknown, meta: { client: string; kind: string; target?: string }): Promise<InvokeOutcome> {
    const fn = pool(label);
    const op = rec.begin({ ...meta, via: `lambda:${label}` });
    const short = timeoutNext.get(label);
    let fault: FaultRecord | null = null;
    if (short) {
      timeoutNext.delete(label);
      fault = rec.fault('invoke-killed', label, `${short.step.detail} (op ${op.id})`);
    }
    try {
      const out = await fn.invoke(event, short ? { timeoutMs: short.afterMs } : {});
      const node = label.startsWith('stack-a') ? NODE_A : NODE_B;
      if (out.status === 'ok') rec.end(op, 'ok', { node, result: summarize(meta.kind, out.result) });
      else if (out.status === 'throttled') rec.end(op, 'failed', { detail: out.detail });
      // A handler that threw may have written before it did; a sandbox that died certainly may have.
      else rec.end(op, 'unknown', { node, detail: out.status === 'error' ? out.error : `${out.status}: ${out.detail} (${out.sandbox})` });
      return out;
    } catch (err) {
      rec.end(op, 'unknown', { detail: String(err) });
      throw err;
    } finally {
      if (fault) fault.endAt = now();
    }
  }
  /** At-least-once delivery: inside an invoke-duplicated window the same event also runs in a second sandbox at once. */
  async function deliver(label: string, event: unknown, meta: { client: string; kind: string; target?: string }): Promise<InvokeOutcome> {
    const stack = label.split('/')[0]!;
    if (!duplicating.has(stack)) return invoke(label, event, meta);
    const [first] = await Promise.all([invoke(label, event, meta), track(invoke(label, event, { ...meta, client: `${meta.client}+dup` }))]);
    return first;
  }
  const asHandler =
    (label: string, kind: string, client: string, target?: (e: unknown) => string | undefined): Handler =>
    async (event) => {
      const t = target?.(event);
      const out = await deliver(label, event, { client, kind, ...(t ? { target: t } : {}) });
      if (out.status !== 'ok') throw new Error(out.status === 'error' ? out.error : `${out.status}: ${out.detail}`);
      return out.status === 'ok' ? out.result : undefined;
    };
  const detailRollout = (e: unknown) => {
    const d = (e as { detail?: { rolloutId?: unknown } }).detail;
    return typeof d?.rolloutId === 'string' ? d.rolloutId : undefined;
  };
  const targetOf: Record<string, Handler> = {
    streamingPromoter: asHandler('stack-a/streamingPromoter', 'promoter.event', 'eventbridge', detailRollout),
    batchPromoter: asHandler('stack-a/batchPromoter', 'promoter.tick', 'scheduler-a'),
    coordinator: asHandler('stack-a/coordinator', 'coordinator.scan-all', 'scheduler-a'),
    spotDrain: asHandler('stack-a/spotDrain', 'drain.notice', 'eventbridge', (e) => (e as { detail?: Record<string, string> }).detail?.['instance-id']),
    api: () => Promise.reject(new Error('the API function has no rule')),
  };
  const names: Record<string, string> = { [busId]: bus, [dlqId]: dlqArn };
  for (const [name, id] of Object.entries(functionIds)) {
    names[id] = arn(name);
    const invokeConfig = Object.values(template.Resources).find(
      (r) => r.Type === 'AWS::Lambda::EventInvokeConfig' && JSON.stringify(r.Properties.FunctionName).includes(id),
    );
    lambdas[arn(name)] = { handler: targetOf[name]!, retries: Number(invokeConfig?.Properties.MaximumRetryAttempts ?? 2), dlqUrl: eventsDlq };
  }
  eb.loadTemplate(template, names);

  // Workers reach the coordinator through the Invoke API; the stand-in routes by function name to stack-a.
  const endpoint = await new InvokeEndpoint((name, event) => {
    const e = event as { action?: string; runId?: string; workerId?: string };
    return deliver(`stack-a/${name}`, event, {
      client: e.workerId ?? 'invoker',
      kind: `coordinator.${e.action ?? 'unknown'}`,
      ...(e.runId ? { target: e.runId } : {}),
    });
  }).start();
  cleanups.push(() => endpoint.stop());

  // Sandboxes started ahead, so the first faults meet warm functions rather than a queue of cold starts.
  await Promise.all([...pools.values()].map((p) => p.warm()));

  // ── the API, as API Gateway (payload 2.0, IAM authorization) hands a request to the function
  async function api(
    method: string,
    path: string,
    body: unknown,
    meta: { kind: string; target?: string; key?: string },
  ): Promise<{ status: number; body: Record<string, unknown> } | null> {
    const op = rec.begin({
      client: 'operator',
      kind: meta.kind,
      via: 'lambda:stack-a/api',
      ...(meta.target ? { target: meta.target } : {}),
      ...(meta.key ? { key: meta.key } : {}),
    });
    const out = await pool('stack-a/api')
      .invoke({
        version: '2.0',
        routeKey: `${method} /{proxy+}`,
        rawPath: path,
        rawQueryString: '',
        headers: { 'content-type': 'application/json', ...(meta.key ? { 'idempotency-key': meta.key } : {}) },
        isBase64Encoded: false,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        requestContext: {
          http: { method, path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'chaos' },
          requestId: `req-${op.id}`,
          authorizer: { iam: { userArn: 'arn:aws:iam::000000000000:user/operator' } },
        },
      })
      .catch((err: unknown) => ({ status: 'exited' as const, detail: String(err), sandbox: '?' }));
    if (out.status === 'throttled') {
      rec.end(op, 'failed', { detail: out.detail });
      return null;
    }
    if (out.status !== 'ok') {
      rec.end(op, 'unknown', { node: NODE_A, detail: out.status === 'error' ? out.error : `${out.status}: ${out.detail}` });
      return null;
    }
    const res = out.result as { statusCode: number; body?: string };
    const parsed = res.body ? (JSON.parse(res.body) as Record<string, unknown>) : {};
    // A 4xx, or a 503 (not the leader; a write refused unjudged), applied nothing; a 500 may have applied anything.
    const outcome: Outcome = res.statusCode < 300 ? 'ok' : res.statusCode === 500 ? 'unknown' : 'failed';
    // A command's answer, as the checker reads it: applied or not, and which transition.
    const action = parsed.action as { applied?: boolean; transition?: string } | undefined;
    const result = action ? { applied: action.applied === true, transition: action.transition } : parsed;
    rec.end(op, outcome, {
      status: res.statusCode,
      node: NODE_A,
      result,
      ...(res.statusCode >= 300 ? { detail: typeof parsed.error === 'string' ? parsed.error : JSON.stringify(parsed.error ?? null) } : {}),
    });
    return { status: res.statusCode, body: parsed };
  }

  async function putEvents(entries: PutEventsRequestEntry[], meta: { client: string; kind: string; target?: string }): Promise<boolean> {
    const op = rec.begin({ ...meta, via: 'eventbridge' });
    try {
      const res = await events.send(new PutEventsCommand({ Entries: entries }));
      const failed = res.FailedEntryCount ?? 0;
      rec.end(op, failed ? 'failed' : 'ok', { result: { entries: entries.length, failed } });
      return failed === 0;
    } catch (err) {
      rec.end(op, 'unknown', { detail: String(err) });
      return false;
    }
  }

  const fleet = new WorkerFleet({
    env: { ...childEnv, AWS_ENDPOINT_URL_LAMBDA: endpoint.url },
    table,
    queueUrl: workQueue,
    backendUrl: backend.url,
    heartbeatMs: WORKER_HEARTBEAT_MS,
    visibilitySeconds: VISIBILITY_S,
    imports,
    logDir,
    salt: plan.salt,
    onProcess: (p, event, end) => rec.process(p, 'worker', event, end),
    log,
  });

  let workloadOn = true;
  let schedulesOn = true;
  t0 = performance.now();
  epochMs = Date.now();
  const w0 = now();
  log(`[${w0}] workload and faults start`);

  const heals: (() => Promise<void> | void)[] = [];
  const nemesis = new Nemesis({ rec, proxy, table, pools, fleet, sqs, workQueue, putEvents, duplicating, timeoutNext, heals, now, log, track });
  const steps = plan.faults.map((step) => track(sleep(Math.max(0, w0 + step.at - now())).then(() => nemesis.run(step))));

  try {
    // ── the workload: runs and rollouts created through the API, then signals and commands
    for (const run of plan.runs) {
      const poison = new Set(run.poison);
      const items = Array.from({ length: run.items }, (_, i) => ({ run: run.key, i, salt: plan.salt, ...(poison.has(i) ? { poison: true } : {}) }));
      const op = await api('POST', '/runs', { id: run.key, spec: { chaos: run.key }, items }, { kind: 'run.create', target: run.key, key: run.key });
      if (!op || op.status >= 300) log(`run ${run.key} was not created (${op ? op.status : 'no answer'}): its workers will find no run`);
      for (let w = 0; w < run.workers; w++) fleet.add(run.key, w);
    }
    for (const ro of plan.rollouts) {
      void track(
        sleep(Math.max(0, w0 + ro.createAt - now())).then(async () => {
          if (!workloadOn) return;
          const created = await api('POST', '/rollouts', { id: ro.key, spec: SPEC(ro) }, { kind: 'rollout.create', target: ro.key, key: ro.key });
          if (created && created.status < 300)
            await putEvents([{ EventBusName: bus, Source: 'rollout.signals', DetailType: 'rollout.created', Detail: JSON.stringify({ rolloutId: ro.key }) }], {
              client: 'signals',
              kind: 'signal.created',
              target: ro.key,
            });
        }),
      );
    }
    // The traffic of each rollout's live stage, as the service's metrics would report it: the reporter knows which
    // stage is live (read here straight from the table, not through the system), healthy until its breach time.
    const liveStage = async (id: string): Promise<number | null> => {
      const res = await plainDdb.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :p',
          ExpressionAttributeValues: { ':p': { S: `ROLLOUT#${id}` } },
          ConsistentRead: true,
        }),
      );
      const items = (res.Items ?? []).map((i) => unmarshall(i));
      const head = items.find((i) => i.sk === 'ROLLOUT');
      if (!head || head.state !== 'running') return null;
      const active = items.find((i) => i.type === 'stage' && i.attempt === head.attempt && i.phase === 'active');
      return active ? Number(active.index) : null;
    };
    const signals = track(
      (async () => {
        for (let i = 0; workloadOn; i++) {
          const ro = plan.rollouts[i % plan.rollouts.length]!;
          const stage = await liveStage(ro.key).catch(() => null);
          if (stage !== null) {
            const breach = ro.breachAfterMs !== null && now() - w0 >= ro.breachAfterMs;
            const detail = { rolloutId: ro.key, stage, requests: 100, errors: breach ? 40 : 0, observedAt: new Date().toISOString() };
            void track(
              putEvents([{ EventBusName: bus, Source: 'rollout.signals', DetailType: 'rollout.metrics_reported', Detail: JSON.stringify(detail) }], {
                client: 'signals',
                kind: 'signal.metrics',
                target: ro.key,
              }),
            );
          }
          await sleep(SIGNAL_EVERY_MS);
        }
      })(),
    );
    const commands = plan.rollouts.flatMap((ro) => ro.commands.map((c) => ({ ...c, rollout: ro.key })));
    for (const c of commands) {
      const key = `${c.rollout}-${c.command}-${c.at}`;
      void track(
        sleep(Math.max(0, w0 + c.at - now())).then(() =>
          // The reason carries the key, so the store shows which command made which change.
          workloadOn ? api('POST', `/rollouts/${c.rollout}/${c.command}`, { reason: key }, { kind: `rollout.${c.command}`, target: c.rollout, key }) : null,
        ),
      );
    }

    // ── the schedules: stack-a's from the template (through the stand-in), stack-b's as its own rules would fire
    const schedules = track(
      (async () => {
        while (schedulesOn) {
          void track(eb.tick());
          void track(
            deliver(
              'stack-b/batchPromoter',
              { source: 'aws.events', 'detail-type': 'Scheduled Event', detail: {} },
              { client: 'scheduler-b', kind: 'promoter.tick' },
            ),
          );
          void track(deliver('stack-b/coordinator', { action: 'scan-all' }, { client: 'scheduler-b', kind: 'coordinator.scan-all' }));
          await sleep(SCHEDULE_EVERY_MS);
        }
      })(),
    );
    // ── the faults phase runs its course (the nemesis' steps were started with the workload)
    await sleep(Math.max(0, w0 + shape.faultsMs - now()));
    const faultsUntil = now();
    log(`[${faultsUntil}] faults end: healing`);
    await nemesis.healAll();
    await Promise.all(steps);
    const healedAt = now();
    log(`[${healedAt}] healed; quiet period (at most ${o.quietMs ?? 60_000} ms)`);

    // ── quiet: no faults; the schedules, the workers and the signals go on until the work is finished, within the bound
    const quietMs = o.quietMs ?? 60_000;
    // On a busy host the bound stretches by what the processes were stalled since (as the checker's bounds do), up to twice.
    const stalledSinceHeal = () => {
      const stalls = onScheduleClock([...readStallDir(stallDir), ...watch.read()], performance.timeOrigin + t0);
      return Math.min(quietMs, worstStall(stalls, new Set(stalls.map((x) => x.process)), healedAt, now()).ms);
    };
    for (;;) {
      await sleep(1_000);
      if (now() - healedAt >= quietMs + stalledSinceHeal()) break;
      if (now() - healedAt < 2_000) continue;
      const rows = rowsOf(await scanTable(plainDdb, table), (w) => w - epochMs);
      const runsDone = rows.items.every((i) => i.state === 'done' || i.state === 'failed') && rows.runs.length === plan.runs.length;
      // Every rollout that exists (a create refused by a fault made none) has left `running`.
      const rolloutsSettled = rows.rollouts.every((r) => r.state !== 'running');
      if (runsDone && rolloutsSettled) break;
    }
    workloadOn = false;
    await signals;
    // Reads after the quiet period: the operator's last look at each rollout and run.
    for (const ro of plan.rollouts) await api('GET', `/rollouts/${ro.key}`, undefined, { kind: 'read.rollout', target: ro.key });
    for (const run of plan.runs) await api('GET', `/runs/${run.key}`, undefined, { kind: 'read.run', target: run.key });
    schedulesOn = false;
    await schedules;
    await fleet.stop();
    log(`[${now()}] quiet period over; settling in-flight invocations`);
    while (background.size) await Promise.all([...background]);
    for (const p of pools.values()) await p.stop();
    await proxy.idle();
    // The end of the history: nothing runs any more, and the dump below is the store as it now stands.
    const quietUntil = now();

    const scanned = await scanTable(plainDdb, table);
    const rows = rowsOf(scanned, (w) => w - epochMs);
    // The backend's own record of executions, by item: which ran, and which the backend failed.
    const itemOf = new Map(
      scanned
        .filter((i) => String(i.sk).startsWith('ITEM#'))
        .map((i) => {
          const p = i.payload as { run?: string; i?: number };
          return [`${p.run}#${p.i}`, String(i.id)];
        }),
    );
    for (const e of backend.executions) {
      const target = itemOf.get(`${String(e.payload.run)}#${String(e.payload.i)}`);
      const op = rec.begin({ client: 'backend', kind: 'backend.execute', via: 'backend', ...(target ? { target } : {}) });
      Object.assign(op, { invokedAt: e.startedAt, completedAt: e.endedAt, outcome: e.ok === null ? 'unknown' : e.ok ? 'ok' : 'failed' });
    }
    for (const node of [NODE_A, NODE_B]) rec.process(node, 'node', 'end', 'stopped');
    rec.process('ddb-proxy', 'proxy', 'end', 'stopped');
    rec.process('dynamodb-local', 'store', 'end', 'stopped');
    const history: ChaosHistory = {
      topology: 'aws',
      seed: o.seed,
      schedule: o.schedule,
      variant: o.variant ?? null,
      epochMs,
      nodes: [NODE_A, NODE_B],
      workers: [...fleet.workerIds].sort(),
      ops: rec.ops,
      faults: rec.faults,
      processes: rec.spans.map((p) => ({ ...p, from: Math.max(0, p.from), ...(p.to === null ? {} : { to: Math.max(0, p.to) }) })),
      // On the schedule's clock: performance.now() − t0, as `now` reads it.
      stalls: onScheduleClock([...readStallDir(stallDir), ...watch.read(true)], performance.timeOrigin + t0),
      phases: { faultsUntil, healedAt, quietUntil },
      bounds: {
        // A lease is taken within one TTL of its holder's last renewal (plus the skew margin) by the next tick that
        // finishes: two schedule periods and an invocation's time-out, since on a busy host one tick may not finish.
        leaderWithinMs: LEASE.ttlMs + LEASE.skewMs + 2 * SCHEDULE_EVERY_MS + TIMEOUTS.batchPromoter!,
        runsFinishWithinMs: quietMs,
        failureTimeoutMs: LEASE.ttlMs,
        heartbeatMs: WORKER_HEARTBEAT_MS,
      },
      store: {
        leaseChanges: proxy.leaseChanges.map((c) => ({ ...c, expiresAt: c.expiresAt === null ? null : c.expiresAt - epochMs })),
        writes: proxy.writes,
        stageTransitions: proxy.stageTransitions,
        rolloutTransitions: proxy.rolloutTransitions,
        itemTransitions: proxy.itemTransitions,
        rollouts: rows.rollouts,
        runs: rows.runs,
        items: rows.items,
        // The API Lambda keeps no record of Idempotency-Keys (rollouts and runs are idempotent on their id instead).
        idempotency: [],
        events: rows.events,
      },
    };
    log(`proxy: ${JSON.stringify(proxy.stats)}`);
    return history;
  } finally {
    watch.close();
    workloadOn = false;
    schedulesOn = false;
    await fleet.stop();
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    sqs.destroy();
    plainDdb.destroy();
    events.destroy();
  }
}

/** What an invocation answered, kept small: counts, not item lists. */
function summarize(kind: string, result: unknown): Record<string, unknown> {
  if (result === null || typeof result !== 'object') return { value: result };
  const r = result as Record<string, unknown>;
  if (kind === 'promoter.event' || kind === 'promoter.tick') {
    const actions = (r.actions as { transition?: string; applied?: boolean; stage?: number; rolloutId?: string }[] | undefined) ?? [];
    return {
      ...Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'actions')),
      actions: actions.map((a) => ({ rolloutId: a.rolloutId, transition: a.transition, applied: a.applied, stage: a.stage })),
    };
  }
  if (kind.startsWith('coordinator.')) {
    const notice = r.notice as { epoch?: number; victim?: string | null; items?: string[] } | undefined;
    const scanned = r.scanned as { repended?: string[]; failed?: string[]; resent?: string[] } | undefined;
    return {
      leader: r.leader,
      ...(notice ? { epoch: notice.epoch, victim: notice.victim, items: notice.items?.length ?? 0 } : {}),
      ...(scanned ? { repended: scanned.repended?.length ?? 0, failed: scanned.failed?.length ?? 0, resent: scanned.resent?.length ?? 0 } : {}),
      ...('holder' in r ? { holder: r.holder } : {}),
    };
  }
  return r;
}

// ─────────────────────────────────────────── the nemesis

interface NemesisDeps {
  readonly rec: Recorder;
  readonly proxy: ObservingProxy;
  readonly table: string;
  readonly pools: ReadonlyMap<string, LambdaFunction>;
  readonly fleet: WorkerFleet;
  readonly sqs: SQSClient;
  readonly workQueue: string;
  readonly putEvents: (entries: PutEventsRequestEntry[], meta: { client: string; kind: string; target?: string }) => Promise<boolean>;
  readonly duplicating: Set<string>;
  readonly timeoutNext: Map<string, { afterMs: number; step: FaultStep }>;
  /** What must be undone when the faults phase ends, whatever is still in force. */
  readonly heals: (() => Promise<void> | void)[];
  readonly now: () => number;
  readonly log: (line: string) => void;
  readonly track: <T>(p: Promise<T>) => Promise<T>;
}

class Nemesis {
  stopping = false;
  private readonly windows: { kind: 'throttle' | 'conflict'; p: number }[] = [];
  /** Fires when the faults phase ends: every step still waiting to undo its fault stops waiting. */
  private readonly healing = new AbortController();

  constructor(private readonly d: NemesisDeps) {}

  /** End the faults phase: nothing new starts, everything in force is undone now. */
  async healAll(): Promise<void> {
    this.stopping = true;
    this.healing.abort();
    for (const heal of this.d.heals.splice(0)) await heal();
  }

  /** Wait out a fault's duration, or until the faults phase ends. */
  private pause(ms: number): Promise<void> {
    return sleep(ms, undefined, { signal: this.healing.signal }).catch(() => undefined);
  }

  async run(step: FaultStep): Promise<void> {
    const { rec, log, now } = this.d;
    if (this.stopping) return;
    log(`[${now()}] nemesis: ${step.kind} ${step.target}: ${step.detail}`);
    switch (step.kind) {
      case 'invoke-duplicated':
        return this.window(step, () => {
          this.d.duplicating.add(step.target);
          return () => void this.d.duplicating.delete(step.target);
        });
      case 'store-throttle':
      case 'store-conflict': {
        const w = { kind: step.kind === 'store-throttle' ? ('throttle' as const) : ('conflict' as const), p: Number(step.params.p) };
        return this.window(step, () => {
          this.windows.push(w);
          this.applyStoreFaults();
          return () => {
            this.windows.splice(this.windows.indexOf(w), 1);
            this.applyStoreFaults();
          };
        });
      }
      case 'store-delay':
        return this.flip(step);
      case 'invoke-killed':
        return this.killInvocation(step);
      case 'queue-redeliver': {
        const f = rec.fault(step.kind, step.target, step.detail);
        // A consumer that takes messages and neither deletes them nor extends them: they come back when its visibility runs out.
        const got = await this.d.sqs
          .send(
            new ReceiveMessageCommand({
              QueueUrl: this.d.workQueue,
              MaxNumberOfMessages: Number(step.params.n),
              VisibilityTimeout: Number(step.params.vis),
              WaitTimeSeconds: 1,
            }),
          )
          .catch((err: unknown) => ({ Messages: [], err }));
        Object.assign(f, { detail: `${step.detail}: took ${got.Messages?.length ?? 0}` });
        await this.pause(Number(step.params.vis) * 1000);
        f.endAt = now();
        return;
      }
      case 'kill-worker': {
        const slot = await this.slot(step);
        if (!slot) return void log(`  no live worker in ${step.target}'s run; skipped`);
        const f = rec.fault(step.kind, slot.workerId, step.detail);
        await this.d.fleet.kill(slot);
        const back = () => {
          this.d.fleet.restart(slot);
          f.endAt = now();
        };
        this.d.heals.push(back);
        await this.pause(step.durationMs);
        const i = this.d.heals.indexOf(back);
        if (i >= 0) {
          this.d.heals.splice(i, 1);
          back();
        }
        return;
      }
      case 'notice-duplicated': {
        const slot = await this.slot(step);
        if (!slot) return void log(`  no live worker in ${step.target}'s run; skipped`);
        const f = rec.fault(step.kind, slot.workerId, `${step.detail} (instance ${slot.instanceId})`);
        const gone = this.d.fleet.gone(slot);
        const copies = Array.from({ length: Number(step.params.copies) }, () => this.notice(slot.instanceId, new Date()));
        await Promise.all(copies);
        // The interruption lasts until its worker has drained and left (bounded: a notice can also be lost).
        await Promise.race([gone, sleep(NOTICE_EFFECT_MS)]);
        f.endAt = now();
        return;
      }
      case 'notice-late': {
        const gone = this.d.fleet.departedInstances.at(-1);
        const slot = gone ? null : await this.slot(step);
        const instance = gone ?? slot?.instanceId;
        if (!instance) return void log('  no instance to send a late notice for; skipped');
        const when = gone ? new Date() : new Date(Date.now() - Number(step.params.ageS) * 1000);
        const f = rec.fault(
          step.kind,
          gone ? instance : slot!.workerId,
          gone ? `spot notice for ${instance}, whose worker has already left` : `spot notice for ${instance} stamped ${String(step.params.ageS)} s ago`,
        );
        const left = slot ? this.d.fleet.gone(slot) : Promise.resolve();
        await this.notice(instance, when);
        await Promise.race([left, sleep(NOTICE_EFFECT_MS)]);
        f.endAt = now();
        return;
      }
    }
  }

  /**
   * Leadership away and back, with a write of the first term delivered in the
   * second: the fence must refuse it (same holder, older epoch).
   */
  private async flip(step: FaultStep): Promise<void> {
    const { proxy, log } = this.d;
    const row = await proxy.leaseRow(this.d.table, 'promotion_leader').catch((err: unknown) => {
      log(`  could not read promotion_leader (${String(err)}); aiming at ${String(step.params.stack)}`);
      return null;
    });
    const leader = row?.holder === NODE_B ? 'stack-b' : row?.holder === NODE_A ? 'stack-a' : String(step.params.stack);
    const other = leader === 'stack-a' ? 'stack-b' : 'stack-a';
    const code = `${stackCode(leader)}.`;
    // A fenced write of a promotion or rollback (a stage or the rollout row) if one comes soon, else any fenced write.
    let straggler = proxy.holdNextWrite(
      (client, _op, touches, fenced) => client.startsWith(code) && fenced && touches.some((k) => k === 'stage' || k === 'rollout'),
    );
    let caught = await Promise.race([straggler.caught, this.pause(4_000).then(() => null)]);
    if (!caught && !this.stopping) {
      straggler.cancel();
      straggler = proxy.holdNextWrite((client, _op, _touches, fenced) => client.startsWith(code) && fenced);
      caught = await Promise.race([straggler.caught, this.pause(2_000).then(() => null)]);
    }
    if (!caught) straggler.cancel();
    else log(`  holding ${caught.client}'s ${caught.op} (a fenced write of ${leader}, epoch ${row?.epoch ?? '?'})`);
    this.d.heals.push(() => straggler.deliver());
    const what = caught
      ? `; ${caught.client}'s fenced ${caught.op} held back, to be delivered ${step.params.straggler === 'after-both' ? `after ${other}'s cut too` : 'when this cut heals'}`
      : '; no fenced write to hold came';
    await this.window(
      { ...step, target: `${leader}→store` },
      () => proxy.hold(code),
      `every request of ${leader} (holding promotion_leader at epoch ${row?.epoch ?? '?'}) held ${step.durationMs} ms${what}`,
    );
    if (step.params.straggler !== 'after-both') straggler.deliver();
    if (!this.stopping)
      await this.window(
        { ...step, target: `${other}→store` },
        () => proxy.hold(`${stackCode(other)}.`),
        `every request of ${other} held ${step.durationMs} ms`,
      );
    straggler.deliver();
  }

  /** The slot's live worker, or another live one of its run; waits a little for one (a run still being created, a worker replaced). */
  private async slot(step: FaultStep): Promise<Slot | null> {
    const run = step.target.split('/')[0]!;
    for (let waited = 0; ; waited += 250) {
      const live = this.d.fleet.live().filter((s) => s.run === run);
      if (live.length) return live.find((s) => s.key === step.target) ?? live[0]!;
      if (waited >= 5_000 || this.stopping) return null;
      await this.pause(250);
    }
  }

  /** The EC2 Spot interruption warning, put on the default bus as AWS itself delivers it. */
  private notice(instanceId: string, time: Date): Promise<boolean> {
    return this.d.putEvents(
      [
        {
          Source: 'aws.ec2',
          DetailType: SPOT_INTERRUPTION,
          Time: time,
          Resources: [`arn:aws:ec2:us-east-1:000000000000:instance/${instanceId}`],
          Detail: JSON.stringify({ 'instance-id': instanceId, 'instance-action': 'terminate' }),
        },
      ],
      { client: 'ec2', kind: 'notice.spot', target: instanceId },
    );
  }

  /** A fault in force for step.durationMs (or until the faults phase ends, whichever is first). */
  private async window(step: FaultStep, start: () => () => void, detail = step.detail): Promise<void> {
    const f = this.d.rec.fault(step.kind, step.target, detail);
    const undo = start();
    let undone = false;
    const heal = () => {
      if (undone) return;
      undone = true;
      undo();
      f.endAt = this.d.now();
    };
    this.d.heals.push(heal);
    await this.pause(step.durationMs);
    heal();
  }

  private applyStoreFaults(): void {
    const f: StoreFaults = {
      throttle: Math.max(0, ...this.windows.filter((w) => w.kind === 'throttle').map((w) => w.p)),
      conflict: Math.max(0, ...this.windows.filter((w) => w.kind === 'conflict').map((w) => w.p)),
    };
    this.d.proxy.setFaults(f);
  }

  /** A sandbox of the target function dies: at its next write (which then commits or not), or by timing out. */
  private async killInvocation(step: FaultStep): Promise<void> {
    const { rec, proxy, now, log } = this.d;
    const fn = this.d.pools.get(step.target)!;
    const mode = String(step.params.mode);
    if (mode === 'timeout') {
      this.d.timeoutNext.set(step.target, { afterMs: Number(step.params.afterMs), step });
      this.d.heals.push(() => void this.d.timeoutNext.delete(step.target));
      return;
    }
    const fate: MidWriteFate = mode === 'mid-write-commit' ? 'commit' : 'drop';
    const prefix = `${fn.o.appPrefix}.`;
    const caught = proxy.killOnNextWrite(
      // A write that changes state the history follows (a lease, a rollout, a stage, a work item).
      (client, _op, touches) => client.startsWith(prefix) && touches.some((k) => k !== 'other'),
      async (client) => {
        const record = rec.fault('invoke-killed', `${step.target}:${client}`, step.detail);
        // Dead before its write goes on (or is lost): the write outlives the process that made it.
        await fn.kill(client);
        record.endAt = now();
        return fate;
      },
    );
    this.d.heals.push(() => proxy.disarm());
    const got = await Promise.race([caught, this.pause(4_000).then(() => null)]);
    if (!got) {
      proxy.disarm();
      // A function with nothing to write (the other stack coordinates every run) dies by a time-out instead.
      if (!this.stopping)
        this.d.timeoutNext.set(step.target, {
          afterMs: Number(step.params.afterMs),
          step: { ...step, detail: `made no write within 4 s: its next invocation times out after ${String(step.params.afterMs)} ms` },
        });
      log(`  ${step.target} made no write within 4 s; its next invocation times out instead`);
      return;
    }
    log(`  killed ${got.client} at its ${got.op}; the write ${got.fate === 'commit' ? 'committed' : 'was lost'}`);
  }
}
