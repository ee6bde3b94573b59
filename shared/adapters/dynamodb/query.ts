import { BatchWriteCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

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

/** Unconditional puts, 25 to a BatchWriteItem, what DynamoDB leaves unprocessed sent again (after a short backoff). */
export async function batchPut(doc: DynamoDBDocumentClient, table: string, items: readonly Item[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    let requests: { PutRequest: { Item: Item } }[] | undefined = items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } }));
    for (let attempt = 0; requests?.length; attempt++) {
      if (attempt) await new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt) * Math.random()));
      const res = await doc.send(new BatchWriteCommand({ RequestItems: { [table]: requests } }));
      requests = res.UnprocessedItems?.[table] as typeof requests;
    }
  }
}
