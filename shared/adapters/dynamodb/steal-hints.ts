import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { STEAL_HINT_REBUILD_MS, type StealHint, type StealHints } from '../../ledger/steal-hint.js';
import { own } from '../../own.js';

/** A finished run's hint is of no use: the table's TTL removes it a day after it was last built. */
const HINT_TTL_S = 86_400;

/**
 * Steal hints on DynamoDB (shared/ledger/steal-hint.ts): one item a run,
 * STEAL#<run> / HINT, on its own partition key (the asks of an idle fleet
 * land on it, not on the run's record or its shards). Reads are eventually
 * consistent: a hint is advice, and half the price.
 */
export class DynamoStealHints implements StealHints {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
  ) {}

  private key(runId: string) {
    return { pk: `STEAL#${runId}`, sk: 'HINT' };
  }

  async read(runId: string): Promise<StealHint | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: this.key(runId) }));
    if (!Item) return null;
    const victims = (Item.victims ?? {}) as Record<string, string[]>;
    return { builtAt: Number(Item.builtAt ?? 0), victims, ...(Item.claimedUntil !== undefined ? { claimedUntil: Number(Item.claimedUntil) } : {}) };
  }

  async claimRebuild(runId: string, seenBuiltAt: number, now: number): Promise<boolean> {
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: this.key(runId),
          UpdateExpression: 'SET claimedUntil = :until',
          ConditionExpression: '(attribute_not_exists(builtAt) OR builtAt = :seen) AND (attribute_not_exists(claimedUntil) OR claimedUntil < :now)',
          ExpressionAttributeValues: { ':until': now + STEAL_HINT_REBUILD_MS, ':seen': seenBuiltAt, ':now': now },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  async write(runId: string, hint: StealHint): Promise<void> {
    const victims = Object.fromEntries(Object.entries(hint.victims).filter(([, ids]) => ids.length > 0));
    await this.doc.send(
      new PutCommand({
        TableName: this.table,
        Item: { ...this.key(runId), runId, builtAt: hint.builtAt, victims, ttl: Math.floor(hint.builtAt / 1000) + HINT_TTL_S },
      }),
    );
  }

  async take(runId: string, builtAt: number, victim: string): Promise<readonly string[] | null> {
    try {
      const res = await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: this.key(runId),
          UpdateExpression: 'REMOVE victims.#w',
          ConditionExpression: 'builtAt = :b AND attribute_exists(victims.#w)',
          ExpressionAttributeNames: { '#w': victim },
          ExpressionAttributeValues: { ':b': builtAt },
          ReturnValues: 'UPDATED_OLD',
        }),
      );
      const victims = res.Attributes?.victims as Record<string, string[]> | undefined;
      return own(victims, victim) ?? [];
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return null;
      throw err;
    }
  }
}
