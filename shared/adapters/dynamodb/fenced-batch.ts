import type { DynamoDBDocumentClient, TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { Batcher } from '../../concurrency.js';
import type { LeaseToken } from '../../lease/record.js';
import { fencedTransactWrite, WriteConditionFailedError } from './fence.js';

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** A write that was not applied, and why. */
interface Failed {
  readonly error: unknown;
}

/** Items a transaction holds at most, the fence's ConditionCheck included (DynamoDB's limit). */
const TRANSACTION_ITEMS = 100;

/** Writes one batch takes at most; they are packed into as few transactions as the item limit allows. */
const WRITES_PER_BATCH = 64;

/**
 * Group commit of fenced writes on DynamoDB. Writes made under one lease
 * while an earlier one is under way (a tick's transitions, many at once) go
 * together: one TransactWriteItems holds the lease's ConditionCheck once, then
 * each write's own items with their own conditions, instead of one
 * transaction each, in turn (fencedTransactWrite's writes on one lease take
 * turns). A write made alone goes alone, exactly as fencedTransactWrite sends it.
 *
 * Guarantees: each write is still all or nothing, atomically with the fence,
 * and is answered as it would be alone —
 * - the fence fails: FencedError for every write of that transaction and of
 *   every one after it in the batch;
 * - one of a write's own conditions fails: WriteConditionFailedError for it
 *   alone (indexes into its own items); nothing of the transaction was
 *   applied, so it goes again without that write;
 * - writes that name one item (a transaction may not name an item twice) go
 *   in successive transactions, in the order they were made.
 *
 * Not guaranteed: an order among writes made at once beyond that; a write
 * whose transaction fails otherwise (a contended or lost request) gets that
 * error, as alone, and so does every write after it in the batch.
 */
export class FencedBatches {
  private readonly batches: Batcher<{ token: LeaseToken; items: readonly TransactItem[] }, Failed | undefined>;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {
    // One batch in flight: a client's fenced writes on one lease take turns in any case.
    this.batches = new Batcher((writes) => this.send(writes), { maxInFlight: 1, maxBatch: WRITES_PER_BATCH, linger: true });
  }

  /** fencedTransactWrite(doc, table, token, items), perhaps in one transaction with others. */
  async write(token: LeaseToken, items: readonly TransactItem[]): Promise<void> {
    if (items.length === 0 || items.length > TRANSACTION_ITEMS - 1) throw new RangeError(`FencedBatches: 1..99 items, got ${items.length}`);
    const answer = await this.batches.add({ token, items });
    if (answer !== undefined) throw answer.error;
  }

  /** Each write's answer: undefined once applied, or the error it gets. */
  private async send(writes: readonly { token: LeaseToken; items: readonly TransactItem[] }[]): Promise<(Failed | undefined)[]> {
    const answers = new Array<Failed | undefined>(writes.length);
    let stop: Failed | undefined;
    for (const group of packed(writes)) {
      if (stop !== undefined) {
        for (const i of group) answers[i] = stop;
        continue;
      }
      let left = group;
      while (left.length > 0) {
        // Where each write's items start in the transaction's (after the fence, which fencedTransactWrite adds).
        const offsets: number[] = [];
        const items: TransactItem[] = [];
        for (const i of left) {
          offsets.push(items.length);
          items.push(...writes[i]!.items);
        }
        try {
          await fencedTransactWrite(this.doc, this.tableName, writes[left[0]!]!.token, items);
          for (const i of left) answers[i] = undefined;
          left = [];
        } catch (err) {
          if (!(err instanceof WriteConditionFailedError) || left.length === 1) {
            // The fence (or anything else) fails them all, and every write after them.
            if (!(err instanceof WriteConditionFailedError)) stop = { error: err };
            for (const i of left) answers[i] = { error: err };
            left = [];
            continue;
          }
          // The writes whose own conditions failed, each told with its own items' indexes; the rest go again.
          const failed = new Map<number, WriteConditionFailedError['reasons'][number][]>();
          for (const r of err.reasons) {
            const at = offsets.findLastIndex((o) => o <= r.index);
            failed.set(at, [...(failed.get(at) ?? []), { ...r, index: r.index - offsets[at]! }]);
          }
          for (const [at, reasons] of failed) answers[left[at]!] = { error: new WriteConditionFailedError(reasons, { cause: err }) };
          left = left.filter((_, at) => !failed.has(at));
        }
      }
    }
    return answers;
  }
}

/**
 * Write indexes packed, in order, into transactions: one lease token each, at most TRANSACTION_ITEMS
 * items with the fence, no item named twice. A write that would break one starts the next.
 */
function packed(writes: readonly { token: LeaseToken; items: readonly TransactItem[] }[]): number[][] {
  const groups: number[][] = [];
  let group: number[] = [];
  let keys = new Set<string>();
  let size = 1;
  let token: LeaseToken | undefined;
  writes.forEach((w, i) => {
    const own = w.items.map(itemKey);
    const sameToken = token !== undefined && token.name === w.token.name && token.holder === w.token.holder && token.epoch === w.token.epoch;
    if (group.length && (!sameToken || size + w.items.length > TRANSACTION_ITEMS || own.some((k) => keys.has(k)))) {
      groups.push(group);
      group = [];
      keys = new Set();
      size = 1;
    }
    group.push(i);
    for (const k of own) keys.add(k);
    size += w.items.length;
    token = w.token;
  });
  if (group.length) groups.push(group);
  return groups;
}

/** The item a transaction item names: its table and key. */
function itemKey(item: TransactItem): string {
  const [, action] = Object.entries(item)[0] as [string, { TableName?: string; Key?: Record<string, unknown>; Item?: Record<string, unknown> }];
  const key = action.Key ?? action.Item ?? {};
  return JSON.stringify([action.TableName, key.pk, key.sk]);
}
