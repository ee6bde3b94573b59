/** The event-bus port: EventBridge in AWS, in-process on one machine. */
export interface BusEvent {
  readonly id: string;
  readonly source: string;
  readonly detailType: string;
  readonly time: number;
  readonly detail: unknown;
}

export interface EventBus {
  /** Publishes all or throws; a retry may deliver an event twice with the same id. */
  publish(events: readonly BusEvent[]): Promise<void>;
}

/** In-process bus: delivers synchronously to subscribers, keeps a bounded history. */
export class InProcessBus implements EventBus {
  private readonly subscribers = new Set<(e: BusEvent) => void>();
  readonly history: BusEvent[] = [];

  constructor(private readonly keep = 10_000) {}

  subscribe(fn: (e: BusEvent) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  publish(events: readonly BusEvent[]): Promise<void> {
    for (const e of events) {
      this.history.push(e);
      if (this.history.length > this.keep) this.history.shift();
      for (const fn of this.subscribers) fn(e);
    }
    return Promise.resolve();
  }
}
