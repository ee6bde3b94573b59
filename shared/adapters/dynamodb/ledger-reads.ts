import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { BadCursorError, cursorInt, cursorObject, cursorText, decodeCursor, encodeCursor } from '../../cursor.js';
import { MAX_RUN_SHARDS } from '../../ledger/capacity.js';
import type { WorkItem } from '../../ledger/model.js';
import type { ItemPage, ItemPageQuery, RunningEntry } from '../../ledger/store.js';
import { isWhole, itemOf, type Item, type LedgerTable } from './ledger-table.js';
import { MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES } from './query.js';

/**
 * A run's items page's cursor: the partition (a shard's, or the run's) and
 * DynamoDB's last key in it, exactly as an items query's LastEvaluatedKey has
 * it (the table's pk and an item's sort key), or null at a partition's start.
 */
const ITEMS_CURSOR = cursorObject({
  p: cursorInt(0, MAX_RUN_SHARDS),
  k: cursorObject({ pk: cursorText(MAX_PARTITION_KEY_BYTES), sk: cursorText(MAX_SORT_KEY_BYTES).startsWith('ITEM#', 'not an item key') }).nullable(),
});

/** What the ledger holds, read: the running set (by its index entries), items by id, a run's items page by page. */
export class LedgerReads {
  constructor(private readonly t: LedgerTable) {}

  /** The entries, then the items they name read consistently (one BatchGetItem per 100): an entry carries no heartbeat. */
  async running(runId: string): Promise<WorkItem[]> {
    const entries = await this.t.runningEntries(runId);
    const whole = entries.filter(isWhole);
    const read = await this.t.readItems(
      runId,
      entries.filter((e) => !isWhole(e)).map((e) => String(e.id)),
    );
    // Gone from Running since the index was read: left out, as a later query would.
    return [...whole, ...read.filter((i) => i.state === 'running')].map(itemOf);
  }

  /** Who holds each Running item, from the entries alone (`started` only where the index has it: a gsi1 projecting ALL). */
  async holders(runId: string): Promise<RunningEntry[]> {
    return (await this.t.runningEntries(runId)).map((e) => ({
      runId: String(e.runId),
      id: String(e.id),
      worker: (e.worker as string | undefined) ?? null,
      claimedAt: e.claimedAt === undefined ? null : Number(e.claimedAt),
      ...(isWhole(e) ? { started: Boolean(e.started) } : {}),
    }));
  }

  async getMany(runId: string, ids: readonly string[]): Promise<WorkItem[]> {
    return (await this.t.readItems(runId, ids)).map(itemOf);
  }

  /**
   * Partition by partition (a sharded run has one per shard), each in item
   * order; the cursor names the partition and DynamoDB's last key in it. A
   * state is a filter: a page reads past items in other states, up to a few
   * query pages of 1 MB before it answers (maybe short, never empty while
   * more may follow unless the read budget ran out; `next` goes on).
   */
  async items(runId: string, o: ItemPageQuery): Promise<ItemPage> {
    type Cursor = { p: number; k: Item | null };
    // Checked before the store is read: a bad cursor is the caller's error, not the store's.
    let at: Cursor = o.cursor === undefined ? { p: 0, k: null } : decodeCursor(o.cursor, ITEMS_CURSOR);
    const keys = await this.t.keys(runId);
    // A start key from another run's (or partition's) items is no cursor of this page.
    if (at.p > keys.partitions.length) throw new BadCursorError("p: past the run's partitions");
    if (at.k && at.k.pk !== keys.partitions[at.p]) throw new BadCursorError("k: a key of another run's items");
    const out: WorkItem[] = [];
    for (let reads = 0; reads < 8 && at.p < keys.partitions.length && out.length < o.limit; reads++) {
      const page = await this.t.doc.send(
        new QueryCommand({
          TableName: this.t.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
          ...(o.state ? { FilterExpression: '#s = :s', ExpressionAttributeNames: { '#s': 'state' } } : {}),
          ExpressionAttributeValues: { ':p': keys.partitions[at.p]!, ':i': 'ITEM#', ...(o.state ? { ':s': o.state } : {}) },
          Limit: o.limit - out.length,
          ConsistentRead: true,
          ...(at.k ? { ExclusiveStartKey: at.k } : {}),
        }),
      );
      out.push(...(page.Items ?? []).map(itemOf));
      at = page.LastEvaluatedKey ? { p: at.p, k: page.LastEvaluatedKey } : { p: at.p + 1, k: null };
    }
    return { items: out, next: at.p < keys.partitions.length ? encodeCursor(at) : null };
  }
}
