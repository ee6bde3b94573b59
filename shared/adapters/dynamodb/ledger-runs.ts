import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import type { WorkItem } from '../../ledger/model.js';
import type { RunCancel, RunOptions, RunRecord } from '../../ledger/store.js';
import { transactWrite } from './conflicts.js';
import { runKeys, runOfKey, runPk, type RunKeys } from './ledger-keys.js';
import { ALL_RUNS, CLOSED_RUNS, RUNS_INDEX, runRecordOf, type Item, type LedgerTable } from './ledger-table.js';
import { pad } from './ledger-updates.js';
import { batchDelete, batchGetAll, listCursor, listPage, listStart, queryAll } from './query.js';
import { GSI1 } from './table.js';

/**
 * A run's record and its life: created (with its shard count), listed,
 * cancelled, found open or closed (in the RUNS index or out of it), counted,
 * and pruned once closed long enough.
 */
export class LedgerRuns {
  constructor(
    private readonly t: LedgerTable,
    /** Shards of a run created without a count of its own. */
    private readonly defaultShards: number,
  ) {}

  async createRun(id: string, spec: unknown, now: number, o: RunOptions = {}): Promise<{ created: boolean }> {
    const shards = o.shards ?? this.defaultShards;
    const keys = runKeys(id, shards); // validates the count before anything is written
    try {
      await transactWrite(this.t.doc, {
        TransactItems: [
          {
            Put: {
              TableName: this.t.table,
              Item: {
                pk: runPk(id),
                sk: 'RUN',
                id,
                spec,
                shards,
                coordinatorEpoch: -1,
                createdAt: now,
                enqueues: 0,
                items: 0,
                [GSI1.pk]: RUNS_INDEX,
                [GSI1.sk]: id,
              },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
          // The list of every run, read newest first: one small item per run, never rewritten.
          { Put: { TableName: this.t.table, Item: { pk: ALL_RUNS, sk: `${pad(now)}#${id}`, id } } },
        ],
      });
      this.t.layouts.set(id, keys);
      return { created: true };
    } catch (err) {
      if (err instanceof TransactionCanceledException && err.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed') return { created: false };
      throw err;
    }
  }

  /** The ALL_RUNS list newest first, each page's run records read one by one (a page is small). Runs created before the list existed are not in it. */
  async listRuns(o: { readonly cursor?: string; readonly limit: number }): Promise<{ runs: RunRecord[]; next: string | null }> {
    const page = await listPage(this.t.doc, this.t.table, ALL_RUNS, o.limit, listStart(o.cursor));
    const records = new Map(
      (
        await batchGetAll(
          this.t.doc,
          this.t.table,
          page.items.map((i) => ({ pk: runPk(String(i.id)), sk: 'RUN' })),
        )
      ).map((r) => [String(r.id), runRecordOf(r)]),
    );
    const runs = page.items.flatMap((i) => records.get(String(i.id)) ?? []);
    const last = page.items.at(-1);
    return { runs, next: page.more && last ? listCursor(String(last.sk)) : null };
  }

  async cancelRun(
    id: string,
    cancel: { readonly by: string; readonly reason: string | null },
    now: number,
  ): Promise<{ cancelled: RunCancel; first: boolean } | null> {
    try {
      const { Attributes } = await this.t.throttled(id, runPk(id), () =>
        this.t.doc.send(
          new UpdateCommand({
            TableName: this.t.table,
            Key: { pk: runPk(id), sk: 'RUN' },
            UpdateExpression: 'SET cancelledAt = :at, cancelledBy = :by, cancelReason = :reason',
            ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(cancelledAt)',
            ExpressionAttributeValues: { ':at': now, ':by': cancel.by, ':reason': cancel.reason },
            ReturnValues: 'ALL_NEW',
          }),
        ),
      );
      return { cancelled: runRecordOf(Attributes!).cancelled!, first: true };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const run = await this.getRun(id);
      return run?.cancelled ? { cancelled: run.cancelled, first: false } : null;
    }
  }

  async getRun(id: string): Promise<RunRecord | null> {
    const { Item } = await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: { pk: runPk(id), sk: 'RUN' }, ConsistentRead: true }));
    if (!Item) return null;
    this.t.remember(id, Item);
    return runRecordOf(Item);
  }

