import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import { conflictMetrics, conflictsSince } from '../shared/adapters/dynamodb/conflicts.js';
import { eventsPublishedSince, renewalFailuresSince, type Runtime } from './runtime.js';
import { CatalogueMetrics, countEvents } from './metrics.js';
import { publishIfAny } from './handler.js';

/**
 * What every promoter invocation counts at its end, whatever happened in it:
 * renewals of promotion_leader that failed while this stack led, DynamoDB's
 * fenced writes that conflicted with other processes (other sandboxes,
 * another stack) and were retried, and the rollout events it published
 * (rollout_events_total, by type). Then the metrics are published.
 */
export class PromoterTelemetry {
  private renewalFailures = () => 0;
  // Counted from the end of the last invocation: the handler, and so this object, outlives each one.
  private conflicts = conflictsSince();
  private events = eventsPublishedSince();

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    readonly catalogue = new CatalogueMetrics(),
  ) {}

  /** From now on, count this runtime's failed renewals. */
  watch(rt: Runtime): void {
    this.renewalFailures = renewalFailuresSince(rt);
  }

  publish(): void {
    const lost = this.renewalFailures();
    if (lost) {
      this.metrics.addMetric('LeaseRenewalFailures', MetricUnit.Count, lost);
      this.catalogue.countStack('LeasesLost', lost);
      this.logger.warn('promotion lease renewal failed while leading', { failures: lost });
    }
    for (const [name, value] of conflictMetrics(this.conflicts())) this.metrics.addMetric(name, MetricUnit.Count, value);
    countEvents(this.catalogue, this.events());
    this.conflicts = conflictsSince();
    this.events = eventsPublishedSince();
    this.catalogue.flush();
    publishIfAny(this.metrics);
  }
}
