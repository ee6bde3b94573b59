import { BatchGetCommand, BatchWriteCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { cursorObject, cursorText, decodeCursor, encodeCursor } from '../../cursor.js';
import { own } from '../../own.js';

type Item = Record<string, unknown>;
export type QueryInput = ConstructorParameters<typeof QueryCommand>[0];

/** Each request of a many-request read, wrapped (e.g. in a throttling retry: a refused page is sent again, not the whole read). */
export type EachRequest = <T>(request: () => Promise<T>) => Promise<T>;
const plain: EachRequest = (request) => request();

/** Every page of a query, or the first `max` items when given. */
export async function queryAll(doc: DynamoDBDocumentClient, input: QueryInput, max?: number, each: EachRequest = plain): Promise<Item[]> {
  const items: Item[] = [];
  let start: Item | undefined;
  do {
    const from = start;
    const page = await each(() =>
      doc.send(new QueryCommand({ ...input, ...(max === undefined ? {} : { Limit: max - items.length }), ExclusiveStartKey: from })),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start && (max === undefined || items.length < max));
  return max === undefined ? items : items.slice(0, max);
}

type WriteRequest = { PutRequest: { Item: Item } } | { DeleteRequest: { Key: Item } };

/** Writes, 25 to a BatchWriteItem, what DynamoDB leaves unprocessed sent again (after a short backoff). */
async function batchWrite(doc: DynamoDBDocumentClient, table: string, all: readonly WriteRequest[]): Promise<void> {
  for (let i = 0; i < all.length; i += 25) {
    let requests: WriteRequest[] | undefined = all.slice(i, i + 25);
    for (let attempt = 0; requests?.length; attempt++) {
      if (attempt) await new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt) * Math.random()));
      const res = await doc.send(new BatchWriteCommand({ RequestItems: { [table]: requests } }));
      requests = own(res.UnprocessedItems, table) as WriteRequest[] | undefined;
    }
  }
}

/** Unconditional puts. */
export function batchPut(doc: DynamoDBDocumentClient, table: string, items: readonly Item[]): Promise<void> {
  return batchWrite(
    doc,
    table,
    items.map((Item) => ({ PutRequest: { Item } })),
  );
}

/** Deletes by key; a missing key is no error. */
export function batchDelete(doc: DynamoDBDocumentClient, table: string, keys: readonly Item[]): Promise<void> {
  return batchWrite(
    doc,
    table,
    keys.map((Key) => ({ DeleteRequest: { Key } })),
  );
}

/** A ProjectionExpression and the attribute names it uses. */
export interface Projection {
  readonly expression: string;
  readonly names?: Record<string, string>;
}

/** Items by key (or `projection` of them), read consistently, 100 to a BatchGetItem, what DynamoDB leaves unprocessed asked again; missing keys are absent from the answer. */
export async function batchGetAll(
  doc: DynamoDBDocumentClient,
  table: string,
  keys: readonly Item[],
  each: EachRequest = plain,
  projection?: Projection,
): Promise<Item[]> {
  const out: Item[] = [];
  for (let i = 0; i < keys.length; i += 100) {
    let batch: Item[] | undefined = keys.slice(i, i + 100);
    for (let attempt = 0; batch?.length; attempt++) {
      if (attempt) await new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt) * Math.random()));
      const keysNow = batch;
      const res = await each(() =>
        doc.send(
          new BatchGetCommand({
            RequestItems: {
              [table]: {
                Keys: keysNow,
                ConsistentRead: true,
                ...(projection && { ProjectionExpression: projection.expression, ExpressionAttributeNames: projection.names }),
              },
            },
          }),
        ),
      );
      out.push(...(own(res.Responses, table) ?? []));
      batch = own(res.UnprocessedKeys, table)?.Keys as Item[] | undefined;
    }
  }
  return out;
}

/** Longest sort key DynamoDB takes (bytes); a partition key may be twice that. */
export const MAX_SORT_KEY_BYTES = 1_024;
export const MAX_PARTITION_KEY_BYTES = 2_048;

/**
 * A list partition's cursor (ROLLOUTS, ALLRUNS): the sort key of the last item
 * listed, `<created at, 15 digits>#<id>`, the only shape an ExclusiveStartKey of
 * that list has (anything else DynamoDB would refuse, and that reads as the
 * store being down).
 */
const LIST_CURSOR = cursorObject({ sk: cursorText(MAX_SORT_KEY_BYTES).regex(/^\d{15}#./s, 'not a list key') });

/** The sort key a list page starts after; null for the first page. */
export function listStart(cursor: string | undefined): string | null {
  return cursor === undefined ? null : decodeCursor(cursor, LIST_CURSOR).sk;
}

/** The cursor that goes on after the list item whose sort key is `sk`. */
export function listCursor(sk: string): string {
  return encodeCursor({ sk });
}

/** One page of a list partition, newest first (sort keys descending), consistently, after `start`; whether more follows. */
export async function listPage(
  doc: DynamoDBDocumentClient,
  table: string,
  pk: string,
  limit: number,
  start: string | null,
): Promise<{ items: Item[]; more: boolean }> {
  const page = await doc.send(
    new QueryCommand({
      TableName: table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': pk },
      ScanIndexForward: false,
      Limit: limit,
      ConsistentRead: true,
      ...(start !== null ? { ExclusiveStartKey: { pk, sk: start } } : {}),
    }),
  );
  return { items: page.Items ?? [], more: page.LastEvaluatedKey !== undefined };
}
