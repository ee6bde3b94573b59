/** A three-stage rollout whose canary watches an alarm, and lease timings for a ManualClock: shared by the gate-reading contract suites. */
export const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
export const CHECKOUT_SPEC = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100, alarms: ['checkout-5xx'] } },
    { name: 'half', percent: 50, bakeSeconds: 60, gates: { maxErrorRate: 0.05, minRequests: 100 } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};
