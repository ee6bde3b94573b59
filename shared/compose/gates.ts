import { CloudWatchAlarmProvider, CloudWatchMetricProvider, cloudWatchClients, type CloudWatchClients } from '../adapters/cloudwatch/providers.js';
import { PrometheusProvider, type PrometheusProviderOptions } from '../adapters/prometheus/provider.js';
import type { GateProviders } from '../rollout/gate-reader.js';

/**
 * Every kind of provider gate, read with the process's own network and AWS
 * identity: a Prometheus it can reach (credentials from the environment
 * variables a gate names; SigV4 from the usual AWS chain), CloudWatch in the
 * gate's region or the process's own. Clients are made on first use, so a
 * process whose rollouts have no such gate never opens one.
 */
export function defaultGateProviders(o: { readonly prometheus?: PrometheusProviderOptions; readonly cloudwatch?: CloudWatchClients } = {}): GateProviders {
  const clients = o.cloudwatch ?? cloudWatchClients();
  return {
    prometheus: new PrometheusProvider(o.prometheus),
    cloudwatchAlarm: new CloudWatchAlarmProvider(clients),
    cloudwatchMetric: new CloudWatchMetricProvider(clients),
  };
}
