import { AssetHashType, DockerImage, Duration, Stack, Validations, type CfnElement } from 'aws-cdk-lib';
import { AutoScalingGroup, SpotAllocationStrategy } from 'aws-cdk-lib/aws-autoscaling';
import {
  AmazonLinuxCpuType,
  BlockDeviceVolume,
  InstanceType,
  LaunchTemplate,
  MachineImage,
  SecurityGroup,
  SubnetType,
  UserData,
  type IVpc,
} from 'aws-cdk-lib/aws-ec2';
import { ManagedPolicy, PolicyStatement, Role, ServicePrincipal, type IRole } from 'aws-cdk-lib/aws-iam';
import { Asset } from 'aws-cdk-lib/aws-s3-assets';
import { Construct } from 'constructs';
import { copyFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import type * as Esbuild from 'esbuild';
import { runLeadingKeys } from '../shared/adapters/dynamodb/table.js';
import { instancePartition } from '../shared/adapters/dynamodb/registry-store.js';
import { grantBoundPartition, grantItems } from './grants.js';
import { controlPlaneVpc } from './aurora.js';
import { packageRoot, WORKER_COMMAND_OPTIONS } from './code.js';
import { KMS_GRANT_FINDINGS, type RolloutControlPlane } from './control-plane.js';

/**
 * A Spot worker fleet: an EC2 Auto Scaling group (Amazon Linux 2023) whose
 * instances run `rollout worker` for your runs as a systemd service, with
 * your own worker module (`module`: the worker SDK's handler, bundled at
 * synth as NodejsFunction bundles an entry) or the built-in mock. The
 * command ships as an S3 asset (no container image, no Docker). Workers
 * watch the instance metadata for Spot notices themselves (`--provider
 * aws`) and are also reached by the spot-drain function through the
 * registry; systemd's SIGTERM on shutdown drains as well. Each instance
 * registers its workers under its own ARN, and its role may write the
 * registry there only (`INSTANCE#${ec2:SourceInstanceARN}`).
 */
export interface WorkerFleetProps {
  /** Whose runs: its table, work queue and coordinator (the DynamoDB store). */
  readonly controlPlane: RolloutControlPlane;
  /** The runs every instance serves (one worker of each per instance). */
  readonly runs: readonly string[];
  /** Your worker module (a .js/.mjs/.ts file whose default export, or `handler`, runs each item); default the built-in mock. Bundled at synth by esbuild. */
  readonly module?: string;
  /** Default: a new VPC (two AZs, one NAT gateway). Instances go in its private subnets with egress. */
  readonly vpc?: IVpc;
  /** Default c7g.large, m7g.large, c6g.large, m6g.large (arm64). All of one architecture: Graviton (…g…) or x86. */
  readonly instanceTypes?: readonly string[];
  /** Spot (default) or On-Demand capacity. */
  readonly spot?: boolean;
  readonly desiredCapacity?: number;
  readonly minCapacity?: number;
  readonly maxCapacity?: number;
  /** More `rollout worker` flags, e.g. ['--item-timeout', '30m']. */
  readonly workerArgs?: readonly string[];
}

/** The registry partition an instance of a fleet may read and write: its own, named by the ARN IAM sees its requests come from. */
export const INSTANCE_REGISTRY = instancePartition('${ec2:SourceInstanceARN}');

const DEFAULT_TYPES = ['c7g.large', 'm7g.large', 'c6g.large', 'm6g.large'];
const ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Graviton: a1, and the families with a g after the generation (c7g, m6gd, t4g, c7gn, g5g, is4gen); g5 or inf2 are x86. */
function cpuOf(types: readonly string[]): AmazonLinuxCpuType {
  const arm = types.map((t) => /^(a1|[a-z]+\d+[a-z]*g[a-z]*)\./.test(t));
  if (arm.some((a) => a !== arm[0]))
    throw new Error(`invalid worker fleet config: instanceTypes: mixes arm64 and x86 (${types.join(', ')}): one AMI serves them all`);
  return arm[0] ? AmazonLinuxCpuType.ARM_64 : AmazonLinuxCpuType.X86_64;
}

/** One ExecStart argument as systemd reads it: double-quoted, with its own escapes (\\ \" and %% $$ for its specifiers and variables). */
export function systemdArg(a: string): string {
  if (/[\n\r\0]/.test(a)) throw new Error(`invalid worker fleet config: workerArgs: ${JSON.stringify(a)} holds a line break`);
  return `"${a.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/%/g, '%%').replace(/\$/g, '$$$$')}"`;
}

export class WorkerFleet extends Construct {
  readonly group: AutoScalingGroup;
  readonly role: IRole;

  constructor(scope: Construct, id: string, props: WorkerFleetProps) {
    super(scope, id);
    const { table, coordinator } = props.controlPlane.workerResources;
    if (!props.runs.length) throw new Error('invalid worker fleet config: runs: at least one run');
    // A worker takes what it receives from the fleet's queue: one run per fleet, so each run's workers receive only its items.
    if (props.runs.length > 1)
      throw new Error(
        "invalid worker fleet config: runs: one run per fleet (a fleet's queue carries its runs' items and each worker takes what it receives; a fleet per run)",
      );
    for (const r of props.runs)
      if (!ID.test(r)) throw new Error(`invalid worker fleet config: runs: "${r}" is not a run id (letters, digits, _ . : -, at most 128)`);
    const types = props.instanceTypes?.length ? props.instanceTypes : DEFAULT_TYPES;
    const cpu = cpuOf(types);
    const desired = props.desiredCapacity ?? 2;
    const module = props.module ? resolve(props.module) : null;
    if (module && !existsSync(module)) throw new Error(`invalid worker fleet config: module: ${module} does not exist`);
    if ((props.workerArgs ?? []).some((a) => /^--instance-id(=|$)/.test(a)))
      throw new Error(
        "invalid worker fleet config: workerArgs: --instance-id is the fleet's: each instance registers under its own ARN, the only name its role may write",
      );
    const extraArgs = (props.workerArgs ?? []).map(systemdArg);
    // Its own queue, once the props are checked: these runs' items are sent there and nowhere else, and the role is granted it alone.
    const workQueue = props.controlPlane.fleetQueue(this, props.runs);
    const bundle = new Asset(this, 'Command', {
      path: packageRoot(),
      assetHashType: AssetHashType.OUTPUT,
      bundling: {
        // Only used if local bundling were impossible; it never is.
        image: DockerImage.fromRegistry('public.ecr.aws/docker/library/node:22'),
        local: { tryBundle: (outputDir) => bundleCommand(outputDir, module) },
      },
    });

    const role = new Role(this, 'Role', { assumedBy: new ServicePrincipal('ec2.amazonaws.com'), description: 'rollout worker instances' });
    this.role = role;
    // Session Manager instead of SSH: no inbound port at all.
    role.addManagedPolicy(ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore'));
    // These runs' items and index keys (and their roster of workers): no other run's, no rollout's, no lease to write.
    const runKeys = props.runs.flatMap((r) => runLeadingKeys(r));
    grantItems(role, table, 'read', runKeys);
    grantItems(
      role,
      table,
      'write',
      runKeys.filter((k) => !k.startsWith('LEASE#')),
    );
    // The registry: each instance its own records only, under its own ARN (the workers register with it, below).
    grantBoundPartition(role, table, INSTANCE_REGISTRY);
    workQueue.grantConsumeMessages(role);
    workQueue.grantSendMessages(role);
    // Its own alias of the coordinator, nothing else of it: through it the coordinator answers steals for these runs only.
    const coordinatorAlias = props.controlPlane.fleetCoordinator(this, props.runs);
    role.addToPolicy(new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [coordinatorAlias.functionArn] }));
    // The one object, not the whole bootstrap bucket.
    role.addToPolicy(
      new PolicyStatement({ actions: ['s3:GetObject'], resources: [`arn:${Stack.of(this).partition}:s3:::${bundle.s3BucketName}/${bundle.s3ObjectKey}`] }),
    );

    const args = [
      ...props.runs.flatMap((r) => ['--run', r]),
      '--store dynamodb',
      `--table ${table.tableName}`,
      `--queue ${workQueue.queueUrl}`,
      `--coordinator lambda:${coordinator.functionName}:${coordinatorAlias.aliasName}`,
      // Its ARN, written at boot (below): the registry grant is bound to it.
      '--provider aws --instance-id ${ROLLOUT_INSTANCE_ARN}',
      ...(module ? ['--module /opt/rollout/worker.mjs'] : []),
      ...extraArgs,
      '--json',
    ];
    const stack = Stack.of(this);
    const userData = UserData.forLinux();
    userData.addCommands(
      'set -euo pipefail',
      'dnf install -y nodejs22',
      'mkdir -p /opt/rollout',
      `aws s3 cp s3://${bundle.s3BucketName}/${bundle.s3ObjectKey} /tmp/rollout.zip`,
      'cd /opt/rollout && python3 -m zipfile -e /tmp/rollout.zip .',
      // The instance's ARN, as IAM gives it in ec2:SourceInstanceARN: the ASG launches in this stack's account and region.
      'IMDS_TOKEN=$(curl -sSf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 60")',
      'INSTANCE_ID=$(curl -sSf -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" http://169.254.169.254/latest/meta-data/instance-id)',
      `echo "ROLLOUT_INSTANCE_ARN=arn:${stack.partition}:ec2:${stack.region}:${stack.account}:instance/$INSTANCE_ID" > /etc/rollout-worker.env`,
      // Quoted: the shell expands nothing in the unit; systemd reads its arguments as systemdArg wrote them.
      "cat > /etc/systemd/system/rollout-worker.service <<'UNIT'",
      '[Unit]',
      'Description=rollout worker',
      'After=network-online.target',
      '[Service]',
      `ExecStart=/usr/bin/node-22 /opt/rollout/rollout.mjs worker ${args.join(' ')}`,
      `Environment=AWS_REGION=${stack.region}`,
      'EnvironmentFile=/etc/rollout-worker.env',
      'Restart=on-failure',
      // A drain needs at most the AWS drain deadline (60 s).
      'TimeoutStopSec=75',
      'KillSignal=SIGTERM',
      '[Install]',
      'WantedBy=multi-user.target',
      'UNIT',
      'systemctl daemon-reload && systemctl enable --now rollout-worker',
    );

    const vpc = props.vpc ?? controlPlaneVpc(this);
    const launchTemplate = new LaunchTemplate(this, 'LaunchTemplate', {
      machineImage: MachineImage.latestAmazonLinux2023({ cpuType: cpu }),
      instanceType: new InstanceType(types[0]!),
      role,
      userData,
      securityGroup: new SecurityGroup(this, 'Group', { vpc, description: 'rollout workers: outbound only', allowAllOutbound: true }),
      requireImdsv2: true,
      detailedMonitoring: true,
      blockDevices: [{ deviceName: '/dev/xvda', volume: BlockDeviceVolume.ebs(16, { encrypted: true }) }],
    });
    this.group = new AutoScalingGroup(this, 'Fleet', {
      vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      minCapacity: props.minCapacity ?? 0,
      maxCapacity: props.maxCapacity ?? Math.max(desired, 1) * 2,
      desiredCapacity: desired,
      mixedInstancesPolicy: {
        launchTemplate,
        instancesDistribution:
          props.spot === false
            ? { onDemandPercentageAboveBaseCapacity: 100 }
            : { onDemandPercentageAboveBaseCapacity: 0, spotAllocationStrategy: SpotAllocationStrategy.PRICE_CAPACITY_OPTIMIZED },
        launchTemplateOverrides: types.map((t) => ({ instanceType: new InstanceType(t) })),
      },
      capacityRebalance: props.spot !== false,
      defaultInstanceWarmup: Duration.minutes(2),
    });
    if (workQueue.encryptionMasterKey || table.encryptionKey) Validations.of(this).acknowledge(...KMS_GRANT_FINDINGS);
    Validations.of(this).acknowledge(
      {
        id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]',
        reason: 'Session Manager access instead of SSH; grants the instance its SSM agent permissions only',
      },
      { id: 'Annotation::@aws-cdk/aws-autoscaling:desiredCapacitySet', reason: 'The fleet size is the workerCount context: a deployment is meant to set it' },
      {
        id: 'AwsSolutions::AwsSolutions-AS3',
        reason: 'Scaling events are visible in the Auto Scaling activity history and EventBridge; no SNS topic is wanted by default',
      },
      {
        id: 'AwsSolutions::AwsSolutions-EC26',
        reason: 'The rule cannot read a mixed-instances launch template; its only block device is encrypted (LaunchTemplate above)',
      },
      ...(table.node.defaultChild
        ? [
            {
              id: `AwsSolutions::AwsSolutions-IAM5[Resource::<${Stack.of(this).getLogicalId(table.node.defaultChild as CfnElement)}.Arn>/index/*]`,
              reason: 'The table grant covers the table’s own index (gsi1), nothing else',
            },
          ]
        : []),
    );
  }
}

