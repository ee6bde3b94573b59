import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { LeaseRecord } from '../../lease/record.js';
import { mapLimit } from '../../concurrency.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { contentId, type WorkItem } from '../../ledger/model.js';
import { assertOneChangePerItem, type ItemCasOutcome, type LedgerStore, type RunRecord } from '../../ledger/store.js';
import type { ItemCas } from '../../ledger/transitions.js';
import { retryingConflicts, transactWrite } from './conflicts.js';
import { fencedTransactWrite, WriteConditionFailedError } from './fence.js';
import { plainItem } from './item.js';
import { ledgerUpdate, pad, pendingSk } from './ledger-updates.js';
import { DynamoLeaseStore, itemFromLease, leaseFromItem } from './lease-store.js';
import { GSI1 } from './table.js';
import { queryAll } from './query.js';

/**
 * The ledger on DynamoDB:
 *   RUN#<id> / RUN          the run (spec, coordinatorEpoch, enqueues); in gsi1 under RUNS while it
 *                           may have work: openRuns takes a finished run out once, and an
 *                           enqueue that adds items puts it back
 *   RUN#<id> / ITEM#<hash>  one item; while running it is in gsi1 under RUNNING#<run> sorted by
 *                           heartbeat, while pending under PENDING#<run> sorted by when its message
 *                           was last sent (never sent: 0, first) — so the coordinator's queries read
 *                           only the running (or pending, or unsent) set, never the whole run.
 * gsi1 is eventually consistent: a query may miss a change of the last moment; every write
 * it leads to is a compare-and-swap on the item itself, so a stale reading never wins.
 */

type Item = Record<string, unknown>;
const runPk = (id: string) => `RUN#${id}`;
const RUNS_INDEX = 'RUNS';
const itemSk = (id: string) => `ITEM#${id}`;

function itemOf(i: Item): WorkItem {
  const n = (v: unknown) => (v === undefined || v === null ? null : Number(v));
  return {
    runId: String(i.runId),
    id: String(i.id),
    payload: i.payload,
    state: i.state as WorkItem['state'],
    worker: (i.worker as string | undefined) ?? null,
    epoch: n(i.epoch),
    claimedAt: n(i.claimedAt),
    started: Boolean(i.started),
    heartbeatAt: n(i.heartbeatAt),
    resultHash: (i.resultHash as string | undefined) ?? null,
    result: i.result ?? null,
    error: (i.error as string | undefined) ?? null,
    sentAt: n(i.sentAt),
    attempts: Number(i.attempts ?? 0),
    version: Number(i.version ?? 0),
  };
}

