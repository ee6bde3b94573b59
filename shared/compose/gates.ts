import { CloudWatchAlarmProvider, CloudWatchMetricProvider, cloudWatchClients, type CloudWatchClients } from '../adapters/cloudwatch/providers.js';
import { OutboundHttp } from '../adapters/http/outbound.js';
import { WebhookProvider } from '../adapters/http/webhook.js';
import { PrometheusProvider, type PrometheusProviderOptions } from '../adapters/prometheus/provider.js';
import { OutboundPolicy } from '../outbound/policy.js';
import type { SecretSource } from '../outbound/secrets.js';
import type { GateProviders } from '../rollout/gate-reader.js';

/**
 * Every kind of provider gate: Prometheus and hooks at the origins the operator
 * allow-listed, with the credentials the operator bound to them (secrets
 * from `secrets`; SigV4 from the usual AWS chain), and CloudWatch in the
 * gate's region or the process's own, with the process's AWS identity.
 * Clients are made on first use, so a process whose rollouts have no such
 * gate never opens one.
 */
export function defaultGateProviders(
  o: {
    readonly outbound?: OutboundPolicy;
    readonly secrets?: SecretSource;
    readonly prometheus?: PrometheusProviderOptions;
    readonly cloudwatch?: CloudWatchClients;
  } = {},
): GateProviders {
  const clients = o.cloudwatch ?? cloudWatchClients();
  const outbound = new OutboundHttp(o.outbound ?? OutboundPolicy.none());
  return {
    prometheus: new PrometheusProvider({ outbound, ...(o.secrets ? { secrets: o.secrets } : {}), ...o.prometheus }),
    cloudwatchAlarm: new CloudWatchAlarmProvider(clients),
    cloudwatchMetric: new CloudWatchMetricProvider(clients),
    webhook: new WebhookProvider({ outbound, ...(o.secrets ? { secrets: o.secrets } : {}) }),
  };
}
