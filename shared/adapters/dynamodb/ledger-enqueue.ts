import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import { contentId, type WorkItem } from '../../ledger/model.js';
import type { PendingEntry } from '../../ledger/store.js';
import { runPk } from './ledger-keys.js';
import { firstInOrder, RUNS_INDEX, type Item, type LedgerTable } from './ledger-table.js';
import { pad, pendingSk } from './ledger-updates.js';
import { GSI1 } from './table.js';

/**
 * Items in: enqueued Pending (each once, by content id; the run back in the
 * RUNS index), then read and marked as their messages are sent, while they
 * are Pending.
 */
export class LedgerEnqueue {
  constructor(private readonly t: LedgerTable) {}

  async enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }> {
    const keys = await this.t.keys(runId);
    const ids = payloads.map(contentId);
    let added = 0;
    let failure: { err: unknown } | null = null;
    // Every put is tried, though one was refused: a throttled request stores what the table takes, and its retry
    // (idempotent: a stored item is left as it is) sends again only to find the rest missing.
    await mapLimit(payloads, this.t.concurrency, async (payload, i) => {
      const id = ids[i]!;
      const item = keys.item(id);
      try {
        await this.t.throttled(runId, item.pk, () =>
          this.t.doc.send(
            new PutCommand({
              TableName: this.t.table,
              Item: {
                ...item,
                runId,
                id,
                payload,
                state: 'pending',
                started: false,
                attempts: 0,
                version: 0,
                pendingVersion: 0,
                createdAt: now,
                [GSI1.pk]: keys.index(id).pending,
                [GSI1.sk]: pendingSk(id, null),
              },
              ConditionExpression: 'attribute_not_exists(pk)',
            }),
          ),
        );
        added++;
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) failure ??= { err };
      }
    });
    // After the items, once per request (never per item): a run openRuns is taking out at this moment
    // either sees them (and stays) or loses its conditional write to this counter (and is back in the index).
    // Also when the request failed part way: a retry finds the items it put already there and would not count them.
    if (added > 0) {
      await this.t.throttled(runId, runPk(runId), () =>
        this.t.doc.send(
          new UpdateCommand({
            TableName: this.t.table,
            Key: { pk: runPk(runId), sk: 'RUN' },
            UpdateExpression:
              'SET enqueues = if_not_exists(enqueues, :zero) + :one, #items = if_not_exists(#items, :zero) + :added, #ipk = :runs, #isk = :id REMOVE closedAt',
            ExpressionAttributeNames: { '#ipk': GSI1.pk, '#isk': GSI1.sk, '#items': 'items' },
            ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':added': added, ':runs': RUNS_INDEX, ':id': runId },
          }),
        ),
      );
    }
    if (failure) throw (failure as { err: unknown }).err;
    return { ids, added };
  }

  /**
   * Pending entries as items: the version from `pendingVersion` (or `version`
   * under an ALL projection); an entry with neither — an item stored before
   * `pendingVersion` existed, in an index that does not project `version` —
   * is read from the table.
   */
  private async pendingItems(runId: string, entries: readonly Item[]): Promise<PendingEntry[]> {
    const versionOf = (e: Item) => e.version ?? e.pendingVersion;
    const unknown = entries.filter((e) => versionOf(e) === undefined).map((e) => String(e.id));
    // Read items no longer Pending (claimed since the index was read) are left out, as a later query would leave them.
    const read = new Map((await this.t.readItems(runId, unknown)).filter((i) => i.state === 'pending').map((i) => [String(i.id), i]));
    return entries.flatMap((e) => {
      const version = versionOf(e) ?? read.get(String(e.id))?.version;
      if (version === undefined) return [];
      return [
        {
          runId: String(e.runId),
          id: String(e.id),
          state: 'pending' as const,
          version: Number(version),
          sentAt: e.sentAt === undefined ? null : Number(e.sentAt),
        },
      ];
    });
  }

  /** In the store's own order, across shards: by when the message was last sent (never: first), then id. */
  async pending(runId: string, limit: number, after?: Pick<PendingEntry, 'id' | 'sentAt'>): Promise<PendingEntry[]> {
    const keys = await this.t.keys(runId);
    const from = after === undefined ? {} : { after: pendingSk(after.id, after.sentAt) };
    return this.pendingItems(runId, firstInOrder(await this.t.fanOut(keys.pendingKeys, (k) => this.t.index(k, from, limit)), limit));
  }

  async unsent(runId: string, sentBefore: number, limit: number): Promise<PendingEntry[]> {
    const keys = await this.t.keys(runId);
    return this.pendingItems(runId, firstInOrder(await this.t.fanOut(keys.pendingKeys, (k) => this.t.index(k, { before: pad(sentBefore) }, limit)), limit));
  }

  /** The PENDING entries past the unsent ones (their sort key carries when they were sent), one conditional update each. */
  async markUnsent(runId: string, limit: number): Promise<number> {
    const keys = await this.t.keys(runId);
    const sent = firstInOrder(await this.t.fanOut(keys.pendingKeys, (k) => this.t.index(k, { after: `${pad(0)}#\uffff` }, limit)), limit);
    // Claimed meanwhile: it has a message, and is left alone.
    const marked = await mapLimit(sent, this.t.concurrency, (entry) =>
      this.pendingUpdate(runId, keys.item(String(entry.id)), 'REMOVE sentAt SET #isk = :sk', { ':sk': pendingSk(String(entry.id), null) }),
    );
    return marked.filter(Boolean).length;
  }

  /** One conditional update per item (DynamoDB has no batched update), a bounded number in flight. */
  async markSent(runId: string, items: readonly Pick<WorkItem, 'id' | 'version'>[], now: number): Promise<void> {
    const keys = await this.t.keys(runId);
    // Claimed (or re-pended) meanwhile: left alone.
    await mapLimit(items, this.t.concurrency, (item) =>
      this.pendingUpdate(
        runId,
        keys.item(item.id),
        'SET sentAt = :now, #isk = :sk',
        { ':now': now, ':sk': pendingSk(item.id, now), ':v': item.version },
        ' AND version = :v',
      ),
    );
  }

  /** An update of a Pending item's send bookkeeping, only while it is Pending (and `also`); false when it no longer was. */
  private async pendingUpdate(runId: string, key: { pk: string; sk: string }, update: string, values: Record<string, unknown>, also = ''): Promise<boolean> {
    try {
      await this.t.throttled(runId, key.pk, () =>
        this.t.doc.send(
          new UpdateCommand({
            TableName: this.t.table,
            Key: key,
            UpdateExpression: update,
            ConditionExpression: `#s = :pending${also}`,
            ExpressionAttributeNames: { '#s': 'state', '#isk': GSI1.sk },
            ExpressionAttributeValues: { ':pending': 'pending', ...values },
          }),
        ),
      );
      return true;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      return false;
    }
  }
}
