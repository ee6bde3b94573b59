import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { PutCommand, ScanCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RegistryStore, WorkerRecord, WorkerState } from '../../registry/registry.js';
import { queryAll } from './query.js';

/**
 * Worker registry on DynamoDB: INSTANCE#<id> / WORKER#<id>, so the drain
 * handler reads one partition per notice (strongly consistent). A gone
 * worker's record expires through the table's TTL a week after it left.
 */
const GONE_TTL_S = 7 * 24 * 3600;

function itemOf(w: WorkerRecord): Record<string, unknown> {
  return {
    pk: `INSTANCE#${w.instanceId}`,
    sk: `WORKER#${w.workerId}`,
    ...w,
    ...(w.goneAt !== null ? { ttl: Math.floor(w.goneAt / 1000) + GONE_TTL_S } : {}),
  };
}

function recordOf(i: Record<string, unknown>): WorkerRecord {
  return {
    workerId: String(i.workerId),
    instanceId: String(i.instanceId),
    provider: i.provider as WorkerRecord['provider'],
    runId: (i.runId as string | null | undefined) ?? null,
    state: i.state as WorkerState,
    registeredAt: Number(i.registeredAt),
    heartbeatAt: Number(i.heartbeatAt),
    drain: (i.drain as WorkerRecord['drain'] | undefined) ?? null,
    goneAt: i.goneAt === null || i.goneAt === undefined ? null : Number(i.goneAt),
  };
}

export class DynamoRegistryStore implements RegistryStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
  ) {}

  async put(w: WorkerRecord): Promise<void> {
    await this.doc.send(new PutCommand({ TableName: this.table, Item: itemOf(w) }));
  }

  async byInstance(instanceId: string): Promise<WorkerRecord[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :w)',
      ExpressionAttributeValues: { ':pk': `INSTANCE#${instanceId}`, ':w': 'WORKER#' },
      ConsistentRead: true,
    });
    return items.map(recordOf);
  }

  async replace(expectedState: WorkerState, expectedHeartbeatAt: number, w: WorkerRecord): Promise<boolean> {
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: itemOf(w),
          ConditionExpression: '#s = :s AND heartbeatAt = :h',
          ExpressionAttributeNames: { '#s': 'state' },
          ExpressionAttributeValues: { ':s': expectedState, ':h': expectedHeartbeatAt },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /** Status pages only: a scan of the registry's items (small: one per worker). */
  async list(): Promise<WorkerRecord[]> {
    const out: WorkerRecord[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.doc.send(
        new ScanCommand({ TableName: this.table, FilterExpression: 'begins_with(pk, :p)', ExpressionAttributeValues: { ':p': 'INSTANCE#' }, ExclusiveStartKey: start, ConsistentRead: true }),
      );
      out.push(...(page.Items ?? []).map(recordOf));
      start = page.LastEvaluatedKey;
    } while (start);
    return out.sort((a, b) => a.instanceId.localeCompare(b.instanceId) || a.workerId.localeCompare(b.workerId));
  }
}
