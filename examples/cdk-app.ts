/**
 * The control plane and a Spot fleet running your worker, in a CDK app of
 * your own (docs/getting-started/package.md#in-your-own-cdk-app). `bin/` of a `cdk init app
 * --language typescript` project, say.
 */
import { App, Stack } from 'aws-cdk-lib';
import { AccountRootPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { RolloutControlPlane, WorkerFleet } from 'rollout-control-plane/cdk';

const app = new App();
const stack = new Stack(app, 'Platform', { env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION } });
const key = new Key(stack, 'Key', { enableKeyRotation: true });
const pager = new Topic(stack, 'Pager', { enforceSSL: true, masterKey: key });
const role = (id: string) => new Role(stack, id, { assumedBy: new AccountRootPrincipal() });
const [dashboardRole, oncallRole, deployRole, metricsRole] = [role('Dashboard'), role('Oncall'), role('Deploy'), role('Metrics')];

// #region construct
const plane = new RolloutControlPlane(stack, 'Rollouts', {
  encryptionKey: key,             // a CMK for the table and queues it creates (default AWS-managed)
  alarmTopic: pager,              // and/or alarmActions: [...]; default: a topic of its own (output AlarmTopicArn)
  functions: { api: { memoryMb: 1024, logRetention: RetentionDays.THREE_MONTHS, reservedConcurrency: 20 } },
  gateAlarms: ['checkout-*'],     // the alarms cloudwatchAlarm gates watch: their changes act within one delivery
  gateNamespaces: ['AWS/Lambda', 'AWS/ApplicationELB'],   // what cloudwatchMetric gates may read (default: none)
  eventSenders: [`arn:aws:iam::${stack.account}:role/metrics-*`],   // who else may put signals on its bus
  apiUrlOutput: true,             // an output of plane.apiUrl, for your pipeline ({ exportName } to export it)
  // and table, bus, store, vpc, outbound, targets, gateRegions, retention, dashboard, nodeId: below
});
plane.grantRead(dashboardRole);   // GET routes
plane.grantOperate(oncallRole);   // + commands on rollouts, not abort
plane.grantAdmin(deployRole);     // + create rollouts and runs, abort, cancel runs
plane.grantSignal(metricsRole);   // PutEvents on the bus, and a place on its policy's list of senders (a role)
new WorkerFleet(stack, 'Workers', {
  controlPlane: plane, runs: ['nightly'], module: './worker.ts',
  instanceTypes: ['c7g.large', 'm7g.large'], spot: true, desiredCapacity: 4, workerArgs: ['--item-timeout', '30m'],
});
// #endregion construct

app.synth();
