import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import { alarmNamesOf } from '../../rollout/model.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import { NEVER_DUE, type DueView } from '../../rollout/store.js';
import { batchGetAll, batchPut, queryAll } from './query.js';
import { DUE, dueSk, markDueUpdate, pad, type RolloutTable } from './rollout-items.js';
import type { RolloutReads } from './rollout-reads.js';
import { GSI1 } from './table.js';

/**
 * The due index: when a tick next reads each running rollout (gsi1 under
 * DUE), made due at once by every signal and transition, rescheduled by a
 * tick only under the mark it read.
 */
export class DueIndex {
  constructor(
    private readonly t: RolloutTable,
    private readonly reads: RolloutReads,
  ) {}

  /**
   * The due index's entries up to `now` (eventually consistent), then their
   * registry items read consistently (an entry the index still shows after a
   * reschedule is dropped here), then the views: each mark is read before
   * its view, so a mark newer than the view it comes with cannot be.
   */
  async loadDue(now: number, limit: number): Promise<DueView[]> {
    await this.backfillDue();
    const entries = await queryAll(
      this.t.doc,
      {
        TableName: this.t.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :d AND ${GSI1.sk} <= :n`,
        ExpressionAttributeValues: { ':d': DUE, ':n': `${pad(Math.max(0, now), 15)}#\uffff` },
      },
      limit,
    );
    const registry = await batchGetAll(
      this.t.doc,
      this.t.table,
      entries.map((e) => ({ pk: 'RUNNING', sk: String(e.sk) })),
    );
    const marks = new Map(registry.filter((r) => Number(r.dueAt) <= now).map((r) => [String(r.sk), String(r.mark)]));
    const views = await this.reads.views([...marks.keys()], { running: true });
    return views.filter((v) => v.rollout.state === 'running').map((view) => ({ view, mark: marks.get(view.rollout.id)! }));
  }

  async reschedule(rolloutId: string, mark: string, at: number): Promise<boolean> {
    const when = Math.min(at, NEVER_DUE);
    try {
      await this.t.doc.send(
        new UpdateCommand({
          TableName: this.t.table,
          Key: { pk: 'RUNNING', sk: rolloutId },
          UpdateExpression: 'SET dueAt = :at, #gs = :gs',
          ConditionExpression: '#m = :m',
          ExpressionAttributeNames: { '#m': 'mark', '#gs': GSI1.sk },
          ExpressionAttributeValues: { ':at': when, ':gs': dueSk(when, rolloutId), ':m': mark },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /**
   * Makes running rollouts due at once: after a signal for them is stored
   * (stale or not: a signal sent again after a crash between its write and
   * this mark is marked then). A rollout not running is left alone.
   */
  async markDue(ids: readonly string[]): Promise<void> {
    await mapLimit(ids, this.t.readConcurrency, async (id) => {
      try {
        await this.t.doc.send(new UpdateCommand({ TableName: this.t.table, ...markDueUpdate(id), ConditionExpression: 'attribute_exists(pk)' }));
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
    });
  }

  private backfilled = false;

  /**
   * Registry items written by an older release carry no due time and have
   * no WATCH entries: on this store's first tick, their entries are written
   * and they are made due, so none is left unread. Until then an alarm's
   * change does not find them; the change is stored, and that tick reads it.
   */
  private async backfillDue(): Promise<void> {
    if (this.backfilled) return;
    const registry = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': 'RUNNING' },
      ConsistentRead: true,
      ProjectionExpression: 'sk, dueAt, watches, watchIndexed',
    });
    const old = registry.filter((i) => i.watchIndexed !== true);
    await mapLimit(old, this.t.readConcurrency, async (i) => {
      const id = String(i.sk);
      const names = Array.isArray(i.watches)
        ? (i.watches as string[])
        : alarmNamesOf((await this.reads.load(id))?.rollout.spec ?? ({ stages: [] } as unknown as RolloutSpec));
      await batchPut(
        this.t.doc,
        this.t.table,
        names.map((a) => ({ pk: `WATCH#${a}`, sk: id })),
      );
      await this.t.doc
        .send(
          new UpdateCommand({
            TableName: this.t.table,
            Key: { pk: 'RUNNING', sk: id },
            UpdateExpression: 'SET watchIndexed = :t',
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: { ':t': true },
          }),
        )
        .catch((err: unknown) => {
          if (!(err instanceof ConditionalCheckFailedException)) throw err;
        });
    });
    await this.markDue(registry.filter((i) => i.dueAt === undefined || i.watchIndexed !== true).map((i) => String(i.sk)));
    this.backfilled = true;
  }
}
