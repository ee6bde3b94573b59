import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { randomUUID } from 'node:crypto';
import {
  DeleteCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { systemClock, type Clock } from '../../clock.js';
import { actuationRecordOf, type ActuationRecord } from '../../rollout/actuation-record.js';
import type { LeaseToken } from '../../lease/record.js';
import type { RolloutEvent } from '../../rollout/events.js';
import {
  alarmNamesOf,
  talliesByStage,
  TERMINAL_STATES,
  type AlarmState,
  type Rollout,
  type RolloutView,
  type StageMetrics,
  type StageStatus,
} from '../../rollout/model.js';
import { READING_RETENTION_DAYS, tallyWith, type GateReading, type GateTally, type ReadingToStore } from '../../rollout/gates.js';
import { StoreContendedError } from '../../errors.js';
import { stageIndexOf, type RolloutSpec } from '../../rollout/spec.js';
import {
  NEVER_DUE,
  RolloutConflictError,
  UnknownRolloutError,
  type CountedReading,
  type DueView,
  type HeldReading,
  type MetricsTarget,
  type ReadingApplied,
  type RolloutListQuery,
  type RolloutPage,
  type RolloutStore,
  type SignalOutcome,
} from '../../rollout/store.js';
import { signalsRead } from '../../rollout/evaluate.js';
import { FencedError } from '../../lease/fencing.js';
import { freshStages, type TransitionPlan } from '../../rollout/transitions.js';
import { transactWrite } from './conflicts.js';
import { fencedTransactWrite, WriteConditionFailedError } from './fence.js';
import { canonicalJson } from '../../canonical-json.js';
import { GSI1 } from './table.js';
import { batchDelete, batchGetAll, batchPut, listCursor, listPage, listStart, queryAll } from './query.js';
import { mapLimit } from '../../concurrency.js';
import { own } from '../../own.js';

/**
 * Rollouts on DynamoDB, single table:
 *   ROLLOUT#<id> / ROLLOUT              the rollout row (version, state, attempt, …)
 *   ROLLOUT#<id> / STAGE#<attempt>#<i>  one item per stage of an attempt
 *   ROLLOUT#<id> / METRICS#<attempt>#<i>
 *   ROLLOUT#<id> / TALLY#<attempt>#<i>#<gate>   a provider gate's counts in its current period
 *   ROLLOUT#<id> / GATEREADING#<attempt>#<i>#<gate>#<at>   every reading (expires after READING_RETENTION_DAYS, by TTL on `ttl`)
 *   ROLLOUT#<id> / EVENT#<event id>     history; carries gsi1pk = OUTBOX until published
 *   ROLLOUT#<id> / ACTUATION#<target>   what was applied to a target (actuation-record.ts)
 *   RUNNING / <id>                      registry of running rollouts (strongly consistent query), with
 *                                       `watches`: the alarms its gates watch (what an alarm change reads),
 *                                       `dueAt` and `mark`: when a tick next reads it (gsi1: DUE / <dueAt>#<id>)
 *   WATCH#<alarm> / <id>                a rollout that watches the alarm (written at creation; read through RUNNING)
 *   ROLLOUTS / <createdAt>#<id>         every rollout, for listing newest first
 *   ENDED / <id>                        a rollout that ended (gsi1: ENDED / <endedAt>#<id>): what retention deletes
 *   ACTUATING / <id>#<target>           registry of actuation records not settled
 *   ALARM#<name> / ALARM
 * Every transition is one TransactWriteItems: the lease ConditionCheck, the
 * rollout row conditioned on version/state/attempt, each stage on its phase,
 * new items on not existing.
 */

const pad = (n: number, w: number) => String(n).padStart(w, '0');
const rolloutPk = (id: string) => `ROLLOUT#${id}`;
/** The list of every rollout: ROLLOUTS / <createdAt, 15 digits>#<id>. */
const ROLLOUTS = 'ROLLOUTS';
const listSk = (r: Pick<Rollout, 'createdAt' | 'id'>) => `${pad(r.createdAt, 15)}#${r.id}`;
const stageSk = (attempt: number, i: number) => `STAGE#${pad(attempt, 6)}#${pad(i, 3)}`;
const metricsSk = (attempt: number, i: number) => `METRICS#${pad(attempt, 6)}#${pad(i, 3)}`;
// A view reads sk >= METRICS#: tallies (T…) are in it, the reading history (G…) and events (E…) are not.
const tallySk = (attempt: number, i: number, gate: string) => `TALLY#${pad(attempt, 6)}#${pad(i, 3)}#${gate}`;
const readingPrefix = (attempt: number) => `GATEREADING#${pad(attempt, 6)}#`;
const readingSk = (r: GateReading) => `${readingPrefix(r.attempt)}${pad(r.stage, 3)}#${r.gate}#${pad(r.at, 15)}`;
/** A tally is read, recomputed by tallyWith and written back only if unchanged: this many tries before giving up. */
const TALLY_ATTEMPTS = 8;
const OUTBOX = 'OUTBOX';
const ACTUATION = 'ACTUATION#';
const ACTUATING = 'ACTUATING';
/**
 * The due index (gsi1 under DUE, sorted by when): a running rollout's
 * registry item carries when it is next due (0: at once) and a mark that
 * every signal and transition replaces, so a reschedule decided on an older
 * reading is refused.
 */
const DUE = 'DUE';
/** ENDED / <id>: a rollout that ended, indexed on gsi1 as ENDED / <when>#<id>, so retention finds the oldest without a scan. */
const ENDED = 'ENDED';
const endedItem = (r: Rollout): Item => ({ pk: ENDED, sk: r.id, endedAt: r.updatedAt, [GSI1.pk]: ENDED, [GSI1.sk]: `${pad(r.updatedAt, 15)}#${r.id}` });
const dueSk = (at: number, id: string) => `${pad(at, 15)}#${id}`;
const dueNow = (id: string): Item => ({ dueAt: 0, mark: randomUUID(), [GSI1.pk]: DUE, [GSI1.sk]: dueSk(0, id) });
/** A running rollout's registry item, due at once: the spec never changes, so the alarms it watches are written with it once. */
const runningItem = (id: string, spec: RolloutSpec): Item => ({ pk: 'RUNNING', sk: id, watches: alarmNamesOf(spec), watchIndexed: true, ...dueNow(id) });
/** WATCH#<alarm> / <id>: who watches an alarm, so an alarm's change reads its watchers only (filtered by RUNNING: kept while the rollout is). */
const watchItems = (id: string, spec: RolloutSpec): Item[] => alarmNamesOf(spec).map((a) => ({ pk: `WATCH#${a}`, sk: id }));
/** The registry item's update that makes a rollout due at once (and creates the item of a rollout running before it had one). */
const markDueUpdate = (id: string) => {
  const due = dueNow(id);
  return {
    Key: { pk: 'RUNNING', sk: id },
    UpdateExpression: 'SET dueAt = :at, #m = :m, #gp = :gp, #gs = :gs',
    ExpressionAttributeNames: { '#m': 'mark', '#gp': GSI1.pk, '#gs': GSI1.sk },
    ExpressionAttributeValues: { ':at': due.dueAt, ':m': due.mark, ':gp': DUE, ':gs': due[GSI1.sk] },
  };
};

type Item = Record<string, unknown>;
const orNull = <T>(v: unknown): T | null => (v === undefined ? null : (v as T));

function rolloutItem(r: Rollout): Item {
  return {
    pk: rolloutPk(r.id),
    sk: 'ROLLOUT',
    type: 'rollout',
    id: r.id,
    spec: r.spec,
    state: r.state,
    attempt: r.attempt,
    version: r.version,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    lastProgressAt: r.lastProgressAt,
    deadlineExceededAt: r.deadlineExceededAt,
    stateBy: r.stateBy,
    stateReason: r.stateReason,
  };
}

function rolloutOf(i: Item): Rollout {
  return {
    id: String(i.id),
    spec: i.spec as RolloutSpec,
    state: i.state as Rollout['state'],
    attempt: Number(i.attempt),
    version: Number(i.version),
    createdAt: Number(i.createdAt),
    updatedAt: Number(i.updatedAt),
    lastProgressAt: Number(i.lastProgressAt),
    deadlineExceededAt: orNull<number>(i.deadlineExceededAt),
    stateBy: orNull<string>(i.stateBy),
    stateReason: orNull<string>(i.stateReason),
  };
}

function stageItem(id: string, attempt: number, s: StageStatus): Item {
  return { pk: rolloutPk(id), sk: stageSk(attempt, s.index), type: 'stage', attempt, ...s };
}

function stageOf(i: Item): StageStatus {
  return {
    index: Number(i.index),
    name: String(i.name),
    phase: i.phase as StageStatus['phase'],
    activatedAt: orNull(i.activatedAt),
    promotedAt: orNull(i.promotedAt),
    promotedEpoch: orNull(i.promotedEpoch),
    promotedBy: orNull(i.promotedBy),
    rolledBackAt: orNull(i.rolledBackAt),
    reason: orNull(i.reason),
  };
}

function eventOf(i: Item): RolloutEvent {
  return {
    id: String(i.id),
    source: 'ai.rollout',
    detailType: i.detailType as RolloutEvent['detailType'],
    time: Number(i.time),
    detail: i.detail as RolloutEvent['detail'],
  };
}

export class DynamoRolloutStore implements RolloutStore {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
    private readonly readConcurrency = 16,
    private readonly clock: Clock = systemClock,
  ) {}

  async create(id: string, spec: RolloutSpec, now: number, actor: string): Promise<{ created: boolean }> {
    const rollout: Rollout = {
      id,
      spec,
      state: 'running',
      attempt: 1,
      version: 0,
      createdAt: now,
      updatedAt: now,
      lastProgressAt: now,
      deadlineExceededAt: null,
      stateBy: actor,
      stateReason: null,
    };
    // Before the rollout, outside its transaction (a spec may watch more alarms than one holds): an entry whose
    // rollout was never created, or does not watch the alarm, is dropped where it is read.
    await batchPut(this.doc, this.table, watchItems(id, spec));
    try {
      // A second create of the same id in flight at once conflicts: retried, it then finds the first.
      await transactWrite(this.doc, {
        TransactItems: [
          { Put: { TableName: this.table, Item: rolloutItem(rollout), ConditionExpression: 'attribute_not_exists(pk)' } },
          ...freshStages({ rollout }).map((s) => ({ Put: { TableName: this.table, Item: stageItem(id, 1, s) } })),
          { Put: { TableName: this.table, Item: runningItem(id, spec) } },
          // The list of every rollout, newest last by key (read newest first): one small item per rollout, never rewritten.
          { Put: { TableName: this.table, Item: { pk: ROLLOUTS, sk: listSk(rollout) } } },
        ],
      });
      return { created: true };
    } catch (err) {
      if (!(err instanceof TransactionCanceledException) || err.CancellationReasons?.[0]?.Code !== 'ConditionalCheckFailed') throw err;
      const existing = await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: rolloutPk(id), sk: 'ROLLOUT' }, ConsistentRead: true }));
      // Key order does not survive a DynamoDB map: compare specs canonically.
      if (!existing.Item || canonicalJson(existing.Item.spec) !== canonicalJson(spec)) throw new RolloutConflictError(id);
      return { created: false };
    }
  }

  async load(id: string): Promise<RolloutView | null> {
    const [view] = await this.views([id]);
    return view ?? null;
  }

  /**
   * The ROLLOUTS list newest first, a query page at a time, each page's
   * rollout rows read in one consistent BatchGet and filtered by state: a
   * state filter reads past rollouts in other states (at most 8 query pages
   * a call; `next` goes on). Rollouts created before the list existed are not
   * in it.
   */
  async list(o: RolloutListQuery): Promise<RolloutPage> {
    let start = listStart(o.cursor);
    const out: Rollout[] = [];
    let more = true;
    for (let reads = 0; reads < 8 && more && out.length < o.limit; reads++) {
      const page = await listPage(this.doc, this.table, ROLLOUTS, o.limit - out.length, start);
      const listed = page.items.map((i) => String(i.sk));
      const rows = await this.rows(listed.map((sk) => sk.slice(sk.indexOf('#') + 1)));
      for (const sk of listed) {
        const row = rows.get(sk.slice(sk.indexOf('#') + 1));
        if (row && (o.state === undefined || row.state === o.state)) out.push(row);
      }
      start = listed.at(-1) ?? start;
      more = page.more;
    }
    return { rollouts: out, next: more && start !== null ? listCursor(start) : null };
  }

  /** Rollout rows by id, in one consistent read per 100. */
  private async rows(ids: readonly string[]): Promise<Map<string, Rollout>> {
    const items = await batchGetAll(
      this.doc,
      this.table,
      ids.map((id) => ({ pk: rolloutPk(id), sk: 'ROLLOUT' })),
    );
    return new Map(items.map((item) => [String(item.id), rolloutOf(item)]));
  }

  async anyRunning(): Promise<boolean> {
    const res = await this.doc.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :p',
        ExpressionAttributeValues: { ':p': 'RUNNING' },
        ConsistentRead: true,
        Limit: 1,
        ProjectionExpression: 'sk',
      }),
    );
    return (res.Items?.length ?? 0) > 0;
  }

  async loadRunning(): Promise<RolloutView[]> {
    const registry = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': 'RUNNING' },
      ConsistentRead: true,
    });
    const ids = registry.map((i) => String(i.sk));
    return (await this.views(ids)).filter((v) => v.rollout.state === 'running');
  }

  /**
   * The due index's entries up to `now` (eventually consistent), then their
   * registry items read consistently (an entry the index still shows after a
   * reschedule is dropped here), then the views: each mark is read before
   * its view, so a mark newer than the view it comes with cannot be.
   */
  async loadDue(now: number, limit: number): Promise<DueView[]> {
    await this.backfillDue();
    const entries = await queryAll(
      this.doc,
      {
        TableName: this.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :d AND ${GSI1.sk} <= :n`,
        ExpressionAttributeValues: { ':d': DUE, ':n': `${pad(Math.max(0, now), 15)}#\uffff` },
      },
      limit,
    );
    const registry = await batchGetAll(
      this.doc,
      this.table,
      entries.map((e) => ({ pk: 'RUNNING', sk: String(e.sk) })),
    );
    const marks = new Map(registry.filter((r) => Number(r.dueAt) <= now).map((r) => [String(r.sk), String(r.mark)]));
    const views = await this.views([...marks.keys()]);
    return views.filter((v) => v.rollout.state === 'running').map((view) => ({ view, mark: marks.get(view.rollout.id)! }));
  }

  async reschedule(rolloutId: string, mark: string, at: number): Promise<boolean> {
    const when = Math.min(at, NEVER_DUE);
    try {
      await this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk: 'RUNNING', sk: rolloutId },
          UpdateExpression: 'SET dueAt = :at, #gs = :gs',
          ConditionExpression: '#m = :m',
          ExpressionAttributeNames: { '#m': 'mark', '#gs': GSI1.sk },
          ExpressionAttributeValues: { ':at': when, ':gs': dueSk(when, rolloutId), ':m': mark },
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /**
   * Makes running rollouts due at once: after a signal for them is stored
   * (stale or not: a signal sent again after a crash between its write and
   * this mark is marked then). A rollout not running is left alone.
   */
  private async markDue(ids: readonly string[]): Promise<void> {
    await mapLimit(ids, this.readConcurrency, async (id) => {
      try {
        await this.doc.send(new UpdateCommand({ TableName: this.table, ...markDueUpdate(id), ConditionExpression: 'attribute_exists(pk)' }));
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
    });
  }

  private backfilled = false;

  /**
   * Registry items written by an older release carry no due time and have
   * no WATCH entries: on this store's first tick, their entries are written
   * and they are made due, so none is left unread. Until then an alarm's
   * change does not find them; the change is stored, and that tick reads it.
   */
  private async backfillDue(): Promise<void> {
    if (this.backfilled) return;
    const registry = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': 'RUNNING' },
      ConsistentRead: true,
      ProjectionExpression: 'sk, dueAt, watches, watchIndexed',
    });
    const old = registry.filter((i) => i.watchIndexed !== true);
    await mapLimit(old, this.readConcurrency, async (i) => {
      const id = String(i.sk);
      const names = Array.isArray(i.watches)
        ? (i.watches as string[])
        : alarmNamesOf((await this.load(id))?.rollout.spec ?? ({ stages: [] } as unknown as RolloutSpec));
      await batchPut(
        this.doc,
        this.table,
        names.map((a) => ({ pk: `WATCH#${a}`, sk: id })),
      );
      await this.doc
        .send(
          new UpdateCommand({
            TableName: this.table,
            Key: { pk: 'RUNNING', sk: id },
            UpdateExpression: 'SET watchIndexed = :t',
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: { ':t': true },
          }),
        )
        .catch((err: unknown) => {
          if (!(err instanceof ConditionalCheckFailedException)) throw err;
        });
    });
    await this.markDue(registry.filter((i) => i.dueAt === undefined || i.watchIndexed !== true).map((i) => String(i.sk)));
    this.backfilled = true;
  }

  async loadWatching(alarm: string): Promise<RolloutView[]> {
    return (await this.views(await this.watching(alarm))).filter((v) => v.rollout.state === 'running' && alarmNamesOf(v.rollout.spec).includes(alarm));
  }

  /** Ids of the running rollouts that watch `alarm`: its WATCH entries, kept if their rollout is in the registry. No rollout is read. */
  private async watching(alarm: string): Promise<string[]> {
    const entries = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': `WATCH#${alarm}` },
      ConsistentRead: true,
      ProjectionExpression: 'sk',
    });
    const running = await batchGetAll(
      this.doc,
      this.table,
      entries.map((e) => ({ pk: 'RUNNING', sk: String(e.sk) })),
    );
    return running.map((r) => String(r.sk));
  }

  /** One query per rollout (rollout, stages, metrics; events sort before and are skipped), then alarms in one batch. */
  private async views(ids: readonly string[]): Promise<RolloutView[]> {
    const partitions = await mapLimit(ids, this.readConcurrency, (id) =>
      queryAll(this.doc, {
        TableName: this.table,
        KeyConditionExpression: 'pk = :p AND sk >= :from',
        ExpressionAttributeValues: { ':p': rolloutPk(id), ':from': 'METRICS#' },
        ConsistentRead: true,
      }),
    );

    const views: Omit<RolloutView, 'alarms'>[] = [];
    for (const items of partitions) {
      const head = items.find((i) => i.sk === 'ROLLOUT');
      if (!head) continue;
      const rollout = rolloutOf(head);
      const stages = items
        .filter((i) => i.type === 'stage' && Number(i.attempt) === rollout.attempt)
        .map(stageOf)
        .sort((a, b) => a.index - b.index);
      const metrics = new Map<number, StageMetrics>();
      for (const m of items.filter((i) => i.type === 'metrics' && Number(i.attempt) === rollout.attempt)) {
        metrics.set(Number(m.index), {
          requests: Number(m.requests),
          errors: Number(m.errors),
          p99LatencyMs: orNull(m.p99LatencyMs),
          observedAt: Number(m.observedAt),
        });
      }
      const tallies = items.filter((i) => i.type === 'tally' && Number(i.attempt) === rollout.attempt).map((i) => i.tally as GateTally);
      views.push({ rollout, stages, metrics, gates: talliesByStage(tallies) });
    }
    const alarms = await this.alarms([...new Set(views.flatMap((v) => alarmNamesOf(v.rollout.spec)))]);
    return views.map((v) => {
      const own = alarmNamesOf(v.rollout.spec);
      return { ...v, alarms: Object.fromEntries(own.filter((n) => alarms.has(n)).map((n) => [n, alarms.get(n)!])) };
    });
  }

  private async alarms(names: readonly string[]): Promise<Map<string, AlarmState>> {
    const items = await batchGetAll(
      this.doc,
      this.table,
      names.map((n) => ({ pk: `ALARM#${n}`, sk: 'ALARM' })),
    );
    return new Map(items.map((item) => [String(item.name), item.state as AlarmState]));
  }

  async recordMetrics(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<SignalOutcome> {
    const head = await this.doc.send(
      new GetCommand({ TableName: this.table, Key: { pk: rolloutPk(rolloutId), sk: 'ROLLOUT' }, ProjectionExpression: 'attempt, spec', ConsistentRead: true }),
    );
    if (!head.Item) throw new UnknownRolloutError(rolloutId);
    const { outcome } = await this.putMetrics(rolloutId, head.Item.spec as RolloutSpec, Number(head.Item.attempt), at, m);
    await this.markDue([rolloutId]);
    return outcome;
  }

  /** The stage resolved on `spec`, the attempt defaulting to `attempt`; stored only if newer than the stage's reading. */
  private async putMetrics(
    rolloutId: string,
    spec: RolloutSpec,
    attempt: number,
    at: MetricsTarget,
    m: StageMetrics,
  ): Promise<{ outcome: SignalOutcome; stage: number; attempt: number }> {
    const stage = stageIndexOf(spec, at.stage);
    if (stage === null) throw new UnknownRolloutError(rolloutId, at.stage);
    const target = at.attempt ?? attempt;
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { pk: rolloutPk(rolloutId), sk: metricsSk(target, stage), type: 'metrics', attempt: target, index: stage, ...m },
          ConditionExpression: 'attribute_not_exists(pk) OR observedAt < :o',
          ExpressionAttributeValues: { ':o': m.observedAt },
        }),
      );
      return { outcome: 'stored', stage, attempt: target };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return { outcome: 'stale', stage, attempt: target };
      throw err;
    }
  }

  /**
   * The view first (its head resolves the stage and attempt, so no read of
   * its own), then the reading, put into the view when stored. A stale
   * reading means a newer one came in: the view is read again to include it.
   */
  async recordMetricsAndLoad(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<{ outcome: SignalOutcome; view: RolloutView }> {
    const before = await this.load(rolloutId);
    if (!before) throw new UnknownRolloutError(rolloutId);
    const { outcome, stage, attempt } = await this.putMetrics(rolloutId, before.rollout.spec, before.rollout.attempt, at, m);
    await this.markDue([rolloutId]);
    if (outcome === 'stale') return { outcome, view: (await this.load(rolloutId))! };
    if (attempt === before.rollout.attempt) (before.metrics as Map<number, StageMetrics>).set(stage, m);
    return { outcome, view: before };
  }

  async recordAlarm(name: string, state: AlarmState, changedAt: number): Promise<SignalOutcome> {
    let outcome: SignalOutcome = 'stored';
    try {
      await this.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { pk: `ALARM#${name}`, sk: 'ALARM', type: 'alarm', name, state, changedAt },
          ConditionExpression: 'attribute_not_exists(pk) OR changedAt < :c',
          ExpressionAttributeValues: { ':c': changedAt },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      outcome = 'stale';
    }
    await this.markDue(await this.watching(name));
    return outcome;
  }

  /** DynamoDB's TTL deletes each reading READING_RETENTION_DAYS after it was taken: nothing to do here. */
  pruneGateReadings(): Promise<number> {
    return Promise.resolve(0);
  }

  /**
   * The oldest ENDED entries (the index is eventually consistent: each
   * rollout's head is read again, consistently, and one that is running again
   * or ended later is left alone), then each rollout deleted: its partition,
   * watch entries, list entry, the alarm states only it watched, its head,
   * and last its ENDED entry, so a crash part way is finished by a later call.
   */
  async pruneEnded(before: number, limit: number): Promise<number> {
    const entries = await queryAll(
      this.doc,
      {
        TableName: this.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :e AND ${GSI1.sk} < :b`,
        ExpressionAttributeValues: { ':e': ENDED, ':b': pad(before, 15) },
      },
      limit,
    );
    const pruned = await mapLimit(entries, this.readConcurrency, async (e) => this.pruneOne(String(e.sk), before));
    return pruned.filter(Boolean).length;
  }

  private async pruneOne(id: string, before: number): Promise<boolean> {
    const head = (await this.doc.send(new GetCommand({ TableName: this.table, Key: { pk: rolloutPk(id), sk: 'ROLLOUT' }, ConsistentRead: true }))).Item;
    if (head) {
      const r = rolloutOf(head);
      if (!TERMINAL_STATES.includes(r.state) || r.updatedAt >= before) return false;
      const items = await queryAll(this.doc, {
        TableName: this.table,
        KeyConditionExpression: 'pk = :p',
        ExpressionAttributeValues: { ':p': rolloutPk(id) },
        ConsistentRead: true,
        ProjectionExpression: 'pk, sk, #g',
        ExpressionAttributeNames: { '#g': GSI1.pk },
      });
      const unsettled = await this.doc.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :r)',
          ExpressionAttributeValues: { ':p': ACTUATING, ':r': `${id}#` },
          ConsistentRead: true,
          Limit: 1,
        }),
      );
      // An event not yet published, or a target not settled: kept until they are.
      if (items.some((i) => i[GSI1.pk] === OUTBOX) || (unsettled.Items?.length ?? 0) > 0) return false;
      const alarms = alarmNamesOf(r.spec);
      await batchDelete(this.doc, this.table, [
        ...items.filter((i) => i.sk !== 'ROLLOUT').map((i) => ({ pk: i.pk, sk: i.sk })),
        ...alarms.map((a) => ({ pk: `WATCH#${a}`, sk: id })),
        { pk: ROLLOUTS, sk: listSk(r) },
      ]);
      await mapLimit(alarms, this.readConcurrency, (a) => this.pruneAlarm(a, before));
      await this.doc.send(new DeleteCommand({ TableName: this.table, Key: { pk: rolloutPk(id), sk: 'ROLLOUT' } }));
    }
    await this.doc.send(new DeleteCommand({ TableName: this.table, Key: { pk: ENDED, sk: id } }));
    return head !== undefined;
  }

  /** An alarm's state, once no rollout watches it and it has not changed since `before`. */
  private async pruneAlarm(alarm: string, before: number): Promise<void> {
    const watched = await this.doc.send(
      new QueryCommand({
        TableName: this.table,
        KeyConditionExpression: 'pk = :p',
        ExpressionAttributeValues: { ':p': `WATCH#${alarm}` },
        ConsistentRead: true,
        Limit: 1,
      }),
    );
    if (watched.Items?.length) return;
    try {
      await this.doc.send(
        new DeleteCommand({
          TableName: this.table,
          Key: { pk: `ALARM#${alarm}`, sk: 'ALARM' },
          ConditionExpression: 'changedAt < :b',
          ExpressionAttributeValues: { ':b': before },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  async recordGateReadings(readings: readonly ReadingToStore[]): Promise<CountedReading[]> {
    // Readings of one gate in order, one after another (each tally after its own reading, the last one standing); gates in parallel.
    const byTally = new Map<string, ReadingToStore[]>();
    for (const r of readings) {
      const key = JSON.stringify([r.rolloutId, r.reading.attempt, r.reading.stage, r.reading.gate]);
      byTally.set(key, [...(byTally.get(key) ?? []), r]);
    }
    const counted = await mapLimit([...byTally.values()], this.readConcurrency, async (same) => {
      const out: CountedReading[] = [];
      for (const r of same) {
        const tally = await this.countReading(r, same.length > 1 ? undefined : r.prior);
        if (tally) out.push({ rolloutId: r.rolloutId, tally });
      }
      return out;
    });
    // The history is for people, not decisions: written after the counts, in batches, whatever they said.
    await batchPut(
      this.doc,
      this.table,
      readings.map(({ rolloutId, reading }) => ({
        pk: rolloutPk(rolloutId),
        sk: readingSk(reading),
        type: 'reading',
        reading,
        ttl: Math.floor(reading.at / 1000) + READING_RETENTION_DAYS * 86_400,
      })),
    );
    return counted.flat();
  }

  /**
   * The tally as `tallyWith` says, written only if it is still the one it was
   * computed from: (origin, readings) names a tally's state, since every
   * count raises one or moves the other forward. Starts from the reader's
   * `prior` when given, and reads the tally only when that was stale.
   */
  private async countReading({ rolloutId, origin, reading }: ReadingToStore, prior: GateTally | null | undefined): Promise<GateTally | null> {
    const key = { pk: rolloutPk(rolloutId), sk: tallySk(reading.attempt, reading.stage, reading.gate) };
    const read = async () =>
      (await this.doc.send(new GetCommand({ TableName: this.table, Key: key, ConsistentRead: true }))).Item?.tally as GateTally | undefined;
    let current = prior === undefined ? await read() : (prior ?? undefined);
    for (let attempt = 0; attempt < TALLY_ATTEMPTS; attempt++) {
      const next = tallyWith(current, reading, origin);
      if (next === null) return null;
      try {
        await this.doc.send(
          new PutCommand({
            TableName: this.table,
            Item: { ...key, type: 'tally', attempt: reading.attempt, tally: next },
            ...(current
              ? {
                  ConditionExpression: '#t.#o = :o AND #t.#n = :n',
                  ExpressionAttributeNames: { '#t': 'tally', '#o': 'origin', '#n': 'readings' },
                  ExpressionAttributeValues: { ':o': current.origin, ':n': current.readings },
                }
              : { ConditionExpression: 'attribute_not_exists(pk)' }),
          }),
        );
        return next;
      } catch (err) {
        // Another reading of this gate got there first: read it and count again.
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
        current = await read();
      }
    }
    throw new StoreContendedError(`gate ${reading.gate} of rollout ${rolloutId}: the tally kept changing under ${TALLY_ATTEMPTS} writes; try again`);
  }

  async gateReadings(rolloutId: string, o: { readonly perGate?: number; readonly attempt?: number } = {}): Promise<GateReading[]> {
    const head = await this.doc.send(
      new GetCommand({ TableName: this.table, Key: { pk: rolloutPk(rolloutId), sk: 'ROLLOUT' }, ProjectionExpression: 'attempt, spec', ConsistentRead: true }),
    );
    if (!head.Item) return [];
    const attempt = o.attempt ?? Number(head.Item.attempt);
    const spec = head.Item.spec as RolloutSpec;
    const gates = spec.stages.flatMap((s, i) => (s.gates.providers ?? []).map((g) => ({ stage: i, gate: g.name })));
    // One query per gate, newest first, so a long bake's history is never read in full.
    const perGate = await mapLimit(gates, this.readConcurrency, ({ stage, gate }) =>
      queryAll(
        this.doc,
        {
          TableName: this.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :r)',
          ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':r': `${readingPrefix(attempt)}${pad(stage, 3)}#${gate}#` },
          ScanIndexForward: false,
        },
        o.perGate ?? 50,
      ),
    );
    return perGate.flat().map((i) => i.reading as GateReading);
  }

  async apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean> {
    try {
      await fencedTransactWrite(this.doc, this.table, token, this.planItems(plan));
      return true;
    } catch (err) {
      // The evaluated state moved on. (A conflict with a concurrent transaction is no verdict: fencedTransactWrite retries it.)
      if (err instanceof WriteConditionFailedError) return false;
      throw err;
    }
  }

  /**
   * The reading, the plan and a ConditionCheck on each signal the decision
   * read (signalsRead: the active stage's metrics, its alarms, its gates'
   * tallies) in one transaction: the plan applies only if none moved since
   * `held` was read, as rollout_apply_with_reading does on PostgreSQL. The
   * rollout row's version check covers the row and the stages. If anything
   * moved, nothing is written: the reading is then stored and the view read
   * the usual way, for the caller to decide again on it.
   */
  async recordMetricsAndApply(token: LeaseToken, plan: TransitionPlan, reading: HeldReading, held: RolloutView): Promise<ReadingApplied> {
    const id = plan.rolloutId;
    const attempt = held.rollout.attempt;
    const target: MetricsTarget = { stage: reading.stage, attempt: reading.attempt };
    const usual = async (): Promise<ReadingApplied> => ({ applied: false, ...(await this.recordMetricsAndLoad(id, target, reading.metrics)) });
    // Another attempt's reading: the usual way.
    if ((reading.attempt ?? attempt) !== attempt) return usual();
    const read = signalsRead(held);
    const items = [
      this.metricsPut(id, attempt, reading, held.metrics.get(reading.stage)),
      ...(read ? this.signalChecks(id, held, read, reading.stage) : []),
      ...this.planItems(plan),
    ];
    // More checks than a transaction holds: the usual way.
    if (items.length > 99) return usual();
    try {
      await fencedTransactWrite(this.doc, this.table, token, items);
      return { applied: true };
    } catch (err) {
      // Stored whoever leads, as a signal always is.
      if (err instanceof FencedError) await this.recordMetrics(id, target, reading.metrics);
      if (!(err instanceof WriteConditionFailedError)) throw err;
    }
    return usual();
  }

  /** The reading of the held view's attempt, put only over the reading the view held (or none). */
  private metricsPut(id: string, attempt: number, reading: HeldReading, prior: StageMetrics | undefined) {
    return {
      Put: {
        TableName: this.table,
        Item: { pk: rolloutPk(id), sk: metricsSk(attempt, reading.stage), type: 'metrics', attempt, index: reading.stage, ...reading.metrics },
        ...(prior
          ? { ConditionExpression: 'observedAt = :o', ExpressionAttributeValues: { ':o': prior.observedAt } }
          : { ConditionExpression: 'attribute_not_exists(pk)' }),
      },
    };
  }

  /** A ConditionCheck per signal read: each as the view held it, or still absent. */
  private signalChecks(id: string, held: RolloutView, read: NonNullable<ReturnType<typeof signalsRead>>, written: number) {
    const { attempt } = held.rollout;
    const check = (Key: Item, ConditionExpression: string, ExpressionAttributeValues?: Item, ExpressionAttributeNames?: Record<string, string>) => ({
      ConditionCheck: {
        TableName: this.table,
        Key,
        ConditionExpression,
        ...(ExpressionAttributeValues && { ExpressionAttributeValues }),
        ...(ExpressionAttributeNames && { ExpressionAttributeNames }),
      },
    });
    const absent = 'attribute_not_exists(pk)';
    const out = [];
    if (read.stage !== written) {
      const m = held.metrics.get(read.stage);
      out.push(check({ pk: rolloutPk(id), sk: metricsSk(attempt, read.stage) }, m ? 'observedAt = :o' : absent, m && { ':o': m.observedAt }));
    }
    for (const name of read.alarms) {
      const state = own(held.alarms, name);
      out.push(check({ pk: `ALARM#${name}`, sk: 'ALARM' }, state ? '#s = :s' : absent, state && { ':s': state }, state && { '#s': 'state' }));
    }
    for (const gate of read.gates) {
      const t = held.gates.get(read.stage)?.get(gate);
      out.push(
        check(
          { pk: rolloutPk(id), sk: tallySk(attempt, read.stage, gate) },
          t ? 'tally.origin = :o AND tally.readings = :n' : absent,
          t && { ':o': t.origin, ':n': t.readings },
        ),
      );
    }
    return out;
  }

  /** A transition's items, all conditioned on the state the plan was made on (fencedTransactWrite adds the fence). */
  private planItems(plan: TransitionPlan): NonNullable<TransactWriteCommandInput['TransactItems']> {
    const { rolloutId: id, expect, next } = plan;
    const items: NonNullable<TransactWriteCommandInput['TransactItems']> = [
      {
        Put: {
          TableName: this.table,
          Item: rolloutItem(next),
          // The rollout row exactly as evaluated.
          ConditionExpression: 'version = :v AND #state = :s AND attempt = :a',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':v': expect.version, ':s': expect.state, ':a': expect.attempt },
        },
      },
    ];
    for (const change of plan.stageChanges) {
      const entries = Object.entries(change.set);
      items.push({
        Update: {
          TableName: this.table,
          Key: { pk: rolloutPk(id), sk: stageSk(expect.attempt, change.index) },
          UpdateExpression: `SET ${entries.map((_, i) => `#f${i} = :f${i}`).join(', ')}`,
          ConditionExpression: 'phase = :expectPhase',
          ExpressionAttributeNames: Object.fromEntries(entries.map(([k], i) => [`#f${i}`, k])),
          ExpressionAttributeValues: { ':expectPhase': change.expect, ...Object.fromEntries(entries.map(([, v], i) => [`:f${i}`, v])) },
        },
      });
    }
    for (const s of plan.newStages) {
      items.push({ Put: { TableName: this.table, Item: stageItem(id, next.attempt, s), ConditionExpression: 'attribute_not_exists(pk)' } });
    }
    plan.events.forEach((e, i) => {
      items.push({
        Put: {
          TableName: this.table,
          Item: {
            pk: rolloutPk(id),
            sk: `EVENT#${e.id}`,
            type: 'event',
            ...e,
            // History order is the rollout's version order: writes to one rollout are serialised by its version condition.
            order: `${pad(next.version, 10)}#${pad(i, 3)}`,
            [GSI1.pk]: OUTBOX,
            [GSI1.sk]: `${pad(e.time, 15)}#${pad(next.version, 10)}#${pad(i, 3)}`,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      });
    });
    if (expect.state !== 'running' && next.state === 'running') items.push({ Put: { TableName: this.table, Item: runningItem(id, next.spec) } });
    const ended = (state: Rollout['state']) => TERMINAL_STATES.includes(state);
    if (!ended(expect.state) && ended(next.state)) items.push({ Put: { TableName: this.table, Item: endedItem(next) } });
    if (ended(expect.state) && !ended(next.state)) items.push({ Delete: { TableName: this.table, Key: { pk: ENDED, sk: id } } });
    // A transition that leaves it running makes it due at once: the next tick looks at it from where it is now.
    if (expect.state === 'running' && next.state === 'running') items.push({ Update: { TableName: this.table, ...markDueUpdate(id) } });
    if (expect.state === 'running' && next.state !== 'running') items.push({ Delete: { TableName: this.table, Key: { pk: 'RUNNING', sk: id } } });
    return items;
  }

  async unpublishedEvents(limit: number): Promise<RolloutEvent[]> {
    // The index is eventually consistent: an event written a moment ago may show up on the next flush.
    const res = await this.doc.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: GSI1.name,
        KeyConditionExpression: `${GSI1.pk} = :o`,
        ExpressionAttributeValues: { ':o': OUTBOX },
        Limit: limit,
      }),
    );
    return (res.Items ?? []).map(eventOf);
  }

  async markPublished(events: readonly RolloutEvent[]): Promise<void> {
    const now = this.clock.now();
    await Promise.all(
      events.map((e) =>
        this.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { pk: rolloutPk(e.detail.rolloutId), sk: `EVENT#${e.id}` },
            UpdateExpression: `SET publishedAt = :now REMOVE ${GSI1.pk}, ${GSI1.sk}`,
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeValues: { ':now': now },
          }),
        ),
      ),
    );
  }

  async events(rolloutId: string): Promise<RolloutEvent[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :e)',
      ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':e': 'EVENT#' },
      ConsistentRead: true,
    });
    return items.sort((a, b) => String(a.order).localeCompare(String(b.order))).map(eventOf);
  }

  async actuations(rolloutId: string): Promise<ActuationRecord[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :a)',
      ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':a': ACTUATION },
      ConsistentRead: true,
    });
    return items.map((i) => actuationRecordOf(i.record));
  }

  async recordActuation(token: LeaseToken, record: ActuationRecord): Promise<void> {
    const registry = { pk: ACTUATING, sk: `${record.rolloutId}#${record.target}` };
    await fencedTransactWrite(this.doc, this.table, token, [
      { Put: { TableName: this.table, Item: { pk: rolloutPk(record.rolloutId), sk: `${ACTUATION}${record.target}`, type: 'actuation', record } } },
      // The registry a tick reads (strongly consistent, like RUNNING): present while the record is not settled.
      record.settled
        ? { Delete: { TableName: this.table, Key: registry } }
        : { Put: { TableName: this.table, Item: { ...registry, rolloutId: record.rolloutId, updatedAt: record.updatedAt } } },
    ]);
  }

  async unsettledActuations(limit: number): Promise<string[]> {
    const items = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': ACTUATING },
      ConsistentRead: true,
    });
    const oldest = new Map<string, number>();
    for (const i of items) {
      const id = String(i.rolloutId);
      oldest.set(id, Math.min(oldest.get(id) ?? Infinity, Number(i.updatedAt)));
    }
    return [...oldest]
      .sort((a, b) => a[1] - b[1])
      .slice(0, limit)
      .map(([id]) => id);
  }
}
