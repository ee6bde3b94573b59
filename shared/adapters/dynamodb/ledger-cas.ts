import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import { FencedError } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import type { WorkItem } from '../../ledger/model.js';
import { assertOneChangePerItem, PartialBatchError, type ItemCasOutcome } from '../../ledger/store.js';
import type { ItemCas } from '../../ledger/transitions.js';
import { retryingConflicts } from './conflicts.js';
import { fencedTransactWrite, WriteConditionFailedError } from './fence.js';
import { plainItem } from './item.js';
import type { RunFences } from './ledger-fences.js';
import type { RunKeys } from './ledger-keys.js';
import { itemOf, type LedgerTable } from './ledger-table.js';
import { ledgerUpdate } from './ledger-updates.js';

/**
 * The item transitions — a worker's claim, start, heartbeat, ack or nack, a
 * coordinator's steal, re-pend or failure — each one conditional update of
 * the item (ledger-updates.ts), a coordinator's checked against its shard's
 * fence in the same transaction.
 */
export class LedgerCas {
  constructor(
    private readonly t: LedgerTable,
    private readonly fences: RunFences,
    /** Seconds a finished item is kept: the write that ends it sets the table's TTL attribute. */
    private readonly retainRunSeconds: number,
  ) {}

  /** Independent conditional writes, a bounded number in flight (DynamoDB has no multi-item conditional update outside transactions). */
  async casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]> {
    assertOneChangePerItem(changes);
    // Every change settles before the batch answers: one throttled change must not hide those that landed.
    const outcomes: (ItemCasOutcome | undefined)[] = Array.from({ length: changes.length }, () => undefined);
    const errors: unknown[] = [];
    await mapLimit(
      changes.map((change, i) => ({ change, i })),
      this.t.concurrency,
      async ({ change, i }) => {
        try {
          outcomes[i] = await this.cas(change, now);
        } catch (err) {
          errors.push(err);
        }
      },
    );
    if (!errors.length) return outcomes as ItemCasOutcome[];
    // Deposed: the coordinator stops; no partial answer is of use to it.
    const fenced = errors.find((e) => e instanceof FencedError);
    if (fenced) throw fenced;
    if (errors.length === changes.length) throw errors[0];
    throw new PartialBatchError(outcomes, errors);
  }

  async applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]> {
    try {
      return (await this.casMany(changes, now)).map((o) => o.ok);
    } catch (err) {
      throw err instanceof PartialBatchError ? (err as PartialBatchError<ItemCasOutcome>).map((o) => o.ok) : err;
    }
  }

  async get(runId: string, itemId: string): Promise<WorkItem | null> {
    const keys = await this.t.keys(runId);
    const key = keys.item(itemId);
    const { Item } = await this.t.throttled(runId, key.pk, () => this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: key, ConsistentRead: true })));
    return Item ? itemOf(Item) : null;
  }

  /** The transition's update (ledger-updates.ts); a coordinator's in one transaction with its fence. */
  async cas(change: ItemCas, now: number): Promise<ItemCasOutcome> {
    const keys = await this.t.keys(change.runId);
    const update = {
      TableName: this.t.table,
      Key: keys.item(change.itemId),
      ...ledgerUpdate(change, now, keys.index(change.itemId), Math.floor(now / 1000) + this.retainRunSeconds),
    };
    try {
      if (change.fence) {
        await this.fencedWrite(change.runId, keys, change.fence, change.itemId, update);
        return { ok: true, item: (await this.get(change.runId, change.itemId))! };
      }
      // A worker's write on an item a coordinator transaction holds (a start meeting a steal) is refused unjudged: again.
      const res = await this.t.throttled(change.runId, update.Key.pk, () =>
        retryingConflicts(() => this.t.doc.send(new UpdateCommand({ ...update, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }))),
      );
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

  /**
   * A coordinator's write, checked against its shard's fence (ledger-fences.ts),
   * raised to the token's epoch first if this process has not seen it raised.
   * A fence found below the epoch (the raise recorded, a fence since lost) is
   * raised again and the write sent once more; one above it is a FencedError.
   */
  private async fencedWrite(
    runId: string,
    keys: RunKeys,
    token: LeaseToken,
    itemId: string,
    update: NonNullable<TransactWriteCommandInput['TransactItems']>[number]['Update'],
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await this.fences.ensure(runId, keys, token);
      try {
        await fencedTransactWrite(this.t.doc, this.t.table, token, [{ Update: update }], { fenceKey: keys.fence(itemId) });
        return;
      } catch (err) {
        const below = err instanceof FencedError && (err.current === null || err.current.epoch < token.epoch);
        if (!below || attempt > 0) throw err;
        this.fences.lost(runId);
      }
    }
  }
}
