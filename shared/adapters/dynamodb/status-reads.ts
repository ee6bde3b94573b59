import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { FailedItem, RunFigures, StatusReads } from '../../api/status-reads.js';
import { mapLimit } from '../../concurrency.js';
import type { RolloutEvent } from '../../rollout/events.js';
import { runKeys, runPk } from './ledger-keys.js';
import { ALL_RUNS } from './ledger-table.js';
import { batchGetAll, listPage, queryAll } from './query.js';
import { instancePartition } from './registry-store.js';
import { ENDED, eventOf, rolloutOf, rolloutPk, ROLLOUTS } from './rollout-items.js';
import { GSI1 } from './table.js';

type Item = Record<string, unknown>;

/** Running rollouts read at most (the RUNNING registry; the batch tick reads it whole). */
const RUNNING_READ = 1_000;
/** The newest rollouts created among which a paused one is looked for (no index holds paused rollouts). */
const PAUSED_LOOKBACK = 100;
/** Failed items of a run read at most to find its newest (the FAILED index is in id order, not time order). */
const FAILED_READ = 200;
/** Partitions read at once. */
const CONCURRENCY = 8;

/**
 * The status page's reads on DynamoDB, from the keys the stores write
 * (rollout-store.ts, ledger-keys.ts, ledger-runs.ts, registry-store.ts),
 * every one a query of a known partition or a read by key; no scan. Where
 * the layout holds no index in the order the page asks for, the answer is
 * bounded and may differ from PostgreSQL's:
 *
 *   rollouts     running ones from the RUNNING registry (up to RUNNING_READ),
 *                paused ones only among the PAUSED_LOOKBACK newest created
 *                (ROLLOUTS): nothing indexes a paused rollout; finished ones
 *                from gsi1 ENDED by when they ended (eventually consistent: one
 *                that ended a moment ago may be missing from one read)
 *   transitions  a rollout's events are keyed by event id, not in order: the
 *                newest are found by reading all its events (bounded by that
 *                rollout's history, not by the table)
 *   failures     the FAILED index is in id order: the newest are found among
 *                the first FAILED_READ failed items of the run
 *   steals       nothing on DynamoDB counts them (a node's coordinators count
 *                them, on PostgreSQL): null
 */
export class DynamoStatusReads implements StatusReads {
  constructor(
    private readonly doc: DynamoDBDocumentClient,
    private readonly table: string,
  ) {}

  async rollouts(o: { readonly live: number; readonly finished: number }): Promise<string[]> {
    const [running, recent, ended] = await Promise.all([
      queryAll(
        this.doc,
        {
          TableName: this.table,
          KeyConditionExpression: 'pk = :p',
          ExpressionAttributeValues: { ':p': 'RUNNING' },
          ConsistentRead: true,
          ProjectionExpression: 'sk',
        },
        RUNNING_READ,
      ),
      o.live > 0 ? listPage(this.doc, this.table, ROLLOUTS, PAUSED_LOOKBACK, null) : { items: [] },
      o.finished > 0
        ? this.doc.send(
            new QueryCommand({
              TableName: this.table,
              IndexName: GSI1.name,
              KeyConditionExpression: `${GSI1.pk} = :e`,
              ExpressionAttributeValues: { ':e': ENDED },
              ScanIndexForward: false,
              Limit: o.finished,
            }),
          )
        : { Items: [] },
    ]);
    const candidates = new Set([...running.map((i) => String(i.sk)), ...recent.items.map((i) => String(i.sk)).map((sk) => sk.slice(sk.indexOf('#') + 1))]);
    const heads = (
      await batchGetAll(
        this.doc,
        this.table,
        [...candidates].map((id) => ({ pk: rolloutPk(id), sk: 'ROLLOUT' })),
      )
    ).map(rolloutOf);
    const live = heads
      .filter((r) => r.state === 'running' || r.state === 'paused')
      .sort((a, b) => b.updatedAt - a.updatedAt || b.id.localeCompare(a.id))
      .slice(0, o.live)
      .map((r) => r.id);
    // A rollout retried since it ended may still be listed under ENDED for a moment: shown once, as live.
    const finished = (ended.Items ?? []).map((i) => String(i.sk)).filter((id) => !live.includes(id));
    return [...live, ...finished];
  }

  async transitions(rolloutIds: readonly string[], limit: number): Promise<Map<string, RolloutEvent[]>> {
    const lists = await mapLimit(rolloutIds, CONCURRENCY, async (id) => {
      const items = await queryAll(this.doc, {
        TableName: this.table,
        KeyConditionExpression: 'pk = :p AND begins_with(sk, :e)',
        ExpressionAttributeValues: { ':p': rolloutPk(id), ':e': 'EVENT#' },
        ConsistentRead: true,
      });
      // History order is `order` (the rollout's version, then the event's place in its transition), newest first.
      const newest = items.sort((a, b) => String(b.order).localeCompare(String(a.order))).slice(0, limit);
      return [id, newest.map((i) => withoutReadings(eventOf(i)))] as const;
    });
    return new Map(lists.filter(([, events]) => events.length > 0));
  }

