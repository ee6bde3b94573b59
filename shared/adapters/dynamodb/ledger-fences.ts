import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { BoundedMap } from '../../bounded-map.js';
import { FencedError } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import { fencedTransactWrite, WriteConditionFailedError } from './fence.js';
import type { RunKeys } from './ledger-keys.js';

/**
 * A run's coordinator fences on DynamoDB: one item a shard carrying the
 * coordinator lease's holder and epoch, which that shard's fenced writes
 * condition-check instead of the lease item itself.
 *
 * Why: every steal, re-pend and fail checked the one lease item, so at a
 * fleet's scale that item took every coordinator write (thousands of units a
 * second against a partition's 1,000) and concurrent Lambda sandboxes
 * conflicted on it. Spread over the shards, each fence takes its shard's
 * share, and writes of different shards go in parallel.
 *
 * Why it fences as the lease does: a fence is raised to an epoch only in a
 * transaction that checks the lease item has that holder and epoch (so only
 * the lease's holder raises it), only upwards, and every shard's fence is
 * raised, then recorded (`RAISED`), before the holder makes any write under
 * that epoch. So once a new holder writes anything, every fence refuses the
 * old epoch: each write of the old holder landed before the new holder's
 * first. The window between a lease win and the raise is one the new holder
 * has not acted in; what it read meanwhile is acted on by compare-and-swaps
 * on the items, which a change it did not see makes fail. A fence item is
 * never deleted while its run may be coordinated (as a lease row never is).
 */
/** A fence was found below an epoch recorded as raised: the next ensure raises without trusting the record. */
const LOST = -2;

export class RunFences {
  /** Per run, the epoch whose fences this process saw raised (a Lambda sandbox keeps it across invocations). */
  private readonly raised = new BoundedMap<string, number>(1_000);
  private readonly ensuring = new Map<string, Promise<void>>();

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
  ) {}

  /** Every shard's fence at `token`'s epoch before a write under it: one read the first time per run and epoch, the raise when it is not done. */
  ensure(runId: string, keys: RunKeys, token: LeaseToken): Promise<void> {
    if (this.raised.get(runId) === token.epoch) return Promise.resolve();
    // A batch of fenced writes (casMany) meets an unraised fence together: one raise between them.
    const key = `${runId}\u0000${token.holder}\u0000${token.epoch}`;
    let pending = this.ensuring.get(key);
    if (!pending) {
      pending = this.ensureOnce(runId, keys, token).finally(() => this.ensuring.delete(key));
      this.ensuring.set(key, pending);
    }
    return pending;
  }

  private async ensureOnce(runId: string, keys: RunKeys, token: LeaseToken): Promise<void> {
    if (this.raised.get(runId) === LOST) {
      await this.raise(runId, keys, token);
      this.raised.set(runId, token.epoch);
      return;
    }
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: keys.fencesRaised, ConsistentRead: true }));
    const at = Item ? { holder: typeof Item.holder === 'string' ? Item.holder : null, epoch: Number(Item.epoch) } : null;
    if (at && at.epoch > token.epoch) throw new FencedError(token, at);
    if (!at || at.epoch < token.epoch || at.holder !== token.holder) await this.raise(runId, keys, token);
    this.raised.set(runId, token.epoch);
  }

  /** A write found its fence below its epoch although the record says raised (a fence lost since): raise all again, record or not. */
  lost(runId: string): void {
    this.raised.set(runId, LOST);
  }

  /** Raise every shard's fence (up to 99 a transaction, each with the lease check), then record it. */
  private async raise(runId: string, keys: RunKeys, token: LeaseToken): Promise<void> {
    const raise = (key: { pk: string; sk: string }) => ({
      Update: {
        TableName: this.table,
        Key: key,
        UpdateExpression: 'SET holder = :h, epoch = :e, runId = :r',
        ConditionExpression: 'attribute_not_exists(epoch) OR epoch < :e OR (epoch = :e AND holder = :h)',
        ExpressionAttributeValues: { ':h': token.holder, ':e': token.epoch, ':r': runId },
      },
    });
    const all = [...keys.fences, keys.fencesRaised];
    const chunks: (typeof all)[] = [];
    // The record last, alone: it says every fence before it is raised.
    for (let i = 0; i < all.length - 1; i += 99) chunks.push(all.slice(i, Math.min(i + 99, all.length - 1)));
    chunks.push([keys.fencesRaised]);
    for (const chunk of chunks) {
      try {
        await fencedTransactWrite(this.doc, this.table, token, chunk.map(raise));
      } catch (err) {
        // A fence already above our epoch: a later holder raised it, we are deposed.
        if (err instanceof WriteConditionFailedError) {
          const item = err.reasons[0]?.item;
          throw new FencedError(token, item ? { holder: typeof item.holder === 'string' ? item.holder : null, epoch: Number(item.epoch) } : null);
        }
        throw err;
      }
    }
  }
}
