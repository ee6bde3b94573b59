import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { Actuator } from '../actuation/port.js';
import type { TargetsConfig } from '../actuation/targets.js';
import { OutboundHttp } from '../adapters/http/outbound.js';
import { WebhookActuator } from '../adapters/actuators/webhook/actuator.js';
import { AlbWeightsActuator } from '../adapters/actuators/alb-weights/actuator.js';
import { LambdaAliasActuator } from '../adapters/actuators/lambda-alias/actuator.js';
import { NginxActuator } from '../adapters/actuators/nginx/actuator.js';
import { OutboundPolicy } from '../outbound/policy.js';
import type { SecretSource } from '../outbound/secrets.js';

/**
 * The operator's targets as actuators. AWS clients are the SDK's defaults
 * (credentials from the process's identity; endpoints from
 * AWS_ENDPOINT_URL_LAMBDA / AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2 when
 * set, so an emulator or LocalStack can stand in), one per region. Webhook
 * targets are reached under the operator's outbound policy, with its
 * credentials' secrets from `secrets`.
 */
export function actuatorsFor(targets: TargetsConfig, o: { readonly outbound?: OutboundPolicy; readonly secrets?: SecretSource } = {}): Map<string, Actuator> {
  let outbound: OutboundHttp | undefined;
  const elbv2 = new Map<string, ElasticLoadBalancingV2Client>();
  const elbv2In = (region: string | undefined) => {
    const key = region ?? '';
    let client = elbv2.get(key);
    if (!client) elbv2.set(key, (client = new ElasticLoadBalancingV2Client(region ? { region } : {})));
    return client;
  };
  const out = new Map<string, Actuator>();
  for (const [name, t] of Object.entries(targets)) {
    switch (t.type) {
      case 'nginx':
        out.set(name, new NginxActuator(name, t));
        break;
      case 'lambdaAlias':
        out.set(name, new LambdaAliasActuator(name, t));
        break;
      case 'albWeights':
        out.set(name, new AlbWeightsActuator(name, t, elbv2In(t.region)));
        break;
      case 'webhook':
        outbound ??= new OutboundHttp(o.outbound ?? OutboundPolicy.none());
        out.set(name, new WebhookActuator(name, t, { outbound, ...(o.secrets ? { secrets: o.secrets } : {}) }));
        break;
    }
  }
  return out;
}
