import { SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';

/**
 * An SQS client. With an endpoint override (AWS_ENDPOINT_URL_SQS or
 * AWS_ENDPOINT_URL: an emulator, LocalStack) requests stay on that endpoint
 * instead of following the host inside each QueueUrl, which emulators fill in
 * with names that may not resolve here.
 */
export function sqsClient(config: SQSClientConfig = {}): SQSClient {
  const overridden = Boolean(process.env.AWS_ENDPOINT_URL_SQS ?? process.env.AWS_ENDPOINT_URL ?? config.endpoint);
  return new SQSClient({ ...(overridden ? { useQueueUrlAsEndpoint: false } : {}), ...config });
}