export class DynamoLedgerStore implements LedgerStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    private readonly writeConcurrency = 16,
  ) {}

  async createRun(id: string, spec: unknown, now: number): Promise<{ created: boolean }> {
    try {
      await this.doc.send(
        new PutCommand({ TableName: this.table, Item: { pk: runPk(id), sk: 'RUN', id, spec, coordinatorEpoch: -1, createdAt: now, enqueues: 0, [GSI1.pk]: RUNS_INDEX, [GSI1.sk]: id }, ConditionExpression: 'attribute_not_exists(pk)' }),
      );
      return { created: true };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return { created: false };
      throw err;
    }
  }

  async getRun(id: string): Promise<RunRecord | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: runPk(id), sk: 'RUN' }, ConsistentRead: true }));
    return Item ? { id: String(Item.id), spec: Item.spec, coordinatorEpoch: Number(Item.coordinatorEpoch), createdAt: Number(Item.createdAt) } : null;
  }

  async enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }> {
    const ids = payloads.map(contentId);
    let added = 0;
    await mapLimit(payloads, this.writeConcurrency, async (payload, i) => {
      const id = ids[i]!;
      try {
        await this.doc.send(
          new PutCommand({
            TableName: this.table,
            Item: { pk: runPk(runId), sk: itemSk(id), runId, id, payload, state: 'pending', started: false, attempts: 0, version: 0, createdAt: now, [GSI1.pk]: `PENDING#${runId}`, [GSI1.sk]: pendingSk(id, null) },
            ConditionExpression: 'attribute_not_exists(pk)',
          }),
        );
        added++;
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
    });
    // After the items: a run openRuns is taking out at this moment either sees them (and stays) or
    // loses its conditional write to this counter (and is back in the index).
    if (added > 0) {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: runPk(runId), sk: 'RUN' },
          UpdateExpression: 'SET enqueues = if_not_exists(enqueues, :zero) + :one, #ipk = :runs, #isk = :id',
          ExpressionAttributeNames: { '#ipk': GSI1.pk, '#isk': GSI1.sk },
          ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':runs': RUNS_INDEX, ':id': runId },
        }),
      );
    }
    return { ids, added };
  }

  /** Independent conditional writes, a bounded number in flight (DynamoDB has no multi-item conditional update outside transactions). */
  async casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]> {
    assertOneChangePerItem(changes);
    return mapLimit(changes, this.writeConcurrency, (change) => this.cas(change, now));
  }

  async applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]> {
    return (await this.casMany(changes, now)).map((o) => o.ok);
  }

  async get(runId: string, itemId: string): Promise<WorkItem | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: runPk(runId), sk: itemSk(itemId) }, ConsistentRead: true }));
    return Item ? itemOf(Item) : null;
  }

  /** The transition's update (ledger-updates.ts); a coordinator's in one transaction with its fence. */
  async cas(change: ItemCas, now: number): Promise<ItemCasOutcome> {
    const update = { TableName: this.table, Key: { pk: runPk(change.runId), sk: itemSk(change.itemId) }, ...ledgerUpdate(change, now) };
    try {
      if (change.fence) {
        await fencedTransactWrite(this.doc, this.table, change.fence, [{ Update: update }]);
        return { ok: true, item: (await this.get(change.runId, change.itemId))! };
      }
      // A worker's write on an item a coordinator transaction holds (a start meeting a steal) is refused unjudged: again.
      const res = await retryingConflicts(() => this.doc.send(new UpdateCommand({ ...update, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })));
      return { ok: true, item: itemOf(res.Attributes!) };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) {
        const old = plainItem(err.Item);
        return { ok: false, current: old ? itemOf(old) : null };
      }
      if (err instanceof WriteConditionFailedError) return { ok: false, current: await this.get(change.runId, change.itemId) };
      throw err;
    }
  }

  private async index(key: string, cond: string, values: Record<string, unknown>, limit?: number): Promise<WorkItem[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      IndexName: GSI1.name,
      KeyConditionExpression: `${GSI1.pk} = :k${cond}`,
      ExpressionAttributeValues: { ':k': key, ...values },
    }, limit);
    return items.map(itemOf);
  }

  running(runId: string): Promise<WorkItem[]> {
    return this.index(`RUNNING#${runId}`, '', {});
  }

  pending(runId: string, limit: number, after?: WorkItem): Promise<WorkItem[]> {
    return after === undefined
      ? this.index(`PENDING#${runId}`, '', {}, limit)
      : this.index(`PENDING#${runId}`, ` AND ${GSI1.sk} > :after`, { ':after': pendingSk(after.id, after.sentAt) }, limit);
  }

  unsent(runId: string, sentBefore: number, limit: number): Promise<WorkItem[]> {
    return this.index(`PENDING#${runId}`, ` AND ${GSI1.sk} < :before`, { ':before': pad(sentBefore) }, limit);
  }

  /** One conditional update per item (DynamoDB has no batched update), a bounded number in flight. */
  async markSent(runId: string, items: readonly Pick<WorkItem, 'id' | 'version'>[], now: number): Promise<void> {
    await mapLimit(items, this.writeConcurrency, async (item) => {
      try {
        await this.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { pk: runPk(runId), sk: itemSk(item.id) },
            UpdateExpression: 'SET sentAt = :now, #isk = :sk',
            ConditionExpression: '#s = :pending AND version = :v',
            ExpressionAttributeNames: { '#s': 'state', '#isk': GSI1.sk },
            ExpressionAttributeValues: { ':now': now, ':sk': pendingSk(item.id, now), ':pending': 'pending', ':v': item.version },
          }),
        );
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err; // claimed (or re-pended) meanwhile
      }
    });
  }

  /**
   * The runs in the RUNS index with a pending or running item. A run found
   * with neither (by the eventually consistent index, then confirmed by a
   * consistent read of its items) leaves the index, so the scheduled scan's
   * cost follows the open runs, not every run ever created. It leaves only
   * if no enqueue happened since it was listed (`enqueues` unchanged).
   */
  async openRuns(): Promise<string[]> {
    const runs = await queryAll(this.doc, { TableName: this.table, IndexName: GSI1.name, KeyConditionExpression: `${GSI1.pk} = :k`, ExpressionAttributeValues: { ':k': RUNS_INDEX } });
    const open = await mapLimit(runs, this.writeConcurrency, async (r) => {
      const id = String(r.id);
      for (const prefix of ['PENDING#', 'RUNNING#']) if ((await this.index(`${prefix}${id}`, '', {}, 1)).length) return id;
      if (await this.hasWork(id)) return id; // the index lags behind
      await this.closeRun(id, r.enqueues);
      return null;
    });
    return open.filter((id): id is string => id !== null).sort();
  }

  /** A consistent read of the run's items, stopping at the first pending or running one. */
  private async hasWork(runId: string): Promise<boolean> {
    let start: Item | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
          FilterExpression: '#s IN (:pending, :running)',
          ExpressionAttributeNames: { '#s': 'state' },
          ExpressionAttributeValues: { ':p': runPk(runId), ':i': 'ITEM#', ':pending': 'pending', ':running': 'running' },
          ProjectionExpression: 'sk',
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      if (page.Items?.length) return true;
      start = page.LastEvaluatedKey;
    } while (start);
    return false;
  }

  private async closeRun(runId: string, enqueues: unknown): Promise<void> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: runPk(runId), sk: 'RUN' },
          UpdateExpression: 'REMOVE #ipk, #isk',
          // Runs written before the counter existed have none.
          ConditionExpression: enqueues === undefined ? 'attribute_not_exists(enqueues)' : 'enqueues = :seen',
          ExpressionAttributeNames: { '#ipk': GSI1.pk, '#isk': GSI1.sk },
          ...(enqueues === undefined ? {} : { ExpressionAttributeValues: { ':seen': enqueues } }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err; // an enqueue came in: it stays
    }
  }

  async counts(runId: string): Promise<Record<WorkItem['state'], number>> {
    const out = { pending: 0, running: 0, done: 0, failed: 0 };
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
      ExpressionAttributeValues: { ':p': runPk(runId), ':i': 'ITEM#' },
      ProjectionExpression: '#s',
      ExpressionAttributeNames: { '#s': 'state' },
      ConsistentRead: true,
    });
    for (const i of items) out[i.state as WorkItem['state']]++;
    return out;
  }

}

