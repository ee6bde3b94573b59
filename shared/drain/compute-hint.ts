/**
 * The compute-hint port: how a preemption notice reaches the drain logic. The
 * coordinator and the drain state machine never import a cloud SDK; sources
 * (EC2 instance metadata, the EventBridge spot events, GCP's preemption flag,
 * a simulator) adapt to this.
 */
export type Provider = 'aws' | 'gcp';

export interface PreemptionNotice {
  readonly provider: Provider;
  readonly instanceId: string;
  /** Interruption: the instance will be reclaimed. Rebalance: it is at elevated risk (AWS). */
  readonly kind: 'interruption' | 'rebalance';
  /** When the notice was received (ms since the Unix epoch). */
  readonly receivedAt: number;
}

export interface ComputeHint {
  /** Subscribe to notices for this instance; returns an unsubscribe. */
  onPreemption(listener: (notice: PreemptionNotice) => void): () => void;
}

/**
 * What the cloud promises (notice lead) and what we target (drain deadline),
 * kept as two numbers: the deadline leaves a margin inside the lead.
 */
export const PROVIDER_DEADLINES: Readonly<Record<Provider, { readonly noticeLeadMs: number; readonly drainDeadlineMs: number }>> = {
  aws: { noticeLeadMs: 120_000, drainDeadlineMs: 60_000 },
  gcp: { noticeLeadMs: 30_000, drainDeadlineMs: 15_000 },
};

/** A hint driven by hand: tests, the local runtime's simulated interruptions. */
export class SimulatedComputeHint implements ComputeHint {
  private readonly listeners = new Set<(n: PreemptionNotice) => void>();

  onPreemption(listener: (notice: PreemptionNotice) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  preempt(notice: PreemptionNotice): void {
    for (const l of this.listeners) l(notice);
  }
}

/** Listeners of one hint; it fires once (a drain runs once). */
export class NoticeListeners {
  private readonly set = new Set<(n: PreemptionNotice) => void>();
  private fired = false;

  add(l: (n: PreemptionNotice) => void): () => void {
    this.set.add(l);
    return () => this.set.delete(l);
  }

  /** Once per hint: a drain runs once. */
  fire(n: PreemptionNotice): void {
    if (this.fired) return;
    this.fired = true;
    for (const l of this.set) l(n);
  }
}
