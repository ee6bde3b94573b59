/**
 * Aurora's logins in the template: each function that uses the database may
 * connect as its own database user (`rds-db:connect` on
 * `dbuser:<cluster resource id>/<its role>`) and as no other; the master
 * secret is the migrator's alone, and the migrator runs at deploy after the
 * cluster and before every function.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_ROLES } from '../../shared/adapters/postgres/roles.js';
import { FUNCTIONS, MIGRATOR, type FunctionName, type FunctionSpec } from '../../shared/topology.js';
import { SYNTH_HOOK_TIMEOUT, synthStack, type Synthesised } from './synth.js';

type Statement = { Action: string | string[]; Resource: unknown; Effect: string };

describe('database roles on Aurora (-c store=aurora)', () => {
  let s: Synthesised;
  let resources: Synthesised['json']['Resources'];
  const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
  /** A function's logical id by its POWERTOOLS_SERVICE_NAME. */
  const functionId = (service: string) =>
    ofType('AWS::Lambda::Function').find(
      ([, r]) => (r.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.POWERTOOLS_SERVICE_NAME === service,
    )?.[0];
  /** The statements of the policies attached to a function's role. */
  const statementsOf = (fnId: string): Statement[] => {
    const role = JSON.stringify((resources[fnId]!.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]);
    return ofType('AWS::IAM::Policy')
      .filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(role))
      .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
  };
  const connects = (sts: Statement[]) => sts.filter((st) => [st.Action].flat().includes('rds-db:connect'));

  // cdk-nag clean with the migrator and its trigger.
  beforeAll(() => {
    s = synthStack('AuroraRoles', { store: 'aurora' }, { nag: true });
    resources = s.json.Resources;
  }, SYNTH_HOOK_TIMEOUT);

  it('each function that uses the database may connect as its own database user, on this cluster, and as no other', () => {
    const cluster = ofType('AWS::RDS::DBCluster').map(([id]) => id);
    expect(cluster).toHaveLength(1);
    const roles = new Set<string>();
    for (const [name, spec] of Object.entries(FUNCTIONS) as [FunctionName, FunctionSpec][]) {
      const id = functionId(name);
      expect(id, name).toBeDefined();
      const granted = connects(statementsOf(id!));
      if (!spec.databaseRole) {
        expect(granted, name).toEqual([]);
        continue;
      }
      expect(Object.hasOwn(DATABASE_ROLES, spec.databaseRole), name).toBe(true);
      roles.add(spec.databaseRole);
      expect(granted, name).toHaveLength(1);
      const resource = JSON.stringify(granted[0]!.Resource);
      // arn:…:rds-db:<region>:<account>:dbuser:<the cluster's resource id>/<the role>, nothing wider.
      expect(resource, name).toContain(`{"Fn::GetAtt":["${cluster[0]}","DBClusterResourceId"]},"/${spec.databaseRole}"]`);
      expect(resource, name).toContain(':dbuser:');
      expect(resource, name).not.toContain('*');
      const env = (resources[id!]!.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      expect(env.ROLLOUT_DB_USER, name).toBe(spec.databaseRole);
      expect(env.ROLLOUT_DB_HOST, name).toEqual({ 'Fn::GetAtt': [cluster[0], 'Endpoint.Address'] });
    }
    // Each role its own function's (the two promoters apart: the batch one alone deletes).
    expect([...roles].sort()).toEqual(['rollout_api', 'rollout_batch_promoter', 'rollout_coordinator', 'rollout_promoter']);
  });

  it('no function but the migrator may read the master secret; the migrator connects with it and with nothing else', () => {
    const attachment = ofType('AWS::SecretsManager::SecretTargetAttachment').map(([id]) => id);
    expect(attachment).toHaveLength(1);
    const secretRef = `{"Ref":"${attachment[0]}"}`;
    const migrator = functionId('migrator');
    expect(migrator).toBeDefined();
    expect(resources[migrator!]!.Properties.Description).toBe(MIGRATOR.description);
    for (const [id] of ofType('AWS::Lambda::Function')) {
      const sts = statementsOf(id);
      const reads = sts.filter((st) => [st.Action].flat().includes('secretsmanager:GetSecretValue') && JSON.stringify(st.Resource).includes(secretRef));
      const env = JSON.stringify(resources[id]!.Properties.Environment ?? {});
      if (id === migrator) {
        expect(reads, id).toHaveLength(1);
        expect(env).toContain(`"ROLLOUT_DB_SECRET_ARN":${secretRef}`);
        expect(connects(sts), id).toEqual([]);
      } else {
        expect(reads, id).toEqual([]);
        expect(env, id).not.toContain('ROLLOUT_DB_SECRET_ARN');
      }
    }
  });

  it('the migrator runs at deploy, after the cluster and before every function', () => {
    const triggers = ofType('Custom::Trigger');
    expect(triggers).toHaveLength(1);
    const [triggerId, trigger] = triggers[0]!;
    const migrator = functionId('migrator')!;
    // The migrator's current version: a new one (so a new run) whenever its code or configuration changes.
    const version = (trigger.Properties.HandlerArn as { Ref: string }).Ref;
    expect(resources[version]).toMatchObject({ Type: 'AWS::Lambda::Version', Properties: { FunctionName: { Ref: migrator } } });
    const after = (trigger as { DependsOn?: string[] }).DependsOn ?? [];
    expect(after).toEqual(expect.arrayContaining(ofType('AWS::RDS::DBCluster').map(([id]) => id)));
    for (const name of Object.keys(FUNCTIONS)) {
      const id = functionId(name)!;
      expect((resources[id] as { DependsOn?: string[] }).DependsOn ?? [], name).toContain(triggerId);
    }
  });

  it('on DynamoDB there is neither a migrator nor a database login', () => {
    const dynamo = synthStack('NoAurora', {}).json.Resources;
    const text = JSON.stringify(dynamo);
    expect(text).not.toContain('rds-db:connect');
    expect(text).not.toContain('Custom::Trigger');
    expect(text).not.toContain(MIGRATOR.description);
  });
});