  async runs(limit: number): Promise<RunFigures[]> {
    if (limit < 1) return [];
    const page = await listPage(this.doc, this.table, ALL_RUNS, limit, null);
    const ids = page.items.map((i) => String(i.id));
    const records = new Map(
      (
        await batchGetAll(
          this.doc,
          this.table,
          ids.map((id) => ({ pk: runPk(id), sk: 'RUN' })),
        )
      ).map((r) => [String(r.id), r]),
    );
    const shown = ids.filter((id) => records.has(id));
    const drains = await mapLimit(shown, CONCURRENCY, (id) => this.drains(id));
    return shown.map((id, i) => {
      const r = records.get(id)!;
      return { id, createdAt: Number(r.createdAt), coordinatorEpoch: Number(r.coordinatorEpoch), steals: null, drains: drains[i]! };
    });
  }

  /** The run's workers asked to drain: its roster (RUN#<run>#WORKERS), then each worker's record on its instance. */
  private async drains(runId: string): Promise<number> {
    const roster = await queryAll(this.doc, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :p AND begins_with(sk, :w)',
      ExpressionAttributeValues: { ':p': `${runPk(runId)}#WORKERS`, ':w': 'WORKER#' },
      ConsistentRead: true,
    });
    const records = await batchGetAll(
      this.doc,
      this.table,
      roster
        .filter((e) => typeof e.instanceId === 'string')
        .map((e) => ({
          pk: instancePartition(String(e.instanceId)),
          sk: `WORKER#${encodeURIComponent(runId)}#${encodeURIComponent(String(e.workerId))}`,
        })),
    );
    return records.filter((r) => r.drain !== undefined && r.drain !== null).length;
  }

  async failures(runIds: readonly string[], o: { readonly limit: number; readonly reasonChars: number }): Promise<Map<string, FailedItem[]>> {
    const lists = await mapLimit(runIds, CONCURRENCY, async (runId) => [runId, await this.newestFailed(runId, o)] as const);
    return new Map(lists.filter(([, items]) => items.length > 0));
  }

  private async newestFailed(runId: string, o: { readonly limit: number; readonly reasonChars: number }): Promise<FailedItem[]> {
    const records = await batchGetAll(this.doc, this.table, [{ pk: runPk(runId), sk: 'RUN' }]);
    const run = records[0];
    if (!run || o.limit < 1) return [];
    const keys = runKeys(runId, run.shards === undefined ? null : Number(run.shards));
    const entries: Item[] = [];
    for (const key of keys.failedKeys) {
      if (entries.length >= FAILED_READ) break;
      entries.push(
        ...(await queryAll(
          this.doc,
          { TableName: this.table, IndexName: GSI1.name, KeyConditionExpression: `${GSI1.pk} = :k`, ExpressionAttributeValues: { ':k': key } },
          FAILED_READ - entries.length,
        )),
      );
    }
    // The index carries neither the reason nor when: the items themselves, read consistently (and still failed: the index lags).
    const items = await batchGetAll(
      this.doc,
      this.table,
      entries.map((e) => ({ pk: e.pk, sk: e.sk })),
    );
    return items
      .filter((i) => i.state === 'failed')
      .map((i) => ({
        id: String(i.id),
        error: typeof i.error === 'string' ? [...i.error].slice(0, o.reasonChars).join('') : null,
        attempts: Number(i.attempts ?? 0),
        worker: typeof i.worker === 'string' ? i.worker : null,
        at: Number(i.updatedAt),
      }))
      .sort((a, b) => b.at - a.at || b.id.localeCompare(a.id))
      .slice(0, o.limit);
  }

  async unaddressable(): Promise<{ kind: 'rollout' | 'run'; id: string }[]> {
    const dots = ['.', '..'];
    const found = await batchGetAll(this.doc, this.table, [
      ...dots.map((id) => ({ pk: rolloutPk(id), sk: 'ROLLOUT' })),
      ...dots.map((id) => ({ pk: runPk(id), sk: 'RUN' })),
    ]);
    const has = (pk: string) => found.some((i) => i.pk === pk);
    return [
      ...dots.filter((id) => has(rolloutPk(id))).map((id) => ({ kind: 'rollout' as const, id })),
      ...dots.filter((id) => has(runPk(id))).map((id) => ({ kind: 'run' as const, id })),
    ];
  }
}

/** The event as the page lists it: what, who, when and why, without the readings, metrics and labels it carries. */
function withoutReadings(e: RolloutEvent): RolloutEvent {
  const detail = Object.fromEntries(Object.entries(e.detail).filter(([k]) => k !== 'readings' && k !== 'metrics' && k !== 'labels'));
  return { ...e, detail: detail as unknown as RolloutEvent['detail'] };
}
