import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import type { GateTally } from '../../rollout/gates.js';
import { alarmNamesOf, talliesByStage, type AlarmState, type Rollout, type RolloutView, type StageMetrics } from '../../rollout/model.js';
import type { RolloutListQuery, RolloutPage } from '../../rollout/store.js';
import { batchGetAll, listCursor, listPage, listStart, queryAll } from './query.js';
import { orNull, rolloutOf, rolloutPk, ROLLOUTS, stageOf, type RolloutTable } from './rollout-items.js';

/** Rollouts read: one, a page of the list, the running ones, those watching an alarm; each view with its stages, signals and alarms. */
export class RolloutReads {
  constructor(private readonly t: RolloutTable) {}

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
      const page = await listPage(this.t.doc, this.t.table, ROLLOUTS, o.limit - out.length, start);
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
      this.t.doc,
      this.t.table,
      ids.map((id) => ({ pk: rolloutPk(id), sk: 'ROLLOUT' })),
    );
    return new Map(items.map((item) => [String(item.id), rolloutOf(item)]));
  }

  async anyRunning(): Promise<boolean> {
    const res = await this.t.doc.send(
      new QueryCommand({
        TableName: this.t.table,
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
    const registry = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': 'RUNNING' },
      ConsistentRead: true,
    });
    const ids = registry.map((i) => String(i.sk));
    return (await this.views(ids)).filter((v) => v.rollout.state === 'running');
  }

  async loadWatching(alarm: string): Promise<RolloutView[]> {
    return (await this.views(await this.watching(alarm))).filter((v) => v.rollout.state === 'running' && alarmNamesOf(v.rollout.spec).includes(alarm));
  }

  /** Ids of the running rollouts that watch `alarm`: its WATCH entries, kept if their rollout is in the registry. No rollout is read. */
  async watching(alarm: string): Promise<string[]> {
    const entries = await queryAll(this.t.doc, {
      TableName: this.t.table,
      KeyConditionExpression: 'pk = :p',
      ExpressionAttributeValues: { ':p': `WATCH#${alarm}` },
      ConsistentRead: true,
      ProjectionExpression: 'sk',
    });
    const running = await batchGetAll(
      this.t.doc,
      this.t.table,
      entries.map((e) => ({ pk: 'RUNNING', sk: String(e.sk) })),
    );
    return running.map((r) => String(r.sk));
  }

  /** One query per rollout (rollout, stages, metrics; events sort before and are skipped), then alarms in one batch. */
  async views(ids: readonly string[]): Promise<RolloutView[]> {
    const partitions = await mapLimit(ids, this.t.readConcurrency, (id) =>
      queryAll(this.t.doc, {
        TableName: this.t.table,
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
      this.t.doc,
      this.t.table,
      names.map((n) => ({ pk: `ALARM#${n}`, sk: 'ALARM' })),
    );
    return new Map(items.map((item) => [String(item.name), item.state as AlarmState]));
  }
}
