/**
 * The custom metrics the functions publish, as the cost model counts them
 * (CloudWatch bills a custom metric by the hour it has data).
 */
import { METRICS, ROLLOUT_METRICS } from '../../shared/api/metrics.js';

/**
 * The custom metrics each function's code can publish (namespace Rollout,
 * dimension `service`; grep `addMetric` in functions/ and shared/): `busy`
 * have data every hour while rollouts run, `onEvent` only when what they
 * count happens (failures, work runs, Spot notices). An idle invocation
 * publishes none (functions/handler.ts `publishIfAny`). test/infra/cost.test.ts
 * checks this list against the code.
 */
export const METRICS_BY_SERVICE: Readonly<Record<string, { readonly busy: readonly string[]; readonly onEvent: readonly string[] }>> = {
  'streaming-promoter': {
    busy: ['EventsHandled', 'Transitions'],
    onEvent: [
      'NotLeader',
      'InvalidEvents',
      'Errors',
      'Throttled',
      'LeaseRenewalFailures',
      'TransactionConflicts',
      'TransactionRetries',
      'TransactionRetriesExhausted',
    ],
  },
  'batch-promoter': {
    busy: ['TickMs', 'Transitions'],
    onEvent: ['Errors', 'Throttled', 'LeaseRenewalFailures', 'TransactionConflicts', 'TransactionRetries', 'TransactionRetriesExhausted'],
  },
  coordinator: {
    busy: [],
    onEvent: [
      'NotCoordinator',
      'ItemsStolen',
      'ItemsRepended',
      'ItemsFailed',
      'ItemsResent',
      'RunsThrottled',
      'InvalidDeadLetters',
      'DeadLettersDropped',
      'Fenced',
      'RefusedRequests',
      'Errors',
      'Throttled',
    ],
  },
  'spot-drain': { busy: [], onEvent: ['DrainsRequested', 'DuplicateNotices', 'UnknownInstances', 'LateNotices', 'InvalidNotices', 'Errors', 'Throttled'] },
  api: { busy: ['Responses2xx'], onEvent: ['Responses4xx', 'Responses5xx', 'Throttled'] },
};

/** Counts of the whole stack, with no dimension (functions/metrics.ts `StackCount`): only when what they count happens. */
export const STACK_METRICS: readonly string[] = ['LeasesLost', 'RolloutsNeedingAttention'];

/**
 * The gauges the BatchPromoter publishes for one running rollout while it
 * leads (functions/batch-promoter.ts; shared/api/metrics.ts), and the EMF
 * blobs they take: those whose one dimension is the rollout share a blob;
 * each provider gate of the active stage adds its value and threshold (one
 * blob) and its readings by outcome (a blob each). Drift is never among them
 * (a drifted rollout is paused, and paused ones are not published). Priced
 * for threshold gates: a judged gate adds its verdicts (3 series, a blob
 * each) and, for mann-whitney, its interval's two ends (a blob each), less
 * the threshold it does not have.
 */
export function rolloutGauges(providerGates: number): { readonly metrics: number; readonly blobs: number } {
  const rolloutOnly = ROLLOUT_METRICS.filter((n) => METRICS[n].dimensions.join() === 'rollout').length;
  const outcomes = 3;
  return { metrics: rolloutOnly + providerGates * (2 + outcomes), blobs: 1 + providerGates * (1 + outcomes) };
}
