import { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand, UpdateItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { errorMessage, silentLogger, type Logger } from '../shared/log.js';
import { traced } from './runtime.js';

/**
 * Activity flags: what lets the scheduled probes leave an idle Aurora cluster
 * alone, so that it pauses (0 ACU). The BatchPromoter and the coordinator's
 * scan run every minute; each first reads its flag (`promotion`, `runs`: one
 * small DynamoDB item each) and queries the database only when the flag is
 * raised, or once a day (the sweep). Whatever may start work raises the flags
 * *before* it writes to the database: the API on every write request, the
 * StreamingPromoter on every signal. A probe lowers its flag only when the
 * database showed it nothing to do, and then only if the flag was not raised
 * since the probe read it (a conditional write on the raise counter) nor
 * within RAISE_GRACE_MS before that read.
 *
 * Why nothing started is ever missed: a writer raises at `a` and commits at
 * `c`, with `c < a + T`, T its longest run (30 s; the Lambda timeout ends it).
 * A probe reads the flag at `t1`, then the database, then lowers. If the raise
 * came after `t1`, the counter moved and the lowering fails. If it came before,
 * the flag's raise time is at least `a`, and the probe lowers only when
 * `t1 − raisedAt > RAISE_GRACE_MS > T`, so `c < t1`: its database read sees
 * the write, finds work, and does not lower. A writer that dies after raising
 * leaves the flag raised (a wasted look, never a missed one); a flag that
 * cannot be read, or is missing, counts as raised.
 *
 * What bypasses the stack's API and bus (a node or a script writing to the
 * database directly) does not raise a flag: the daily sweep finds its work,
 * and a node sharing the database runs its own promoter and coordinators.
 */
export type ActivityFlag = 'promotion' | 'runs';

/** Longer than any invocation that raises a flag can run (30 s), by far: also covers clock skew and a commit delayed on the server. */
export const RAISE_GRACE_MS = 10 * 60_000;

/** Once a UTC day the probes read the database even with their flag lowered: work written without raising a flag is found within a day. */
export const SWEEP_EVERY_MS = 86_400_000;

export interface FlagState {
  /** False when the item does not exist (counted as raised). */
  readonly exists: boolean;
  readonly raised: boolean;
  /** Raises so far: a lowering is conditional on it. */
  readonly version: number;
  readonly raisedAt: number;
  readonly loweredAt: number;
}

/** What a probe does this invocation. */
export interface Probe {
  /** Nothing started since the flag was lowered, and no sweep is due: leave the database alone. */
  readonly skip: boolean;
  /** Why it looks (or not): raised, missing, unreadable, sweep, lowered. */
  readonly reason: string;
  /** The database showed nothing to do: lower the flag, unless it was raised since it was read, or too recently before. */
  nothingLeft(): Promise<void>;
}

export class ActivityFlags {
  /** When this sandbox last raised each flag: a raise is written again only once it is half the grace old. */
  private readonly raisedHere = new Map<ActivityFlag, number>();

  constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
    private readonly o: { readonly now?: () => number; readonly logger?: Logger } = {},
  ) {}

  private now(): number {
    return (this.o.now ?? Date.now)();
  }

  /**
   * Before a write that may start work. Skipped while this sandbox raised the
   * flag less than half the grace ago: the flag's raise time is then recent
   * enough that no probe may lower it before this invocation's writes are
   * visible (they commit within 30 s, far less than the other half).
   */
  async raise(flags: readonly ActivityFlag[]): Promise<void> {
    const now = this.now();
    await Promise.all(
      flags.map(async (flag) => {
        const last = this.raisedHere.get(flag);
        if (last !== undefined && now - last < RAISE_GRACE_MS / 2) return;
        await this.client.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: { flag: { S: flag } },
            UpdateExpression: 'SET raised = :yes, raisedAt = :now ADD version :one',
            ExpressionAttributeValues: { ':yes': { BOOL: true }, ':now': { N: String(now) }, ':one': { N: '1' } },
          }),
        );
        this.raisedHere.set(flag, now);
      }),
    );
  }

  async read(flag: ActivityFlag): Promise<FlagState> {
    const { Item } = await this.client.send(new GetItemCommand({ TableName: this.table, Key: { flag: { S: flag } }, ConsistentRead: true }));
    if (!Item) return { exists: false, raised: true, version: 0, raisedAt: 0, loweredAt: 0 };
    const n = (v: AttributeValue | undefined) => (v?.N === undefined ? 0 : Number(v.N));
    return { exists: true, raised: Item.raised?.BOOL !== false, version: n(Item.version), raisedAt: n(Item.raisedAt), loweredAt: n(Item.loweredAt) };
  }

  /** Lowered, unless raised since `seen` was read. */
  async lower(flag: ActivityFlag, seen: FlagState): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { flag: { S: flag } },
          UpdateExpression: 'SET raised = :no, loweredAt = :now, version = if_not_exists(version, :zero)',
          ConditionExpression: seen.exists ? 'version = :seen' : 'attribute_not_exists(flag)',
          ExpressionAttributeValues: {
            ':no': { BOOL: false },
            ':now': { N: String(this.now()) },
            ':zero': { N: '0' },
            ...(seen.exists ? { ':seen': { N: String(seen.version) } } : {}),
          },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /** The start of a scheduled probe: read the flag and say whether to look at the database. */
  async probe(flag: ActivityFlag): Promise<Probe> {
    const logger = this.o.logger ?? silentLogger;
    const readAt = this.now();
    let seen: FlagState;
    try {
      seen = await this.read(flag);
    } catch (err) {
      logger.warn('activity flag unreadable: the database is read', { flag, error: errorMessage(err) });
      return { skip: false, reason: 'unreadable', nothingLeft: () => Promise.resolve() };
    }
    const sweep = !seen.raised && Math.floor(readAt / SWEEP_EVERY_MS) * SWEEP_EVERY_MS > seen.loweredAt;
    const lowerable = !seen.exists || !seen.raised || readAt - seen.raisedAt > RAISE_GRACE_MS;
    return {
      skip: seen.exists && !seen.raised && !sweep,
      reason: !seen.exists ? 'missing' : seen.raised ? 'raised' : sweep ? 'sweep' : 'lowered',
      nothingLeft: async () => {
        if (!lowerable) return;
        try {
          if (await this.lower(flag, seen)) logger.info('activity flag lowered: nothing to do', { flag });
        } catch (err) {
          // Left raised: the next probe looks again.
          logger.warn('activity flag not lowered', { flag, error: errorMessage(err) });
        }
      },
    };
  }
}

/** The stack's activity flags (ROLLOUT_ACTIVITY_TABLE, set on the Aurora store only), or null: every probe reads the database. */
export function activityFlagsFrom(env: NodeJS.ProcessEnv, logger?: Logger): ActivityFlags | null {
  const table = env.ROLLOUT_ACTIVITY_TABLE;
  return table ? new ActivityFlags(traced(new DynamoDBClient({})), table, logger ? { logger } : {}) : null;
}