/** The coordinator lease of one run, with the run's epoch stamped in the same transaction as each lease win. */
export class DynamoRunLeaseStore implements LeaseStore {
  private readonly leases: DynamoLeaseStore;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    private readonly runId: string,
  ) {
    this.leases = new DynamoLeaseStore(doc, table);
  }

  read(name: string): Promise<LeaseRecord | null> {
    return this.leases.read(name);
  }

  async compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
    // Renewals and releases do not change the epoch: a plain lease CAS.
    if (next.holder === null || (expected !== null && expected.epoch === next.epoch)) return this.leases.compareAndSwap(expected, next);
    try {
      await transactWrite(this.doc, {
        TransactItems: [
          {
            Put: {
              TableName: this.table,
              Item: itemFromLease(next),
              ...(expected === null
                ? { ConditionExpression: 'attribute_not_exists(pk)' }
                : { ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': expected.version } }),
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          {
            Update: {
              TableName: this.table,
              Key: { pk: runPk(this.runId), sk: 'RUN' },
              UpdateExpression: 'SET coordinatorEpoch = :e',
              ConditionExpression: 'attribute_exists(pk) AND coordinatorEpoch < :e',
              ExpressionAttributeValues: { ':e': next.epoch },
            },
          },
        ],
      });
      return { ok: true, record: next };
    } catch (err) {
      if (!(err instanceof TransactionCanceledException)) throw err;
      const reason = err.CancellationReasons?.[0];
      if (reason?.Code === 'ConditionalCheckFailed') {
        const old = plainItem(reason.Item);
        return { ok: false, current: old ? leaseFromItem(old) : await this.read(next.name) };
      }
      throw err;
    }
  }

}
