import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateRuleCommand,
  CreateTargetGroupCommand,
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DescribeRulesCommand,
  ElasticLoadBalancingV2Client,
  ModifyRuleCommand,
  type Action,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { AlbWeightsActuator } from '../../../shared/adapters/actuators/alb-weights/actuator.js';
import { sigv4Headers } from '../../../shared/adapters/http/sigv4.js';
import type { AlbWeightsTarget } from '../../../shared/actuation/targets.js';
import { uniqueName } from '../backends.js';
import type { ActuatorFixture } from './fixture.js';

/**
 * ALBs on moto for the albWeights actuator. moto wants an ALB's subnets to
 * exist in its EC2: it makes a default VPC (172.31.0.0/16) with one default
 * subnet per availability zone the first time a region's EC2 is touched, and
 * refuses CreateLoadBalancer without subnets or with unknown ones
 * (SubnetNotFound). The subnets are read through EC2's query API, signed,
 * since no EC2 client is among the dependencies.
 */

export const ALB_REGION = 'eu-west-3';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

export function motoElbv2(motoUrl: string, region = ALB_REGION): ElasticLoadBalancingV2Client {
  return new ElasticLoadBalancingV2Client({ region, endpoint: motoUrl, credentials });
}

const subnetsByRegion = new Map<string, Promise<string[]>>();

/** Two default subnets of the region's default VPC, in different zones (an ALB needs two). */
export function defaultSubnets(motoUrl: string, region = ALB_REGION): Promise<string[]> {
  const key = `${motoUrl} ${region}`;
  let found = subnetsByRegion.get(key);
  if (found === undefined) {
    found = (async () => {
      const url = new URL('/', motoUrl);
      const body = new URLSearchParams({
        Action: 'DescribeSubnets',
        Version: '2016-11-15',
        'Filter.1.Name': 'default-for-az',
        'Filter.1.Value.1': 'true',
      }).toString();
      const headers = await sigv4Headers(
        { service: 'ec2', region, credentials: () => Promise.resolve(credentials) },
        { method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body },
      );
      const res = await fetch(url, { method: 'POST', headers, body });
      const text = await res.text();
      if (!res.ok) throw new Error(`EC2 DescribeSubnets on ${motoUrl}: ${res.status} ${text.slice(0, 300)}`);
      const ids = [...text.matchAll(/<subnetId>(subnet-[0-9a-f]+)<\/subnetId>/g)].map((m) => m[1]!);
      if (ids.length < 2) throw new Error(`EC2 DescribeSubnets on ${motoUrl}: ${ids.length} default subnet(s) in ${region}, an ALB needs two`);
      return ids.slice(0, 2);
    })();
    found.catch(() => subnetsByRegion.delete(key));
    subnetsByRegion.set(key, found);
  }
  return found;
}

/** A weighted forward action, as a person would write it. */
export function forwardAction(groups: readonly (readonly [arn: string, weight: number])[], stickySeconds?: number): Action {
  return {
    Type: 'forward',
    ForwardConfig: {
      TargetGroups: groups.map(([TargetGroupArn, Weight]) => ({ TargetGroupArn, Weight })),
      TargetGroupStickinessConfig: stickySeconds !== undefined ? { Enabled: true, DurationSeconds: stickySeconds } : { Enabled: false },
    },
  };
}

export interface AlbOnMoto {
  readonly client: ElasticLoadBalancingV2Client;
  readonly loadBalancerArn: string;
  /** Its default action forwards 100/0 to stable/canary. */
  readonly listenerArn: string;
  /** Priority 10 on `/app/*`, forwarding 100/0 to stable/canary. */
  readonly ruleArn: string;
  readonly stable: string;
  readonly canary: string;
  /** One more target group in the ALB's VPC (deleted with the rest). */
  targetGroup(suffix: string): Promise<string>;
  delete(): Promise<void>;
}

