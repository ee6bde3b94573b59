/**
 * `rollout-control-plane/cdk`: the constructs to put the control plane in a
 * CDK app of your own. `aws-cdk-lib` and `constructs` are peer dependencies
 * (esbuild too, for a WorkerFleet with a module of yours).
 */
export {
  RolloutControlPlane,
  API_ROUTES,
  LAMBDA_RUNTIME,
  MAX_RECEIVE_COUNT,
  type RolloutControlPlaneProps,
  type FunctionOverrides,
  type ApiRole,
} from './control-plane.js';
export { WorkerFleet, type WorkerFleetProps } from './worker-fleet.js';
export { FUNCTIONS, type FunctionName } from '../shared/topology.js';
