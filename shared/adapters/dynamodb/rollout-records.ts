import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { actuationRecordOf, type ActuationRecord } from '../../rollout/actuation-record.js';
import type { LeaseToken } from '../../lease/record.js';
import type { RolloutEvent } from '../../rollout/events.js';
import { fencedTransactWrite } from './fence.js';
import { queryAll } from './query.js';
import { ACTUATING, ACTUATION, eventOf, OUTBOX, rolloutPk, type RolloutTable } from './rollout-items.js';
import { GSI1 } from './table.js';

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

  async markPublished(events: readonly RolloutEvent[]): Promise<void> {
    const now = this.t.clock.now();
    await Promise.all(
      events.map((e) =>
        this.t.doc.send(
          new UpdateCommand({
            TableName: this.t.table,
            Key: { pk: rolloutPk(e.detail.rolloutId), sk: `EVENT#${e.id}` },
            UpdateExpression: `SET publishedAt = :now REMOVE ${GSI1.pk}, ${GSI1.sk}`,
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: { ':now': now },
          }),
        ),
      ),
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