/**
 * The instance's files: rollout.mjs (the command: bundled from the sources
 * in this repository, or as `npm run build` bundled it in the package) and,
 * with a module of yours, worker.mjs bundled from it. esbuild is needed only
 * for what is bundled here.
 */
function bundleCommand(outputDir: string, module: string | null): boolean {
  const root = packageRoot();
  const source = join(root, 'shared', 'runtimes', 'cli', 'cli.ts');
  // Loaded here, not at the top: a user of RolloutControlPlane alone, or of a fleet without a module, never needs esbuild.
  const esbuild = () => createRequire(import.meta.url)('esbuild') as typeof Esbuild;
  if (existsSync(source)) esbuild().buildSync({ ...WORKER_COMMAND_OPTIONS, entryPoints: [source], outfile: join(outputDir, 'rollout.mjs') });
  else {
    const built = join(root, 'dist', 'worker', 'rollout.mjs');
    if (!existsSync(built)) throw new Error(`rollout-control-plane: the worker command's bundle is missing (${built}): run npm run build`);
    copyFileSync(built, join(outputDir, 'rollout.mjs'));
  }
  if (module) esbuild().buildSync({ ...WORKER_COMMAND_OPTIONS, entryPoints: [module], outfile: join(outputDir, 'worker.mjs') });
  return true;
}
