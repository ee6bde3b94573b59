import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { BoundedMap } from '../../bounded-map.js';
import { mapLimit } from '../../concurrency.js';
import type { WorkItem } from '../../ledger/model.js';
import type { RunRecord } from '../../ledger/store.js';
import { runKeys, runOfKey, runPk, type RunKeys } from './ledger-keys.js';
import { batchGetAll, queryAll } from './query.js';
import { GSI1 } from './table.js';
import { retryingThrottles } from './throttles.js';

export type Item = Record<string, unknown>;
export const RUNS_INDEX = 'RUNS';
/** Runs with nothing left to do, by when they were found so: CLOSEDRUNS / <closedAt, 15 digits>#<id>. */
export const CLOSED_RUNS = 'CLOSEDRUNS';
/** Every run, for listing: ALL_RUNS / <createdAt, 15 digits>#<id>. */
export const ALL_RUNS = 'ALLRUNS';
/** How often a process writes a run's throttling to its record, at most. */
const THROTTLE_NOTE_MS = 10_000;
/** Runs whose layout a store keeps: a run's keys are up to 4 × 512 strings. */
const KNOWN_RUNS = 1_000;

export function runRecordOf(i: Item): RunRecord {
  const t = i.throttle as { at: number; family: string } | undefined;
  return {
    id: String(i.id),
    spec: i.spec,
    coordinatorEpoch: Number(i.coordinatorEpoch),
    createdAt: Number(i.createdAt),
    shards: i.shards === undefined ? null : Number(i.shards),
    ...(t ? { throttled: { at: Number(t.at), family: String(t.family), requests: Number(i.throttledRequests ?? 0) } } : {}),
    cancelled:
      i.cancelledAt === undefined
        ? null
        : { at: Number(i.cancelledAt), by: String(i.cancelledBy), reason: typeof i.cancelReason === 'string' ? i.cancelReason : null },
  };
}

export function itemOf(i: Item): WorkItem {
  const n = (v: unknown) => (v === undefined || v === null ? null : Number(v));
  return {
    runId: String(i.runId),
    id: String(i.id),
    payload: i.payload,
    state: i.state as WorkItem['state'],
    worker: (i.worker as string | undefined) ?? null,
    epoch: n(i.epoch),
    claimedAt: n(i.claimedAt),
    started: Boolean(i.started),
    heartbeatAt: n(i.heartbeatAt),
    resultHash: (i.resultHash as string | undefined) ?? null,
    result: i.result ?? null,
    error: (i.error as string | undefined) ?? null,
    sentAt: n(i.sentAt),
    attempts: Number(i.attempts ?? 0),
    version: Number(i.version ?? 0),
  };
}

/** An index entry that is the whole item (gsi1 projecting ALL): every item has a version, and no INCLUDE projection carries it. */
export const isWhole = (entry: Item) => entry.version !== undefined;

/** The first `limit` of several sorted index pages, in index order (gsi1sk), as one list. */
export function firstInOrder(pages: readonly Item[][], limit: number): Item[] {
  return pages
    .flat()
    .sort((a, b) => String(a[GSI1.sk]).localeCompare(String(b[GSI1.sk])))
    .slice(0, limit);
}

/**
 * What every part of the ledger on DynamoDB shares (ledger-store.ts): the
 * client and table, each run's layout as read, throttling retried and noted
 * on the run's record, and the reads of the index and of items by id.
 */
export class LedgerTable {
  /** A run's layout never changes once created: read once per run (the runs of a long-lived process, the most recent ones). */
  readonly layouts = new BoundedMap<string, RunKeys>(KNOWN_RUNS);
  /** Throttled requests not yet written to their run's record (at most one such write per run every THROTTLE_NOTE_MS). */
  private readonly throttleNotes = new BoundedMap<string, { count: number; family: string; writtenAt: number }>(KNOWN_RUNS);

