import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DrainRequest, RegistryStore, WorkerRecord, WorkerState } from '../../registry/registry.js';
import { queryAll } from './query.js';

/**
 * Worker registry on DynamoDB: INSTANCE#<id> / WORKER#<id>, so the drain
 * handler reads one partition per notice (strongly consistent). A gone
 * worker's record expires through the table's TTL a week after it left.
 */
const GONE_TTL_S = 7 * 24 * 3600;

const key = (instanceId: string, workerId: string) => ({ pk: `INSTANCE#${instanceId}`, sk: `WORKER#${workerId}` });

function itemOf(w: WorkerRecord): Record<string, unknown> {
  return {
    ...key(w.instanceId, w.workerId),
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

  async heartbeat(instanceId: string, workerId: string, now: number): Promise<WorkerRecord | null> {
    try {
      const { Attributes } = await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(instanceId, workerId),
          UpdateExpression: 'SET heartbeatAt = :now',
          ConditionExpression: 'attribute_exists(pk) AND #s <> :gone AND heartbeatAt < :now',
          ExpressionAttributeNames: { '#s': 'state' },
          ExpressionAttributeValues: { ':now': now, ':gone': 'gone' },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return recordOf(Attributes!);
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      // Unknown, gone, or already a later heartbeat: answer with what is stored.
      const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: key(instanceId, workerId), ConsistentRead: true }));
      return Item ? recordOf(Item) : null;
    }
  }

  async setState(instanceId: string, workerId: string, from: readonly WorkerState[], to: { state: WorkerState; drain?: DrainRequest; goneAt?: number }): Promise<boolean> {
    const values: Record<string, unknown> = { ':to': to.state, ...Object.fromEntries(from.map((f, i) => [`:f${i}`, f])) };
    const sets = ['#s = :to'];
    if (to.drain) {
      sets.push('drain = :drain');
      values[':drain'] = to.drain;
    }
    if (to.goneAt !== undefined) {
      sets.push('goneAt = :gone, #ttl = :ttl');
      values[':gone'] = to.goneAt;
      values[':ttl'] = Math.floor(to.goneAt / 1000) + GONE_TTL_S;
    }
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(instanceId, workerId),
          UpdateExpression: `SET ${sets.join(', ')}`,
          ConditionExpression: `#s IN (${from.map((_, i) => `:f${i}`).join(', ')})`,
          ExpressionAttributeNames: { '#s': 'state', ...(to.goneAt !== undefined ? { '#ttl': 'ttl' } : {}) },
          ExpressionAttributeValues: values,
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
