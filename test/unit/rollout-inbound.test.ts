import { describe, expect, it } from 'vitest';
import { InvalidEventError, parseInboundEvent, READING_SKEW_MARGIN_MS, refuseFromTheFuture } from '../../shared/rollout/inbound.js';

const now = Date.UTC(2026, 0, 1);
const reading = (observedAt: number | string) =>
  parseInboundEvent({ type: 'rollout.metrics_reported', rolloutId: 'r', stage: 0, requests: 10, errors: 0, observedAt });

describe('inbound signal times', () => {
  it('a time no Date can hold is refused by the schema, naming the field', () => {
    expect(() => reading(1e300)).toThrow(InvalidEventError);
    expect(() => reading(1e300)).toThrow(/observedAt/);
    expect(reading('9999-12-31T00:00:00Z')).toMatchObject({ observedAt: Date.parse('9999-12-31T00:00:00Z') }); // a valid time; only the clock can judge it
  });

  it('a reading or alarm change later than now + the margin is refused naming the field; up to the margin it is taken', () => {
    expect(() => refuseFromTheFuture(reading(now + READING_SKEW_MARGIN_MS), now)).not.toThrow();
    expect(() => refuseFromTheFuture(reading(now + READING_SKEW_MARGIN_MS + 1), now)).toThrow(
      `invalid rollout event: observedAt: ${new Date(now + READING_SKEW_MARGIN_MS + 1).toISOString()} is later than now + 30 s (${new Date(now).toISOString()})`,
    );
    const alarm = parseInboundEvent({ type: 'rollout.alarm_changed', alarm: 'a', state: 'ALARM', changedAt: now + 60_000 });
    expect(() => refuseFromTheFuture(alarm, now)).toThrow(/changedAt: .* is later than now \+ 30 s/);
    expect(() => refuseFromTheFuture(alarm, now, 60_000)).not.toThrow();
    expect(() => refuseFromTheFuture(parseInboundEvent({ type: 'rollout.created', rolloutId: 'r' }), now)).not.toThrow();
  });
});
