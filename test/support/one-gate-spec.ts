/** A spec whose canary stage holds one provider gate, and the refusals it gets: what the gate schema tests ask. */
import { ConfigError } from '../../shared/errors.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';

/** Where that gate sits in a refusal. */
export const GATE_AT = 'stages.0.gates.providers.0';

export const oneGateSpec = (target: unknown, gate: unknown, percent = 10) =>
  parseRolloutSpec({
    target,
    stages: [
      { name: 'canary', percent, bakeSeconds: 0, gates: { providers: [gate] } },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });

/** The spec's refusals, one line a field (none: accepted). */
export function gateErrors(target: unknown, gate: unknown): string[] {
  try {
    oneGateSpec(target, gate);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues as string[];
    throw err;
  }
  return [];
}
