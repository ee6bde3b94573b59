import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ControlPlaneStack } from './stack.js';

/** `npm run synth` / `cdk deploy`. Offline: no lookups, no version check, no notices. */
export function buildApp(app = new App()): App {
  const stackName: unknown = app.node.tryGetContext('stackName');
  new ControlPlaneStack(app, typeof stackName === 'string' && stackName ? stackName : 'RolloutControlPlane', {
    description: 'Rollout control plane: progressive rollouts and work runs under epoch-fenced leases',
  });
  // cdk-nag 3 is a policy-validation plugin; findings fail the synth.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return app;
}

buildApp().synth();
