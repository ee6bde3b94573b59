import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import {
  FlowLogDestination,
  FlowLogTrafficType,
  GatewayVpcEndpointAwsService,
  Port,
  SecurityGroup,
  SubnetType,
  Vpc,
  type ISecurityGroup,
  type IVpc,
  type SubnetSelection,
} from 'aws-cdk-lib/aws-ec2';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { AuroraPostgresEngineVersion, ClusterInstance, Credentials, DatabaseCluster, DatabaseClusterEngine } from 'aws-cdk-lib/aws-rds';
import { Construct } from 'constructs';

/**
 * The Aurora PostgreSQL Serverless v2 store (`-c store=aurora`): the same
 * `pg` code path as a local PostgreSQL. A VPC with private subnets, the
 * cluster encrypted, IAM-authenticated as well, credentials in Secrets
 * Manager with rotation, deletion protection and a final snapshot. The schema
 * is migrated at deploy by the migrator, the one function holding the master
 * secret, which also sets up a database role per function; every other
 * function logs in as its own role with an IAM token (IAM database
 * authentication), and may do only what that role may.
 *
 * Idle, it costs what the VPC's NAT gateway costs: the cluster's minimum is
 * 0 ACU, so it pauses after AUTO_PAUSE without a connection, and nothing on
 * a schedule wakes it (the activity flags, functions/activity.ts, and pools
 * closed at the end of each invocation, functions/runtime.ts).
 */

/** The cluster's port and database. */
const PORT = 5433;
const DATABASE_NAME = 'rollout';

/** How long the cluster stays up with no connection before it pauses (Aurora's shortest). */
export const AUTO_PAUSE = Duration.minutes(5);

/**
 * Two AZs, public / private-with-egress / isolated subnets, flow logs of
 * rejected traffic. One NAT gateway: the functions in the VPC reach SQS,
 * EventBridge, Secrets Manager, X-Ray and CloudWatch through it, and the
 * origins gates read and the targets rollouts move (Prometheus, webhooks,
 * ALB and Lambda APIs). Interface endpoints instead would cost more (US$ 7.20
 * a month each per AZ, four services at least, two AZs: US$ 57.60, against
 * US$ 36 for the gateway and its address; `npm run cost -- --store aurora`)
 * and still leave gates and targets outside AWS unreachable. DynamoDB (the
 * activity flags, a worker fleet's table) goes through a gateway endpoint,
 * which is free and spares the NAT gateway's per-GB charge.
 */
