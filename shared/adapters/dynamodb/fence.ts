import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import type { TransactWriteCommandInput, DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { randomUUID } from 'node:crypto';
import { FencedError } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import { inTurn, transactWrite } from './conflicts.js';
import { plainItem } from './item.js';
import { leaseKey } from './table.js';

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** One of the caller's own conditions failed (not the fence): the state moved on. `index` is into the caller's items; `item` is that item as it is now. */
export class WriteConditionFailedError extends Error {
  override readonly name = 'WriteConditionFailedError';
  constructor(
    readonly reasons: readonly { index: number; code: string; item?: Record<string, unknown> }[],
    options?: { cause: unknown },
  ) {
    super(`transaction cancelled: ${reasons.map((r) => `item ${r.index}: ${r.code}`).join(', ')}`, options);
  }
}

/**
 * The fenced-write primitive on DynamoDB: the caller's items plus a
 * ConditionCheck that the lease item still has this holder and epoch, in one
 * TransactWriteItems. DynamoDB applies all or none, so a steal that committed
 * first makes the whole write fail.
 *
 * `fenceKey` checks another item that carries the lease's holder and epoch
 * instead: a run's shard fence (ledger-fences.ts), raised to each new epoch
 * under this same check of the lease before the new holder writes anything.
 *
 * Outcomes, told apart by the cancellation reasons:
 * - the fence's condition failed → FencedError with the lease's holder and epoch;
 * - one of the caller's conditions failed → WriteConditionFailedError, each
 *   failed item with its current value;
 * - a conflict with a concurrent transaction on one of the items (the lease
 *   item above all: every fenced write checks it) is no verdict: retried
 *   (conflicts.ts), then WriteContendedError. This client's fenced writes
 *   on one fence item go one at a time, so they never conflict with each other;
 * - anything else (a validation error) is thrown as DynamoDB sent it.
 *
 * A ClientRequestToken makes the SDK's own retries of a lost reply idempotent
 * (for 10 minutes): a retry after commit returns success instead of failing.
 */
export async function fencedTransactWrite(
  doc: DynamoDBDocumentClient,
  tableName: string,
  token: LeaseToken,
  items: readonly TransactItem[],
  o: { readonly clientRequestToken?: string; readonly fenceKey?: { readonly pk: string; readonly sk: string } } = {},
): Promise<void> {
  if (items.length === 0 || items.length > 99) throw new RangeError(`fencedTransactWrite: 1..99 items, got ${items.length}`);
  const fenceKey = o.fenceKey ?? leaseKey(token.name);
  const clientRequestToken = o.clientRequestToken ?? randomUUID();
  try {
    // Turns by the item checked: the lease's name (as its renewals take turns), else the fence item's key.
    await inTurn(doc, `${tableName}|${o.fenceKey ? o.fenceKey.pk : token.name}`, () =>
      transactWrite(
        doc,
        {
          TransactItems: [
            {
              ConditionCheck: {
                TableName: tableName,
                Key: fenceKey,
                ConditionExpression: 'holder = :fenceHolder AND epoch = :fenceEpoch',
                ExpressionAttributeValues: { ':fenceHolder': token.holder, ':fenceEpoch': token.epoch },
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              },
            },
            ...items.map(withCurrentOnFailure),
          ],
        },
        clientRequestToken,
      ),
    );
  } catch (err) {
    if (!(err instanceof TransactionCanceledException)) throw err;
    const reasons = err.CancellationReasons ?? [];
    const fence = reasons[0];
    if (fence?.Code === 'ConditionalCheckFailed') {
      const row = plainItem(fence.Item);
      throw new FencedError(token, row ? { holder: typeof row.holder === 'string' ? row.holder : null, epoch: Number(row.epoch) } : null);
    }
    const failed = reasons
      .map((r, i) => ({ index: i - 1, code: r.Code ?? 'None', item: plainItem(r.Item) }))
      .filter((r) => r.index >= 0 && r.code === 'ConditionalCheckFailed')
      .map((r) => (r.item ? r : { index: r.index, code: r.code }));
    if (!failed.length) throw err;
    throw new WriteConditionFailedError(failed, { cause: err });
  }
}

/** A failed condition returns the item as it is (the caller sees what it lost to), unless the caller chose otherwise. */
function withCurrentOnFailure(item: TransactItem): TransactItem {
  const [kind, action] = Object.entries(item)[0] as [keyof TransactItem, Record<string, unknown> | undefined];
  if (!action || !('ConditionExpression' in action) || 'ReturnValuesOnConditionCheckFailure' in action) return item;
  return { [kind]: { ...action, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } };
}
