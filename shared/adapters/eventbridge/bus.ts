import { EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import type { BusEvent, EventBus } from '../../events/bus.js';

/**
 * EventBridge as the bus. PutEvents takes 10 entries per call; a partial
 * failure throws so the caller leaves the events in its outbox and retries
 * them (with the same ids: consumers de-duplicate on `detail.eventId`).
 * Endpoint from AWS_ENDPOINT_URL_EVENTBRIDGE / AWS_ENDPOINT_URL when set.
 */
export class EventBridgeBus implements EventBus {
  constructor(
    private readonly busName: string,
    private readonly client = new EventBridgeClient({}),
  ) {}

  async publish(events: readonly BusEvent[]): Promise<void> {
    for (let i = 0; i < events.length; i += 10) {
      const batch = events.slice(i, i + 10);
      const entries: PutEventsRequestEntry[] = batch.map((e) => ({
        EventBusName: this.busName,
        Source: e.source,
        DetailType: e.detailType,
        Time: new Date(e.time),
        // EventBridge assigns its own id; ours travels in the detail for de-duplication.
        Detail: JSON.stringify({ eventId: e.id, ...(e.detail as object) }),
      }));
      const res = await this.client.send(new PutEventsCommand({ Entries: entries }));
      if (res.FailedEntryCount) {
        const failed = (res.Entries ?? []).flatMap((r, j) => (r.ErrorCode ? [`${batch[j]?.id}: ${r.ErrorCode} ${r.ErrorMessage ?? ''}`] : []));
        throw new Error(`EventBridge rejected ${res.FailedEntryCount} of ${entries.length} events: ${failed.join('; ')}`);
      }
    }
  }
}
