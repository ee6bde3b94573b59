import type { GateProviders } from '../shared/rollout/gate-reader.js';
import { namespaceIssue } from '../shared/rollout/spec.js';

/**
 * The CloudWatch metric reader held to the operator's namespaces: IAM
 * cannot hold GetMetricData to a namespace, so a gate naming another one is
 * answered with an error reading and never sent.
 */
export function namespaceLimited(providers: GateProviders, allowed: readonly string[]): GateProviders {
  const inner = providers.cloudwatchMetric;
  if (!inner) return providers;
  return {
    ...providers,
    cloudwatchMetric: {
      async read(gates, o) {
        const issues = gates.map((g) => namespaceIssue(g, allowed));
        const kept = gates.flatMap((g, i) => (issues[i] ? [] : [{ g, context: o.contexts[i]! }]));
        const read = kept.length
          ? await inner.read(
              kept.map((k) => k.g),
              { ...o, contexts: kept.map((k) => k.context) },
            )
          : [];
        let next = 0;
        return issues.map((issue) => (issue ? { kind: 'error' as const, message: `cloudwatchMetric gate refused: ${issue}`, answer: '' } : read[next++]!));
      },
    },
  };
}
