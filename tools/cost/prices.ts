/**
 * The list prices the cost model (estimate.ts) and the capacity plan
 * (tools/capacity/) charge, and the free tiers printed beside a line.
 */

/** Every price below is a us-east-1 on-demand list price. */
export const PRICE_REGION = 'us-east-1';
/** When the prices below were read. A price is only as good as this date: re-read the pages and update both. */
export const PRICES_READ_ON = '2026-11-24';

export interface Price {
  /** US$ per one `unit`. */
  readonly usd: number;
  readonly unit: string;
  /** Where it was read, and whether it was confirmed there. */
  readonly source: string;
}

/**
 * List prices, us-east-1, read 2026-11-24 (PRICES_READ_ON). The official
 * pricing pages' paid-tier tables are not all in the stored copies this was
 * read from; where a figure comes from a secondary page citing the official
 * one, or could not be confirmed at all, the source says so.
 */
export const PRICES = {
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    unit: 'GB-second, arm64 (first 7.5 billion GB-s a month)',
    source: 'aws.amazon.com/lambda/pricing; figure confirmed on secondary pages citing it (cloudchipr.com Lambda pricing guide, 2024)',
  },
  lambdaRequest: { usd: 0.2 / 1e6, unit: 'request', source: 'aws.amazon.com/lambda/pricing; US$ 0.20 per million, confirmed on secondary pages' },
  dynamoWrite: {
    usd: 0.625 / 1e6,
    unit: 'write request unit, on-demand',
    source: 'aws.amazon.com/dynamodb/pricing/on-demand after the November 2024 cut; US$ 0.625 per million confirmed on airbyte.com (2025)',
  },
  dynamoRead: { usd: 0.125 / 1e6, unit: 'read request unit, on-demand', source: 'same page; US$ 0.125 per million confirmed on airbyte.com (2025)' },
  dynamoStorage: {
    usd: 0.25,
    unit: 'GB-month of table storage (Standard class)',
    source: 'aws.amazon.com/dynamodb/pricing/on-demand; NOT confirmed in the copies read (the long-standing list price)',
  },
  dynamoPitr: {
    usd: 0.2,
    unit: 'GB-month of table size with continuous backups (PITR)',
    source: 'aws.amazon.com/dynamodb/pricing; US$ 0.20 confirmed on finops.com.py (secondary)',
  },
  kmsRequest: { usd: 0.03 / 1e4, unit: 'KMS request', source: 'aws.amazon.com/kms/pricing; US$ 0.03 per 10,000 confirmed on wring.co and cloudburn.io (2026)' },
  eventBridgeCustomEvent: {
    usd: 1 / 1e6,
    unit: 'custom event put on a bus (per 64 KB chunk)',
    source: 'aws.amazon.com/eventbridge/pricing (64 KB chunking confirmed there); US$ 1.00 per million confirmed on wring.co and factualminds.com (June 2026)',
  },
  eventBridgeArchiveGb: {
    usd: 0.1,
    unit: 'GB of events archived',
    source:
      'aws.amazon.com/eventbridge/pricing; US$ 0.10/GB on factualminds.com and wring.co, which disagree on whether it is per GB processed or per GB-month: counted here per GB processed, plus storage below',
  },
  eventBridgeArchiveStorage: {
    usd: 0.023,
    unit: 'GB-month of archived events',
    source: 'aws.amazon.com/eventbridge/pricing; NOT confirmed in the copies read',
  },
  sqsRequest: {
    usd: 0.4 / 1e6,
    unit: 'SQS standard request (per 64 KB chunk)',
    source: 'aws.amazon.com/sqs/pricing; US$ 0.40 per million confirmed on cloudburn.io (March 2026)',
  },
  alarmStandard: { usd: 0.1, unit: 'standard-resolution alarm metric-month', source: 'aws.amazon.com/cloudwatch/pricing; US$ 0.10 confirmed on c3x.dev' },
  alarmHighResolution: { usd: 0.3, unit: 'high-resolution (period < 60 s) alarm metric-month', source: 'same; US$ 0.30 confirmed on c3x.dev' },
  customMetric: {
    usd: 0.3,
    unit: 'custom metric-month (first 10,000), prorated by the hour it has data',
    source: 'aws.amazon.com/cloudwatch/pricing; US$ 0.30 confirmed on signoz.io (Feb 2026)',
  },
  dashboard: { usd: 3, unit: 'dashboard-month', source: 'aws.amazon.com/cloudwatch/pricing; US$ 3 confirmed on factualminds.com (June 2026)' },
  logsIngest: {
    usd: 0.5,
    unit: 'GB of log data ingested (standard class; bytes + 26 bytes per event)',
    source:
      'aws.amazon.com/cloudwatch/pricing; US$ 0.50/GB confirmed on factualminds.com and cloudburn.io (2026); the 26-byte overhead NOT confirmed in the copies read',
  },
  logsStorage: { usd: 0.03, unit: 'GB-month of logs stored (compressed)', source: 'aws.amazon.com/cloudwatch/pricing; NOT confirmed in the copies read' },
  getMetricData: {
    usd: 0.01 / 1000,
    unit: 'metric requested by GetMetricData',
    source: 'aws.amazon.com/cloudwatch/pricing (its free tier excludes GetMetricData, confirmed); US$ 0.01 per 1,000 NOT confirmed in the copies read',
  },
  ampQuerySample: {
    usd: 0.1 / 1e9,
    unit: 'query sample processed by Amazon Managed Service for Prometheus (QSP)',
    source:
      'aws.amazon.com/prometheus/pricing (QSP metered on every query, confirmed on the stored page); US$ 0.10 per billion NOT confirmed in the copies read',
  },
  cloudWatchApiRequest: {
    usd: 0.01 / 1000,
    unit: 'other CloudWatch API request (DescribeAlarms)',
    source: 'aws.amazon.com/cloudwatch/pricing; NOT confirmed in the copies read',
  },
  xrayTrace: { usd: 5 / 1e6, unit: 'trace recorded', source: 'aws.amazon.com/xray/pricing (US$ 0.000005 per trace, confirmed on the stored page)' },
  httpApiRequest: {
    usd: 1 / 1e6,
    unit: 'HTTP API request (first 300 million, per 512 KB)',
    source: 'aws.amazon.com/api-gateway/pricing; NOT confirmed in the copies read (the docs say US$ 1 per million)',
  },
  natGatewayHour: {
    usd: 0.045,
    unit: 'NAT gateway-hour',
    source: 'aws.amazon.com/vpc/pricing; US$ 0.045 confirmed on cloudburn.io (Feb 2026) and basavytix.com',
  },
  natGatewayGb: { usd: 0.045, unit: 'GB processed by a NAT gateway', source: 'same' },
  publicIpv4Hour: {
    usd: 0.005,
    unit: 'public IPv4 address-hour (an EIP, attached or not)',
    source: 'aws.amazon.com/vpc/pricing; US$ 0.005 confirmed on cloudburn.io (Feb 2026)',
  },
  interfaceEndpointHour: {
    usd: 0.01,
    unit: 'interface VPC endpoint-hour per AZ',
    source: 'aws.amazon.com/privatelink/pricing; US$ 7.20/AZ-month on egresscost.com (secondary)',
  },
  auroraAcuHour: {
    usd: 0.12,
    unit: 'Aurora Serverless v2 ACU-hour (Aurora Standard)',
    source: 'aws.amazon.com/rds/aurora/pricing; US$ 0.12 confirmed on c3x.dev, awsnegotiations.com and factualminds.com (2026)',
  },
  auroraStorage: { usd: 0.1, unit: 'GB-month of Aurora Standard storage', source: 'same; US$ 0.10 on awsnegotiations.com (May 2026)' },
  auroraIo: {
    usd: 0.2 / 1e6,
    unit: 'Aurora Standard I/O request',
    source: 'aws.amazon.com/rds/aurora/pricing; US$ 0.20 per million NOT confirmed in the copies read',
  },
  secret: { usd: 0.4, unit: 'secret-month', source: 'aws.amazon.com/secrets-manager/pricing; US$ 0.40 confirmed on hivebook.wiki (secondary)' },
  secretApiCall: { usd: 0.05 / 1e4, unit: 'Secrets Manager API call', source: 'same; US$ 0.05 per 10,000' },
} as const satisfies Record<string, Price>;

/** Free tiers, printed beside a line; never subtracted (the totals are list prices). */
export const FREE_TIER = {
  lambda: '1M requests and 400,000 GB-s a month free',
  dynamo: '25 GB of storage free',
  sqs: '1M requests a month free',
  alarms: '10 alarm metrics free',
  metrics: '10 custom metrics free',
  dashboard: '3 dashboards (up to 50 metrics each) free',
  logs: '5 GB of ingestion, storage and scans free',
  xray: '100,000 traces recorded a month free',
  kms: '20,000 requests a month free',
  cloudwatchApi: '1M API requests free (GetMetricData excluded)',
} as const;
