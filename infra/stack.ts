import { CfnOutput, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';
import { GSI1, KEY } from '../shared/store/dynamodb/table.js';

/**
 * The control plane in AWS. So far: the store table that holds the lease rows
 * (and, as the rollout and ledger land, everything else). Keys come from the
 * same module the code and the tests use, so they cannot drift.
 */
export class ControlPlaneStack extends Stack {
  readonly table: Table;

  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);

    this.table = new Table(this, 'Store', {
      partitionKey: { name: KEY.pk, type: AttributeType.STRING },
      sortKey: { name: KEY.sk, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // Records that may expire carry `ttl`; lease items never do — a lease row
      // removed by TTL would come back at epoch 0 and break fencing.
      timeToLiveAttribute: 'ttl',
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    this.table.addGlobalSecondaryIndex({
      indexName: GSI1.name,
      partitionKey: { name: GSI1.pk, type: AttributeType.STRING },
      sortKey: { name: GSI1.sk, type: AttributeType.STRING },
    });

    new CfnOutput(this, 'StoreTableName', { value: this.table.tableName });
  }
}
