import { readFileSync } from 'node:fs';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { RolloutControlPlaneProps } from './control-plane-props.js';
import { ControlPlaneStack } from './stack.js';

/** `-c targetsFile=targets.json`: the targets rollouts may move (a file: validated by the stack at synth, naming the field). */
function targetsFrom(path: string): RolloutControlPlaneProps['targets'] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`invalid context: targetsFile: cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as RolloutControlPlaneProps['targets'];
  } catch {
    throw new Error(`invalid context: targetsFile: ${path} is not JSON`);
  }
}

/** `npm run synth` / `cdk deploy`. Offline: no lookups, no version check, no notices. */
export function buildApp(app = new App()): App {
  const context = (key: string): string | undefined => {
    const v: unknown = app.node.tryGetContext(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || !v.trim()) throw new Error(`invalid context: ${key}: must be a non-empty string, got ${JSON.stringify(v)}`);
    return v;
  };
  const nodeId = context('nodeId');
  const workers = (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) > 100) throw new Error(`invalid context: workerCount: a whole number up to 100, got ${v}`);
    return Number(v);
  };
  const capacity = (v: string) => {
    if (!/^\d+(\.5|\.0)?$/.test(v) || Number(v) > 8) throw new Error(`invalid context: auroraMinCapacity: 0 to 8 in steps of 0.5, got ${v}`);
    return Number(v);
  };
  const store = context('store') ?? 'dynamodb';
  if (store !== 'dynamodb' && store !== 'aurora') throw new Error(`invalid context: store: must be dynamodb or aurora, got ${store}`);
  new ControlPlaneStack(app, context('stackName') ?? 'RolloutControlPlane', {
    description: 'Rollout control plane: progressive rollouts and work runs under epoch-fenced leases',
    ...(nodeId ? { nodeId } : {}),
    store,
    ...(context('sharedTable') ? { sharedTableName: context('sharedTable')! } : {}),
    ...(context('dashboard') === 'true' ? { dashboard: true } : {}),
    ...(context('auroraReader') === 'true' ? { auroraReader: true } : {}),
    ...(context('auroraMinCapacity') ? { auroraMinCapacity: capacity(context('auroraMinCapacity')!) } : {}),
    ...(context('gateAlarms')
      ? {
          gateAlarms: context('gateAlarms')!
            .split(',')
            .map((n) => n.trim()),
        }
      : {}),
    ...(context('workerRun') ? { workerFleet: { runId: context('workerRun')!, desired: workers(context('workerCount') ?? '2') } } : {}),
    ...(context('targetsFile') ? { targets: targetsFrom(context('targetsFile')!) } : {}),
  });
  // cdk-nag 3 is a policy-validation plugin; findings fail the synth.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return app;
}

buildApp().synth();
