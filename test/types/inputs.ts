/**
 * Type tests of the package's input types (compiled by `npm run typecheck`
 * and the lint step of `npm test`; nothing runs): what a user writes for a
 * spec, a signal, a target or a worker's options is checked by the compiler,
 * from the same schemas the server parses with. Each `@ts-expect-error` is
 * a typo that must not compile: were the type loose, the directive itself
 * would be the error.
 */
import type { RolloutClient, RolloutSpecInput, SignalInput, TargetInput } from '../../shared/index.js';
import type { CreateWorkerOptions } from '../../shared/runtimes/worker/sdk.js';

declare const client: RolloutClient;

export const spec: RolloutSpecInput = {
  target: { service: 'web', version: 'v2', stableVersion: 'v1' },
  stages: [{ name: 'canary', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.01 } }],
};
export const preset: RolloutSpecInput = { target: { service: 'web', version: 'v2' }, preset: 'canary', canaryPercent: 5, bakeSeconds: 300 };
// @ts-expect-error a misspelt stage field
export const typoStage: RolloutSpecInput = { target: { service: 'web', version: 'v2' }, stages: [{ name: 'all', precent: 100, bakeSeconds: 0 }] };
// @ts-expect-error a preset that does not exist
export const typoPreset: RolloutSpecInput = { target: { service: 'web', version: 'v2' }, preset: 'linaer', stepPercent: 10, bakeSeconds: 60 };
const web = { service: 'web', version: 'v2' };
// @ts-expect-error a gate field that does not exist
export const typoGate: RolloutSpecInput = { target: web, stages: [{ name: 'all', percent: 100, bakeSeconds: 0, gates: { maxErrorRates: 1 } }] };

export const signal: SignalInput = { type: 'rollout.metrics_reported', rolloutId: 'r', stage: 0, requests: 10, errors: 0, observedAt: '2026-12-07T00:00:00Z' };
// @ts-expect-error a signal type that does not exist
export const typoSignal: SignalInput = { type: 'rollout.metric_reported', rolloutId: 'r' };
// @ts-expect-error errors misspelt
export const typoCount: SignalInput = { type: 'rollout.metrics_reported', rolloutId: 'r', stage: 0, requests: 10, error: 0, observedAt: 0 };

export const target: TargetInput = { type: 'lambdaAlias', functionName: 'checkout', alias: 'live' };
// @ts-expect-error a target type that does not exist
export const typoTarget: TargetInput = { type: 'lambda-alias', functionName: 'checkout', alias: 'live' };

export async function calls(): Promise<void> {
  await client.createRollout(spec);
  await client.publishSignal(signal);
  // @ts-expect-error the client takes a spec, not any object
  await client.createRollout({ target: { service: 'web', version: 'v2' }, stage: [] });
  // @ts-expect-error the client takes a signal, not any object
  await client.publishSignal({ type: 'rollout.created', rollout: 'r' });
}

export const worker: CreateWorkerOptions = { runs: ['r'], url: 'http://127.0.0.1:8000', handler: () => null };
// @ts-expect-error an option that does not exist
export const typoWorker: CreateWorkerOptions = { runs: ['r'], url: 'http://127.0.0.1:8000', exitWhenDon: true, handler: () => null };
