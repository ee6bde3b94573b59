import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

type Item = Record<string, unknown>;
export type QueryInput = ConstructorParameters<typeof QueryCommand>[0];

/** Every page of a query, or the first `max` items when given. */
export async function queryAll(doc: DynamoDBDocumentClient, input: QueryInput, max?: number): Promise<Item[]> {
  const items: Item[] = [];
  let start: Item | undefined;
  do {
    const page = await doc.send(new QueryCommand({ ...input, ...(max === undefined ? {} : { Limit: max - items.length }), ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start && (max === undefined || items.length < max));
  return max === undefined ? items : items.slice(0, max);
}
