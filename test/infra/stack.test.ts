import { App, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, Table } from 'aws-cdk-lib/aws-dynamodb';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { ControlPlaneStack } from '../../infra/stack.js';
import { tableDefinition } from '../../shared/store/dynamodb/table.js';

function synth() {
  const app = new App();
  const stack = new ControlPlaneStack(app, 'Test');
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const assembly = app.synth(); // throws on any unacknowledged cdk-nag finding
  return { template: Template.fromStack(stack), assembly };
}

describe('ControlPlaneStack', () => {
  const { template } = synth();

  it('declares the store table with the keys the code uses', () => {
    const def = tableDefinition('x');
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: def.KeySchema,
      AttributeDefinitions: Match.arrayWith(def.AttributeDefinitions!.map((a) => Match.objectLike(a))),
      BillingMode: 'PAY_PER_REQUEST',
      GlobalSecondaryIndexes: [Match.objectLike({ IndexName: def.GlobalSecondaryIndexes![0]!.IndexName, KeySchema: def.GlobalSecondaryIndexes![0]!.KeySchema })],
    });
  });

  it('keeps lease rows safe: PITR, encryption, deletion protection, retained on stack delete', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
      DeletionProtectionEnabled: true,
      TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    });
    template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
  });

  it('outputs the table name', () => {
    template.hasOutput('StoreTableName', { Value: Match.anyValue() });
    expect(Object.keys(template.findResources('AWS::DynamoDB::Table'))).toHaveLength(1);
  });
});

describe('cdk-nag at synth', () => {
  it('fails the synth on an unacknowledged finding', () => {
    const app = new App();
    const stack = new Stack(app, 'Bad');
    new Table(stack, 'NoPitr', { partitionKey: { name: 'pk', type: AttributeType.STRING } });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow(/AwsSolutions-DDB3/);
  });
});
