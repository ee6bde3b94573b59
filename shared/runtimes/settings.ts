import { z } from 'zod';
import { targetsSchema } from '../actuation/targets.js';
import { leaseTimingsSchema } from '../lease/config.js';
import { outboundConfigSchema } from '../outbound/policy.js';
import { DEFAULT_RETENTION, retentionSchema } from '../retention.js';

/**
 * The settings every runtime takes, each defined once: a node reads them from
 * its flags (node/config.ts), a Lambda function from its environment
 * (lambda-env.ts). A value one runtime refuses the other refuses too, and
 * both fall back on the same defaults.
 */
export const runtimeSettings = {
  /** How long what ended is kept (`--retain-rollouts`, the stack's `retention`): docs/operating/retention.md#what-is-kept. */
  retention: retentionSchema.default(DEFAULT_RETENTION),
  /** What a spec may make the runtime request (`--outbound-config`, the stack's `outbound`): nothing by default. */
  outbound: outboundConfigSchema.default({ origins: [], credentials: {} }),
  /** The targets rollouts may move, by name (`--targets-config`, the stack's `targets`): none by default. */
  targets: targetsSchema.default({}),
  /** How long a rollout read for assignment answers is served again (ms; 0: every answer reads the store): a fleet's questions cost one read per window. */
  assignmentReadMs: z.number().int().min(0).max(5_000).default(250),
};

/** The lease timings a runtime starts with unless told otherwise: TTL 30 s, renewed every 10 s, retried every 5 s. */
export const DEFAULT_LEASE = leaseTimingsSchema.parse({});

/** The order lease timings must keep, the rule of leaseTimingsSchema (shared/lease/config.ts): TTL > renew > 1.2 × retry. */
export function leaseCadenceHolds(t: { readonly ttl: number; readonly renew: number; readonly retry: number }): boolean {
  return t.ttl > t.renew && t.renew > 1.2 * t.retry;
}
