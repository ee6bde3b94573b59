import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/**
 * A document client. The SDK finds DynamoDB Local, LocalStack or AWS through
 * the standard variables (AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL,
 * AWS_REGION); nothing here hard-codes an endpoint.
 */
export function dynamoDocumentClient(config: DynamoDBClientConfig = {}): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(new DynamoDBClient(config), {
    marshallOptions: { removeUndefinedValues: true },
  });
}
