import { z } from 'zod';
import type { WorkerRegistry } from '../registry/registry.js';
import type { ComputeHint, PreemptionNotice } from './compute-hint.js';

/**
 * Where preemption notices come from, each adapted to the ComputeHint port:
 *  - the EventBridge events (read by the drain Lambda, which asks the workers
 *    of the instance to drain through the registry: `RegistryHint`);
 *  - the instance metadata, read by the worker itself (adapters/metadata).
 */

export const SPOT_INTERRUPTION = 'EC2 Spot Instance Interruption Warning';
export const REBALANCE_RECOMMENDATION = 'EC2 Instance Rebalance Recommendation';

/** What EC2 instance ids look like: `i-` and 8 (older) or 17 lower-case hex digits. Anything else never names one of our workers. */
export const EC2_INSTANCE_ID = /^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$/;

const ec2Event = z.object({
  source: z.literal('aws.ec2'),
  'detail-type': z.enum([SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION]),
  time: z.string().datetime({ offset: true }),
  detail: z.object({ 'instance-id': z.string().regex(EC2_INSTANCE_ID, 'not an EC2 instance id (i- followed by 8 or 17 hex digits)') }).passthrough(),
});

export class InvalidNoticeError extends Error {
  override readonly name = 'InvalidNoticeError';
}

/**
 * An EventBridge spot event → a notice; a malformed event is refused with the
 * reason (it goes to the target's DLQ). The drain deadline counts from
 * `noticeAt`: the event's time, unless that is later than our receipt — a
 * notice stamped in the future must not give the drain more time than the
 * cloud does.
 */
export function noticeFromEvent(event: unknown, receivedAt: number): PreemptionNotice & { noticeAt: number } {
  const parsed = ec2Event.safeParse(event);
  if (!parsed.success) {
    throw new InvalidNoticeError(`not an EC2 spot notice: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'event'}: ${i.message}`).join('; ')}`);
  }
  const e = parsed.data;
  return {
    provider: 'aws',
    instanceId: e.detail['instance-id'],
    kind: e['detail-type'] === SPOT_INTERRUPTION ? 'interruption' : 'rebalance',
    receivedAt,
    noticeAt: Math.min(Date.parse(e.time), receivedAt),
  };
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
