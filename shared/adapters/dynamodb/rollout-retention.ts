import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import { alarmNamesOf, TERMINAL_STATES } from '../../rollout/model.js';
import { batchDelete, queryAll } from './query.js';
import { ACTUATING, ENDED, listSk, OUTBOX, pad, ROLLOUTS, rolloutOf, rolloutPk, type RolloutTable } from './rollout-items.js';
import { GSI1 } from './table.js';

/** What retention deletes: rollouts ended long enough ago, with everything only they kept. */
export class RolloutRetention {
  constructor(private readonly t: RolloutTable) {}

  /** DynamoDB's TTL deletes each reading READING_RETENTION_DAYS after it was taken: nothing to do here. */
  pruneGateReadings(): Promise<number> {
    return Promise.resolve(0);
  }

  /**
   * The oldest ENDED entries (the index is eventually consistent: each
   * rollout's head is read again, consistently, and one that is running again
   * or ended later is left alone), then each rollout deleted: its partition,
   * watch entries, list entry, the alarm states only it watched, its head,
   * and last its ENDED entry, so a crash part way is finished by a later call.
   */
  async pruneEnded(before: number, limit: number): Promise<number> {
    const entries = await queryAll(
      this.t.doc,
      {
        TableName: this.t.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :e AND ${GSI1.sk} < :b`,
        ExpressionAttributeValues: { ':e': ENDED, ':b': pad(before, 15) },
      },
      limit,
    );
    const pruned = await mapLimit(entries, this.t.readConcurrency, async (e) => this.pruneOne(String(e.sk), before));
    return pruned.filter(Boolean).length;
  }

  private async pruneOne(id: string, before: number): Promise<boolean> {
    const head = (await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: { pk: rolloutPk(id), sk: 'ROLLOUT' }, ConsistentRead: true }))).Item;
    if (head) {
      const r = rolloutOf(head);
      if (!TERMINAL_STATES.includes(r.state) || r.updatedAt >= before) return false;
      const items = await queryAll(this.t.doc, {
        TableName: this.t.table,
        KeyConditionExpression: 'pk = :p',
        ExpressionAttributeValues: { ':p': rolloutPk(id) },
        ConsistentRead: true,
        ProjectionExpression: 'pk, sk, #g',
        ExpressionAttributeNames: { '#g': GSI1.pk },
      });
      const unsettled = await this.t.doc.send(
        new QueryCommand({
          TableName: this.t.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :r)',
          ExpressionAttributeValues: { ':p': ACTUATING, ':r': `${id}#` },
          ConsistentRead: true,
          Limit: 1,
        }),
      );
      // An event not yet published, or a target not settled: kept until they are.
      if (items.some((i) => i[GSI1.pk] === OUTBOX) || (unsettled.Items?.length ?? 0) > 0) return false;
      const alarms = alarmNamesOf(r.spec);
      await batchDelete(this.t.doc, this.t.table, [
        ...items.filter((i) => i.sk !== 'ROLLOUT').map((i) => ({ pk: i.pk, sk: i.sk })),
        ...alarms.map((a) => ({ pk: `WATCH#${a}`, sk: id })),
        { pk: ROLLOUTS, sk: listSk(r) },
      ]);
      await mapLimit(alarms, this.t.readConcurrency, (a) => this.pruneAlarm(a, before));
      await this.t.doc.send(new DeleteCommand({ TableName: this.t.table, Key: { pk: rolloutPk(id), sk: 'ROLLOUT' } }));
    }
    await this.t.doc.send(new DeleteCommand({ TableName: this.t.table, Key: { pk: ENDED, sk: id } }));
    return head !== undefined;
  }

  /** An alarm's state, once no rollout watches it and it has not changed since `before`. */
  private async pruneAlarm(alarm: string, before: number): Promise<void> {
    const watched = await this.t.doc.send(
      new QueryCommand({
        TableName: this.t.table,
        KeyConditionExpression: 'pk = :p',
        ExpressionAttributeValues: { ':p': `WATCH#${alarm}` },
        ConsistentRead: true,
        Limit: 1,
      }),
    );
    if (watched.Items?.length) return;
    try {
      await this.t.doc.send(
        new DeleteCommand({
          TableName: this.t.table,
          Key: { pk: `ALARM#${alarm}`, sk: 'ALARM' },
          ConditionExpression: 'changedAt < :b',
          ExpressionAttributeValues: { ':b': before },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }
}