  /**
   * Runs closed before `before` (CLOSEDRUNS, oldest first), deleted: the
   * record, only if still closed at the time read (an enqueue re-opens it),
   * then its place in the list, its steal hint and its fences. Its items are
   * not deleted here: each carries a TTL from the write that finished it.
   * Runs closed before this release are not in CLOSEDRUNS and are kept.
   */
  async pruneRuns(before: number, limit: number): Promise<{ runs: number; items: number }> {
    const { Items } = await this.t.doc.send(
      new QueryCommand({
        TableName: this.t.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :k AND ${GSI1.sk} < :before`,
        ExpressionAttributeValues: { ':k': CLOSED_RUNS, ':before': `${pad(before)}#` },
        Limit: Math.max(1, Math.min(limit, 25)),
      }),
    );
    let runs = 0;
    for (const entry of Items ?? []) {
      const id = String(entry.id);
      const { Item: run } = await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: { pk: runPk(id), sk: 'RUN' }, ConsistentRead: true }));
      if (!run || run[GSI1.pk] !== CLOSED_RUNS || !(Number(run.closedAt) < before)) continue;
      try {
        await this.t.doc.send(
          new DeleteCommand({
            TableName: this.t.table,
            Key: { pk: runPk(id), sk: 'RUN' },
            ConditionExpression: '#ipk = :closed AND closedAt = :at',
            ExpressionAttributeNames: { '#ipk': GSI1.pk },
            ExpressionAttributeValues: { ':closed': CLOSED_RUNS, ':at': Number(run.closedAt) },
          }),
        );
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException) continue; // re-opened since it was read
        throw err;
      }
      const keys = runKeys(id, run.shards === undefined ? null : Number(run.shards));
      const rest = [{ pk: ALL_RUNS, sk: `${pad(Number(run.createdAt))}#${id}` }, { pk: `STEAL#${id}`, sk: 'HINT' }, ...keys.fences, keys.fencesRaised];
      await batchDelete(this.t.doc, this.t.table, rest);
      this.t.layouts.delete(id);
      runs++;
    }
    return { runs, items: 0 };
  }

  /**
   * The runs in the RUNS index with a pending or running item. A run found
   * with neither (by the eventually consistent index, then confirmed by a
   * consistent read of its items) leaves the index, so the scheduled scan's
   * cost follows the open runs, not every run ever created. It leaves only
   * if no enqueue happened since it was listed (`enqueues` unchanged).
   */
  async openRuns(): Promise<string[]> {
    const runs = await queryAll(this.t.doc, {
      TableName: this.t.table,
      IndexName: GSI1.name,
      KeyConditionExpression: `${GSI1.pk} = :k`,
      ExpressionAttributeValues: { ':k': RUNS_INDEX },
    });
    const open = await mapLimit(runs, this.t.concurrency, async (r) => {
      const id = String(r.id);
      if ((await this.openState(id)) === 'open') return id;
      await this.closeRun(id, r.enqueues);
      return null;
    });
    return open.filter((id): id is string => id !== null).sort();
  }

  /**
   * Whether anything of the run is pending or running: the index first (a
   * query of one entry per key), then, when it shows nothing, a consistent
   * read of the items, stopping at the first open one (the index lags).
   */
  private async openState(runId: string): Promise<'open' | 'closed'> {
    const keys = await this.t.keys(runId);
    const hits = await this.t.fanOut([...keys.pendingKeys, ...keys.runningKeys], async (k) => (await this.t.index(k, {}, 1)).length > 0);
    if (hits.some(Boolean)) return 'open';
    return (await this.firstOpen(keys)) ? 'open' : 'closed';
  }

  /** A consistent read of the run's items, shard by shard, stopping at the first pending or running one. */
  private async firstOpen(keys: RunKeys): Promise<WorkItem['state'] | null> {
    for (const partition of keys.partitions) {
      let start: Item | undefined;
      do {
        const page = await this.t.doc.send(
          new QueryCommand({
            TableName: this.t.table,
            KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
            FilterExpression: '#s IN (:pending, :running)',
            ExpressionAttributeNames: { '#s': 'state' },
            ExpressionAttributeValues: { ':p': partition, ':i': 'ITEM#', ':pending': 'pending', ':running': 'running' },
            ProjectionExpression: '#s',
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        const found = page.Items?.[0];
        if (found) return found.state as WorkItem['state'];
        start = page.LastEvaluatedKey;
      } while (start);
    }
    return null;
  }

  /** Out of the open runs, into the closed ones by when (what pruneRuns reads): only if no enqueue came since it was listed. */
  private async closeRun(runId: string, enqueues: unknown): Promise<boolean> {
    const now = Date.now();
    try {
      await this.t.doc.send(
        new UpdateCommand({
          TableName: this.t.table,
          Key: { pk: runPk(runId), sk: 'RUN' },
          UpdateExpression: 'SET #ipk = :closed, #isk = :at, closedAt = :now',
          // Runs written before the counter existed have none.
          ConditionExpression: enqueues === undefined ? 'attribute_not_exists(enqueues)' : 'enqueues = :seen',
          ExpressionAttributeNames: { '#ipk': GSI1.pk, '#isk': GSI1.sk },
          ExpressionAttributeValues: {
            ':closed': CLOSED_RUNS,
            ':at': `${pad(now)}#${runId}`,
            ':now': now,
            ...(enqueues === undefined ? {} : { ':seen': enqueues }),
          },
        }),
      );
      return true;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err; // an enqueue came in: it stays
      return false;
    }
  }

  /**
   * The run record first: one closed (out of the RUNS index) is done. An
   * open one is probed (one index entry a key, then the items if the index
   * shows none) and closed here when nothing is open, as the scan does.
   */
  async isDone(runId: string): Promise<boolean> {
    const { Item: run } = await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: { pk: runPk(runId), sk: 'RUN' }, ConsistentRead: true }));
    if (!run || run[GSI1.pk] !== RUNS_INDEX) return true;
    if ((await this.openState(runId)) === 'open') return false;
    await this.closeRun(runId, run.enqueues);
    return true;
  }

  /**
   * A sharded run's counts come from its index and its record, never from
   * reading its items: pending, running and failed are counted per shard
   * key, done is the items enqueued less those. The index lags a moment, so
   * a run that looks finished is confirmed by a consistent read of its items
   * (stopping at the first open one) before it is reported finished, and is
   * then closed (out of the RUNS index), so that read happens once. A run of
   * the first layout is counted by reading its items, as it always was.
   */
  async counts(runId: string): Promise<Record<WorkItem['state'], number>> {
    const keys = await this.t.keys(runId);
    if (keys.shards === null) return this.countByReading(keys.partitions[0]!);
    const { Item: run } = await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: { pk: runPk(runId), sk: 'RUN' }, ConsistentRead: true }));
    if (!run) return { pending: 0, running: 0, done: 0, failed: 0 };
    const count = async (list: readonly string[]) => (await this.t.fanOut(list, (k) => this.countKey(k))).reduce((a, b) => a + b, 0);
    const closed = run[GSI1.pk] !== RUNS_INDEX;
    const [pending, running, failed] = closed
      ? [0, 0, await count(keys.failedKeys)]
      : await Promise.all([count(keys.pendingKeys), count(keys.runningKeys), count(keys.failedKeys)]);
    const out = { pending, running, failed, done: 0 };
    if (!closed && pending + running === 0) {
      const open = await this.firstOpen(keys);
      if (open) out[open] = Math.max(1, out[open]);
      else await this.closeRun(runId, run.enqueues);
    }
    out.done = Math.max(0, Number(run.items ?? 0) - out.pending - out.running - out.failed);
    return out;
  }

  private async countKey(key: string): Promise<number> {
    let total = 0;
    let start: Item | undefined;
    do {
      const from = start;
      const page = await this.t.throttled(runOfKey(key), `gsi1:${key}`, () =>
        this.t.doc.send(
          new QueryCommand({
            TableName: this.t.table,
            IndexName: GSI1.name,
            KeyConditionExpression: `${GSI1.pk} = :k`,
            ExpressionAttributeValues: { ':k': key },
            Select: 'COUNT',
            ExclusiveStartKey: from,
          }),
        ),
      );
      total += page.Count ?? 0;
      start = page.LastEvaluatedKey;
    } while (start);
    return total;
  }

  private async countByReading(partition: string): Promise<Record<WorkItem['state'], number>> {
    const out = { pending: 0, running: 0, done: 0, failed: 0 };
    const items = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
      ExpressionAttributeValues: { ':p': partition, ':i': 'ITEM#' },
      ProjectionExpression: '#s',
      ExpressionAttributeNames: { '#s': 'state' },
      ConsistentRead: true,
    });
    for (const i of items) out[i.state as WorkItem['state']]++;
    return out;
  }
}
