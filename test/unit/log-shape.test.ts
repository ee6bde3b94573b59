import { describe, expect, it } from 'vitest';
import { lambdaLogger } from '../../functions/log.js';
import { CORRELATION_FIELDS, lineLogger } from '../../shared/log.js';

/** What every line must carry, in this order, then the correlation fields that apply. */
const SHAPE = ['time', 'level', 'service', 'message'];

function capture(run: () => void): string[] {
  const out: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (chunk: string | Uint8Array) => {
    out.push(chunk.toString());
    return true;
  };
  try {
    run();
  } finally {
    process.stdout.write = write;
  }
  return out.join('').trim().split('\n').filter(Boolean);
}

describe('one log shape on nodes, workers and Lambdas', () => {
  it('nodes and workers: time, level, service, message first, then rolloutId, runId, requestId, leaseEpoch, then the rest', () => {
    const lines: string[] = [];
    const logger = lineLogger({ service: 'rollout-node', write: (l) => lines.push(l), fields: { nodeId: 'n1', runId: 'r-1' } });
    logger.warn('leadership lost', { reason: 'expired', leaseEpoch: 7, rolloutId: 'ro-1', requestId: 'q-1' });
    logger.debug('not written unless asked');
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(Object.keys(line)).toEqual([...SHAPE, ...CORRELATION_FIELDS, 'nodeId', 'reason']);
    expect(line).toMatchObject({
      level: 'warn',
      service: 'rollout-node',
      message: 'leadership lost',
      rolloutId: 'ro-1',
      runId: 'r-1',
      requestId: 'q-1',
      leaseEpoch: 7,
      nodeId: 'n1',
    });
    expect(new Date(line.time as string).toISOString()).toBe(line.time);
  });

  it('readable lines keep the fields after the message', () => {
    const lines: string[] = [];
    lineLogger({ service: 'rollout-worker', write: (l) => lines.push(l), human: true }).error('step failed', { runId: 'r-2', error: 'boom' });
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\S+ error step failed \{"runId":"r-2","error":"boom"\}\n$/);
  });

  it("Lambdas: Powertools writes the same keys, with the invocation's request id as requestId", () => {
    const logger = lambdaLogger('batch-promoter');
    logger.addContext({
      awsRequestId: 'req-9',
      functionName: 'BatchPromoter',
      memoryLimitInMB: '512',
      functionVersion: '$LATEST',
      invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:BatchPromoter',
      callbackWaitsForEmptyEventLoop: true,
      logGroupName: 'g',
      logStreamName: 's',
      getRemainingTimeInMillis: () => 1000,
      done: () => undefined,
      fail: () => undefined,
      succeed: () => undefined,
    });
    const lines = capture(() => logger.info('rollout promoted', { rolloutId: 'ro-2', leaseEpoch: 3, transitions: 1 }));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(Object.keys(line).slice(0, SHAPE.length)).toEqual(SHAPE);
    expect(line).toMatchObject({
      level: 'info',
      service: 'batch-promoter',
      message: 'rollout promoted',
      rolloutId: 'ro-2',
      requestId: 'req-9',
      leaseEpoch: 3,
      functionName: 'BatchPromoter',
      transitions: 1,
    });
    expect(Object.keys(line).slice(SHAPE.length, SHAPE.length + 3)).toEqual(['rolloutId', 'requestId', 'leaseEpoch']);
    expect(new Date(line.time as string).toISOString()).toBe(line.time);
  });
});
