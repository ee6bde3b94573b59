/**
 * The custom metrics the functions publish, as the cost model counts them
 * (CloudWatch bills a custom metric by the hour it has data). A running
 * rollout's gauges are priced with its gates (gates.ts).
 */

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

export { rolloutGauges } from './gates.js';
