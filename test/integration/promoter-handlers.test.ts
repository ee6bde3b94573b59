/**
 * The Lambda handlers, called as Lambda calls them, wired from the
 * environment to real stores. EventBridge is replaced by the in-process bus
 * here (the AWS issue brings an EventBridge emulator).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchPromoterHandler } from '../../functions/batch-promoter.js';
import { runtimeFrom, type Runtime } from '../../functions/runtime.js';
import { streamingPromoterHandler } from '../../functions/streaming-promoter.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { steal } from '../../shared/lease/transitions.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { dynamoTable, postgresSchema } from '../support/backends.js';

const SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 0, gates: { minRequests: 10, maxErrorRate: 0.05 } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
  ],
};

function capturingLogger(service: string) {
  const logger = new Logger({ serviceName: service, logLevel: 'CRITICAL' });
  const errors: { message: string; extra: unknown[] }[] = [];
  const original = logger.error.bind(logger);
  logger.error = (message: unknown, ...extra: unknown[]) => {
    errors.push({ message: String(message), extra });
    original(message as string, ...(extra as []));
  };
  return { logger, errors };
}

describe.each(['postgres', 'dynamodb'] as const)('promoter handlers on %s', (store) => {
  let env: NodeJS.ProcessEnv;
  let bus: InProcessBus;
  let runtime: Runtime;
  let close: () => Promise<void>;
  const envelope = (detailType: string, detail: object) => ({ version: '0', id: 'e1', source: 'rollout.signals', 'detail-type': detailType, detail });

  beforeAll(async () => {
    bus = new InProcessBus();
    if (store === 'postgres') {
      const db = await postgresSchema(2);
      const url = new URL(db.url);
      url.searchParams.set('options', `-c search_path=${db.schema}`);
      env = { ROLLOUT_STORE: 'postgres', DATABASE_URL: url.toString(), ROLLOUT_NODE_ID: 'stack-a/eu-west-1', ROLLOUT_TICK_INTERVAL_MS: '40' };
      close = () => db.close();
    } else {
      const t = await dynamoTable();
      env = { ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: t.table, ROLLOUT_NODE_ID: 'stack-a/eu-west-1', ROLLOUT_TICK_INTERVAL_MS: '40' };
      close = () => t.close();
    }
    runtime = await runtimeFrom(env, { bus });
  });
  afterAll(async () => {
    await close?.();
  });

  // First in the file: the store has no rollout yet.
  it('batch: with nothing running an invocation ends at once — no tick, no lease write, no metric; a rollout whose event was lost is caught up by the next one, which ticks while it runs and stops when it ends', async () => {
    const metrics = new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' });
    const published: string[] = [];
    const publish = metrics.publishStoredMetrics.bind(metrics);
    metrics.publishStoredMetrics = () => {
      published.push('published');
      return publish();
    };
    // Time enough for many ticks: what ends the invocation here is having nothing left to tick for.
    const context = { getRemainingTimeInMillis: () => 10 * runtime.env.ROLLOUT_TICK_INTERVAL_MS };
    const handler = batchPromoterHandler(() => Promise.resolve(runtime), new Logger({ logLevel: 'CRITICAL' }), metrics);
    const before = await runtime.stores.leases.read('promotion_leader');
    expect(await handler({}, context)).toEqual({ ticks: 0, transitions: 0, leader: false, idle: true });
    expect(await runtime.stores.leases.read('promotion_leader')).toEqual(before);
    expect(published).toEqual([]);

    // A rollout starts and its rollout.created never reaches the StreamingPromoter: the next invocation activates it,
    // ticks while it runs (here it completes: no bake, no gates) and ends once nothing runs, with time still left.
    const { id } = await createRollout(runtime.engine, {
      spec: {
        target: SPEC.target,
        stages: [
          { name: 'canary', percent: 10, bakeSeconds: 0 },
          { name: 'all', percent: 100, bakeSeconds: 0 },
        ],
      },
      actor: 'alice',
    });
    const result = await handler({}, context);
    expect(result).toMatchObject({ idle: false, leader: true, transitions: 3 });
    expect(result.ticks).toBe(1);
    expect((await runtime.stores.rollouts.load(id))!.rollout.state).toBe('completed');
    expect(published).toEqual(['published']);
    expect(await handler({}, context)).toMatchObject({ idle: true });
  });

  it('batch: idle, a rollout that ended longer ago than ROLLOUT_RETAIN_ROLLOUTS_DAYS is deleted by the next invocation', async () => {
    // A retention of about 0.5 s, so the test does not wait days: the same code path as 90 days.
    const short = await runtimeFrom({ ...env, ROLLOUT_RETAIN_ROLLOUTS_DAYS: String(500 / 86_400_000) }, { bus });
    const context = { getRemainingTimeInMillis: () => 10 * short.env.ROLLOUT_TICK_INTERVAL_MS };
    const handler = batchPromoterHandler(() => Promise.resolve(short), new Logger({ logLevel: 'CRITICAL' }));
    const { id } = await createRollout(short.engine, {
      spec: { target: SPEC.target, stages: [{ name: 'all', percent: 100, bakeSeconds: 0 }] },
      actor: 'alice',
    });
    // Activated and completed by this invocation (read from its answer: the rollout may already be gone past the short retention).
    expect(await handler({}, context)).toMatchObject({ idle: false, transitions: 2 });
    await expect
      .poll(
        async () => {
          expect(await handler({}, context)).toMatchObject({ idle: true });
          return short.stores.rollouts.load(id);
        },
        { interval: 50, timeout: 30_000 },
      )
      .toBeNull();
    expect(await short.stores.rollouts.events(id)).toEqual([]);
  });

  it('streaming: a metrics event arriving through EventBridge promotes the stage', async () => {
    const handler = streamingPromoterHandler(() => Promise.resolve(runtime), new Logger({ logLevel: 'CRITICAL' }));
    const { id } = await createRollout(runtime.engine, { spec: SPEC, actor: 'alice' });
    await handler(envelope('rollout.created', { rolloutId: id }));
    const result = await handler(
      envelope('rollout.metrics_reported', { rolloutId: id, stage: 'canary', requests: 50, errors: 0, observedAt: new Date().toISOString() }),
    );
    expect(result).toMatchObject({ stored: 'stored', evaluated: true });
    expect(result.actions.map((a) => a.transition)).toEqual(['promote']);
    expect(bus.history.filter((e) => (e.detail as { rolloutId: string }).rolloutId === id).map((e) => e.detailType)).toEqual([
      'ai.rollout.stage_activated',
      'ai.rollout.stage_promoted',
    ]);
  });

  it('streaming: an invalid event is logged with its reason and fails the invocation (the rule’s DLQ keeps it)', async () => {
    const { logger, errors } = capturingLogger('streaming-promoter');
    const handler = streamingPromoterHandler(() => Promise.resolve(runtime), logger);
    await expect(handler(envelope('rollout.metrics_reported', { rolloutId: 'r', stage: 0, requests: 5, errors: 9, observedAt: 1 }))).rejects.toThrow(
      /errors: must not exceed requests/,
    );
    await expect(handler({ detail: {} })).rejects.toThrow(/detail-type/);
    await expect(handler(envelope('rollout.unknown', {}))).rejects.toThrow(/type/);
    expect(errors.map((e) => e.message)).toEqual(['rejected rollout event', 'rejected rollout event', 'rejected rollout event']);
    expect(JSON.stringify(errors[0]!.extra)).toMatch(/errors: must not exceed requests/);
  });

  it('streaming: a reading stamped in the future is refused naming observedAt, logged as a rejected event (the rule’s DLQ keeps it), and not stored', async () => {
    const { logger, errors } = capturingLogger('streaming-promoter');
    const handler = streamingPromoterHandler(() => Promise.resolve(runtime), logger);
    const { id } = await createRollout(runtime.engine, { spec: SPEC, actor: 'alice' });
    await handler(envelope('rollout.created', { rolloutId: id }));
    await expect(
      handler(envelope('rollout.metrics_reported', { rolloutId: id, stage: 'canary', requests: 50, errors: 0, observedAt: '9999-12-31T00:00:00Z' })),
    ).rejects.toThrow(/observedAt: 9999-12-31T00:00:00\.000Z is later than now \+ 30 s/);
    expect(errors.map((e) => e.message)).toEqual(['rejected rollout event']);
    expect((await runtime.stores.rollouts.load(id))!.metrics.size).toBe(0);
  });

  it('streaming: metrics for an unknown rollout or stage fail the invocation instead of being dropped', async () => {
    const handler = streamingPromoterHandler(() => Promise.resolve(runtime), new Logger({ logLevel: 'CRITICAL' }));
    await expect(handler(envelope('rollout.metrics_reported', { rolloutId: 'ro_missing', stage: 0, requests: 5, errors: 0, observedAt: 1 }))).rejects.toThrow(
      /unknown rollout ro_missing/,
    );
    const { id } = await createRollout(runtime.engine, { spec: SPEC, actor: 'alice' });
    await expect(handler(envelope('rollout.metrics_reported', { rolloutId: id, stage: 'half', requests: 5, errors: 0, observedAt: 1 }))).rejects.toThrow(
      `rollout ${id} has no stage "half"`,
    );
    await expect(handler(envelope('rollout.metrics_reported', { rolloutId: id, stage: 7, requests: 5, errors: 0, observedAt: 1 }))).rejects.toThrow(
      `rollout ${id} has no stage 7`,
    );
  });

  it('batch: one invocation ticks while its remaining time allows another full tick, then stops on its own', async () => {
    const { id } = await createRollout(runtime.engine, { spec: SPEC, actor: 'alice' });
    const interval = runtime.env.ROLLOUT_TICK_INTERVAL_MS;
    // Lambda's remaining time, as a function of the ticks done: room for two more after the first, then none.
    let asked = 0;
    const context = { getRemainingTimeInMillis: () => (++asked < 3 ? 10 * interval : 0) };
    // Each tick starts by asking for leadership: count the ticks, and report stage 0's traffic once it is active.
    let ticks = 0;
    const leadership = async () => {
      if (++ticks > 3) throw new Error(`tick ${ticks}: the invocation went on past its remaining time`);
      if (ticks === 2) await runtime.stores.rollouts.recordMetrics(id, { stage: 0 }, { requests: 50, errors: 0, p99LatencyMs: null, observedAt: Date.now() });
      return runtime.leadership();
    };
    const handler = batchPromoterHandler(() => Promise.resolve({ ...runtime, leadership }), new Logger({ logLevel: 'CRITICAL' }));
    const result = await handler({}, context);
    expect(result).toMatchObject({ ticks: 3, leader: true });
    expect(asked).toBe(3); // it looked at its remaining time after every tick
    expect((await runtime.stores.rollouts.load(id))!.stages.map((s) => s.phase)).toEqual(['promoted', 'active']);
  });

  it('batch: a leader that cannot renew (another stack took the lease) is counted as a renewal failure, for the alarm', async () => {
    const metrics = new Metrics({ namespace: 'Rollout', serviceName: 'batch-promoter' });
    const added: string[] = [];
    const addMetric = metrics.addMetric.bind(metrics);
    metrics.addMetric = (name, unit, value) => {
      added.push(`${name}=${value}`);
      return addMetric(name, unit, value);
    };
    const handler = batchPromoterHandler(() => Promise.resolve(runtime), new Logger({ logLevel: 'CRITICAL' }), metrics);
    expect((await runtime.leadership()) !== null).toBe(true);
    // Another stack takes the row (as if this one had been partitioned past its expiry).
    const row = (await runtime.stores.leases.read('promotion_leader'))!;
    expect((await runtime.stores.leases.compareAndSwap(row, steal(row, 'stack-b/us-east-1', row.expiresAt + 1, 30_000))).ok).toBe(true);
    const result = await handler({}, { getRemainingTimeInMillis: () => 0 });
    expect(result.leader).toBe(false);
    expect(added).toContain('LeaseRenewalFailures=1');
  });

  it('refuses a bad environment with the variable named', async () => {
    await expect(runtimeFrom({ ROLLOUT_STORE: 'mysql' })).rejects.toThrow(/ROLLOUT_STORE/);
    await expect(runtimeFrom({ ROLLOUT_STORE: 'dynamodb' })).rejects.toThrow(/ROLLOUT_TABLE: required/);
    await expect(runtimeFrom({ ROLLOUT_STORE: 'postgres' })).rejects.toThrow(
      /DATABASE_URL or ROLLOUT_DB_SECRET_ARN, or ROLLOUT_DB_USER with ROLLOUT_DB_HOST: one is required/,
    );
  });
});
