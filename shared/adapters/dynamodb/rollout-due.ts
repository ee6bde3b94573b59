import { randomUUID } from 'node:crypto';
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { UpdateCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import { alarmNamesOf } from '../../rollout/model.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import { NEVER_DUE, type DueView } from '../../rollout/store.js';
import { batchGetAll, batchPut, queryAll } from './query.js';
import { transactWrite } from './conflicts.js';
import { DUE, dueSk, markDueUpdate, pad, rolloutKey, rolloutPk, type Item, type RolloutTable } from './rollout-items.js';
import type { RolloutReads } from './rollout-reads.js';
import { GSI1 } from './table.js';

/**
 * The due index: when a tick next reads each running rollout (gsi1 under
 * DUE, on the rollout's row), made due at once by every signal and
 * transition, rescheduled by a tick only under the mark it read.
 *
 * Upgrading from the release that kept the index on the registry items
 * (RUNNING / <id>): entries of both layouts are read (a rollout is due if
 * either says so), and a reschedule moves a registry entry onto the row, in
 * one transaction conditioned on both marks. Until every function runs this
 * release, the previous one's keep writing registry entries (its signals,
 * transitions and creations); they are read here, so nothing is missed. The
 * previous release's tick reads registry entries only: upgrade the batch
 * promoter first, then the functions that record signals and transitions
 * (the streaming promoter, the API); a rollout created or moved by this
 * release is otherwise not found by the old tick until a signal finds it.
 */
export class DueIndex {
  constructor(
    private readonly t: RolloutTable,
    private readonly reads: RolloutReads,
  ) {}

  /**
   * The due index's entries up to `now` (eventually consistent), then the
   * previous layout's registry items read consistently, then the views with
   * their rows (an entry the index still shows after a reschedule is
   * dropped here, by the row's or the registry item's own due time). Each
   * mark is read before its view (a row as first read, before the rest of
   * its view), so a mark newer than the view it comes with cannot be.
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
    const legacyIds = entries.filter((e) => e.pk === 'RUNNING').map((e) => String(e.sk));
    const registry = await batchGetAll(
      this.t.doc,
      this.t.table,
      legacyIds.map((id) => ({ pk: 'RUNNING', sk: id })),
    );
    const legacy = new Map(registry.filter((r) => r[GSI1.pk] === DUE && Number(r.dueAt) <= now).map((r) => [String(r.sk), String(r.mark)]));
    const ids = [...new Set(entries.map((e) => (e.pk === 'RUNNING' ? String(e.sk) : String(e.pk).slice(rolloutPk('').length))))];
    const rows = new Map<string, Item>();
    const views = await this.reads.views(ids, { running: true, rows });
    return views.flatMap((view) => {
      const row = rows.get(view.rollout.id);
      if (view.rollout.state !== 'running' || !row) return [];
      const rowMark = row[GSI1.pk] === DUE && typeof row.mark === 'string' ? row.mark : null;
      const old = legacy.get(view.rollout.id);
      if (old !== undefined) return [{ view, mark: legacyMark(old, rowMark) }];
      return rowMark !== null && Number(row.dueAt) <= now ? [{ view, mark: rowMark }] : [];
    });
  }

  async reschedule(rolloutId: string, mark: string, at: number): Promise<boolean> {
    const when = Math.min(at, NEVER_DUE);
    const legacy = parseLegacyMark(mark);
    try {
      if (legacy) {
        await transactWrite(this.t.doc, { TransactItems: this.moveOntoRow(rolloutId, legacy, when) });
        return true;
      }
      await this.t.doc.send(
        new UpdateCommand({
          TableName: this.t.table,
          Key: rolloutKey(rolloutId),
          UpdateExpression: 'SET dueAt = :at, #gs = :gs',
          ConditionExpression: '#m = :m',
          ExpressionAttributeNames: { '#m': 'mark', '#gs': GSI1.sk },
          ExpressionAttributeValues: { ':at': when, ':gs': dueSk(when, rolloutId), ':m': mark },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      if (err instanceof TransactionCanceledException && err.CancellationReasons?.some((r) => r.Code === 'ConditionalCheckFailed')) return false;
      throw err;
    }
  }

  /**
   * A registry entry of the previous layout moved onto the row, due at `when`: the row only under the mark
   * it was read with (none, if it had none) and while running, the registry entry only under its own mark
   * (one the previous release wrote since stays, and is read on a later tick).
   */
  private moveOntoRow(id: string, marks: { legacy: string; row: string | null }, when: number): NonNullable<TransactWriteCommandInput['TransactItems']> {
    const running = { TableName: this.t.table, Key: { pk: 'RUNNING', sk: id } };
    return [
      {
        Update: {
          TableName: this.t.table,
          Key: rolloutKey(id),
          UpdateExpression: 'SET dueAt = :at, #m = :new, #gp = :gp, #gs = :gs',
          ConditionExpression: `#state = :running AND ${marks.row === null ? 'attribute_not_exists(#m)' : '#m = :m'}`,
          ExpressionAttributeNames: { '#m': 'mark', '#gp': GSI1.pk, '#gs': GSI1.sk, '#state': 'state' },
          ExpressionAttributeValues: {
            ':at': when,
            ':new': randomUUID(),
            ':gp': DUE,
            ':gs': dueSk(when, id),
            ':running': 'running',
            ...(marks.row === null ? {} : { ':m': marks.row }),
          },
        },
      },
      {
        Update: {
          ...running,
          UpdateExpression: 'SET dueOnRow = :t REMOVE dueAt, #m, #gp, #gs',
          ConditionExpression: '#m = :m',
          ExpressionAttributeNames: { '#m': 'mark', '#gp': GSI1.pk, '#gs': GSI1.sk },
          ExpressionAttributeValues: { ':t': true, ':m': marks.legacy },
        },
      },
    ];
  }

  /**
   * Makes running rollouts due at once: after a signal for them is stored
   * (stale or not: a signal sent again after a crash between its write and
   * this mark is marked then). A rollout not running is left alone.
   */
  async markDue(ids: readonly string[]): Promise<void> {
    await mapLimit(ids, this.t.readConcurrency, async (id) => {
      try {
        await this.t.doc.send(new UpdateCommand({ TableName: this.t.table, ...markDueUpdate(id) }));
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
      ProjectionExpression: 'sk, dueAt, dueOnRow, watches, watchIndexed',
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
    // Due nowhere (older than the due index: neither a due time of its own nor one on its row), or not yet found by its alarms.
    await this.markDue(registry.filter((i) => (i.dueAt === undefined && i.dueOnRow !== true) || i.watchIndexed !== true).map((i) => String(i.sk)));
    this.backfilled = true;
  }
}

/**
 * A due rollout found by a registry entry of the previous layout: both marks in one (the row's mark, none
 * if its row carries no due time), for reschedule to move the entry onto the row. Marks are UUIDs.
 */
const LEGACY = 'registry:';
const legacyMark = (legacy: string, row: string | null) => `${LEGACY}${legacy}:${row ?? ''}`;
function parseLegacyMark(mark: string): { legacy: string; row: string | null } | null {
  if (!mark.startsWith(LEGACY)) return null;
  const [legacy = '', row = ''] = mark.slice(LEGACY.length).split(':');
  return { legacy, row: row === '' ? null : row };
}
