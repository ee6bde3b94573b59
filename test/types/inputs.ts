/**
 * Type tests of the package's input types (compiled by `npm run typecheck`
 * and the lint step of `npm test`; nothing runs): what a user writes for a
 * spec, a signal, a target, a worker's options or a construct's props is
 * checked by the compiler, from the same schemas the server parses with.
 * Each `@ts-expect-error` is a typo that must not compile: were the type
 * loose, the directive itself would be the error.
 */
import type { RolloutClient, RolloutSpecInput, SignalInput, TargetInput } from '../../shared/index.js';
import type { CreateWorkerOptions } from '../../shared/runtimes/worker/sdk.js';
import type { RolloutControlPlane, RolloutControlPlaneProps, WorkerFleetProps } from '../../infra/cdk.js';

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

// The constructs' props: interfaces, so a misspelt prop, a function the topology does not have or a target the stack cannot move does not compile.
export const plane: RolloutControlPlaneProps = { store: 'aurora', functions: { api: { memoryMb: 1024 } }, targets: { live: target }, apiUrlOutput: true };
// @ts-expect-error a store that does not exist
export const typoStore: RolloutControlPlaneProps = { store: 'postgres' };
// @ts-expect-error memoryMb misspelt
export const typoMemory: RolloutControlPlaneProps = { functions: { api: { memoryMB: 1024 } } };
// @ts-expect-error a function the topology does not have
export const typoFunction: RolloutControlPlaneProps = { functions: { apis: { memoryMb: 1024 } } };
const nginx = { type: 'nginx', include: '/x', config: '/y', stableUpstream: 'a', canaryUpstream: 'b' } as const;
// @ts-expect-error an nginx target is a file on a node's machine: the stack's functions cannot move it
export const nginxOnAws: RolloutControlPlaneProps = { targets: { web: nginx } };
// @ts-expect-error alias misspelt in a target
export const typoAlias: RolloutControlPlaneProps = { targets: { live: { type: 'lambdaAlias', functionName: 'checkout', alais: 'live' } } };
declare const controlPlane: RolloutControlPlane;
export const fleet: WorkerFleetProps = { controlPlane, runs: ['nightly'], desiredCapacity: 2, spot: true };
// @ts-expect-error desiredCapacity misspelt
export const typoFleet: WorkerFleetProps = { controlPlane, runs: ['nightly'], desiredCapcity: 2 };
