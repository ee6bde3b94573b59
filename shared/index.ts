/**
 * The package's main entry: the typed client and the types a user of the
 * control plane sees (rollout specs, rollouts as the API shows them, client
 * assignment). The OpenFeature provider is `rollout-control-plane/openfeature`.
 */
export { RolloutClient, RolloutWaitTimeoutError, ENDED_STATES } from './client/client.js';
export type {
  RolloutClientOptions,
  CreatedRollout,
  CommandResult,
  AssignmentAnswer,
  SignalResult,
  CreateRunInput,
  CreatedRun,
  RunJson,
  RunCancelJson,
  CancelledRun,
  RunItemJson,
  RunItemsPage,
  ItemState,
  HistoryEntryJson,
  RolloutSummaryJson,
  RolloutsPage,
  RunSummaryJson,
  RunsPage,
  LeaderJson,
  ClusterStatusJson,
} from './client/client.js';
export { ApiError, UnreachableError } from './client/transport.js';
export { EnqueueError, PRODUCER_PACE } from './client/producer.js';
export type { EnqueueRunInput, EnqueueOptions, EnqueueReport } from './client/producer.js';
export type { RolloutJson, GateJson, ActuationJson } from './api/rollout-json.js';
export { parseRolloutSpec, type RolloutSpec, type RolloutSpecInput } from './rollout/spec.js';
export type { SignalInput } from './rollout/inbound.js';
export type { TargetInput } from './actuation/targets.js';
export { COMMANDS, type Command } from './rollout/command-names.js';
export type { Rollout, RolloutState, StageStatus, StagePhase, StageMetrics, AlarmState } from './rollout/model.js';
export { assign, bucketOf, type Assignment, type RolloutTraffic } from './rollout/assignment.js';
export type { Stamp } from './rollout/actuation-record.js';
