import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { LeaseRecord } from '../../lease/record.js';
import { mapLimit } from '../../concurrency.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { contentId, type WorkItem } from '../../ledger/model.js';
import { BadCursorError, cursorInt, cursorObject, cursorText, decodeCursor, encodeCursor } from '../../cursor.js';
import {
  assertOneChangePerItem,
  PartialBatchError,
  type ItemCasOutcome,
  type ItemPage,
  type ItemPageQuery,
  type LedgerStore,
  type PendingEntry,
  type RunCancel,
  type RunningEntry,
  type RunOptions,
  type RunRecord,
} from '../../ledger/store.js';
import type { ItemCas } from '../../ledger/transitions.js';
import { retryingConflicts, transactWrite } from './conflicts.js';
import { fencedTransactWrite, WriteConditionFailedError } from './fence.js';
import { RunFences } from './ledger-fences.js';
import { DynamoStealHints } from './steal-hints.js';
import { FencedError } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import { plainItem } from './item.js';
import { runKeys, runOfKey, runPk, type RunKeys } from './ledger-keys.js';
import { ledgerUpdate, pad, pendingSk } from './ledger-updates.js';
import { DynamoLeaseStore, itemFromLease, leaseFromItem } from './lease-store.js';
import { GSI1 } from './table.js';
import { batchDelete, batchGetAll, listCursor, listPage, listStart, MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES, queryAll } from './query.js';
import { DEFAULT_RETENTION } from '../../retention.js';
import { retryingThrottles } from './throttles.js';
import { BoundedMap } from '../../bounded-map.js';
import { MAX_RUN_SHARDS } from '../../ledger/capacity.js';

/**
 * The ledger on DynamoDB:
 *   RUN#<id> / RUN          the run (spec, shards, coordinatorEpoch, enqueues, items); in gsi1
 *                           under RUNS while it may have work: openRuns takes a finished run
 *                           out once, and an enqueue that adds items puts it back
 *   items                   one item each, spread over the run's shards (ledger-keys.ts); while
 *                           running it is in gsi1 under its shard's RUNNING key by id, while
 *                           pending under its PENDING key sorted by when its message was last
 *                           sent (never sent: 0, first), once failed under its FAILED key — so the
 *                           coordinator's queries read only the running (or pending, or unsent)
 *                           set, fanned out over the shards, never the whole run.
 * gsi1 is eventually consistent: a query may miss a change of the last moment; every write
 * it leads to is a compare-and-swap on the item itself, so a stale reading never wins.
 * An index entry carries only what no start or heartbeat changes (table.ts GSI1_PROJECTED):
 * `holders` answers from the entries alone; `running` reads the items the entries name
 * (a table whose gsi1 still projects ALL has them in the entries: nothing more is read).
 *
 * A run records its shard count when it is created and keeps it; a run
 * created before sharding has none and keeps the first layout, so the runs
 * of an existing table finish where they started.
 */

type Item = Record<string, unknown>;
const RUNS_INDEX = 'RUNS';
/** Runs with nothing left to do, by when they were found so: CLOSEDRUNS / <closedAt, 15 digits>#<id>. */
const CLOSED_RUNS = 'CLOSEDRUNS';
/** Every run, for listing: ALL_RUNS / <createdAt, 15 digits>#<id>. */
const ALL_RUNS = 'ALLRUNS';
/** How often a process writes a run's throttling to its record, at most. */
const THROTTLE_NOTE_MS = 10_000;

