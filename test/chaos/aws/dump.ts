/**
 * The table as it stands after a schedule, read with a plain consistent Scan
 * (the observer's own client, straight from DynamoDB Local) and mapped onto
 * the history's rows by the single-table layout alone.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { EventRow, ItemRow, ItemState, RolloutRow, RunRow, StagePhase } from '../history.js';

type Plain = Record<string, unknown>;

export interface TableRows {
  readonly rollouts: RolloutRow[];
  readonly runs: RunRow[];
  readonly items: ItemRow[];
  readonly events: EventRow[];
}

export async function scanTable(client: DynamoDBClient, table: string): Promise<Plain[]> {
  const out: Plain[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start }));
    for (const item of page.Items ?? []) out.push(unmarshall(item));
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (v === undefined || v === null ? null : Number(v));

/** `toSchedule` turns a wall-clock stamp the store holds into the schedule's clock. */
export function rowsOf(items: readonly Plain[], toSchedule: (wallMs: number) => number): TableRows {
  const pk = (i: Plain) => String(i.pk);
  const sk = (i: Plain) => String(i.sk);
  const stagesBy = new Map<string, Plain[]>();
  const itemsBy = new Map<string, Plain[]>();
  for (const i of items) {
    if (pk(i).startsWith('ROLLOUT#') && sk(i).startsWith('STAGE#')) stagesBy.set(pk(i), [...(stagesBy.get(pk(i)) ?? []), i]);
    // Items by run, whatever shard of it they are in (RUN#<run>#<shard>).
    if (pk(i).startsWith('RUN#') && sk(i).startsWith('ITEM#')) itemsBy.set(String(i.runId), [...(itemsBy.get(String(i.runId)) ?? []), i]);
  }
  const rollouts: RolloutRow[] = items
    .filter((i) => pk(i).startsWith('ROLLOUT#') && sk(i) === 'ROLLOUT')
    .map((r) => {
      const spec = (r.spec ?? {}) as { target?: { labels?: Record<string, string> } };
      const stages = (stagesBy.get(pk(r)) ?? [])
        .map((s) => {
          const activatedAt = num(s.activatedAt);
          return {
            attempt: Number(s.attempt),
            index: Number(s.index),
            name: String(s.name),
            phase: s.phase as StagePhase,
            promotedEpoch: num(s.promotedEpoch),
            promotedBy: str(s.promotedBy),
            activatedAt: activatedAt === null ? null : toSchedule(activatedAt),
          };
        })
        .sort((a, b) => a.attempt - b.attempt || a.index - b.index);
      return { id: String(r.id), state: String(r.state), attempt: Number(r.attempt), reason: str(r.stateReason), labels: spec.target?.labels ?? {}, stages };
    })
    .sort((a, b) => a.id.localeCompare(b.id));
  const runs: RunRow[] = items
    .filter((i) => pk(i).startsWith('RUN#') && sk(i) === 'RUN')
    .map((r) => ({ id: String(r.id), items: (itemsBy.get(String(r.id)) ?? []).length }))
    .sort((a, b) => a.id.localeCompare(b.id));
  const workItems: ItemRow[] = [...itemsBy.values()].flat().map((i) => ({
    runId: String(i.runId),
    id: String(i.id),
    state: i.state as ItemState,
    worker: str(i.worker),
    resultHash: str(i.resultHash),
    error: str(i.error),
    attempts: Number(i.attempts ?? 0),
    // SQS keeps no record we could read without consuming it: a Pending item has a message on record when it was recorded as sent.
    hasMessage: i.state === 'pending' && num(i.sentAt) !== null,
  }));
  const events: EventRow[] = items
    .filter((i) => pk(i).startsWith('ROLLOUT#') && sk(i).startsWith('EVENT#'))
    // Within a rollout the store's own order (its version order); across rollouts, by time.
    .sort((a, b) => Number(a.time) - Number(b.time) || pk(a).localeCompare(pk(b)) || String(a.order).localeCompare(String(b.order)))
    .map((e, i) => {
      const published = num(e.publishedAt);
      return {
        seq: i + 1,
        rolloutId: pk(e).slice('ROLLOUT#'.length),
        detailType: String(e.detailType),
        detail: (e.detail ?? {}) as Record<string, unknown>,
        at: toSchedule(Number(e.time)),
        publishedAt: published === null ? null : toSchedule(published),
      };
    });
  return { rollouts, runs, items: workItems, events };
}
