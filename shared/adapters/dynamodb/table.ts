import type { KeyFamily } from '../../topology.js';
import { CreateTableCommand, DescribeTableCommand, ResourceInUseException, type CreateTableCommandInput, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PROMOTION_LEASE } from '../../lease/names.js';

/**
 * Single-table design: every record lives under a partition key `pk` and sort
 * key `sk`. The CDK stack declares the same keys. No TTL attribute is ever set
 * on a lease item: an expired-and-deleted lease would restart at epoch 0.
 */
export const KEY = { pk: 'pk', sk: 'sk' } as const;

/** A sparse index: only items that carry gsi1pk are in it (e.g. unpublished events under 'OUTBOX'). */
export const GSI1 = { name: 'gsi1', pk: 'gsi1pk', sk: 'gsi1sk' } as const;

/**
 * What gsi1 carries besides the keys (an INCLUDE projection): every
 * attribute a query of the index reads, and none that a work item's start or
 * heartbeat changes (`started`, `heartbeatAt`, `version`, `updatedAt`), so
 * those writes — most of a running item's — cost the index nothing. Each
 * family reads only these (and the table's and the index's keys):
 *
 *   ledger items (PENDING, RUNNING, FAILED)   id, runId, state, worker, claimedAt, sentAt, pendingVersion
 *   run records (RUNS)                        id, enqueues
 *   unpublished events (OUTBOX)               id, detailType, time, detail
 *   due and ended rollouts (DUE, ENDED)       the keys alone
 *
 * A reader that needs more reads the item itself. Nothing relies on an
 * attribute being absent from an entry, so the same code runs on a table
 * whose gsi1 still projects ALL (one created before this list; DynamoDB
 * cannot change an index's projection in place).
 */
export const GSI1_PROJECTED: readonly string[] = [
  'id',
  'runId',
  'state',
  'worker',
  'claimedAt',
  'sentAt',
  'pendingVersion',
  'enqueues',
  'detailType',
  'time',
  'detail',
];

/**
 * Each family's partition keys (and gsi1 partition keys: a query of the index
 * is held to its own), as IAM `dynamodb:LeadingKeys` patterns. The layout is
 * in rollout-store.ts, ledger-keys.ts, registry-store.ts and `leaseKey`.
 */
export const LEADING_KEYS: Readonly<Record<KeyFamily, readonly string[]>> = {
  promotionLease: [`LEASE#${PROMOTION_LEASE}`],
  runLeases: ['LEASE#coordinator:*'],
  rollouts: ['ROLLOUT#*', 'RUNNING', 'ACTUATING', 'ALARM#*', 'OUTBOX'],
  // ALLRUNS: every run, for listing; CLOSEDRUNS: finished runs by when (retention); FENCE#: the coordinator's shard fences; STEAL#: steal hints.
  runs: ['RUN#*', 'RUNS', 'ALLRUNS', 'CLOSEDRUNS', 'PENDING#*', 'RUNNING#*', 'FAILED#*', 'FENCE#*', 'STEAL#*'],
  registry: ['INSTANCE#*'],
};

/** One run's keys only (a worker fleet of that run): its record and items, their index keys, its coordinator's lease (read). */
export function runLeadingKeys(runId: string): string[] {
  return [
    `RUN#${runId}`,
    `RUN#${runId}#*`,
    `PENDING#${runId}`,
    `PENDING#${runId}#*`,
    `RUNNING#${runId}`,
    `RUNNING#${runId}#*`,
    `FAILED#${runId}`,
    `FAILED#${runId}#*`,
    `LEASE#coordinator:${runId}`,
  ];
}

export function leaseKey(name: string): { pk: string; sk: string } {
  return { pk: `LEASE#${name}`, sk: 'LEASE' };
}

export function tableDefinition(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: KEY.pk, AttributeType: 'S' },
      { AttributeName: KEY.sk, AttributeType: 'S' },
      { AttributeName: GSI1.pk, AttributeType: 'S' },
      { AttributeName: GSI1.sk, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: KEY.pk, KeyType: 'HASH' },
      { AttributeName: KEY.sk, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: GSI1.name,
        KeySchema: [
          { AttributeName: GSI1.pk, KeyType: 'HASH' },
          { AttributeName: GSI1.sk, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...GSI1_PROJECTED] },
      },
    ],
  };
}

/** Create the table if missing and wait until it is ACTIVE (local, tests, dev accounts; CDK owns it in AWS). */
export async function ensureTable(client: DynamoDBClient, tableName: string, timeoutMs = 120_000): Promise<void> {
  try {
    await client.send(new CreateTableCommand(tableDefinition(tableName)));
  } catch (err) {
    if (!(err instanceof ResourceInUseException)) throw err;
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    if (Table?.TableStatus === 'ACTIVE') return;
    if (Date.now() > deadline) throw new Error(`DynamoDB table ${tableName} not ACTIVE after ${timeoutMs} ms (status ${Table?.TableStatus})`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
