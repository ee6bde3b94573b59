/**
 * Spot notices are outside input: their time and instance id are bounded
 * before they reach the drain deadline or the store.
 */
import { describe, expect, it } from 'vitest';
import { PROVIDER_DEADLINES } from '../../shared/drain/compute-hint.js';
import { drain } from '../../shared/drain/drain.js';
import { InvalidNoticeError, noticeFromEvent, REBALANCE_RECOMMENDATION, SPOT_INTERRUPTION } from '../../shared/drain/sources.js';
import { ManualClock } from '../support/clock.js';

const receivedAt = Date.UTC(2026, 0, 1, 12);
const event = (instanceId: unknown, time = new Date(receivedAt - 2_000).toISOString(), detailType = SPOT_INTERRUPTION) => ({
  version: '0',
  id: 'e1',
  source: 'aws.ec2',
  'detail-type': detailType,
  time,
  region: 'us-east-1',
  detail: { 'instance-id': instanceId, 'instance-action': 'terminate' },
});

describe('EC2 spot notices', () => {
  it('the deadline counts from the notice’s time, or from its receipt when the notice claims a later time', () => {
    expect(noticeFromEvent(event('i-1234567890abcdef0'), receivedAt)).toMatchObject({ noticeAt: receivedAt - 2_000, receivedAt, kind: 'interruption' });
    expect(noticeFromEvent(event('i-1234567890abcdef0', '2099-01-01T00:00:00Z'), receivedAt).noticeAt).toBe(receivedAt);
    expect(noticeFromEvent(event('i-0abc1234', new Date(receivedAt + 1).toISOString(), REBALANCE_RECOMMENDATION), receivedAt)).toMatchObject({
      noticeAt: receivedAt,
      kind: 'rebalance',
    });
  });

  it.each([
    ['5,000 characters', `i-${'a'.repeat(4_998)}`],
    ['no i- prefix', '1234567890abcdef0'],
    ['7 hex digits', 'i-1234567'],
    ['10 hex digits', 'i-1234567890'],
    ['not hex', 'i-1234567g'],
    ['upper case', 'i-1234567890ABCDEF0'],
    ['an ARN', 'arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0'],
    ['a number', 12345678],
  ])('an instance id that is no EC2 instance id (%s) is refused, naming the field', (_what, id) => {
    expect(() => noticeFromEvent(event(id), receivedAt)).toThrow(InvalidNoticeError);
    expect(() => noticeFromEvent(event(id), receivedAt)).toThrow(
      typeof id === 'string' ? /detail\.instance-id: not an EC2 instance id \(i- followed by 8 or 17 hex digits\)/ : /detail\.instance-id: .*expected string/,
    );
  });

  it('accepts both EC2 instance id forms (8 and 17 hex digits)', () => {
    expect(noticeFromEvent(event('i-0abc1234'), receivedAt).instanceId).toBe('i-0abc1234');
    expect(noticeFromEvent(event('i-1234567890abcdef0'), receivedAt).instanceId).toBe('i-1234567890abcdef0');
  });

  it('the instance ARN in `resources` is the name a fleet instance registers under: kept; one naming another instance is refused; none, null', () => {
    const arn = 'arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0';
    const withResources = (resources: unknown) => ({ ...event('i-1234567890abcdef0'), resources });
    expect(noticeFromEvent(withResources([arn]), receivedAt)).toMatchObject({ instanceId: 'i-1234567890abcdef0', instanceArn: arn });
    expect(noticeFromEvent(withResources(['arn:aws-cn:ec2:cn-north-1:123456789012:instance/i-1234567890abcdef0']), receivedAt).instanceArn).toBe(
      'arn:aws-cn:ec2:cn-north-1:123456789012:instance/i-1234567890abcdef0',
    );
    // Something else in resources (not an instance ARN) names no instance.
    expect(noticeFromEvent(withResources(['arn:aws:ec2:us-east-1:123456789012:volume/vol-0abc']), receivedAt).instanceArn).toBeNull();
    expect(noticeFromEvent(event('i-1234567890abcdef0'), receivedAt).instanceArn).toBeNull();
    const other = 'arn:aws:ec2:us-east-1:123456789012:instance/i-0abc1234';
    expect(() => noticeFromEvent(withResources([arn, other]), receivedAt)).toThrow(InvalidNoticeError);
    expect(() => noticeFromEvent(withResources([other]), receivedAt)).toThrow(
      /resources: arn:aws:ec2:us-east-1:123456789012:instance\/i-0abc1234 names another instance than detail.instance-id i-1234567890abcdef0/,
    );
    expect(() => noticeFromEvent(withResources('not a list'), receivedAt)).toThrow(/resources: /);
  });
});

describe('the drain deadline', () => {
  const target = (clock: ManualClock, costMs: number) => ({
    stopAndNack: () => {
      clock.advance(costMs);
      return Promise.resolve(['item-1']);
    },
    deregister: () => Promise.resolve(),
  });

  it('a notice stamped after the drain starts does not extend the deadline: it counts from the earlier of the two', async () => {
    const clock = new ManualClock(receivedAt);
    const { drainDeadlineMs } = PROVIDER_DEADLINES.aws;
    // The notice claims an hour from now; the drain starts now and its steps take a whole deadline and a second.
    const r = await drain(
      target(clock, drainDeadlineMs + 1_000),
      { provider: 'aws', instanceId: 'i-0abc1234', kind: 'interruption', receivedAt: receivedAt + 3_600_000 },
      {
        clock,
        snapshot: { estimatedCostMs: 1, take: () => Promise.reject(new Error('must not be taken: no time is left')) },
      },
    );
    expect(r.withinDeadline).toBe(false);
    expect(r.steps).toEqual(['stop_pulling_and_nack', 'snapshot_skipped', 'deregister', 'exit']);
    expect(r.problems).toEqual(['snapshot skipped: 0 ms left, it needs ~1 ms']);
  });

  it('an earlier notice time is kept: the deadline counts from when the cloud issued the notice', async () => {
    const clock = new ManualClock(receivedAt);
    const { drainDeadlineMs } = PROVIDER_DEADLINES.gcp;
    const r = await drain(
      target(clock, 0),
      { provider: 'gcp', instanceId: 'gce-1', kind: 'interruption', receivedAt: receivedAt - drainDeadlineMs + 200 },
      {
        clock,
        snapshot: { estimatedCostMs: 10_000, take: () => Promise.reject(new Error('must not be taken: 200 ms are left')) },
      },
    );
    expect(r.problems).toEqual(['snapshot skipped: 200 ms left, it needs ~10000 ms']);
    expect(r.withinDeadline).toBe(true);
  });
});
