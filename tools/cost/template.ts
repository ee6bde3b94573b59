/**
 * The synthesized CloudFormation template as the cost model reads it, the
 * estimate it returns, the resource types with no charge of their own, and
 * the small readers the estimate shares.
 */
import type { FunctionName } from '../../shared/topology.js';
import type { Assumptions } from './assumptions.js';

export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}
export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
}

export interface LineItem {
  readonly what: string;
  /** US$ a month. */
  readonly idle: number;
  readonly busy: number;
  /** How the figures follow from the template and the assumptions. */
  readonly basis: string;
  readonly freeTier?: string;
}

export interface ScheduleCount {
  readonly rule: string;
  readonly expression: string;
  /** Logical ids of the functions it invokes. */
  readonly targets: readonly string[];
  readonly perMonth: number;
}

export interface CostEstimate {
  readonly store: 'dynamodb' | 'aurora';
  readonly lines: readonly LineItem[];
  readonly idle: number;
  readonly busy: number;
  /** Logical ids of the resources each line counted, by type: what a test compares with the template. */
  readonly counted: Readonly<Record<string, readonly string[]>>;
  readonly schedules: readonly ScheduleCount[];
  /** Invocations a month of every function, by logical id. */
  readonly invocations: Readonly<Record<string, { readonly idle: number; readonly busy: number }>>;
  /** Resource types in the template this estimate neither prices nor knows to be free: a new billable resource to add here. */
  readonly unpriced: readonly string[];
  readonly assumptions: Assumptions;
}

/** Resource types with no charge of their own (what they carry is priced on another line, or nothing). */
export const NO_CHARGE_OF_THEIR_OWN: Readonly<Record<string, string>> = {
  'AWS::IAM::Role': 'free',
  'AWS::IAM::Policy': 'free',
  'AWS::Lambda::Permission': 'free',
  'AWS::Lambda::Version': "free: the migrator's version its deploy-time trigger runs",
  'Custom::Trigger': "free: the migrator's one invocation at each deploy",
  'AWS::Lambda::EventInvokeConfig': 'free',
  'AWS::SQS::Queue': 'billed by request: the SQS line',
  'AWS::SQS::QueuePolicy': 'free',
  // The alarm topic: a standing topic costs nothing; an alarm notification is US$ 0.50 per million publishes (plus the subscriber's own: e-mail, SMS), and alarms fire rarely.
  'AWS::SNS::Topic': 'free to keep; US$ 0.50 per million notifications',
  'AWS::SNS::TopicPolicy': 'free',
  'AWS::Events::EventBus': 'billed by event: the EventBridge line',
  'AWS::Events::EventBusPolicy': 'free',
  'AWS::Logs::LogGroup': 'billed by ingestion and storage: the logs line',
  'AWS::ApiGatewayV2::Api': 'billed by request: the HTTP API line',
  'AWS::ApiGatewayV2::Integration': 'free',
  'AWS::ApiGatewayV2::Route': 'free',
  'AWS::ApiGatewayV2::Stage': 'free (its access logs: the logs line)',
  'AWS::EC2::VPC': 'free',
  'AWS::EC2::Subnet': 'free',
  'AWS::EC2::RouteTable': 'free',
  'AWS::EC2::SubnetRouteTableAssociation': 'free',
  'AWS::EC2::Route': 'free',
  'AWS::EC2::InternetGateway': 'free',
  'AWS::EC2::VPCGatewayAttachment': 'free',
  'AWS::EC2::SecurityGroup': 'free',
  'AWS::EC2::SecurityGroupIngress': 'free',
  'AWS::EC2::SecurityGroupEgress': 'free',
  'AWS::EC2::FlowLog': 'billed as logs: the flow logs line',
  'AWS::RDS::DBSubnetGroup': 'free',
  'AWS::SecretsManager::SecretTargetAttachment': 'free',
  'AWS::SecretsManager::ResourcePolicy': 'free',
  'AWS::SecretsManager::RotationSchedule': 'its rotation function runs once a month: the secret line (and the Aurora line: it wakes the cluster)',
  'AWS::Serverless::Application': 'the rotation function of the secret (SAR): runs once a month',
  'Custom::LogRetention': 'runs at deploy only',
  'AWS::CDK::Metadata': 'free',
};

export const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
export const num = (v: unknown, fallback: number): number =>
  typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : fallback;

/** Minutes between two firings of `rate(…)`; null for a cron expression. */
export function rateMinutes(expression: string): number | null {
  const m = /^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2]!.replace(/s$/, '');
  return n * (unit === 'minute' ? 1 : unit === 'hour' ? 60 : 1440);
}

/** Traces X-Ray records of `perMonth` requests arriving evenly, under the default sampling rule. */
export function sampledTraces(perMonth: number, monthSeconds: number, a: Assumptions): number {
  const perSecond = perMonth / monthSeconds;
  const traced = Math.min(perSecond, a.xrayReservoirPerSecond) + a.xrayFixedRate * Math.max(0, perSecond - a.xrayReservoirPerSecond);
  return traced * monthSeconds;
}

export const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
export const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');

export interface FnInfo {
  readonly id: string;
  /** Its topology.ts name, when the stack built it from there. */
  readonly role: FunctionName | null;
  readonly label: string;
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  readonly active: boolean;
  readonly store: string | null;
  /** Its IAM role's logical id. */
  readonly roleId: string | null;
  /** The activity flags table it uses (ROLLOUT_ACTIVITY_TABLE), by logical id: on Aurora, what keeps a schedule from waking the cluster. */
  readonly activityTable: string | null;
}
