/**
 * A rollout that acts, end to end: two `rollout serve` processes over one
 * PostgreSQL, with three targets declared by the operator: a real nginx
 * splitting real requests, a Lambda alias and an ALB rule on moto (the alias
 * behind the RevisionId proxy, the one part of the emulation that is ours).
 * One rollout moves all three stage by stage, rolls them back on a breaching
 * gate, and, retried, completes them. Waits are on conditions, never sleeps.
 */
import { GetAliasCommand } from '@aws-sdk/client-lambda';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type LocalCluster } from '../../infra/local/cluster.js';
import { startSplitNginx, type SplitNginx } from '../support/split-nginx.js';
import { ALB_REGION, createAlb, rulePercent, type AlbOnMoto } from '../support/actuators/alb-weights.js';
import { setupLambdaAlias, type LambdaAliasUnderTest } from '../support/actuators/lambda-alias.js';
import { rollout as cli } from '../support/cli.js';
import { eventually } from '../support/gate.js';

const moto = process.env.ROLLOUT_MOTO_URL;
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');

const SPEC = {
  target: { service: 'checkout', version: '2', stableVersion: '1', labels: { team: 'payments' } },
  actuators: ['web', 'api', 'edge'],
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 1, gates: { maxErrorRate: 0.05, minRequests: 10 } },
    { name: 'half', percent: 50, bakeSeconds: 1, gates: { maxErrorRate: 0.05, minRequests: 10 } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

describe('a rollout moves nginx, a Lambda alias and an ALB rule through real node processes', () => {
  let nginx: SplitNginx;
  let lambda: LambdaAliasUnderTest;
  let alb: AlbOnMoto;
  let cluster: LocalCluster;

  beforeAll(async () => {
    [nginx, lambda, alb] = await Promise.all([startSplitNginx(), setupLambdaAlias(moto), createAlb(moto)]);
    const dir = mkdtempSync(join(tmpdir(), 'rollout-targets-'));
    const targets = join(dir, 'targets.json');
    writeFileSync(
      targets,
      JSON.stringify({
        web: nginx.target,
        api: { type: 'lambdaAlias', functionName: lambda.functionName, alias: lambda.alias, region: ALB_REGION },
        edge: { type: 'albWeights', ruleArn: alb.ruleArn, stableTargetGroupArn: alb.stable, canaryTargetGroupArn: alb.canary, region: ALB_REGION },
      }),
    );
    cluster = await startCluster({
      nodes: 2,
      env: {
        CLUSTER_LEASE_TTL: '4',
        CLUSTER_HEARTBEAT_INTERVAL: '1.5',
        CLUSTER_ELECTION_INTERVAL: '1',
        CLUSTER_ELECTION_TIMEOUT: '4',
        ROLLOUT_TICK_INTERVAL: '1',
        ROLLOUT_TARGETS_CONFIG: targets,
        // The unmodified SDK clients, pointed at the emulator as at any endpoint.
        AWS_ENDPOINT_URL_LAMBDA: lambda.proxy.url,
        AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2: moto,
        AWS_REGION: ALB_REGION,
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
      },
    });
  }, 180_000);
  afterAll(async () => {
    await cluster?.stop();
    await Promise.all([nginx?.stop(), lambda?.close(), alb?.delete()]);
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${cluster.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const aliasPercent = async () => {
    const a = await lambda.onMoto.send(new GetAliasCommand({ FunctionName: lambda.functionName, Name: lambda.alias }));
    if (a.FunctionVersion === '2' && !Object.keys(a.RoutingConfig?.AdditionalVersionWeights ?? {}).length) return 'final';
    return Math.round((a.RoutingConfig?.AdditionalVersionWeights?.['2'] ?? 0) * 10_000) / 100;
  };
  /** What the three targets carry, once all three carry `want`. */
  const carrying = (want: number | 'final') =>
    eventually(`all three targets at ${want}`, 60_000, async () => {
      const [api, edge, web] = await Promise.all([aliasPercent(), rulePercent(alb.client, alb.ruleArn, alb.canary), nginx.measure(50, `probe-${want}-`)]);
      const edgeNow = edge === 100 && want === 'final' ? 'final' : edge;
      const ok = api === want && edgeNow === want && (want === 'final' ? web === 100 : Math.abs(web - want) <= 25);
      return ok && { api, edge: edgeNow };
    });
  const state = async (id: string) => (await call('GET', `/rollouts/${id}`)).body;
  const metrics = (id: string, stage: number, errors: number, attempt: number) =>
    call('POST', '/events', {
      type: 'rollout.metrics_reported',
      rolloutId: id,
      stage,
      attempt,
      requests: 200,
      errors,
      p99LatencyMs: 50,
      observedAt: Date.now(),
    });

  it('stage by stage, a rollback on a breaching gate, then a retry that completes; what was applied is shown', async () => {
    const created = await call('POST', '/rollouts', { id: 'checkout-2', spec: SPEC });
    expect(created.status).toBe(201);
    const id = 'checkout-2';

    await carrying(10);
    // Through nginx: 2,000 requests, each its own entity, within 3 points of the stage's percent.
    expect(Math.abs((await nginx.measure(2_000)) - 10)).toBeLessThanOrEqual(3);
    const sticky = Array.from({ length: 20 }, (_, i) => `user-${i}`);
    const first = await Promise.all(sticky.map((k) => nginx.ask(k)));
    expect(await Promise.all(sticky.map((k) => nginx.ask(k)))).toEqual(first);

    expect((await metrics(id, 0, 0, 1)).status).toBe(202);
    await carrying(50);
    expect(Math.abs((await nginx.measure(2_000)) - 50)).toBeLessThanOrEqual(3);
    // Growing the percent only adds entities: whoever was on the new version stays there.
    const now = await Promise.all(sticky.map((k) => nginx.ask(k)));
    expect(first.every((v, i) => v === 'stable' || now[i] === 'canary')).toBe(true);

    expect((await metrics(id, 1, 100, 1)).status).toBe(202); // half the requests failing: over the gate
    await eventually('rolled back', 30_000, async () => (await state(id)).state === 'rolled_back');
    await carrying(0);
    expect(await nginx.measure(2_000)).toBe(0);

    const shown = await state(id);
    expect(shown.actuation).toEqual(
      expect.arrayContaining(
        ['web', 'api', 'edge'].map((target) => expect.objectContaining({ target, state: 'converged', percent: 0, stage: null }) as unknown),
      ),
    );
    const got = await cli(['rollouts', 'get', id, '--url', cluster.url]);
    expect(got.out).toMatch(/web\s+nginx\s+converged\s+0%\s+0%/);

    expect((await call('POST', `/rollouts/${id}/retry`, {})).status).toBe(200);
    await carrying(10);
    expect((await metrics(id, 0, 0, 2)).status).toBe(202);
    await carrying(50);
    expect((await metrics(id, 1, 0, 2)).status).toBe(202);
    await eventually('completed', 30_000, async () => (await state(id)).state === 'completed');
    await carrying('final');
    expect(await nginx.measure(2_000)).toBe(100);
    // The alias is finalised on the new version: no split left.
    const alias = await lambda.onMoto.send(new GetAliasCommand({ FunctionName: lambda.functionName, Name: lambda.alias }));
    expect(alias.FunctionVersion).toBe('2');
    expect(alias.Description).toMatch(/^rollout=checkout-2 attempt=2 stage=2 epoch=\d+ percent=100 final=true version=\d+ base=1$/);
  }, 300_000);
});
