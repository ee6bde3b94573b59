/**
 * Rollout spec inputs a caller can send, adversarial numbers over-represented,
 * and the outcome every one of them must have. Shared by the in-process
 * property and the one run in a memory-capped child process.
 */
import fc from 'fast-check';
import { ConfigError } from '../../shared/errors.js';
import { MAX_STAGES, parseRolloutSpec } from '../../shared/rollout/spec.js';

export const anyNumber = fc.oneof(
  fc.double(),
  fc.double({ min: 0, max: 100, noNaN: true }),
  fc.double({ min: 1, max: 1.1, noNaN: true }),
  fc.integer({ min: -5, max: 200 }),
  fc.constantFrom(
    0,
    -0,
    0.001,
    0.004,
    0.005,
    0.0051,
    5e-324,
    Number.EPSILON,
    1 + Number.EPSILON,
    1.001,
    1.0001,
    99.99,
    99.995,
    99.999,
    100,
    100.0001,
    1e308,
    Infinity,
    -Infinity,
    NaN,
  ),
);

const bakeSeconds = fc.constantFrom(0, 60);
export const specInput = fc.oneof(
  fc.record({ preset: fc.constant('linear'), stepPercent: anyNumber, bakeSeconds }),
  fc.record(
    { preset: fc.constant('exponential'), initialPercent: anyNumber, growthFactor: anyNumber, bakeSeconds },
    { requiredKeys: ['preset', 'bakeSeconds'] },
  ),
  fc.record({ preset: fc.constant('canary'), canaryPercent: anyNumber, bakeSeconds }, { requiredKeys: ['preset', 'bakeSeconds'] }),
  fc.record({ preset: fc.constant('all-at-once') }),
  fc.record({
    stages: fc.array(fc.record({ name: fc.string({ minLength: 1, maxLength: 3 }), percent: anyNumber, bakeSeconds }), { maxLength: 2 * MAX_STAGES }),
  }),
);

/** A spec of 1..MAX_STAGES rising stages ending at 100, or a ConfigError naming something; throws otherwise. */
export function parsesOrRefuses(input: object): void {
  let spec;
  try {
    spec = parseRolloutSpec({ target: { service: 'checkout', version: 'v2' }, ...input });
  } catch (err) {
    if (!(err instanceof ConfigError) || err.issues.length === 0) throw new Error(`refused without a ConfigError naming the field: ${String(err)}`);
    return;
  }
  const percents = spec.stages.map((s) => s.percent);
  if (percents.length < 1 || percents.length > MAX_STAGES) throw new Error(`accepted with ${percents.length} stages`);
  if (percents.some((p, i) => i > 0 && !(p > percents[i - 1]!))) throw new Error(`accepted with percents that do not rise: ${percents.join(', ')}`);
  if (percents.at(-1) !== 100) throw new Error(`accepted ending at ${percents.at(-1)}`);
}
