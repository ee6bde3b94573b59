/** The OpenFeature provider (docs/guides/openfeature.md#openfeature-provider). */
// #region provider
import { OpenFeature } from '@openfeature/server-sdk';
import { RolloutProvider } from 'rollout-control-plane/openfeature';

await OpenFeature.setProviderAndWait(new RolloutProvider({ baseUrl: 'https://rollouts.example.com', token: process.env.ROLLOUT_TOKEN }));
const flags = OpenFeature.getClient();
await flags.getStringValue('r1', 'v41', { targetingKey: 'host-17' });  // 'v42' or 'v41'
await flags.getBooleanValue('r1', false, { targetingKey: 'host-17' }); // on the new version?
// #endregion provider
