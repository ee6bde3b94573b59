/**
 * One topology, two runtimes: the CDK stack builds every function of
 * shared/topology.ts with its triggers (test/infra/stack.test.ts), and the
 * local runtime wires the same declaration (shared/runtimes/node/triggers.ts). Here a
 * node on embedded PostgreSQL: every declared trigger is wired, and events
 * reach the function whose rule matches them, as EventBridge would route them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpError } from '../../shared/api/handler.js';
import { SPOT_INTERRUPTION } from '../../shared/drain/sources.js';
import type { HandleResult } from '../../shared/rollout/promoters.js';
import { FUNCTIONS, type Trigger } from '../../shared/topology.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { NoRouteError } from '../../shared/runtimes/node/triggers.js';
import { alarmStateChange } from '../support/cloudwatch/events.js';

describe('the local runtime wires every function of the topology from its triggers', () => {
  let node: ControlPlaneNode;
  beforeAll(async () => {
    node = await ControlPlaneNode.open({ nodeId: 'wiring', store: { kind: 'pglite', dataDir: null }, elector: 'static', port: 0 });
    await node.start();
  });
  afterAll(async () => {
    await node?.stop();
  });

  it('one wiring per function and trigger the topology declares, and nothing else', () => {
    const declared = Object.entries(FUNCTIONS)
      .flatMap(([fn, spec]) => (spec.triggers as readonly Trigger[]).map((t) => `${fn} ${t.kind}`))
      .sort();
    expect(node.triggers.wiring.map((w) => `${w.fn} ${w.trigger}`).sort()).toEqual(declared);
    expect(node.triggers.wiring.find((w) => w.fn === 'streamingPromoter')?.how).toContain('rollout.metrics_reported');
  });

  it('a rollout signal on our bus reaches the StreamingPromoter through the rule, and it promotes', async () => {
    const spec = {
      target: { service: 'svc', version: 'v2' },
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 0, gates: { maxErrorRate: 0.05, minRequests: 10 } },
        { name: 'all', percent: 100, bakeSeconds: 0, gates: { maxErrorRate: 0.05, minRequests: 10 } },
      ],
    };
    const created = await node.triggers.http('api')({ method: 'POST', path: '/rollouts', body: JSON.stringify({ id: 'wired', spec }), actor: 'test' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // A signal's source must say it is one (rollout.*): the bus also carries our own ai.rollout events.
    await expect(node.triggers.route('rollout', { source: 'ai.rollout', 'detail-type': 'rollout.created', detail: { rolloutId: 'wired' } })).rejects.toThrow(
      /no function takes/,
    );
    await node.triggers.route('rollout', { source: 'rollout.test', 'detail-type': 'rollout.created', detail: { rolloutId: 'wired' } });
    const delivered = await node.triggers.route('rollout', {
      source: 'rollout.test',
      'detail-type': 'rollout.metrics_reported',
      detail: { rolloutId: 'wired', stage: 0, requests: 100, errors: 0, observedAt: Date.now() },
    });
    expect(delivered.map((d) => d.fn)).toEqual(['streamingPromoter']);
    const result = delivered[0]!.result as HandleResult;
    expect(result.stored).toBe('stored');
    expect(result.actions.map((a) => a.transition)).toContain('promote');
  });

  it('an EC2 spot notice on the default bus reaches spot drain; an event no rule takes is refused, naming it', async () => {
    const notice = {
      source: 'aws.ec2',
      'detail-type': SPOT_INTERRUPTION,
      time: new Date().toISOString(),
      detail: { 'instance-id': 'i-0123456789abcdef0', 'instance-action': 'terminate' },
    };
    const delivered = await node.triggers.route('default', notice);
    expect(delivered).toEqual([{ fn: 'spotDrain', result: { outcome: 'unknown', workers: [] } }]);
    // Our rule lives on our bus only: the same notice there finds no function.
    await expect(node.triggers.route('rollout', notice)).rejects.toThrow(NoRouteError);
    await expect(node.triggers.route('rollout', { source: 'rollout.test', 'detail-type': 'rollout.unheard_of', detail: {} })).rejects.toThrow(
      /no function takes rollout.test "rollout.unheard_of" on the rollout bus/,
    );
  });

  it('a CloudWatch alarm state change, as AWS puts it on the default bus, reaches the StreamingPromoter and rolls back a stage gated on the alarm', async () => {
    const spec = {
      target: { service: 'svc', version: 'v3' },
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [{ type: 'cloudwatchAlarm', name: 'health', alarms: ['svc-5xx'] }] } },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    };
    const created = await node.triggers.http('api')({ method: 'POST', path: '/rollouts', body: JSON.stringify({ id: 'alarmed', spec }), actor: 'test' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await node.triggers.route('rollout', { source: 'rollout.test', 'detail-type': 'rollout.created', detail: { rolloutId: 'alarmed' } });
    const delivered = await node.triggers.route('default', alarmStateChange('svc-5xx', 'ALARM', new Date().toISOString().replace('Z', '+0000')));
    expect(delivered.map((d) => d.fn)).toEqual(['streamingPromoter']);
    expect((delivered[0]!.result as HandleResult).actions.map((a) => [a.transition, a.applied])).toEqual([['rollback', true]]);
  });

  it('the coordinator is invoked with the request a worker sends; a malformed one is a 400 naming the field', async () => {
    await expect(node.triggers.invoke('coordinator', { action: 'steal', runId: 'no-such-run', workerId: 'w1' })).resolves.toMatchObject({
      leader: expect.any(Boolean) as unknown,
    });
    const bad = node.triggers.invoke('coordinator', { action: 'steal', runId: 'r' });
    await expect(bad).rejects.toThrow(HttpError);
    await expect(bad).rejects.toThrow(/workerId/);
  });
});
