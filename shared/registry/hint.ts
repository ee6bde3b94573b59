import { NoticeListeners, type ComputeHint, type PreemptionNotice } from '../drain/compute-hint.js';
import type { WorkerRegistry } from './registry.js';

/**
 * The worker learns of a drain request through its registry heartbeat (the
 * drain Lambda marked it draining). The notice time is the cloud's, so the
 * deadline counts from when the notice was issued.
 */
export class RegistryHint implements ComputeHint {
  private readonly listeners = new NoticeListeners();

  onPreemption(listener: (notice: PreemptionNotice) => void): () => void {
    return this.listeners.add(listener);
  }

  /** Feed each heartbeat's answer here. */
  observe(record: Awaited<ReturnType<WorkerRegistry['heartbeat']>>): void {
    if (record?.state === 'draining' && record.drain) {
      this.listeners.fire({ provider: record.drain.provider, instanceId: record.instanceId, kind: record.drain.kind, receivedAt: record.drain.noticeAt });
    }
  }
}
