/**
 * README's first example: the control plane and a Spot fleet in a stack of
 * yours, then a run created and read back through the typed client.
 */
import { App, Stack } from 'aws-cdk-lib';
import { AccountRootPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { Topic } from 'aws-cdk-lib/aws-sns';

const stack = new Stack(new App(), 'Platform');
const pager = new Topic(stack, 'Pager', { enforceSSL: true });
const oncallRole = new Role(stack, 'Oncall', { assumedBy: new AccountRootPrincipal() });
declare const url: string; // the API's URL: the construct's apiUrl
declare const items: readonly { readonly index: string; readonly shard: number }[];
declare function use(result: unknown): void;

// #region infra
// infra: the control plane and a Spot fleet running your worker, in your own stack
import { RolloutControlPlane, WorkerFleet } from 'rollout-control-plane/cdk';
const plane = new RolloutControlPlane(stack, 'Rollouts', { alarmTopic: pager });
plane.grantOperate(oncallRole);
new WorkerFleet(stack, 'Workers', { controlPlane: plane, runs: ['nightly'], module: './worker.ts' });
// #endregion infra

// #region client
// anywhere: create, watch and read back through the typed client
import { RolloutClient } from 'rollout-control-plane';
const client = new RolloutClient({ url, awsRegion: 'eu-west-1' });   // SigV4 for the deployed API
await client.createRun({ id: 'nightly', items });
for await (const item of client.allRunItems('nightly', { state: 'done' })) use(item.result);
// #endregion client
