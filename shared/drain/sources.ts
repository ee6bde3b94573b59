import { z } from 'zod';
import type { PreemptionNotice } from './compute-hint.js';

/**
 * Where preemption notices come from, each adapted to the ComputeHint port:
 *  - the EventBridge events, read here (by the drain Lambda, which asks the
 *    workers of the instance to drain through the registry: registry/hint.ts);
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
