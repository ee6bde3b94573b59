import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { actuationRecordOf, type ActuationRecord } from '../../rollout/actuation-record.js';
import type { LeaseToken } from '../../lease/record.js';
import type { RolloutEvent } from '../../rollout/events.js';
import { transactWrite } from './conflicts.js';
import { fencedTransactWrite } from './fence.js';
import { queryAll } from './query.js';
import { ACTUATING, ACTUATION, eventOf, OUTBOX, rolloutPk, type Item, type RolloutTable } from './rollout-items.js';
import { GSI1 } from './table.js';

/** Marks one transaction carries at most (DynamoDB's limit on a transaction's items). */
const MARKS_PER_TRANSACTION = 100;

/** A rollout's records beside its state: its events (and the outbox of those not yet published), and what was applied to each target. */
export class RolloutRecords {
  constructor(private readonly t: RolloutTable) {}

  async unpublishedEvents(limit: number): Promise<RolloutEvent[]> {
    // The index is eventually consistent: an event written a moment ago may show up on the next flush.
    const res = await this.t.doc.send(
      new QueryCommand({
        TableName: this.t.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :o`,
        ExpressionAttributeValues: { ':o': OUTBOX },
        Limit: limit,
      }),
    );
    return (res.Items ?? []).map(eventOf);
  }

  /**
   * Each event's outbox entry taken off (and `publishedAt` set), on the
   * event's item only if it is still there (retention may have deleted its
   * rollout). Events of one call go in transactions of up to 100 updates —
   * one request instead of one each, which is most of a tick's requests
   * otherwise; a transaction costs twice the write capacity of a plain
   * update, so a lone event goes as one UpdateItem. A transaction whose
   * condition fails on an item applied nothing: it goes again without that
   * item. Nothing is marked before this is called, and the engine calls it
   * only after the event was delivered.
   */
  async markPublished(events: readonly RolloutEvent[]): Promise<void> {
    const now = this.t.clock.now();
    // A transaction may not name an item twice: one mark an event.
    const keys = [...new Map(events.map((e) => [`${e.detail.rolloutId}\u0000${e.id}`, { pk: rolloutPk(e.detail.rolloutId), sk: `EVENT#${e.id}` }])).values()];
    const mark = (Key: Item) => ({
      TableName: this.t.table,
      Key,
      UpdateExpression: `SET publishedAt = :now REMOVE ${GSI1.pk}, ${GSI1.sk}`,
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeValues: { ':now': now },
    });
    const chunks = Array.from({ length: Math.ceil(keys.length / MARKS_PER_TRANSACTION) }, (_, i) =>
      keys.slice(i * MARKS_PER_TRANSACTION, (i + 1) * MARKS_PER_TRANSACTION),
    );
    await Promise.all(
      chunks.map(async (chunk) => {
        let left = chunk;
        while (left.length > 1) {
          try {
            await transactWrite(this.t.doc, { TransactItems: left.map((Key) => ({ Update: mark(Key) })) });
            return;
          } catch (err) {
            if (!(err instanceof TransactionCanceledException)) throw err;
            // The events whose items are gone: nothing to mark. A reason of any other kind is not ours to judge.
            const gone = new Set((err.CancellationReasons ?? []).flatMap((r, i) => (r.Code === 'ConditionalCheckFailed' ? [i] : [])));
            if (gone.size === 0) throw err;
            left = left.filter((_, i) => !gone.has(i));
          }
        }
        if (left.length === 1) {
          await this.t.doc.send(new UpdateCommand(mark(left[0]!))).catch((err: unknown) => {
            if (!(err instanceof ConditionalCheckFailedException)) throw err;
          });
        }
      }),
    );
  }

  async events(rolloutId: string): Promise<RolloutEvent[]> {
    const items = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :e)',
      ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':e': 'EVENT#' },
      ConsistentRead: true,
    });
    return items.sort((a, b) => String(a.order).localeCompare(String(b.order))).map(eventOf);
  }

  async actuations(rolloutId: string): Promise<ActuationRecord[]> {
    const items = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :a)',
      ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':a': ACTUATION },
      ConsistentRead: true,
    });
    return items.map((i) => actuationRecordOf(i.record));
  }

  async recordActuation(token: LeaseToken, record: ActuationRecord): Promise<void> {
    const registry = { pk: ACTUATING, sk: `${record.rolloutId}#${record.target}` };
    await fencedTransactWrite(this.t.doc, this.t.table, token, [
      { Put: { TableName: this.t.table, Item: { pk: rolloutPk(record.rolloutId), sk: `${ACTUATION}${record.target}`, type: 'actuation', record } } },
      // The registry a tick reads (strongly consistent, like RUNNING): present while the record is not settled.
      record.settled
        ? { Delete: { TableName: this.t.table, Key: registry } }
        : { Put: { TableName: this.t.table, Item: { ...registry, rolloutId: record.rolloutId, updatedAt: record.updatedAt } } },
    ]);
  }

  async unsettledActuations(limit: number): Promise<string[]> {
    const items = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': ACTUATING },
      ConsistentRead: true,
    });
    const oldest = new Map<string, number>();
    for (const i of items) {
      const id = String(i.rolloutId);
      oldest.set(id, Math.min(oldest.get(id) ?? Infinity, Number(i.updatedAt)));
    }
    return [...oldest]
      .sort((a, b) => a[1] - b[1])
      .slice(0, limit)
      .map(([id]) => id);
  }
}
