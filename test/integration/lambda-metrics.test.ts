/**
 * The Lambdas' EMF under the names a node's /metrics gives the same metrics
 * (shared/api/metrics.ts): the real handlers, wired from the environment to
 * DynamoDB Local, with a gate read from a real Prometheus; the EMF blobs are
 * what Powertools Metrics writes to stdout, captured and parsed as
 * CloudWatch would.
 */
import { CreateQueueCommand, DeleteQueueCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { batchPromoterHandler } from '../../functions/batch-promoter.js';
import { coordinatorHandler } from '../../functions/coordinator.js';
import { runtimeFrom, type Runtime } from '../../functions/runtime.js';
import { streamingPromoterHandler } from '../../functions/streaming-promoter.js';
import { ACTUATION_METRICS, JUDGED_GATE_METRICS, METRICS, METRICS_NAMESPACE, ROLLOUT_METRICS, rolloutSamples } from '../../shared/api/metrics.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { steal } from '../../shared/lease/transitions.js';
import { rolloutGauges } from '../../tools/cost/metrics.js';
import { operateMetrics } from '../../shared/runtimes/node/operate-metrics.js';
import type { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { dynamoTable, uniqueName } from '../support/backends.js';
import { startPrometheus, type PrometheusServer } from '../support/prometheus.js';

interface Blob {
  readonly _aws: {
    readonly Timestamp: number;
    readonly CloudWatchMetrics: readonly {
      readonly Namespace: string;
      readonly Dimensions: readonly (readonly string[])[];
      readonly Metrics: readonly { readonly Name: string; readonly Unit: string }[];
    }[];
  };
  readonly [key: string]: unknown;
}

/** Every EMF blob written to stdout while it is on; other output passes through. */
function captureEmf() {
  const blobs: Blob[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (chunk: string | Uint8Array, ...rest: unknown[]) => {
    for (const line of String(chunk).split('\n')) {
      if (!line.startsWith('{"_aws"')) continue;
      blobs.push(JSON.parse(line) as Blob);
      return true;
    }
    return write(chunk, ...(rest as []));
  };
  return { blobs, stop: () => void (process.stdout.write = write) };
}

/** Each metric of each blob, with the blob's dimensions (name → value) and its value. */
function samples(blobs: readonly Blob[]) {
  return blobs.flatMap((b) =>
    b._aws.CloudWatchMetrics.flatMap((d) =>
      d.Metrics.map((m) => ({
        namespace: d.Namespace,
        name: m.Name,
        unit: m.Unit,
        dimensionSets: d.Dimensions,
        dimensions: Object.fromEntries((d.Dimensions[0] ?? []).map((k) => [k, b[k]])),
        value: b[m.Name] as number,
        blob: b,
      })),
    ),
  );
}

/** The metric names a node's /metrics registers (collected or not): the Prometheus side of the comparison. */
function prometheusNames(): Set<string> {
  const registry = new Registry();
  const follower = { state: 'follower', bus: new InProcessBus(), deadLetters: () => 0, logger: { warn: () => undefined } } as unknown as ControlPlaneNode;
  operateMetrics(follower, registry);
  return new Set(registry.getMetricsAsArray().map((m) => m.name));
}

const silent = () => new Logger({ logLevel: 'CRITICAL' });

describe('the Lambdas publish EMF under the Prometheus names (DynamoDB)', () => {
  let prometheus: PrometheusServer;
  let runtime: Runtime;
  let close: () => Promise<void>;
  let emf: ReturnType<typeof captureEmf>;
  const disabled = process.env.POWERTOOLS_METRICS_DISABLED;

  beforeAll(async () => {
    prometheus = await startPrometheus({ targets: [] });
    const t = await dynamoTable();
    close = () => t.close();
    runtime = await runtimeFrom(
      {
        ROLLOUT_STORE: 'dynamodb',
        ROLLOUT_TABLE: t.table,
        ROLLOUT_NODE_ID: 'stack-a/eu-west-1',
        ROLLOUT_TICK_INTERVAL_MS: '40',
        ROLLOUT_OUTBOUND: JSON.stringify({ origins: [prometheus.url] }),
      },
      { bus: new InProcessBus() },
    );
  });
  afterAll(async () => {
    await close?.();
    await prometheus?.stop();
  });
  // Metrics read the switch when they are made: every handler below is made after this.
  beforeEach(() => {
    process.env.POWERTOOLS_METRICS_DISABLED = 'false';
    emf = captureEmf();
  });
  afterEach(() => {
    emf.stop();
    if (disabled === undefined) delete process.env.POWERTOOLS_METRICS_DISABLED;
    else process.env.POWERTOOLS_METRICS_DISABLED = disabled;
  });

  it("the batch promoter, leading, publishes each running rollout's gauges with dimension rollout (and gate), the same names and values a node's /metrics has; transitions as rollout_events_total by type; its series stop when the rollout ends", async () => {
    const gate = {
      type: 'prometheus',
      name: 'error-rate',
      address: prometheus.url,
      query: 'vector(0.004)',
      comparison: '<',
      threshold: 0.05,
      intervalSeconds: 1,
    };
    const spec = {
      target: { service: 'checkout', version: 'v2', stableVersion: 'v1' },
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [gate] } },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    };
    const { id } = await createRollout(runtime.engine, { spec, actor: 'alice' });
    const handler = batchPromoterHandler(() => Promise.resolve(runtime), silent(), new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' }));
    const oneTick = { getRemainingTimeInMillis: () => 0 };
    // The first invocation activates the canary; the second reads its gate from Prometheus.
    expect(await handler({}, oneTick)).toMatchObject({ leader: true, transitions: 1 });
    const first = samples(emf.blobs.splice(0));
    expect(first.filter((s) => s.name === 'rollout_events_total').map((s) => [s.dimensions, s.value, s.dimensionSets])).toEqual([
      [{ type: 'ai.rollout.stage_activated' }, 1, [['type']]],
    ]);
    expect(await handler({}, oneTick)).toMatchObject({ leader: true, transitions: 0 });
    const view = (await runtime.stores.rollouts.load(id))!;
    const published = samples(emf.blobs.splice(0));
    const emitted = published.filter((s) => s.name.startsWith('rollout_'));

    // Every per-rollout gauge the node has for this rollout (no targets and no judged gate: none of theirs), under the node's name, in the Rollout namespace.
    const notHere: readonly string[] = [...ACTUATION_METRICS, ...JUDGED_GATE_METRICS];
    expect(new Set(emitted.map((s) => s.name))).toEqual(new Set(ROLLOUT_METRICS.filter((n) => !notHere.includes(n))));
    const onNode = prometheusNames();
    for (const s of emitted) expect(onNode, s.name).toContain(s.name);
    for (const s of emitted) expect(s.namespace).toBe(METRICS_NAMESPACE);

    // Dimensions: the rollout, the gate where Prometheus has one, the reading outcome; one set per blob, no service.
    const one = (name: string, where: Record<string, string> = {}) => {
      const found = emitted.filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.dimensions[k] === v));
      expect(found, `${name} ${JSON.stringify(where)}`).toHaveLength(1);
      return found[0]!;
    };
    for (const s of emitted) {
      expect(s.dimensionSets, s.name).toEqual([[...METRICS[s.name as keyof typeof METRICS].dimensions]]);
      expect(s.dimensions.rollout).toBe(id);
    }
    expect(one('rollout_percent').value).toBe(10);
    expect(one('rollout_percent').unit).toBe('Percent');
    expect(one('rollout_stage_index')).toMatchObject({ value: 0, blob: { stage: 'canary' } });
    expect(one('rollout_info')).toMatchObject({ value: 1, blob: { service: 'checkout', new_version: 'v2', stable_version: 'v1', state: 'running' } });
    expect(one('rollout_gate_value', { gate: 'error-rate' })).toMatchObject({ value: 0.004, blob: { type: 'prometheus' } });
    expect(one('rollout_gate_threshold', { gate: 'error-rate' })).toMatchObject({ value: 0.05, blob: { type: 'prometheus', comparison: '<' } });
    expect(one('rollout_gate_readings', { gate: 'error-rate', outcome: 'pass' }).value).toBe(1);
    expect(one('rollout_gate_readings', { gate: 'error-rate', outcome: 'fail' }).value).toBe(0);
    expect(one('rollout_gate_readings', { gate: 'error-rate', outcome: 'inconclusive' }).value).toBe(0);

    // The values are the node's: the one function both compute them with, over the store's view (time in stage moves on).
    const expected = rolloutSamples(view, [], Date.now()).filter((f) => f.name !== 'rollout_stage_seconds');
    for (const f of expected) {
      const dims = Object.fromEntries(METRICS[f.name].dimensions.map((d) => [d, f.labels[d]!]));
      expect(one(f.name, dims).value, `${f.name} ${JSON.stringify(dims)}`).toBe(f.value);
    }
    expect(one('rollout_stage_seconds').value).toBeGreaterThanOrEqual(0);

    // What the cost model prices for a running rollout with one provider gate: its metrics, and the blobs they take.
    expect(new Set(emitted.map((s) => `${s.name} ${JSON.stringify(s.dimensions)}`)).size).toBe(rolloutGauges(1).metrics);
    expect(new Set(emitted.map((s) => s.blob)).size).toBe(rolloutGauges(1).blobs);

    // The function's own CamelCase metrics keep their service dimension, in a blob of their own.
    const tick = published.find((s) => s.name === 'TickMs')!;
    expect(tick.dimensions).toEqual({ service: 'batch-promoter' });

    // Aborted, the rollout has no gauges from the next invocation on; the abort is counted by type.
    const token = (await runtime.leadership())!;
    await runCommand(runtime.engine, token, { rolloutId: id, command: 'abort', actor: 'alice', reason: 'test' });
    await handler({}, oneTick);
    const after = samples(emf.blobs.splice(0));
    expect(after.filter((s) => (ROLLOUT_METRICS as readonly string[]).includes(s.name))).toEqual([]);
  });

  it('the streaming promoter counts the transitions it made as rollout_events_total, by type', async () => {
    const handler = streamingPromoterHandler(
      () => Promise.resolve(runtime),
      silent(),
      new Metrics({ namespace: 'Rollout', serviceName: 'streaming-promoter' }),
    );
    const spec = {
      target: { service: 'cart', version: 'v3' },
      stages: [
        { name: 'canary', percent: 5, bakeSeconds: 0, gates: { minRequests: 10 } },
        { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
      ],
    };
    const { id } = await createRollout(runtime.engine, { spec, actor: 'alice' });
    const envelope = (detailType: string, detail: object) => ({ version: '0', id: 'e1', source: 'rollout.signals', 'detail-type': detailType, detail });
    await handler(envelope('rollout.created', { rolloutId: id }));
    await handler(envelope('rollout.metrics_reported', { rolloutId: id, stage: 'canary', requests: 50, errors: 0, observedAt: new Date().toISOString() }));
    const counted = samples(emf.blobs)
      .filter((s) => s.name === 'rollout_events_total')
      .map((s) => `${String(s.dimensions.type)}=${s.value}`);
    expect(counted).toEqual(['ai.rollout.stage_activated=1', 'ai.rollout.stage_promoted=1']);
  });

  it("the coordinator's scan counts rollout_dead_letters_total as it drains the work DLQ (no dimension); the coordinator counts rollout_run_steals by run", async () => {
    const { ledger } = runtime.stores;
    const runId = uniqueName('run');
    await ledger.createRun(runId, {}, Date.now());
    const [poison] = (await ledger.enqueue(runId, [{ poison: 1 }], Date.now())).ids;
    const sqs = sqsClient();
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q') }))).QueueUrl!;
    const dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('dlq') }))).QueueUrl!;
    try {
      await sqs.send(new SendMessageCommand({ QueueUrl: dlqUrl, MessageBody: JSON.stringify({ runId, itemId: poison }) }));
      const scan = coordinatorHandler(
        () => Promise.resolve(runtime),
        { bus: new InProcessBus(), queue: () => new SqsWorkQueue(sqs, url), onFenced: () => undefined, deadLetters: { sqs, queueUrl: dlqUrl }, activity: null },
        silent(),
        new Metrics({ namespace: 'Rollout', serviceName: 'coordinator' }),
      );
      await scan({ action: 'scan-all' });
      expect((await ledger.get(runId, poison!))!.state).toBe('failed');
      const dead = samples(emf.blobs.splice(0)).filter((s) => s.name === 'rollout_dead_letters_total');
      expect(dead.map((s) => [s.dimensionSets, s.value])).toEqual([[[[]], 1]]);

      // A silent worker holds 4 items; an idle one asks the coordinator for work.
      const queue = new SqsWorkQueue(sqs, url);
      const { ids } = await ledger.enqueue(
        runId,
        Array.from({ length: 4 }, (_, i) => ({ i })),
        Date.now(),
      );
      await queue.send(runId, ids);
      const victim = new Worker({ runId, workerId: 'victim', ledger, queue, backend: mockBackend(), waitSeconds: 0 });
      while (victim.held.length < 4) expect(await victim.pull()).toBeGreaterThan(0);
      const coordinator = coordinatorHandler(
        () => Promise.resolve(runtime),
        { bus: new InProcessBus(), queue: () => queue, onFenced: () => undefined },
        silent(),
        new Metrics({ namespace: 'Rollout', serviceName: 'coordinator' }),
      );
      const reply = await coordinator({ action: 'steal', runId, workerId: 'thief' });
      const stolen = 'notice' in reply ? reply.notice.items.length : 0;
      expect(stolen).toBeGreaterThan(0);
      const steals = samples(emf.blobs.splice(0)).filter((s) => s.name === 'rollout_run_steals');
      expect(steals.map((s) => [s.dimensionSets, s.dimensions, s.value])).toEqual([[[['run']], { run: runId }, stolen]]);
      expect(prometheusNames()).toContain('rollout_run_steals');
    } finally {
      for (const q of [url, dlqUrl]) await sqs.send(new DeleteQueueCommand({ QueueUrl: q }));
      sqs.destroy();
    }
  });

  it('last: a promoter that could not renew while leading adds to LeasesLost, one count of the whole stack with no dimension (one alarm metric)', async () => {
    const handler = batchPromoterHandler(() => Promise.resolve(runtime), silent(), new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' }));
    // A rollout runs, so the invocation ticks (and renews) rather than ending idle.
    await createRollout(runtime.engine, {
      spec: { target: { service: 'search', version: 'v9' }, stages: [{ name: 'all', percent: 100, bakeSeconds: 3_600 }] },
      actor: 'alice',
    });
    expect(await runtime.leadership()).not.toBeNull();
    // Another stack takes the row, as if this one had been partitioned past its expiry.
    const row = (await runtime.stores.leases.read('promotion_leader'))!;
    expect((await runtime.stores.leases.compareAndSwap(row, steal(row, 'stack-b/us-east-1', row.expiresAt + 1, 30_000))).ok).toBe(true);
    expect(await handler({}, { getRemainingTimeInMillis: () => 0 })).toMatchObject({ leader: false });
    const published = samples(emf.blobs.splice(0));
    expect(published.filter((s) => s.name === 'LeasesLost').map((s) => [s.dimensionSets, s.value])).toEqual([[[[]], 1]]);
    expect(published.find((s) => s.name === 'LeaseRenewalFailures')).toMatchObject({ dimensions: { service: 'batch-promoter' }, value: 1 });
  });
});
