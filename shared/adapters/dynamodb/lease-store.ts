import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, type DynamoDBDocumentClient, type PutCommandInput } from '@aws-sdk/lib-dynamodb';
import type { LeaseRecord } from '../../lease/record.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { inTurn, retryingConflicts } from './conflicts.js';
import { plainItem } from './item.js';
import { leaseKey } from './table.js';

export function leaseFromItem(item: Record<string, unknown>): LeaseRecord {
  return {
    name: String(item.name),
    holder: typeof item.holder === 'string' ? item.holder : null,
    epoch: Number(item.epoch),
    version: Number(item.version),
    acquiredAt: Number(item.acquiredAt),
    renewedAt: Number(item.renewedAt),
    expiresAt: Number(item.expiresAt),
    hostname: typeof item.hostname === 'string' ? item.hostname : null,
    apiUrl: typeof item.apiUrl === 'string' ? item.apiUrl : null,
  };
}

export function itemFromLease(r: LeaseRecord): Record<string, unknown> {
  const item: Record<string, unknown> = {
    ...leaseKey(r.name),
    type: 'lease',
    name: r.name,
    epoch: r.epoch,
    version: r.version,
    acquiredAt: r.acquiredAt,
    renewedAt: r.renewedAt,
    expiresAt: r.expiresAt,
  };
  // A released row has no holder attribute; the fence condition `holder = :h` can then never match.
  if (r.holder !== null) item.holder = r.holder;
  if (r.hostname !== null) item.hostname = r.hostname;
  if (r.apiUrl !== null) item.apiUrl = r.apiUrl;
  return item;
}

/**
 * Leases on DynamoDB: one conditional PutItem per transition, strongly
 * consistent reads. A PutItem that meets a transaction on the lease item
 * (every fenced write checks it) is refused with TransactionConflictException,
 * nothing written: it waits its turn behind this client's fenced writes and is
 * sent again on a conflict with another process's (conflicts.ts), so a
 * renewal is not lost to fenced writes.
 */
export class DynamoLeaseStore implements LeaseStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async read(name: string): Promise<LeaseRecord | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.tableName, Key: leaseKey(name), ConsistentRead: true }));
    return Item ? leaseFromItem(Item) : null;
  }

  async compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
    const put: PutCommandInput = {
      TableName: this.tableName,
      Item: itemFromLease(next),
      ...(expected === null
        ? // acquire: only if no row has ever existed under this name
          { ConditionExpression: 'attribute_not_exists(pk)' }
        : // steal, renew, release: only over the exact prior row
          { ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': expected.version } }),
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    };
    try {
      // In turn with this client's fenced writes, which all condition-check this item.
      await inTurn(this.doc, `${this.tableName}|${next.name}`, () => retryingConflicts(() => this.doc.send(new PutCommand(put))));
      return { ok: true, record: next };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const item = plainItem(err.Item);
      return { ok: false, current: item ? leaseFromItem(item) : await this.read(next.name) };
    }
  }
}
