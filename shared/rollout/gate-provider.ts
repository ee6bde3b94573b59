import type { ProviderGate, ProviderType } from './gate-spec.js';
import type { ProviderResult } from './gates.js';

/**
 * The gate provider port: one adapter per kind of gate (Prometheus,
 * CloudWatch alarms, CloudWatch metrics, hooks; pushed cohort reports,
 * read from the store: signals-gate.ts). An adapter reads; it never judges
 * (gates.ts does, once for all of them) and never throws for one gate's
 * trouble: a provider that cannot answer says why, as a result.
 *
 * `read` gets every gate of its kind due in one tick, so an adapter can
 * batch (one DescribeAlarms for up to 100 alarms, one GetMetricData for up
 * to 500 queries) and ask each distinct query once. Each request it makes
 * must end within its gates' `timeoutSeconds` (`deadline`); `signal` aborts
 * everything still in flight.
 */
export interface GateProvider<G extends ProviderGate = ProviderGate> {
  /** `contexts[i]`: the rollout and stage `gates[i]` is read for (a hook sends it; a query has no use for it). */
  read(gates: readonly G[], o: { readonly now: number; readonly signal: AbortSignal; readonly contexts: readonly GateContext[] }): Promise<ProviderResult[]>;
}

/** Which rollout, attempt and stage a gate is read for, and under which leader. */
export interface GateContext {
  readonly rolloutId: string;
  readonly attempt: number;
  readonly stage: { readonly index: number; readonly name: string; readonly percent: number };
  /** The lease epoch of the leader whose tick reads it; null outside a leader's tick. */
  readonly epoch: number | null;
  readonly service: string;
  readonly newVersion: string;
  readonly stableVersion: string | null;
  readonly labels: Readonly<Record<string, string>>;
  /** When the stage's current period began (activation or last resume; ms): a judged gate reads nothing older. */
  readonly periodStart?: number;
  /** For a post-rollout hook: how the rollout ended. */
  readonly outcome?: 'completed' | 'rolled_back' | 'aborted';
}

export type GateProviders = { readonly [T in ProviderType]?: GateProvider<Extract<ProviderGate, { type: T }>> };