  constructor(
    readonly doc: DynamoDBDocumentClient,
    readonly table: string,
    /** Writes (and fanned-out queries) in flight at once. */
    readonly concurrency: number,
  ) {}

  remember(id: string, run: Item): RunKeys {
    const keys = runKeys(id, run.shards === undefined ? null : Number(run.shards));
    this.layouts.set(id, keys);
    return keys;
  }

  /** The run's layout; an unknown run has none yet (its item writes find no item, its queries nothing). */
  async keys(runId: string): Promise<RunKeys> {
    const known = this.layouts.get(runId);
    if (known) return known;
    const { Item } = await this.doc.send(
      new GetCommand({ TableName: this.table, Key: { pk: runPk(runId), sk: 'RUN' }, ProjectionExpression: 'shards', ConsistentRead: true }),
    );
    return Item ? this.remember(runId, Item) : runKeys(runId, null);
  }

  /** A request on one of the run's keys: throttling retried with a backoff (throttles.ts) and noted on the run's record. */
  throttled<T>(runId: string, key: string, request: () => Promise<T>): Promise<T> {
    return retryingThrottles(key, request, (family) => this.noteThrottle(runId, family));
  }

  /**
   * Writes what was throttled to the run's record — when, on which key
   * family, how many requests — at most once per THROTTLE_NOTE_MS per run:
   * what `rollout runs status` shows. Observability only: not awaited, and
   * a write that fails (throttled itself, on a hot run record) is dropped.
   */
  private noteThrottle(runId: string, family: string): void {
    const note = this.throttleNotes.get(runId) ?? { count: 0, family, writtenAt: 0 };
    note.count++;
    note.family = family;
    this.throttleNotes.set(runId, note);
    const now = Date.now();
    if (now - note.writtenAt < THROTTLE_NOTE_MS) return;
    const n = note.count;
    note.count = 0;
    note.writtenAt = now;
    void this.doc
      .send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: runPk(runId), sk: 'RUN' },
          UpdateExpression: 'SET throttle = :t ADD throttledRequests :n',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':t': { at: now, family }, ':n': n },
        }),
      )
      .catch(() => undefined);
  }

  /** One index key's items, in its sort order, after `from` (exclusive) or before `to` (exclusive) when given. */
  async index(key: string, range: { after?: string; before?: string } = {}, limit?: number): Promise<Item[]> {
    const cond = range.after !== undefined ? ` AND ${GSI1.sk} > :after` : range.before !== undefined ? ` AND ${GSI1.sk} < :before` : '';
    // Each page retried on its own when throttled: a refused page of a large running set does not restart the read.
    return queryAll(
      this.doc,
      {
        TableName: this.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :k${cond}`,
        ExpressionAttributeValues: {
          ':k': key,
          ...(range.after !== undefined ? { ':after': range.after } : {}),
          ...(range.before !== undefined ? { ':before': range.before } : {}),
        },
      },
      limit,
      (page) => this.throttled(runOfKey(key), `gsi1:${key}`, page),
    );
  }

  /** Every shard's part of an index, fanned out a bounded number at a time. */
  fanOut<T>(keys: readonly string[], each: (key: string) => Promise<T>): Promise<T[]> {
    return mapLimit(keys, this.concurrency, each);
  }

  /** Every shard's RUNNING entries, as the index has them. */
  async runningEntries(runId: string): Promise<Item[]> {
    const keys = await this.keys(runId);
    return (await this.fanOut(keys.runningKeys, (k) => this.index(k))).flat();
  }

  /** Items by id, read consistently, 100 to a request; missing ones left out. */
  async readItems(runId: string, ids: readonly string[]): Promise<Item[]> {
    if (!ids.length) return [];
    const keys = await this.keys(runId);
    return batchGetAll(
      this.doc,
      this.table,
      [...new Set(ids)].map((id) => keys.item(id)),
      (batch) => this.throttled(runId, keys.partitions[0]!, batch),
    );
  }
}
