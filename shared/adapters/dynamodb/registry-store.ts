import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DrainRequest, Registered, RegistryStore, WorkerKey, WorkerRecord, WorkerState } from '../../registry/registry.js';
import { queryAll } from './query.js';

/**
 * Worker registry on DynamoDB: INSTANCE#<instance> / WORKER#<run>#<worker>
 * (each part URI-encoded, so no '#' inside one can blur the two), so the
 * drain handler reads one partition per notice (strongly consistent) and
 * finds every worker of every run on the instance. A gone worker's record
 * expires through the table's TTL a week after it left. DynamoDB has no clock
 * of its own: records carry no silentForMs, the registry judges stamps with a
 * margin.
 */
const GONE_TTL_S = 7 * 24 * 3600;

const key = (k: WorkerKey) => ({ pk: `INSTANCE#${k.instanceId}`, sk: `WORKER#${encodeURIComponent(k.runId)}#${encodeURIComponent(k.workerId)}` });

function itemOf(w: Omit<WorkerRecord, 'silentForMs'>): Record<string, unknown> {
  return {
    ...key(w),
    ...w,
    ...(w.goneAt !== null ? { ttl: Math.floor(w.goneAt / 1000) + GONE_TTL_S } : {}),
  };
}

function recordOf(i: Record<string, unknown>): WorkerRecord {
  return {
    workerId: String(i.workerId),
    instanceId: String(i.instanceId),
    provider: i.provider as WorkerRecord['provider'],
    runId: typeof i.runId === 'string' ? i.runId : '',
    state: i.state as WorkerState,
    registeredAt: Number(i.registeredAt),
    heartbeatAt: Number(i.heartbeatAt),
    drain: (i.drain as WorkerRecord['drain'] | undefined) ?? null,
    goneAt: i.goneAt === null || i.goneAt === undefined ? null : Number(i.goneAt),
    silentForMs: null,
  };
}

const byWorker = (a: WorkerRecord, b: WorkerRecord) => a.workerId.localeCompare(b.workerId) || a.runId.localeCompare(b.runId);

export class DynamoRegistryStore implements RegistryStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
  ) {}

  async register(w: Omit<WorkerRecord, 'silentForMs'>): Promise<Registered> {
    // Two rounds at most: a record refused as draining and gone by the time it is read was a drain that finished.
    for (let round = 0; ; round++) {
      try {
        const { Attributes } = await this.doc.send(
          new PutCommand({
            TableName: this.table,
            Item: itemOf(w),
            // A pending drain request survives any registration: the worker reads it back and drains.
            ConditionExpression: 'attribute_not_exists(pk) OR #s <> :draining',
            ExpressionAttributeNames: { '#s': 'state' },
            ExpressionAttributeValues: { ':draining': 'draining' },
            // What it replaced, if anything: whether this worker was here before, at no extra read.
            ReturnValues: 'ALL_OLD',
          }),
        );
        return { ...recordOf(itemOf(w)), known: Attributes !== undefined || round > 0 };
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
      const stored = await this.get(w);
      if (stored?.state === 'draining') return { ...stored, known: true };
      if (round >= 1)
        throw new Error(`worker ${w.workerId} of run ${w.runId} on ${w.instanceId}: registration refused twice, the record is ${stored?.state ?? 'missing'}`);
    }
  }

  async byInstance(instanceId: string): Promise<WorkerRecord[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :w)',
      ExpressionAttributeValues: { ':pk': `INSTANCE#${instanceId}`, ':w': 'WORKER#' },
      ConsistentRead: true,
    });
    return items.map(recordOf).sort(byWorker);
  }

  async heartbeat(k: WorkerKey, now: number): Promise<WorkerRecord | null> {
    try {
      const { Attributes } = await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: key(k),
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
      return this.get(k);
    }
  }

  async setState(k: WorkerKey, from: readonly WorkerState[], to: { state: WorkerState; drain?: DrainRequest; goneAt?: number }): Promise<boolean> {
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
          Key: key(k),
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
        new ScanCommand({
          TableName: this.table,
          FilterExpression: 'begins_with(pk, :p)',
          ExpressionAttributeValues: { ':p': 'INSTANCE#' },
          ExclusiveStartKey: start,
          ConsistentRead: true,
        }),
      );
      out.push(...(page.Items ?? []).map(recordOf));
      start = page.LastEvaluatedKey;
    } while (start);
    return out.sort((a, b) => a.instanceId.localeCompare(b.instanceId) || byWorker(a, b));
  }

  private async get(k: WorkerKey): Promise<WorkerRecord | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: key(k), ConsistentRead: true }));
    return Item ? recordOf(Item) : null;
  }
}
