import { AssetHashType, DockerImage, Duration, Stack, Validations, type CfnElement } from 'aws-cdk-lib';
import { AutoScalingGroup, SpotAllocationStrategy } from 'aws-cdk-lib/aws-autoscaling';
import { BlockDeviceVolume, InstanceType, LaunchTemplate, MachineImage, AmazonLinuxCpuType, SecurityGroup, SubnetType, UserData, type IVpc } from 'aws-cdk-lib/aws-ec2';
import { ManagedPolicy, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { LEADING_KEYS, runLeadingKeys } from '../shared/adapters/dynamodb/table.js';
import { grantItems } from './grants.js';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Asset } from 'aws-cdk-lib/aws-s3-assets';
import { buildSync } from 'esbuild';
import { Construct } from 'constructs';
import { join } from 'node:path';

/**
 * The optional worker fleet (`-c workerRun=<run id>`): an EC2 Spot Auto
 * Scaling group (arm64, Amazon Linux 2023) running `rollout worker` for one
 * run as a systemd service. The command is bundled at synth by the local
 * esbuild into one file and shipped as an S3 asset — no container image, no
 * Docker. Workers watch the instance metadata for Spot notices themselves
 * (`--provider aws`) and are also reached by the spot-drain Lambda through
 * the registry; systemd's SIGTERM on shutdown drains as well.
 */
export interface WorkerFleetProps {
  readonly vpc: IVpc;
  readonly root: string;
  readonly runId: string;
  readonly table: ITable;
  readonly workQueue: IQueue;
  readonly coordinator: IFunction;
  readonly desired: number;
}

export class WorkerFleet extends Construct {
  readonly group: AutoScalingGroup;

  constructor(scope: Construct, id: string, props: WorkerFleetProps) {
    super(scope, id);
    const bundle = new Asset(this, 'Command', {
      path: join(props.root, 'shared', 'runtimes'),
      assetHashType: AssetHashType.OUTPUT,
      bundling: {
        // Only used if local bundling were impossible; esbuild is a dependency, so it never is.
        image: DockerImage.fromRegistry('public.ecr.aws/docker/library/node:22'),
        local: {
          tryBundle(outputDir: string): boolean {
            buildSync({
              entryPoints: [join(props.root, 'shared', 'runtimes', 'cli', 'cli.ts')],
              outfile: join(outputDir, 'rollout.mjs'),
              bundle: true,
              platform: 'node',
              format: 'esm',
              target: 'node22',
              minify: true,
              external: ['@electric-sql/pglite', 'pg-native'],
              // Some bundled CommonJS dependencies call require(): give ESM one.
              banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
              logLevel: 'warning',
            });
            return true;
          },
        },
      },
    });

    const role = new Role(this, 'Role', { assumedBy: new ServicePrincipal('ec2.amazonaws.com'), description: 'rollout worker instances' });
    // Session Manager instead of SSH: no inbound port at all.
    role.addManagedPolicy(ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore'));
    // This run's items and index keys, and the worker registry: no other run's, no rollout's, no lease to write.
    grantItems(role, props.table, 'read', [...runLeadingKeys(props.runId), ...LEADING_KEYS.registry]);
    grantItems(role, props.table, 'write', [...runLeadingKeys(props.runId).filter((k) => !k.startsWith('LEASE#')), ...LEADING_KEYS.registry]);
    props.workQueue.grantConsumeMessages(role);
    props.workQueue.grantSendMessages(role);
    props.coordinator.grantInvoke(role);
    // The one object, not the whole bootstrap bucket.
    role.addToPolicy(new PolicyStatement({ actions: ['s3:GetObject'], resources: [`arn:${Stack.of(this).partition}:s3:::${bundle.s3BucketName}/${bundle.s3ObjectKey}`] }));

    const userData = UserData.forLinux();
    userData.addCommands(
      'set -euo pipefail',
      'dnf install -y nodejs22',
      'mkdir -p /opt/rollout',
      `aws s3 cp s3://${bundle.s3BucketName}/${bundle.s3ObjectKey} /tmp/rollout.zip`,
      'cd /opt/rollout && python3 -m zipfile -e /tmp/rollout.zip .',
      'cat > /etc/systemd/system/rollout-worker.service <<UNIT',
      '[Unit]',
      'Description=rollout worker',
      'After=network-online.target',
      '[Service]',
      `ExecStart=/usr/bin/node-22 /opt/rollout/rollout.mjs worker --run ${props.runId} --store dynamodb --table ${props.table.tableName} --queue ${props.workQueue.queueUrl} --coordinator lambda:${props.coordinator.functionName} --provider aws --instance-id auto --json`,
      `Environment=AWS_REGION=${Stack.of(this).region}`,
      'Restart=on-failure',
      // A drain needs at most the AWS drain deadline (60 s).
      'TimeoutStopSec=75',
      'KillSignal=SIGTERM',
      '[Install]',
      'WantedBy=multi-user.target',
      'UNIT',
      'systemctl daemon-reload && systemctl enable --now rollout-worker',
    );

    const launchTemplate = new LaunchTemplate(this, 'LaunchTemplate', {
      machineImage: MachineImage.latestAmazonLinux2023({ cpuType: AmazonLinuxCpuType.ARM_64 }),
      instanceType: new InstanceType('c7g.large'),
      role,
      userData,
      securityGroup: new SecurityGroup(this, 'Group', { vpc: props.vpc, description: 'rollout workers: outbound only', allowAllOutbound: true }),
      requireImdsv2: true,
      detailedMonitoring: true,
      blockDevices: [{ deviceName: '/dev/xvda', volume: BlockDeviceVolume.ebs(16, { encrypted: true }) }],
    });
    this.group = new AutoScalingGroup(this, 'Fleet', {
      vpc: props.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      minCapacity: 0,
      maxCapacity: Math.max(props.desired, 1) * 2,
      desiredCapacity: props.desired,
      mixedInstancesPolicy: {
        launchTemplate,
        instancesDistribution: { onDemandPercentageAboveBaseCapacity: 0, spotAllocationStrategy: SpotAllocationStrategy.PRICE_CAPACITY_OPTIMIZED },
        launchTemplateOverrides: ['c7g.large', 'm7g.large', 'c6g.large', 'm6g.large'].map((t) => ({ instanceType: new InstanceType(t) })),
      },
      capacityRebalance: true,
      defaultInstanceWarmup: Duration.minutes(2),
    });
    Validations.of(this).acknowledge(
      { id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]', reason: 'Session Manager access instead of SSH; grants the instance its SSM agent permissions only' },
      { id: 'Annotation::@aws-cdk/aws-autoscaling:desiredCapacitySet', reason: 'The fleet size is the workerCount context: a deployment is meant to set it' },
      { id: 'AwsSolutions::AwsSolutions-AS3', reason: 'Scaling events are visible in the Auto Scaling activity history and EventBridge; no SNS topic is wanted by default' },
      { id: 'AwsSolutions::AwsSolutions-EC26', reason: 'The rule cannot read a mixed-instances launch template; its only block device is encrypted (LaunchTemplate above)' },
      { id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${Stack.of(this).getLogicalId(props.coordinator.node.defaultChild as CfnElement)}.Arn>:*]`, reason: 'Invoking the coordinator function (any of its versions), nothing else' },
      { id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${Stack.of(this).getLogicalId(props.table.node.defaultChild as CfnElement)}.Arn>/index/*]`, reason: 'The table grant covers the table’s own index (gsi1), nothing else' },
    );
  }
}
