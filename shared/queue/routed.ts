import type { QueueMessage, ReceiveOptions, WorkQueue } from './port.js';

/**
 * Sends each run's messages to the queue its run is routed to (a worker
 * fleet's own queue, so its workers receive no other run's items), and every
 * other run's to the shared queue. Only sending is routed: receiving and
 * settling are the shared queue's, where a sender of this kind (the api, the
 * coordinator) never receives from a fleet's queue.
 */
export class RoutedWorkQueue implements WorkQueue {
  constructor(
    private readonly routes: ReadonlyMap<string, WorkQueue>,
    private readonly shared: WorkQueue,
  ) {
    for (const q of [shared, ...routes.values()]) {
      // A ledger-backed queue is not a place messages go: routing it would change nothing.
      if (q.deliversFromLedger) throw new Error('RoutedWorkQueue: routes SQS-like queues; a ledger-backed queue delivers from the ledger');
    }
  }

  /** The queue a run's messages go to. */
  queueFor(runId: string): WorkQueue {
    return this.routes.get(runId) ?? this.shared;
  }

  send(runId: string, itemIds: readonly string[]): Promise<void> {
    return this.queueFor(runId).send(runId, itemIds);
  }

  receive(max: number, waitSeconds: number, signal?: AbortSignal, options?: ReceiveOptions): Promise<QueueMessage[]> {
    return this.shared.receive(max, waitSeconds, signal, options);
  }

  delete(message: QueueMessage): Promise<void> {
    return this.shared.delete(message);
  }

  deleteMany(messages: readonly QueueMessage[]): Promise<void> {
    return this.shared.deleteMany(messages);
  }

  extend(message: QueueMessage, seconds: number): Promise<void> {
    return this.shared.extend(message, seconds);
  }

  release(message: QueueMessage): Promise<void> {
    return this.shared.release(message);
  }
}