function runRecordOf(i: Item): RunRecord {
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

function itemOf(i: Item): WorkItem {
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

export interface DynamoLedgerOptions {
  /** Writes (and fanned-out queries) in flight at once. */
  readonly concurrency?: number;
  /** Shards of a run created without a count of its own. */
  readonly defaultShards?: number;
  /** Days a finished item is kept: the write that ends it sets the table's TTL attribute (default DEFAULT_RETENTION.runDays). */
  readonly retainRunDays?: number;
}

/** Runs whose layout a store keeps: a run's keys are up to 4 × 512 strings. */
const KNOWN_RUNS = 1_000;

/**
 * A run's items page's cursor: the partition (a shard's, or the run's) and
 * DynamoDB's last key in it, exactly as an items query's LastEvaluatedKey has
 * it (the table's pk and an item's sort key), or null at a partition's start.
 */
const ITEMS_CURSOR = cursorObject({
  p: cursorInt(0, MAX_RUN_SHARDS),
  k: cursorObject({ pk: cursorText(MAX_PARTITION_KEY_BYTES), sk: cursorText(MAX_SORT_KEY_BYTES).startsWith('ITEM#', 'not an item key') }).nullable(),
});

export class DynamoLedgerStore implements LedgerStore {
  private readonly concurrency: number;
  private readonly defaultShards: number;
  private readonly retainRunSeconds: number;
  /** A run's layout never changes once created: read once per run (the runs of a long-lived process, the most recent ones). */
  private readonly layouts = new BoundedMap<string, RunKeys>(KNOWN_RUNS);
  /** Throttled requests not yet written to their run's record (at most one such write per run every THROTTLE_NOTE_MS). */
  private readonly throttleNotes = new BoundedMap<string, { count: number; family: string; writtenAt: number }>(KNOWN_RUNS);
  private readonly fences: RunFences;
  readonly stealHints: DynamoStealHints;

  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    o: DynamoLedgerOptions = {},
  ) {
    this.fences = new RunFences(doc, table);
    this.stealHints = new DynamoStealHints(doc, table);
    this.concurrency = o.concurrency ?? 16;
    this.defaultShards = o.defaultShards ?? 1;
    this.retainRunSeconds = (o.retainRunDays ?? DEFAULT_RETENTION.runDays) * 86_400;
  }

  async createRun(id: string, spec: unknown, now: number, o: RunOptions = {}): Promise<{ created: boolean }> {
    const shards = o.shards ?? this.defaultShards;
    const keys = runKeys(id, shards); // validates the count before anything is written
    try {
      await transactWrite(this.doc, {
        TransactItems: [
          {
            Put: {
              TableName: this.table,
              Item: {
                pk: runPk(id),
                sk: 'RUN',
                id,
                spec,
                shards,
                coordinatorEpoch: -1,
                createdAt: now,
                enqueues: 0,
                items: 0,
                [GSI1.pk]: RUNS_INDEX,
                [GSI1.sk]: id,
              },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
          // The list of every run, read newest first: one small item per run, never rewritten.
          { Put: { TableName: this.table, Item: { pk: ALL_RUNS, sk: `${pad(now)}#${id}`, id } } },
        ],
      });
      this.layouts.set(id, keys);
      return { created: true };
    } catch (err) {
      if (err instanceof TransactionCanceledException && err.CancellationReasons?.[0]?.Code === 'ConditionalCheckFailed') return { created: false };
      throw err;
    }
  }

  /** The ALL_RUNS list newest first, each page's run records read one by one (a page is small). Runs created before the list existed are not in it. */
  async listRuns(o: { readonly cursor?: string; readonly limit: number }): Promise<{ runs: RunRecord[]; next: string | null }> {
    const page = await listPage(this.doc, this.table, ALL_RUNS, o.limit, listStart(o.cursor));
    const records = new Map(
      (
        await batchGetAll(
          this.doc,
          this.table,
          page.items.map((i) => ({ pk: runPk(String(i.id)), sk: 'RUN' })),
        )
      ).map((r) => [String(r.id), runRecordOf(r)]),
    );
    const runs = page.items.flatMap((i) => records.get(String(i.id)) ?? []);
    const last = page.items.at(-1);
    return { runs, next: page.more && last ? listCursor(String(last.sk)) : null };
  }

  async cancelRun(
    id: string,
    cancel: { readonly by: string; readonly reason: string | null },
    now: number,
  ): Promise<{ cancelled: RunCancel; first: boolean } | null> {
    try {
      const { Attributes } = await this.throttled(id, runPk(id), () =>
        this.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { pk: runPk(id), sk: 'RUN' },
            UpdateExpression: 'SET cancelledAt = :at, cancelledBy = :by, cancelReason = :reason',
            ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(cancelledAt)',
            ExpressionAttributeValues: { ':at': now, ':by': cancel.by, ':reason': cancel.reason },
            ReturnValues: 'ALL_NEW',
          }),
        ),
      );
      return { cancelled: runRecordOf(Attributes!).cancelled!, first: true };
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const run = await this.getRun(id);
      return run?.cancelled ? { cancelled: run.cancelled, first: false } : null;
    }
  }

  async getRun(id: string): Promise<RunRecord | null> {
    const { Item } = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: runPk(id), sk: 'RUN' }, ConsistentRead: true }));
    if (!Item) return null;
    this.remember(id, Item);
    return runRecordOf(Item);
  }

  private remember(id: string, run: Item): RunKeys {
    const keys = runKeys(id, run.shards === undefined ? null : Number(run.shards));
    this.layouts.set(id, keys);
    return keys;
  }

  /** The run's layout; an unknown run has none yet (its item writes find no item, its queries nothing). */
  private async keys(runId: string): Promise<RunKeys> {
    const known = this.layouts.get(runId);
    if (known) return known;
    const { Item } = await this.doc.send(
      new GetCommand({ TableName: this.table, Key: { pk: runPk(runId), sk: 'RUN' }, ProjectionExpression: 'shards', ConsistentRead: true }),
    );
    return Item ? this.remember(runId, Item) : runKeys(runId, null);
  }

  /** A request on one of the run's keys: throttling retried with a backoff (throttles.ts) and noted on the run's record. */
  private throttled<T>(runId: string, key: string, request: () => Promise<T>): Promise<T> {
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

  async enqueue(runId: string, payloads: readonly unknown[], now: number): Promise<{ ids: string[]; added: number }> {
    const keys = await this.keys(runId);
    const ids = payloads.map(contentId);
    let added = 0;
    let failure: { err: unknown } | null = null;
    // Every put is tried, though one was refused: a throttled request stores what the table takes, and its retry
    // (idempotent: a stored item is left as it is) sends again only to find the rest missing.
    await mapLimit(payloads, this.concurrency, async (payload, i) => {
      const id = ids[i]!;
      const item = keys.item(id);
      try {
        await this.throttled(runId, item.pk, () =>
          this.doc.send(
            new PutCommand({
              TableName: this.table,
              Item: {
                ...item,
                runId,
                id,
                payload,
                state: 'pending',
                started: false,
                attempts: 0,
                version: 0,
                pendingVersion: 0,
                createdAt: now,
                [GSI1.pk]: keys.index(id).pending,
                [GSI1.sk]: pendingSk(id, null),
              },
              ConditionExpression: 'attribute_not_exists(pk)',
            }),
          ),
        );
        added++;
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) failure ??= { err };
      }
    });
    // After the items, once per request (never per item): a run openRuns is taking out at this moment
    // either sees them (and stays) or loses its conditional write to this counter (and is back in the index).
    // Also when the request failed part way: a retry finds the items it put already there and would not count them.
    if (added > 0) {
      await this.throttled(runId, runPk(runId), () =>
        this.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { pk: runPk(runId), sk: 'RUN' },
            UpdateExpression:
              'SET enqueues = if_not_exists(enqueues, :zero) + :one, #items = if_not_exists(#items, :zero) + :added, #ipk = :runs, #isk = :id REMOVE closedAt',
            ExpressionAttributeNames: { '#ipk': GSI1.pk, '#isk': GSI1.sk, '#items': 'items' },
            ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':added': added, ':runs': RUNS_INDEX, ':id': runId },
          }),
        ),
      );
    }
    if (failure) throw (failure as { err: unknown }).err;
    return { ids, added };
  }

  /** Independent conditional writes, a bounded number in flight (DynamoDB has no multi-item conditional update outside transactions). */
  async casMany(changes: readonly ItemCas[], now: number): Promise<ItemCasOutcome[]> {
    assertOneChangePerItem(changes);
    // Every change settles before the batch answers: one throttled change must not hide those that landed.
    const outcomes: (ItemCasOutcome | undefined)[] = Array.from({ length: changes.length }, () => undefined);
    const errors: unknown[] = [];
    await mapLimit(
      changes.map((change, i) => ({ change, i })),
      this.concurrency,
      async ({ change, i }) => {
        try {
          outcomes[i] = await this.cas(change, now);
        } catch (err) {
          errors.push(err);
        }
      },
    );
    if (!errors.length) return outcomes as ItemCasOutcome[];
    // Deposed: the coordinator stops; no partial answer is of use to it.
    const fenced = errors.find((e) => e instanceof FencedError);
    if (fenced) throw fenced;
    if (errors.length === changes.length) throw errors[0];
    throw new PartialBatchError(outcomes, errors);
  }

  async applyMany(changes: readonly ItemCas[], now: number): Promise<boolean[]> {
    try {
      return (await this.casMany(changes, now)).map((o) => o.ok);
    } catch (err) {
      throw err instanceof PartialBatchError ? (err as PartialBatchError<ItemCasOutcome>).map((o) => o.ok) : err;
    }
  }

  async get(runId: string, itemId: string): Promise<WorkItem | null> {
    const keys = await this.keys(runId);
    const key = keys.item(itemId);
    const { Item } = await this.throttled(runId, key.pk, () => this.doc.send(new GetCommand({ TableName: this.table, Key: key, ConsistentRead: true })));
    return Item ? itemOf(Item) : null;
  }

  /** The transition's update (ledger-updates.ts); a coordinator's in one transaction with its fence. */
  async cas(change: ItemCas, now: number): Promise<ItemCasOutcome> {
    const keys = await this.keys(change.runId);
    const update = {
      TableName: this.table,
      Key: keys.item(change.itemId),
      ...ledgerUpdate(change, now, keys.index(change.itemId), Math.floor(now / 1000) + this.retainRunSeconds),
    };
    try {
      if (change.fence) {
        await this.fencedWrite(change.runId, keys, change.fence, change.itemId, update);
        return { ok: true, item: (await this.get(change.runId, change.itemId))! };
      }
      // A worker's write on an item a coordinator transaction holds (a start meeting a steal) is refused unjudged: again.
      const res = await this.throttled(change.runId, update.Key.pk, () =>
        retryingConflicts(() => this.doc.send(new UpdateCommand({ ...update, ReturnValues: 'ALL_NEW', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }))),
      );
      return { ok: true, item: itemOf(res.Attributes!) };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) {
        const old = plainItem(err.Item);
        return { ok: false, current: old ? itemOf(old) : null };
      }
      if (err instanceof WriteConditionFailedError) return { ok: false, current: await this.get(change.runId, change.itemId) };
      throw err;
    }
  }

  /**
   * A coordinator's write, checked against its shard's fence (ledger-fences.ts),
   * raised to the token's epoch first if this process has not seen it raised.
   * A fence found below the epoch (the raise recorded, a fence since lost) is
   * raised again and the write sent once more; one above it is a FencedError.
   */
  private async fencedWrite(
    runId: string,
    keys: RunKeys,
    token: LeaseToken,
    itemId: string,
    update: NonNullable<TransactWriteCommandInput['TransactItems']>[number]['Update'],
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await this.fences.ensure(runId, keys, token);
      try {
        await fencedTransactWrite(this.doc, this.table, token, [{ Update: update }], { fenceKey: keys.fence(itemId) });
        return;
      } catch (err) {
        const below = err instanceof FencedError && (err.current === null || err.current.epoch < token.epoch);
        if (!below || attempt > 0) throw err;
        this.fences.lost(runId);
      }
    }
  }

  /** One index key's items, in its sort order, after `from` (exclusive) or before `to` (exclusive) when given. */
  private async index(key: string, range: { after?: string; before?: string } = {}, limit?: number): Promise<Item[]> {
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
  private fanOut<T>(keys: readonly string[], each: (key: string) => Promise<T>): Promise<T[]> {
    return mapLimit(keys, this.concurrency, each);
  }

  /** Every shard's RUNNING entries, as the index has them. */
  private async runningEntries(runId: string): Promise<Item[]> {
    const keys = await this.keys(runId);
    return (await this.fanOut(keys.runningKeys, (k) => this.index(k))).flat();
  }

  /** The entries, then the items they name read consistently (one BatchGetItem per 100): an entry carries no heartbeat. */
  async running(runId: string): Promise<WorkItem[]> {
    const entries = await this.runningEntries(runId);
    const whole = entries.filter(isWhole);
    const read = await this.readItems(
      runId,
      entries.filter((e) => !isWhole(e)).map((e) => String(e.id)),
    );
    // Gone from Running since the index was read: left out, as a later query would.
    return [...whole, ...read.filter((i) => i.state === 'running')].map(itemOf);
  }

  /** Who holds each Running item, from the entries alone (`started` only where the index has it: a gsi1 projecting ALL). */
  async holders(runId: string): Promise<RunningEntry[]> {
    return (await this.runningEntries(runId)).map((e) => ({
      runId: String(e.runId),
      id: String(e.id),
      worker: (e.worker as string | undefined) ?? null,
      claimedAt: e.claimedAt === undefined ? null : Number(e.claimedAt),
      ...(isWhole(e) ? { started: Boolean(e.started) } : {}),
    }));
  }

  async getMany(runId: string, ids: readonly string[]): Promise<WorkItem[]> {
    return (await this.readItems(runId, ids)).map(itemOf);
  }

  /** Items by id, read consistently, 100 to a request; missing ones left out. */
  private async readItems(runId: string, ids: readonly string[]): Promise<Item[]> {
    if (!ids.length) return [];
    const keys = await this.keys(runId);
    return batchGetAll(
      this.doc,
      this.table,
      [...new Set(ids)].map((id) => keys.item(id)),
      (batch) => this.throttled(runId, keys.partitions[0]!, batch),
    );
  }

  /**
   * Pending entries as items: the version from `pendingVersion` (or `version`
   * under an ALL projection); an entry with neither — an item stored before
   * `pendingVersion` existed, in an index that does not project `version` —
   * is read from the table.
   */
  private async pendingItems(runId: string, entries: readonly Item[]): Promise<PendingEntry[]> {
    const versionOf = (e: Item) => e.version ?? e.pendingVersion;
    const unknown = entries.filter((e) => versionOf(e) === undefined).map((e) => String(e.id));
    // Read items no longer Pending (claimed since the index was read) are left out, as a later query would leave them.
    const read = new Map((await this.readItems(runId, unknown)).filter((i) => i.state === 'pending').map((i) => [String(i.id), i]));
    return entries.flatMap((e) => {
      const version = versionOf(e) ?? read.get(String(e.id))?.version;
      if (version === undefined) return [];
      return [
        {
          runId: String(e.runId),
          id: String(e.id),
          state: 'pending' as const,
          version: Number(version),
          sentAt: e.sentAt === undefined ? null : Number(e.sentAt),
        },
      ];
    });
  }

  /** In the store's own order, across shards: by when the message was last sent (never: first), then id. */
  async pending(runId: string, limit: number, after?: Pick<PendingEntry, 'id' | 'sentAt'>): Promise<PendingEntry[]> {
    const keys = await this.keys(runId);
    const from = after === undefined ? {} : { after: pendingSk(after.id, after.sentAt) };
    return this.pendingItems(runId, firstInOrder(await this.fanOut(keys.pendingKeys, (k) => this.index(k, from, limit)), limit));
  }

  async unsent(runId: string, sentBefore: number, limit: number): Promise<PendingEntry[]> {
    const keys = await this.keys(runId);
    return this.pendingItems(runId, firstInOrder(await this.fanOut(keys.pendingKeys, (k) => this.index(k, { before: pad(sentBefore) }, limit)), limit));
  }

  /** The PENDING entries past the unsent ones (their sort key carries when they were sent), one conditional update each. */
  async markUnsent(runId: string, limit: number): Promise<number> {
    const keys = await this.keys(runId);
    const sent = firstInOrder(await this.fanOut(keys.pendingKeys, (k) => this.index(k, { after: `${pad(0)}#\uffff` }, limit)), limit);
    // Claimed meanwhile: it has a message, and is left alone.
    const marked = await mapLimit(sent, this.concurrency, (entry) =>
      this.pendingUpdate(runId, keys.item(String(entry.id)), 'REMOVE sentAt SET #isk = :sk', { ':sk': pendingSk(String(entry.id), null) }),
    );
    return marked.filter(Boolean).length;
  }

  /** One conditional update per item (DynamoDB has no batched update), a bounded number in flight. */
  async markSent(runId: string, items: readonly Pick<WorkItem, 'id' | 'version'>[], now: number): Promise<void> {
    const keys = await this.keys(runId);
    // Claimed (or re-pended) meanwhile: left alone.
    await mapLimit(items, this.concurrency, (item) =>
      this.pendingUpdate(
        runId,
        keys.item(item.id),
        'SET sentAt = :now, #isk = :sk',
        { ':now': now, ':sk': pendingSk(item.id, now), ':v': item.version },
        ' AND version = :v',
      ),
    );
  }

  /** An update of a Pending item's send bookkeeping, only while it is Pending (and `also`); false when it no longer was. */
  private async pendingUpdate(runId: string, key: { pk: string; sk: string }, update: string, values: Record<string, unknown>, also = ''): Promise<boolean> {
    try {
      await this.throttled(runId, key.pk, () =>
        this.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: key,
            UpdateExpression: update,
            ConditionExpression: `#s = :pending${also}`,
            ExpressionAttributeNames: { '#s': 'state', '#isk': GSI1.sk },
            ExpressionAttributeValues: { ':pending': 'pending', ...values },
          }),
        ),
      );
      return true;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      return false;
    }
  }

  /**
   * The runs in the RUNS index with a pending or running item. A run found
   * with neither (by the eventually consistent index, then confirmed by a
   * consistent read of its items) leaves the index, so the scheduled scan's
   * cost follows the open runs, not every run ever created. It leaves only
   * if no enqueue happened since it was listed (`enqueues` unchanged).
   */
  /**
   * Runs closed before `before` (CLOSEDRUNS, oldest first), deleted: the
   * record, only if still closed at the time read (an enqueue re-opens it),
   * then its place in the list, its steal hint and its fences. Its items are
   * not deleted here: each carries a TTL from the write that finished it.
   * Runs closed before this release are not in CLOSEDRUNS and are kept.
   */
  async pruneRuns(before: number, limit: number): Promise<{ runs: number; items: number }> {
    const { Items } = await this.doc.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :k AND ${GSI1.sk} < :before`,
        ExpressionAttributeValues: { ':k': CLOSED_RUNS, ':before': `${pad(before)}#` },
        Limit: Math.max(1, Math.min(limit, 25)),
      }),
    );
    let runs = 0;
    for (const entry of Items ?? []) {
      const id = String(entry.id);
      const { Item: run } = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: runPk(id), sk: 'RUN' }, ConsistentRead: true }));
      if (!run || run[GSI1.pk] !== CLOSED_RUNS || !(Number(run.closedAt) < before)) continue;
      try {
        await this.doc.send(
          new DeleteCommand({
            TableName: this.table,
            Key: { pk: runPk(id), sk: 'RUN' },
            ConditionExpression: '#ipk = :closed AND closedAt = :at',
            ExpressionAttributeNames: { '#ipk': GSI1.pk },
            ExpressionAttributeValues: { ':closed': CLOSED_RUNS, ':at': Number(run.closedAt) },
          }),
        );
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException) continue; // re-opened since it was read
        throw err;
      }
      const keys = runKeys(id, run.shards === undefined ? null : Number(run.shards));
      const rest = [{ pk: ALL_RUNS, sk: `${pad(Number(run.createdAt))}#${id}` }, { pk: `STEAL#${id}`, sk: 'HINT' }, ...keys.fences, keys.fencesRaised];
      await batchDelete(this.doc, this.table, rest);
      this.layouts.delete(id);
      runs++;
    }
    return { runs, items: 0 };
  }

  async openRuns(): Promise<string[]> {
    const runs = await queryAll(this.doc, {
      TableName: this.table,
      IndexName: GSI1.name,
      KeyConditionExpression: `${GSI1.pk} = :k`,
      ExpressionAttributeValues: { ':k': RUNS_INDEX },
    });
    const open = await mapLimit(runs, this.concurrency, async (r) => {
      const id = String(r.id);
      if ((await this.openState(id)) === 'open') return id;
      await this.closeRun(id, r.enqueues);
      return null;
    });
    return open.filter((id): id is string => id !== null).sort();
  }

  /**
   * Whether anything of the run is pending or running: the index first (a
   * query of one entry per key), then, when it shows nothing, a consistent
   * read of the items, stopping at the first open one (the index lags).
   */
  private async openState(runId: string): Promise<'open' | 'closed'> {
    const keys = await this.keys(runId);
    const hits = await this.fanOut([...keys.pendingKeys, ...keys.runningKeys], async (k) => (await this.index(k, {}, 1)).length > 0);
    if (hits.some(Boolean)) return 'open';
    return (await this.firstOpen(keys)) ? 'open' : 'closed';
  }

  /** A consistent read of the run's items, shard by shard, stopping at the first pending or running one. */
  private async firstOpen(keys: RunKeys): Promise<WorkItem['state'] | null> {
    for (const partition of keys.partitions) {
      let start: Item | undefined;
      do {
        const page = await this.doc.send(
          new QueryCommand({
            TableName: this.table,
            KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
            FilterExpression: '#s IN (:pending, :running)',
            ExpressionAttributeNames: { '#s': 'state' },
            ExpressionAttributeValues: { ':p': partition, ':i': 'ITEM#', ':pending': 'pending', ':running': 'running' },
            ProjectionExpression: '#s',
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
        const found = page.Items?.[0];
        if (found) return found.state as WorkItem['state'];
        start = page.LastEvaluatedKey;
      } while (start);
    }
    return null;
  }

  /** Out of the open runs, into the closed ones by when (what pruneRuns reads): only if no enqueue came since it was listed. */
  private async closeRun(runId: string, enqueues: unknown): Promise<boolean> {
    const now = Date.now();
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: runPk(runId), sk: 'RUN' },
          UpdateExpression: 'SET #ipk = :closed, #isk = :at, closedAt = :now',
          // Runs written before the counter existed have none.
          ConditionExpression: enqueues === undefined ? 'attribute_not_exists(enqueues)' : 'enqueues = :seen',
          ExpressionAttributeNames: { '#ipk': GSI1.pk, '#isk': GSI1.sk },
          ExpressionAttributeValues: {
            ':closed': CLOSED_RUNS,
            ':at': `${pad(now)}#${runId}`,
            ':now': now,
            ...(enqueues === undefined ? {} : { ':seen': enqueues }),
          },
        }),
      );
      return true;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err; // an enqueue came in: it stays
      return false;
    }
  }

  /**
   * A sharded run's counts come from its index and its record, never from
   * reading its items: pending, running and failed are counted per shard
   * key, done is the items enqueued less those. The index lags a moment, so
   * a run that looks finished is confirmed by a consistent read of its items
   * (stopping at the first open one) before it is reported finished, and is
   * then closed (out of the RUNS index), so that read happens once. A run of
   * the first layout is counted by reading its items, as it always was.
   */
  /**
   * Partition by partition (a sharded run has one per shard), each in item
   * order; the cursor names the partition and DynamoDB's last key in it. A
   * state is a filter: a page reads past items in other states, up to a few
   * query pages of 1 MB before it answers (maybe short, never empty while
   * more may follow unless the read budget ran out; `next` goes on).
   */
  async items(runId: string, o: ItemPageQuery): Promise<ItemPage> {
    type Cursor = { p: number; k: Item | null };
    // Checked before the store is read: a bad cursor is the caller's error, not the store's.
    let at: Cursor = o.cursor === undefined ? { p: 0, k: null } : decodeCursor(o.cursor, ITEMS_CURSOR);
    const keys = await this.keys(runId);
    // A start key from another run's (or partition's) items is no cursor of this page.
    if (at.p > keys.partitions.length) throw new BadCursorError("p: past the run's partitions");
    if (at.k && at.k.pk !== keys.partitions[at.p]) throw new BadCursorError("k: a key of another run's items");
    const out: WorkItem[] = [];
    for (let reads = 0; reads < 8 && at.p < keys.partitions.length && out.length < o.limit; reads++) {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
          ...(o.state ? { FilterExpression: '#s = :s', ExpressionAttributeNames: { '#s': 'state' } } : {}),
          ExpressionAttributeValues: { ':p': keys.partitions[at.p]!, ':i': 'ITEM#', ...(o.state ? { ':s': o.state } : {}) },
          Limit: o.limit - out.length,
          ConsistentRead: true,
          ...(at.k ? { ExclusiveStartKey: at.k } : {}),
        }),
      );
      out.push(...(page.Items ?? []).map(itemOf));
      at = page.LastEvaluatedKey ? { p: at.p, k: page.LastEvaluatedKey } : { p: at.p + 1, k: null };
    }
    return { items: out, next: at.p < keys.partitions.length ? encodeCursor(at) : null };
  }

  /**
   * The run record first: one closed (out of the RUNS index) is done. An
   * open one is probed (one index entry a key, then the items if the index
   * shows none) and closed here when nothing is open, as the scan does.
   */
  async isDone(runId: string): Promise<boolean> {
    const { Item: run } = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: runPk(runId), sk: 'RUN' }, ConsistentRead: true }));
    if (!run || run[GSI1.pk] !== RUNS_INDEX) return true;
    if ((await this.openState(runId)) === 'open') return false;
    await this.closeRun(runId, run.enqueues);
    return true;
  }

  async counts(runId: string): Promise<Record<WorkItem['state'], number>> {
    const keys = await this.keys(runId);
    if (keys.shards === null) return this.countByReading(keys.partitions[0]!);
    const { Item: run } = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: runPk(runId), sk: 'RUN' }, ConsistentRead: true }));
    if (!run) return { pending: 0, running: 0, done: 0, failed: 0 };
    const count = async (list: readonly string[]) => (await this.fanOut(list, (k) => this.countKey(k))).reduce((a, b) => a + b, 0);
    const closed = run[GSI1.pk] !== RUNS_INDEX;
    const [pending, running, failed] = closed
      ? [0, 0, await count(keys.failedKeys)]
      : await Promise.all([count(keys.pendingKeys), count(keys.runningKeys), count(keys.failedKeys)]);
    const out = { pending, running, failed, done: 0 };
    if (!closed && pending + running === 0) {
      const open = await this.firstOpen(keys);
      if (open) out[open] = Math.max(1, out[open]);
      else await this.closeRun(runId, run.enqueues);
    }
    out.done = Math.max(0, Number(run.items ?? 0) - out.pending - out.running - out.failed);
    return out;
  }

  private async countKey(key: string): Promise<number> {
    let total = 0;
    let start: Item | undefined;
    do {
      const from = start;
      const page = await this.throttled(runOfKey(key), `gsi1:${key}`, () =>
        this.doc.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: GSI1.name,
            KeyConditionExpression: `${GSI1.pk} = :k`,
            ExpressionAttributeValues: { ':k': key },
            Select: 'COUNT',
            ExclusiveStartKey: from,
          }),
        ),
      );
      total += page.Count ?? 0;
      start = page.LastEvaluatedKey;
    } while (start);
    return total;
  }

  private async countByReading(partition: string): Promise<Record<WorkItem['state'], number>> {
    const out = { pending: 0, running: 0, done: 0, failed: 0 };
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :i)',
      ExpressionAttributeValues: { ':p': partition, ':i': 'ITEM#' },
      ProjectionExpression: '#s',
      ExpressionAttributeNames: { '#s': 'state' },
      ConsistentRead: true,
    });
    for (const i of items) out[i.state as WorkItem['state']]++;
    return out;
  }
}

/** An index entry that is the whole item (gsi1 projecting ALL): every item has a version, and no INCLUDE projection carries it. */
const isWhole = (entry: Item) => entry.version !== undefined;

/** The first `limit` of several sorted index pages, in index order (gsi1sk), as one list. */
function firstInOrder(pages: readonly Item[][], limit: number): Item[] {
  return pages
    .flat()
    .sort((a, b) => String(a[GSI1.sk]).localeCompare(String(b[GSI1.sk])))
    .slice(0, limit);
}

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
