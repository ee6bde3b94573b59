/** The client alone: `rollout-control-plane-client` (packages/client/README.md; docs/getting-started/package.md#as-a-package). */
// #region client
import { RolloutClient, assign } from 'rollout-control-plane-client';
import { RolloutProvider } from 'rollout-control-plane-client/openfeature';

const client = new RolloutClient({ url: 'https://rollouts.internal', token: process.env.ROLLOUT_TOKEN });
const traffic = await client.traffic('web-v42'); // cached by ETag in the provider; here, read once
const { version } = assign(traffic, 'user-1');   // what the server answers for user-1, computed here
const provider = new RolloutProvider({ baseUrl: 'https://rollouts.internal', token: process.env.ROLLOUT_TOKEN });
// #endregion client
void version;
void provider;
