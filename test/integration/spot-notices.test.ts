/**
 * The spot-drain Lambda on outside input, over real stores: an instance id
 * that is no EC2 instance id is refused with its reason before it reaches the
 * store, and a notice stamped in the future asks for a drain whose deadline
 * counts from the notice's receipt.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeFrom, type Runtime } from '../../functions/runtime.js';
import { spotDrainHandler } from '../../functions/spot-drain.js';
import { InvalidNoticeError, SPOT_INTERRUPTION } from '../../shared/drain/sources.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { dynamoTable, postgresSchema } from '../support/backends.js';

const ec2InstanceId = () => `i-${randomBytes(9).toString('hex').slice(0, 17)}`;
const spotEvent = (instanceId: string, time: string) => ({
  version: '0',
  id: 'e1',
  'detail-type': SPOT_INTERRUPTION,
  source: 'aws.ec2',
  account: '123456789012',
  time,
  region: 'us-east-1',
  resources: [`arn:aws:ec2:us-east-1:123456789012:instance/${instanceId}`],
  detail: { 'instance-id': instanceId, 'instance-action': 'terminate' },
});

/** The handler with its log lines and metrics captured. */
function captured(rt: Runtime) {
  const log: { level: string; message: string }[] = [];
  const metrics: string[] = [];
  const logger = Object.fromEntries(['debug', 'info', 'warn', 'error'].map((level) => [level, (message: string) => void log.push({ level, message })]));
  const handler = spotDrainHandler(
    () => Promise.resolve(rt),
    logger as never,
    { addMetric: (name: string) => void metrics.push(name), hasStoredMetrics: () => metrics.length > 0, publishStoredMetrics: () => undefined } as never,
  );
  return { handler, log, metrics };
}

describe.each(['postgres', 'dynamodb'] as const)('spot notices through the drain Lambda on %s', (store) => {
  let rt: Runtime;
  let close: () => Promise<void>;
  beforeAll(async () => {
    if (store === 'postgres') {
      const db = await postgresSchema(2);
      const url = new URL(db.url);
      url.searchParams.set('options', `-c search_path=${db.schema}`);
      rt = await runtimeFrom({ ROLLOUT_STORE: 'postgres', DATABASE_URL: url.toString(), ROLLOUT_NODE_ID: 'stack-a' }, { bus: new InProcessBus() });
      close = () => db.close();
    } else {
      const t = await dynamoTable();
      rt = await runtimeFrom({ ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: t.table, ROLLOUT_NODE_ID: 'stack-a' }, { bus: new InProcessBus() });
      close = () => t.close();
    }
  });
  afterAll(async () => {
    await close?.();
  });

  it('an instance id of 5,000 characters is refused with the field named, logged and counted as invalid (the DLQ keeps it), not sent to the store', async () => {
    const { handler, log, metrics } = captured(rt);
    const err = await handler(spotEvent(`i-${'a'.repeat(4_998)}`, new Date().toISOString())).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidNoticeError);
    expect((err as Error).message).toMatch(/detail\.instance-id: not an EC2 instance id \(i- followed by 8 or 17 hex digits\)/);
    expect(log.filter((l) => l.level === 'error').map((l) => l.message)).toEqual(['rejected spot event']);
    expect(metrics).toEqual(['InvalidNotices']);
  });

  it('a notice stamped an hour ahead asks for a drain that counts from its receipt, not from the hour', async () => {
    const instanceId = ec2InstanceId();
    await rt.registry.register({ workerId: 'w1', instanceId, provider: 'aws', runId: 'run-1' }, Date.now());
    const { handler } = captured(rt);
    const before = Date.now();
    expect(await handler(spotEvent(instanceId, new Date(before + 3_600_000).toISOString()))).toMatchObject({ outcome: 'requested', workers: ['w1'] });
    const after = Date.now();
    const [worker] = (await rt.registry.list()).filter((w) => w.instanceId === instanceId);
    expect(worker!.drain!.noticeAt).toBeGreaterThanOrEqual(before);
    expect(worker!.drain!.noticeAt).toBeLessThanOrEqual(after);
  });
});