/** A fresh ALB with a stable and a canary target group, a listener and a rule, untagged. */
export async function createAlb(motoUrl: string, region = ALB_REGION): Promise<AlbOnMoto> {
  const client = motoElbv2(motoUrl, region);
  const name = uniqueName('alb');
  const lb = (await client.send(new CreateLoadBalancerCommand({ Name: name, Subnets: await defaultSubnets(motoUrl, region), Type: 'application' })))
    .LoadBalancers?.[0];
  const loadBalancerArn = lb?.LoadBalancerArn;
  if (lb?.VpcId === undefined || loadBalancerArn === undefined) throw new Error('CreateLoadBalancer answered no load balancer');
  const groups: string[] = [];
  const targetGroup = async (suffix: string) => {
    const tg = (await client.send(new CreateTargetGroupCommand({ Name: `${name}-${suffix}`, Protocol: 'HTTP', Port: 80, VpcId: lb.VpcId }))).TargetGroups?.[0]
      ?.TargetGroupArn;
    if (tg === undefined) throw new Error('CreateTargetGroup answered no target group');
    groups.push(tg);
    return tg;
  };
  const remove = async () => {
    // Deleting the load balancer takes its listeners and rules with it; the groups are free after.
    await client.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: loadBalancerArn }));
    for (const tg of groups) await client.send(new DeleteTargetGroupCommand({ TargetGroupArn: tg }));
  };
  try {
    const [stable, canary] = [await targetGroup('stable'), await targetGroup('canary')];
    const rest = forwardAction([
      [stable, 100],
      [canary, 0],
    ]);
    const listenerArn = (await client.send(new CreateListenerCommand({ LoadBalancerArn: loadBalancerArn, Protocol: 'HTTP', Port: 80, DefaultActions: [rest] })))
      .Listeners?.[0]?.ListenerArn;
    if (listenerArn === undefined) throw new Error('CreateListener answered no listener');
    const ruleArn = (
      await client.send(
        new CreateRuleCommand({
          ListenerArn: listenerArn,
          Priority: 10,
          Conditions: [{ Field: 'path-pattern', PathPatternConfig: { Values: ['/app/*'] } }],
          Actions: [rest],
        }),
      )
    ).Rules?.[0]?.RuleArn;
    if (ruleArn === undefined) throw new Error('CreateRule answered no rule');
    return { client, loadBalancerArn, listenerArn, ruleArn, stable, canary, targetGroup, delete: remove };
  } catch (err) {
    await remove().catch(() => undefined);
    throw err;
  }
}

/** The canary's share as the rule's weights state it (an ALB's traffic cannot be measured here). */
export async function rulePercent(client: ElasticLoadBalancingV2Client, ruleArn: string, canary: string): Promise<number> {
  const groups =
    (await client.send(new DescribeRulesCommand({ RuleArns: [ruleArn] }))).Rules?.[0]?.Actions?.find((a) => a.Type === 'forward')?.ForwardConfig
      ?.TargetGroups ?? [];
  const total = groups.reduce((sum, g) => sum + (g.Weight ?? 0), 0);
  const share = groups.filter((g) => g.TargetGroupArn === canary).reduce((sum, g) => sum + (g.Weight ?? 0), 0);
  return total > 0 ? Math.round((share * 10_000) / total) / 100 : 0;
}

/** A person's edit of the rule's weights in the console: out of 100, or 1000 for tenths; everything else on the rule kept. */
export async function tamperRule(client: ElasticLoadBalancingV2Client, ruleArn: string, stable: string, canary: string, percent: number): Promise<void> {
  const actions = (await client.send(new DescribeRulesCommand({ RuleArns: [ruleArn] }))).Rules?.[0]?.Actions ?? [];
  const scale = Number.isInteger(percent) ? 100 : 1000;
  const share = Math.round((percent * scale) / 100);
  const edited = actions.map((a) =>
    a.Type === 'forward'
      ? {
          ...a,
          TargetGroupArn: undefined,
          ForwardConfig: {
            ...a.ForwardConfig,
            TargetGroups: [
              { TargetGroupArn: stable, Weight: scale - share },
              { TargetGroupArn: canary, Weight: share },
            ],
          },
        }
      : a,
  );
  await client.send(new ModifyRuleCommand({ RuleArn: ruleArn, Actions: edited }));
}

export function albWeightsFixture(motoUrl: string): ActuatorFixture {
  return {
    kind: 'albWeights',
    async setup() {
      const alb = await createAlb(motoUrl);
      const config: AlbWeightsTarget = {
        type: 'albWeights',
        ruleArn: alb.ruleArn,
        stableTargetGroupArn: alb.stable,
        canaryTargetGroupArn: alb.canary,
        region: ALB_REGION,
      };
      return {
        actuator: new AlbWeightsActuator('web-alb', config, alb.client),
        newVersion: 'canary',
        measuredPercent: () => rulePercent(alb.client, alb.ruleArn, alb.canary),
        tamper: (percent) => tamperRule(alb.client, alb.ruleArn, alb.stable, alb.canary, percent),
        close: () => alb.delete(),
      };
    },
  };
}
