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

/** An EC2 instance's ARN, as a notice's `resources` and an instance role's `ec2:SourceInstanceARN` give it; group 1 is the instance id. */
export const EC2_INSTANCE_ARN = /^arn:aws[a-z-]*:ec2:[a-z0-9-]+:\d{12}:instance\/(i-(?:[0-9a-f]{8}|[0-9a-f]{17}))$/;

const ec2Event = z.object({
  source: z.literal('aws.ec2'),
  'detail-type': z.enum([SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION]),
  time: z.string().datetime({ offset: true }),
  resources: z.array(z.string().max(2048)).max(100).optional(),
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
 *
 * `instanceArn`: the instance's ARN from `resources`, the name a worker fleet's
 * instances register under (the registry grant binds each to its own ARN);
 * null when the event carries none. An instance ARN there naming another
 * instance than `detail` does is refused: the notice would drain the wrong one.
 */
export function noticeFromEvent(event: unknown, receivedAt: number): PreemptionNotice & { noticeAt: number; instanceArn: string | null } {
  const parsed = ec2Event.safeParse(event);
  if (!parsed.success) {
    throw new InvalidNoticeError(`not an EC2 spot notice: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'event'}: ${i.message}`).join('; ')}`);
  }
  const e = parsed.data;
  const instanceId = e.detail['instance-id'];
  const arns = (e.resources ?? []).flatMap((r) => {
    const m = EC2_INSTANCE_ARN.exec(r);
    return m ? [{ arn: r, id: m[1]! }] : [];
  });
  const other = arns.find((a) => a.id !== instanceId);
  if (other) throw new InvalidNoticeError(`not an EC2 spot notice: resources: ${other.arn} names another instance than detail.instance-id ${instanceId}`);
  return {
    provider: 'aws',
    instanceId,
    instanceArn: arns[0]?.arn ?? null,
    kind: e['detail-type'] === SPOT_INTERRUPTION ? 'interruption' : 'rebalance',
    receivedAt,
    noticeAt: Math.min(Date.parse(e.time), receivedAt),
  };
}
