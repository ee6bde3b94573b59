/** An application's metrics split by cohort with the OpenFeature provider (docs/concepts/gates.md#checking-the-split-sample-ratio). */
// #region cohort-metrics
import { metrics } from '@opentelemetry/api';
import { OpenFeature } from '@openfeature/server-sdk';
import { RolloutProvider } from 'rollout-control-plane/openfeature';

// Exposures go to rollout.exposures on the global meter provider your OpenTelemetry SDK registers.
await OpenFeature.setProviderAndWait(new RolloutProvider({ baseUrl: 'https://rollouts.example.com', token: process.env.ROLLOUT_TOKEN }));
const flags = OpenFeature.getClient();
const meter = metrics.getMeter('checkout');
const requests = meter.createCounter('checkout.requests');
const duration = meter.createHistogram('checkout.request.duration', { unit: 's' });

/** Serves one request of `user` on the version the rollout gives it, its metrics labelled by cohort. */
export async function serve(user: string, run: (version: string) => Promise<void>): Promise<void> {
  const answer = await flags.getStringDetails('checkout-v42', 'v41', { targetingKey: user });
  // An error's value is your default, the stable version: its request is the baseline's.
  const cohort = answer.flagMetadata.cohort === 'canary' ? 'canary' : 'baseline';
  const started = performance.now();
  let outcome = 'ok';
  try {
    await run(answer.value);
  } catch (err) {
    outcome = 'error';
    throw err;
  } finally {
    requests.add(1, { cohort, outcome });
    duration.record((performance.now() - started) / 1000, { cohort });
  }
}
// #endregion cohort-metrics