export function controlPlaneVpc(scope: Construct): Vpc {
  const vpc = new Vpc(scope, 'Vpc', {
    maxAzs: 2,
    natGateways: 1,
    subnetConfiguration: [
      { name: 'public', subnetType: SubnetType.PUBLIC, cidrMask: 24 },
      { name: 'private', subnetType: SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 22 },
      { name: 'data', subnetType: SubnetType.PRIVATE_ISOLATED, cidrMask: 24 },
    ],
  });
  vpc.addGatewayEndpoint('DynamoDb', { service: GatewayVpcEndpointAwsService.DYNAMODB });
  vpc.addFlowLog('FlowLogs', {
    destination: FlowLogDestination.toCloudWatchLogs(
      new LogGroup(scope, 'FlowLogGroup', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
    ),
    trafficType: FlowLogTrafficType.REJECT,
  });
  return vpc;
}

export interface AuroraStoreOptions {
  /** One of yours, with private subnets with egress (the functions) and isolated ones (the cluster); default a new one. */
  readonly vpc?: IVpc;
  /**
   * A second instance, in another AZ, that a failover promotes in about a minute. Default none: nothing reads from
   * it, and it would double the busy cost; without one, Aurora recovers a failed writer by creating a new instance
   * (several minutes, with the control plane's writes refused meanwhile).
   */
  readonly reader?: boolean;
  /**
   * The cluster's minimum ACUs. Default 0: it pauses after AUTO_PAUSE without a connection and costs nothing for
   * compute while paused; the first connection after a pause waits for it to resume (about 15 s; longer after a
   * day or more). 0.5 or more: it never pauses, and costs that many ACU-hours all month.
   */
  readonly minCapacity?: number;
}

export class AuroraStore extends Construct {
  readonly vpc: IVpc;
  readonly cluster: DatabaseCluster;
  /** Functions join this group; only it may reach the database port. */
  readonly clientGroup: ISecurityGroup;
  readonly subnets: SubnetSelection = { subnetType: SubnetType.PRIVATE_WITH_EGRESS };
  /**
   * The activity flags (functions/activity.ts): whether anything may have started since the scheduled probes last
   * found nothing to do. Two small items; a missing one counts as raised, so nothing in it needs keeping.
   */
  readonly activity: Table;

  constructor(scope: Construct, id: string, o: AuroraStoreOptions = {}) {
    super(scope, id);
    const minCapacity = o.minCapacity ?? 0;
    if (!(minCapacity >= 0 && minCapacity <= 8 && Number.isInteger(minCapacity * 2)))
      throw new Error(`invalid control plane config: auroraMinCapacity: 0 to 8 in steps of 0.5, got ${minCapacity}`);
    this.vpc = o.vpc ?? controlPlaneVpc(this);
    this.clientGroup = new SecurityGroup(this, 'Clients', { vpc: this.vpc, description: 'Control-plane functions that use the store', allowAllOutbound: true });
    const dbGroup = new SecurityGroup(this, 'Database', {
      vpc: this.vpc,
      description: 'The store; reachable from the control-plane functions only',
      allowAllOutbound: false,
    });
    this.cluster = new DatabaseCluster(this, 'Cluster', {
      // 0 ACU (auto-pause) needs Aurora PostgreSQL 13.15, 14.12, 15.7, 16.3 or later: 16.6 has it.
      engine: DatabaseClusterEngine.auroraPostgres({ version: AuroraPostgresEngineVersion.VER_16_6 }),
      credentials: Credentials.fromGeneratedSecret('rollout'),
      defaultDatabaseName: DATABASE_NAME,
      writer: ClusterInstance.serverlessV2('writer'),
      readers: o.reader ? [ClusterInstance.serverlessV2('reader', { scaleWithWriter: true })] : [],
      serverlessV2MinCapacity: minCapacity,
      ...(minCapacity === 0 ? { serverlessV2AutoPauseDuration: AUTO_PAUSE } : {}),
      serverlessV2MaxCapacity: 8,
      vpc: this.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
      securityGroups: [dbGroup],
      port: PORT,
      storageEncrypted: true,
      iamAuthentication: true,
      deletionProtection: true,
      backup: { retention: Duration.days(7) },
      removalPolicy: RemovalPolicy.SNAPSHOT,
      cloudwatchLogsExports: ['postgresql'],
      cloudwatchLogsRetention: RetentionDays.ONE_MONTH,
    });
    // cloudwatchLogsRetention above is applied by CDK's log-retention helper function at the stack root.
    for (const [finding, reason] of [
      [
        'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        'CDK log-retention helper: writes only its own logs',
      ],
      ['AwsSolutions::AwsSolutions-IAM5[Resource::*]', 'CDK log-retention helper: sets retention on log groups whose names it learns at deploy time'],
    ] as const) {
      const helper = Stack.of(this).node.children.find((c) => c.node.id.startsWith('LogRetention'));
      if (helper) Validations.of(helper).acknowledge({ id: finding, reason });
    }
    dbGroup.addIngressRule(this.clientGroup, Port.tcp(PORT), 'control-plane functions');
    this.cluster.addRotationSingleUser({ automaticallyAfter: Duration.days(30), vpcSubnets: this.subnets });
    // The AWS owned key: no KMS request is billed for the reads a minute the probes make.
    this.activity = new Table(this, 'ActivityFlags', {
      partitionKey: { name: 'flag', type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.DEFAULT,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    Validations.of(this.activity).acknowledge({
      id: 'AwsSolutions::AwsSolutions-DDB3',
      reason: 'Two flags rebuilt by the next write; a missing flag counts as raised (the database is read): nothing to restore',
    });
  }

  /**
   * The activity flags, for a function that may start work (`raise`: the API, the streaming promoter) or probes
   * for it on a schedule (`probe`: reads the flag, lowers it when the database shows nothing to do).
   */
  grantActivity(fn: IFunction & { addEnvironment(key: string, value: string): unknown }, use: 'raise' | 'probe'): void {
    fn.addEnvironment('ROLLOUT_ACTIVITY_TABLE', this.activity.tableName);
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: use === 'probe' ? ['dynamodb:GetItem', 'dynamodb:UpdateItem'] : ['dynamodb:UpdateItem'],
        resources: [this.activity.tableArn],
      }),
    );
  }

  /**
   * What a function needs to log in as its own database role `user`
   * (shared/adapters/postgres/roles.ts, set up by the migrator): `rds-db:connect`
   * on that database user alone, the endpoint, the CA bundle for TLS
   * verification. No secret: the token is signed with the function's own
   * credentials (functions/db-auth.ts).
   */
  grantConnect(fn: IFunction & { addEnvironment(key: string, value: string): unknown }, user: string): void {
    this.cluster.grantConnect(fn, user);
    fn.addEnvironment('ROLLOUT_DB_HOST', this.cluster.clusterEndpoint.hostname);
    fn.addEnvironment('ROLLOUT_DB_PORT', String(PORT));
    fn.addEnvironment('ROLLOUT_DB_NAME', DATABASE_NAME);
    fn.addEnvironment('ROLLOUT_DB_USER', user);
    // Lambda's Node.js runtimes ship the RDS CA bundle but (from Node 20) do not load it by default.
    fn.addEnvironment('NODE_EXTRA_CA_CERTS', '/var/runtime/ca-cert.pem');
  }

  /** The migrator's: the master secret (read), which owns the schema and creates the functions' roles. No other function gets it. */
  grantMaster(fn: IFunction & { addEnvironment(key: string, value: string): unknown }): void {
    this.cluster.secret!.grantRead(fn);
    fn.addEnvironment('ROLLOUT_DB_SECRET_ARN', this.cluster.secret!.secretArn);
    fn.addEnvironment('NODE_EXTRA_CA_CERTS', '/var/runtime/ca-cert.pem');
  }
}
