import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { LeaseRecord } from '../../lease/record.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { transactWrite } from './conflicts.js';
import { plainItem } from './item.js';
import { runPk } from './ledger-keys.js';
import { DynamoLeaseStore, itemFromLease, leaseFromItem } from './lease-store.js';

/** The coordinator lease of one run, with the run's epoch stamped in the same transaction as each lease win. */
export class DynamoRunLeaseStore implements LeaseStore {
  private readonly leases: DynamoLeaseStore;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    private readonly runId: string,
  ) {
    this.leases = new DynamoLeaseStore(doc, table);
  }

  read(name: string): Promise<LeaseRecord | null> {
    return this.leases.read(name);
  }

  async compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
    // Renewals and releases do not change the epoch: a plain lease CAS.
    if (next.holder === null || (expected !== null && expected.epoch === next.epoch)) return this.leases.compareAndSwap(expected, next);
    try {
      await transactWrite(this.doc, {
        TransactItems: [
          {
            Put: {
              TableName: this.table,
              Item: itemFromLease(next),
              ...(expected === null
                ? { ConditionExpression: 'attribute_not_exists(pk)' }
                : { ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': expected.version } }),
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          {
            Update: {
              TableName: this.table,
              Key: { pk: runPk(this.runId), sk: 'RUN' },
              UpdateExpression: 'SET coordinatorEpoch = :e',
              ConditionExpression: 'attribute_exists(pk) AND coordinatorEpoch < :e',
              ExpressionAttributeValues: { ':e': next.epoch },
            },
          },
        ],
      });
      return { ok: true, record: next };
    } catch (err) {
      if (!(err instanceof TransactionCanceledException)) throw err;
      const reason = err.CancellationReasons?.[0];
      if (reason?.Code === 'ConditionalCheckFailed') {
        const old = plainItem(reason.Item);
        return { ok: false, current: old ? leaseFromItem(old) : await this.read(next.name) };
      }
      throw err;
    }
  }
}
