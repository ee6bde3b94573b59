import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { controlPlaneVpc } from './aurora.js';
import { RolloutControlPlane, type ApiRole, type RolloutControlPlaneProps } from './control-plane.js';
import { WorkerFleet } from './worker-fleet.js';

export { API_ROUTES, LAMBDA_RUNTIME, MAX_RECEIVE_COUNT, type ApiRole } from './control-plane.js';

export interface ControlPlaneProps extends StackProps, RolloutControlPlaneProps {
  /** Deploy a Spot worker fleet for this run (DynamoDB store): `-c workerRun=<id>`. */
  readonly workerFleet?: { readonly runId: string; readonly desired: number };
}

/**
 * This repository's own app (`npm run synth`, `cdk deploy`): one stack
 * holding a RolloutControlPlane, and a WorkerFleet when asked, with the
 * outputs the CLI and the tests read. The construct's id is `Default`, which
 * CDK leaves out of logical ids: a stack deployed before the construct
 * existed keeps every resource (the table above all) as it was.
 */
export class ControlPlaneStack extends Stack {
  readonly controlPlane: RolloutControlPlane;

  constructor(scope: Construct, id: string, props: ControlPlaneProps = {}) {
    super(scope, id, props);
    const { workerFleet, ...rest } = props;
    this.controlPlane = new RolloutControlPlane(this, 'Default', rest);
    const cp = this.controlPlane;
    if (workerFleet) {
      if (!cp.table) throw new Error('invalid stack config: workerFleet: needs the DynamoDB store (workers on Aurora are not wired yet)');
      new WorkerFleet(this, 'Workers', { controlPlane: cp, runs: [workerFleet.runId], desiredCapacity: workerFleet.desired, vpc: controlPlaneVpc(this) });
    }
    if (cp.table) new CfnOutput(this, 'StoreTableName', { value: cp.table.tableName });
    new CfnOutput(this, 'RolloutBusName', { value: cp.bus.eventBusName });
    new CfnOutput(this, 'WorkQueueUrl', { value: cp.workQueue.queueUrl });
    new CfnOutput(this, 'CoordinatorFunctionName', { value: cp.functions.coordinator.functionName });
    new CfnOutput(this, 'ApiUrl', { value: cp.apiUrl });
  }

  get table() {
    return this.controlPlane.table;
  }
  get bus() {
    return this.controlPlane.bus;
  }
  get workQueue() {
    return this.controlPlane.workQueue;
  }
  get workDlq() {
    return this.controlPlane.workDlq;
  }
  get eventsDlq() {
    return this.controlPlane.eventsDlq;
  }
  get functions() {
    return this.controlPlane.functions;
  }
  get aurora() {
    return this.controlPlane.aurora;
  }

  grantApi(grantee: Parameters<RolloutControlPlane['grantApi']>[0], ...roles: ApiRole[]): void {
    this.controlPlane.grantApi(grantee, ...roles);
  }
}
