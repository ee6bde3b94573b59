/** The promotion bench's request census on DynamoDB (test/bench/dynamo-census.ts): kinds, items, and counts through a client. */
import { DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { describe, expect, it } from 'vitest';
import { dynamoCensus, requestKind } from '../bench/dynamo-census.js';

describe('dynamo census', () => {
  it('names a request by its command and the tables it names (by their labels), and counts the items it carries', () => {
    const labels = { 'rollout-test-1': 'table' };
    expect(requestKind('UpdateItemCommand', { TableName: 'rollout-test-1' }, labels)).toEqual({ kind: 'UpdateItem table', items: 0 });
    expect(
      requestKind(
        'TransactWriteItemsCommand',
        { TransactItems: [{ ConditionCheck: { TableName: 'rollout-test-1' } }, { Put: { TableName: 'rollout-test-1' } }, { Update: { TableName: 'other' } }] },
        labels,
      ),
    ).toEqual({ kind: 'TransactWriteItems other+table', items: 3 });
    expect(requestKind('BatchGetItemCommand', { RequestItems: { 'rollout-test-1': { Keys: [{}, {}] } } }, labels)).toEqual({
      kind: 'BatchGetItem table',
      items: 2,
    });
    expect(requestKind('BatchWriteItemCommand', { RequestItems: { t: [{}, {}, {}] } })).toEqual({ kind: 'BatchWriteItem t', items: 3 });
  });

  it('counts every command sent through the client, the document client’s too, and is taken off again', async () => {
    // Nothing listens there: each request fails once counted (the census counts what is sent, not what succeeds).
    const client = new DynamoDBClient({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
      maxAttempts: 1,
    });
    const doc = dynamoDocumentClient(client);
    const census = dynamoCensus(doc, { t: 'table' });
    const stop = new Error('not sent');
    client.middlewareStack.add(() => () => Promise.reject(stop), { step: 'build', name: 'stop' });
    await expect(client.send(new UpdateItemCommand({ TableName: 't', Key: { pk: { S: 'a' } } }))).rejects.toBe(stop);
    await expect(
      doc.send(new TransactWriteCommand({ TransactItems: [{ Put: { TableName: 't', Item: { pk: 'a' } } }, { Delete: { TableName: 't', Key: { pk: 'b' } } }] })),
    ).rejects.toBe(stop);
    expect(census.take()).toEqual({ 'UpdateItem table': 1, 'TransactWriteItems table': 1, 'TransactWriteItems table items': 2 });
    expect(census.take()).toEqual({});
    census.restore();
    await expect(client.send(new UpdateItemCommand({ TableName: 't', Key: { pk: { S: 'a' } } }))).rejects.toBe(stop);
    expect(census.take()).toEqual({});
    client.destroy();
  });
});
