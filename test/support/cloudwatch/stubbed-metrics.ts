/** A CloudWatch client for unit tests of the metric provider: GetMetricData answered by the test, each request recorded. */
import type { CloudWatchClient, GetMetricDataCommandInput, GetMetricDataCommandOutput } from '@aws-sdk/client-cloudwatch';
import { CloudWatchMetricProvider, cloudWatchClients } from '../../../shared/adapters/cloudwatch/providers.js';
import type { GateContext } from '../../../shared/rollout/gate-reader.js';

export function stubbed(answer: (input: GetMetricDataCommandInput, call: number) => Partial<GetMetricDataCommandOutput>) {
  const calls: GetMetricDataCommandInput[] = [];
  const client = {
    send: (command: { input: GetMetricDataCommandInput }) => {
      calls.push(command.input);
      return Promise.resolve(answer(command.input, calls.length));
    },
  } as unknown as CloudWatchClient;
  return { calls, provider: new CloudWatchMetricProvider(cloudWatchClients(() => client)) };
}

/** Version 7 of `api` against 6, its canary stage at 10 % since `periodStart`. */
export const canaryContext = (periodStart: number): GateContext => ({
  rolloutId: 'r',
  attempt: 1,
  stage: { index: 0, name: 'canary', percent: 10 },
  epoch: 1,
  service: 'api',
  newVersion: '7',
  stableVersion: '6',
  labels: {},
  periodStart,
});
