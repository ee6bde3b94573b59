import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DrainRequest, Registered, RegistryStore, WorkerKey, WorkerRecord, WorkerState } from '../../registry/registry.js';
import { queryAll } from './query.js';

/**
 * Worker registry on DynamoDB: INSTANCE#<instance> / WORKER#<run>#<worker>
 * (run and worker URI-encoded, so no '#' inside one can blur the two), so the
 * drain handler reads one partition per notice (strongly consistent) and
 * finds every worker of every run on the instance. <instance> is the name
 * the worker registered with, verbatim: a worker fleet's instances register
 * under their ARN, because their role may write only the partition
 * `INSTANCE#${ec2:SourceInstanceARN}` (IAM's `dynamodb:LeadingKeys`, with the
 * ARN of the instance the request comes from); a worker started by hand
 * under its instance id.
 *
 * Beside it, each run's roster: RUN#<run>#WORKERS / WORKER#<worker> names the
 * instance a worker of the run registered on. Only the run's own fleet (and
 * the control plane) may write a run's keys, so an entry there is a fleet's
 * word that the worker is one of its own; the record on the instance is the
 * instance's. The coordinator reads both before it gives a fleet's worker
 * work (`worker`). Written at registration, never per heartbeat; an entry
 * expires with its worker's record once the worker has left.
 *
 * A gone worker's record expires through the table's TTL a week after it
 * left. DynamoDB has no clock of its own: records carry no silentForMs, the
 * registry judges stamps with a margin.
 */
const GONE_TTL_S = 7 * 24 * 3600;

/** The partition of an instance's workers: what a worker fleet's grant binds to `${ec2:SourceInstanceARN}`. */
export const instancePartition = (instance: string) => `INSTANCE#${instance}`;

const key = (k: WorkerKey) => ({ pk: instancePartition(k.instanceId), sk: `WORKER#${encodeURIComponent(k.runId)}#${encodeURIComponent(k.workerId)}` });

/** A run's roster entry for one worker (the run id never holds '#': it is a run key like the ledger's). */
const rosterKey = (runId: string, workerId: string) => ({ pk: `RUN#${runId}#WORKERS`, sk: `WORKER#${encodeURIComponent(workerId)}` });

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
        await this.enrol(w);
        return { ...recordOf(itemOf(w)), known: Attributes !== undefined || round > 0 };
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
      const stored = await this.get(w);
      if (stored?.state === 'draining') {
        await this.enrol(w);
        return { ...stored, known: true };
      }
      if (round >= 1)
        throw new Error(`worker ${w.workerId} of run ${w.runId} on ${w.instanceId}: registration refused twice, the record is ${stored?.state ?? 'missing'}`);
    }
  }

  async byInstance(instanceId: string): Promise<WorkerRecord[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :w)',
      ExpressionAttributeValues: { ':pk': instancePartition(instanceId), ':w': 'WORKER#' },
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
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
    if (to.goneAt !== undefined) await this.unenrol(k, Number(values[':ttl']));
    return true;
  }

  /**
   * The worker of the run, found through the run's roster, as its instance
   * recorded it; null when the roster has no such worker, or its instance
   * holds no record of it (a made-up entry, or one whose record expired).
   */
  async worker(runId: string, workerId: string): Promise<WorkerRecord | null> {
    const { Item: entry } = await this.doc.send(new GetCommand({ TableName: this.table, Key: rosterKey(runId, workerId), ConsistentRead: true }));
    if (!entry || typeof entry.instanceId !== 'string') return null;
    return this.get({ instanceId: entry.instanceId, runId, workerId });
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

  /** On the run's roster, naming this instance (a later registration elsewhere under the same worker id names its own). */
  private async enrol(w: Omit<WorkerRecord, 'silentForMs'>): Promise<void> {
    await this.doc.send(
      new PutCommand({
        TableName: this.table,
        Item: { ...rosterKey(w.runId, w.workerId), runId: w.runId, workerId: w.workerId, instanceId: w.instanceId, registeredAt: w.registeredAt },
      }),
    );
  }

  /** Off the roster when its record expires, unless the entry names another instance by now. */
  private async unenrol(k: WorkerKey, ttl: number): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: rosterKey(k.runId, k.workerId),
          UpdateExpression: 'SET #ttl = :ttl',
          ConditionExpression: 'instanceId = :i',
          ExpressionAttributeNames: { '#ttl': 'ttl' },
          ExpressionAttributeValues: { ':ttl': ttl, ':i': k.instanceId },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  private async get(k: WorkerKey): Promise<WorkerRecord | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: key(k), ConsistentRead: true }));
    return Item ? recordOf(Item) : null;
  }
}
