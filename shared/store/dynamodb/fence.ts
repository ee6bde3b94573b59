import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { randomUUID } from 'node:crypto';
import { FencedError } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import { plainItem } from './item.js';
import { leaseKey } from './table.js';

type TransactItem = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>[number];

/** One of the caller's own conditions failed (not the fence). `index` is into the caller's items. */
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
 * A ClientRequestToken makes the SDK's own retries of a lost reply idempotent
 * (for 10 minutes): a retry after commit returns success instead of failing.
 */
export async function fencedTransactWrite(
  doc: DynamoDBDocumentClient,
  tableName: string,
  token: LeaseToken,
  items: readonly TransactItem[],
  clientRequestToken: string = randomUUID(),
): Promise<void> {
  if (items.length === 0 || items.length > 99) throw new RangeError(`fencedTransactWrite: 1..99 items, got ${items.length}`);
  try {
    await doc.send(
      new TransactWriteCommand({
        ClientRequestToken: clientRequestToken,
        TransactItems: [
          {
            ConditionCheck: {
              TableName: tableName,
              Key: leaseKey(token.name),
              ConditionExpression: 'holder = :fenceHolder AND epoch = :fenceEpoch',
              ExpressionAttributeValues: { ':fenceHolder': token.holder, ':fenceEpoch': token.epoch },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          ...items,
        ],
      }),
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
      .map((r, i) => ({ index: i - 1, code: r.Code ?? 'Unknown', item: plainItem(r.Item) }))
      .filter((r) => r.index >= 0 && r.code !== 'None');
    throw new WriteConditionFailedError(failed, { cause: err });
  }
}
