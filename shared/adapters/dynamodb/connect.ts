import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/**
 * A document client over `client` (or a new one from `config`). The SDK finds
 * DynamoDB Local, LocalStack or AWS through the standard variables
 * (AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL, AWS_REGION); nothing here
 * hard-codes an endpoint.
 */
export function dynamoDocumentClient(client: DynamoDBClient | DynamoDBClientConfig = {}): DynamoDBDocumentClient {
  const base = client instanceof DynamoDBClient ? client : new DynamoDBClient(client);
  return DynamoDBDocumentClient.from(base, { marshallOptions: { removeUndefinedValues: true } });
}
