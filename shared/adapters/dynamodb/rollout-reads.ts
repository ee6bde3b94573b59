import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import type { GateTally } from '../../rollout/gates.js';
import { alarmNamesOf, talliesByStage, type AlarmState, type Rollout, type RolloutView, type StageMetrics } from '../../rollout/model.js';
import type { RolloutListQuery, RolloutPage } from '../../rollout/store.js';
import { batchGetAll, listCursor, listPage, listStart, queryAll, type Projection } from './query.js';
import { metricsSk, orNull, rolloutOf, rolloutPk, ROLLOUTS, stageOf, stageSk, tallySk, type Item, type RolloutTable } from './rollout-items.js';
import { beforeRolloutHooks } from '../../rollout/gate-spec.js';
import { stageProviders, type RolloutSpec } from '../../rollout/spec.js';

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
    return (await this.views(ids, { running: true })).filter((v) => v.rollout.state === 'running');
  }

  async loadWatching(alarm: string): Promise<RolloutView[]> {
    return (await this.views(await this.watching(alarm), { running: true })).filter(
      (v) => v.rollout.state === 'running' && alarmNamesOf(v.rollout.spec).includes(alarm),
    );
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

  /**
   * Each rollout's view (none for a rollout that does not exist), alarms
   * read in one batch. A few at a time: one query a rollout (rollout, stages,
   * metrics, tallies; events and readings sort before and are skipped). More
   * than a round of those queries (a tick's due rollouts): in batches
   * (viewsInBatches), a few requests for them all.
   */
  async views(ids: readonly string[], o: ViewsOptions = {}): Promise<RolloutView[]> {
    const parts = ids.length > this.t.readConcurrency || o.rows ? await this.viewsInBatches(ids, o) : await this.partitions(ids);
    const views: Omit<RolloutView, 'alarms'>[] = [];
    for (const items of parts) {
      const view = viewOf(items);
      if (view) views.push(view);
    }
    const alarms = await this.alarms([...new Set(views.flatMap((v) => alarmNamesOf(v.rollout.spec)))]);
    return views.map((v) => {
      const own = alarmNamesOf(v.rollout.spec);
      return { ...v, alarms: Object.fromEntries(own.filter((n) => alarms.has(n)).map((n) => [n, alarms.get(n)!])) };
    });
  }

  /** The items a view is made of, one query a rollout. */
  private partitions(ids: readonly string[]): Promise<Item[][]> {
    return mapLimit(ids, this.t.readConcurrency, (id) =>
      queryAll(this.t.doc, {
        TableName: this.t.table,
        KeyConditionExpression: 'pk = :p AND sk >= :from',
        ExpressionAttributeValues: { ':p': rolloutPk(id), ':from': 'METRICS#' },
        ConsistentRead: true,
      }),
    );
  }

  /**
   * The items of many views by key, 100 to a BatchGetItem, instead of a query
   * each: the rollout rows, then what each row's spec says its view holds
   * (viewKeys), then the rows' versions again. A rollout whose version moved
   * in between (a transition committed while its items were read) is read
   * again by its query, so every view is of one version of its rollout, as a
   * query's is. `running`: a rollout not running needs no view (a tick's), its items are not read.
   * `rows`: each row as first read, before the rest of its view (its due mark, for loadDue).
   *
   * Costs more read capacity than the queries (each key is a read of its
   * own, one for a missing item too); it is used where many rollouts are read
   * at once.
   */
  private async viewsInBatches(ids: readonly string[], o: ViewsOptions): Promise<Item[][]> {
    const rowKey = (id: string) => ({ pk: rolloutPk(id), sk: 'ROLLOUT' });
    const rows = (await this.batchGet([...new Set(ids)].map(rowKey))).filter((r) => !o.running || r.state === 'running');
    for (const r of rows) o.rows?.set(String(r.id), r);
    const items = await this.batchGet(rows.flatMap((r) => viewKeys(String(r.id), r.spec as RolloutSpec, Number(r.attempt))));
    const again = new Map(
      (
        await this.batchGet(
          rows.map((r) => rowKey(String(r.id))),
          { expression: '#i, #v', names: { '#i': 'id', '#v': 'version' } },
        )
      ).map((r) => [String(r.id), Number(r.version)]),
    );
    const byPk = new Map<string, Item[]>(rows.map((r) => [String(r.pk), [r]]));
    for (const i of items) byPk.get(String(i.pk))?.push(i);
    const moved = rows.filter((r) => again.get(String(r.id)) !== Number(r.version)).map((r) => String(r.id));
    const reread = await this.partitions(moved);
    moved.forEach((id, i) => byPk.set(rolloutPk(id), reread[i]!));
    // In the order asked, as the queries answer.
    return [...new Set(ids)].flatMap((id) => {
      const parts = byPk.get(rolloutPk(id));
      return parts ? [parts] : [];
    });
  }

  /** batchGetAll, several requests at once. */
  private async batchGet(keys: readonly Item[], projection?: Projection): Promise<Item[]> {
    const chunks = Array.from({ length: Math.ceil(keys.length / 100) }, (_, i) => keys.slice(i * 100, (i + 1) * 100));
    const got = await mapLimit(chunks, Math.max(1, Math.ceil(this.t.readConcurrency / 4)), (chunk) =>
      batchGetAll(this.t.doc, this.t.table, chunk, undefined, projection),
    );
    return got.flat();
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

interface ViewsOptions {
  /** Only running rollouts' views: the items of others are not read. */
  readonly running?: boolean;
  /** Filled with each row as first read, before the rest of its view; views are then read in batches whatever their number. */
  readonly rows?: Map<string, Item>;
}

/** A view (without its alarms) from its rollout's items: the row, and its attempt's stages, metrics and tallies. Null without the row. */
function viewOf(items: readonly Item[]): Omit<RolloutView, 'alarms'> | null {
  const head = items.find((i) => i.sk === 'ROLLOUT');
  if (!head) return null;
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
  return { rollout, stages, metrics, gates: talliesByStage(tallies) };
}

/**
 * The keys of what a rollout's view holds besides its row, from its spec:
 * each stage of the attempt, its metrics, and a tally for each gate the
 * evaluation reads at that stage (its providers, the rollout-wide ones
 * included, and at stage 0 the before-rollout hooks): every tally a gate
 * reader writes.
 */
export function viewKeys(id: string, spec: RolloutSpec, attempt: number): Item[] {
  const pk = rolloutPk(id);
  return spec.stages.flatMap((_, i) => [
    { pk, sk: stageSk(attempt, i) },
    { pk, sk: metricsSk(attempt, i) },
    ...[...new Set([...(i === 0 ? beforeRolloutHooks(spec.hooks) : []), ...stageProviders(spec, i)].map((g) => g.name))].map((gate) => ({
      pk,
      sk: tallySk(attempt, i, gate),
    })),
  ]);
}
