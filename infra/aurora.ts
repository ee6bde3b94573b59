import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { FlowLogDestination, FlowLogTrafficType, Port, SecurityGroup, SubnetType, Vpc, type ISecurityGroup, type IVpc, type SubnetSelection } from 'aws-cdk-lib/aws-ec2';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { AuroraPostgresEngineVersion, ClusterInstance, Credentials, DatabaseCluster, DatabaseClusterEngine } from 'aws-cdk-lib/aws-rds';
import { Construct } from 'constructs';

/**
 * The Aurora PostgreSQL Serverless v2 store (`-c store=aurora`): the same
 * `pg` code path as a local PostgreSQL. A VPC with private subnets (one NAT
 * gateway: the functions still reach SQS, EventBridge, X-Ray and Secrets
 * Manager), the cluster encrypted, IAM-authenticated as well, credentials in
 * Secrets Manager with rotation, deletion protection and a final snapshot.
 * The schema is migrated on first use by whichever function connects first
 * (migrations take an advisory lock, so concurrent cold starts are safe).
 */
/** Two AZs, public / private-with-egress (one NAT gateway) / isolated subnets, flow logs of rejected traffic. */
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
  vpc.addFlowLog('FlowLogs', {
    destination: FlowLogDestination.toCloudWatchLogs(new LogGroup(scope, 'FlowLogGroup', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY })),
    trafficType: FlowLogTrafficType.REJECT,
  });
  return vpc;
}

export class AuroraStore extends Construct {
  readonly vpc: IVpc;
  readonly cluster: DatabaseCluster;
  /** Functions join this group; only it may reach the database port. */
  readonly clientGroup: ISecurityGroup;
  readonly subnets: SubnetSelection = { subnetType: SubnetType.PRIVATE_WITH_EGRESS };

  /**
   * `vpc`: one of yours, with private subnets with egress (the functions) and isolated ones (the cluster); default a new one.
   * `reader`: a second instance, in another AZ, that a failover promotes in about a minute. Default none: nothing
   * reads from it, and it would double the idle cost; without one, Aurora recovers a failed writer by creating a new
   * instance (several minutes, with the control plane's writes refused meanwhile).
   */
  constructor(scope: Construct, id: string, o: { readonly vpc?: IVpc; readonly reader?: boolean } = {}) {
    super(scope, id);
    this.vpc = o.vpc ?? controlPlaneVpc(this);
    this.clientGroup = new SecurityGroup(this, 'Clients', { vpc: this.vpc, description: 'Control-plane functions that use the store', allowAllOutbound: true });
    const dbGroup = new SecurityGroup(this, 'Database', { vpc: this.vpc, description: 'The store; reachable from the control-plane functions only', allowAllOutbound: false });
    this.cluster = new DatabaseCluster(this, 'Cluster', {
      engine: DatabaseClusterEngine.auroraPostgres({ version: AuroraPostgresEngineVersion.VER_16_6 }),
      credentials: Credentials.fromGeneratedSecret('rollout'),
      defaultDatabaseName: 'rollout',
      writer: ClusterInstance.serverlessV2('writer'),
      readers: o.reader ? [ClusterInstance.serverlessV2('reader', { scaleWithWriter: true })] : [],
      serverlessV2MinCapacity: 0.5,
      serverlessV2MaxCapacity: 8,
      vpc: this.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
      securityGroups: [dbGroup],
      port: 5433,
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
      ['AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]', 'CDK log-retention helper: writes only its own logs'],
      ['AwsSolutions::AwsSolutions-IAM5[Resource::*]', 'CDK log-retention helper: sets retention on log groups whose names it learns at deploy time'],
    ] as const) {
      const helper = Stack.of(this).node.children.find((c) => c.node.id.startsWith('LogRetention'));
      if (helper) Validations.of(helper).acknowledge({ id: finding, reason });
    }
    dbGroup.addIngressRule(this.clientGroup, Port.tcp(5433), 'control-plane functions');
    this.cluster.addRotationSingleUser({ automaticallyAfter: Duration.days(30), vpcSubnets: this.subnets });
  }

  /** What a function needs to connect: the secret (read), the network, the CA bundle for TLS verification. */
  grant(fn: IFunction & { addEnvironment(key: string, value: string): unknown }): void {
    this.cluster.secret!.grantRead(fn);
    fn.addEnvironment('ROLLOUT_DB_SECRET_ARN', this.cluster.secret!.secretArn);
    // Lambda's Node.js runtimes ship the RDS CA bundle but (from Node 20) do not load it by default.
    fn.addEnvironment('NODE_EXTRA_CA_CERTS', '/var/runtime/ca-cert.pem');
  }
}
