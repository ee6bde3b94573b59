import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.js';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RolloutEvent } from '../../rollout/events.js';
import type { GateReading } from '../../rollout/gates.js';
import { alarmNamesOf, type Rollout, type StageStatus } from '../../rollout/model.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import { GSI1 } from './table.js';

/** What every part of the rollout store shares (rollout-store.ts): the client, the table, how many reads fan out at once, the clock. */
export interface RolloutTable {
  readonly doc: DynamoDBDocumentClient;
  readonly table: string;
  readonly readConcurrency: number;
  readonly clock: Clock;
}

/* The keys of the rollout items (the layout in rollout-store.ts) and their codecs. */

export const pad = (n: number, w: number) => String(n).padStart(w, '0');
export const rolloutPk = (id: string) => `ROLLOUT#${id}`;
/** The list of every rollout: ROLLOUTS / <createdAt, 15 digits>#<id>. */
export const ROLLOUTS = 'ROLLOUTS';
export const listSk = (r: Pick<Rollout, 'createdAt' | 'id'>) => `${pad(r.createdAt, 15)}#${r.id}`;
export const stageSk = (attempt: number, i: number) => `STAGE#${pad(attempt, 6)}#${pad(i, 3)}`;
export const metricsSk = (attempt: number, i: number) => `METRICS#${pad(attempt, 6)}#${pad(i, 3)}`;
// A view reads sk >= METRICS#: tallies (T…) are in it, the reading history (G…) and events (E…) are not.
export const tallySk = (attempt: number, i: number, gate: string) => `TALLY#${pad(attempt, 6)}#${pad(i, 3)}#${gate}`;
export const readingPrefix = (attempt: number) => `GATEREADING#${pad(attempt, 6)}#`;
export const readingSk = (r: GateReading) => `${readingPrefix(r.attempt)}${pad(r.stage, 3)}#${r.gate}#${pad(r.at, 15)}`;
// A judged reading's series, beside its reading (G…: outside a view's range too), in an item of its own so that reading the history does not read them.
export const seriesPrefix = (attempt: number) => `GATESERIES#${pad(attempt, 6)}#`;
export const seriesSk = (r: GateReading) => `${seriesPrefix(r.attempt)}${pad(r.stage, 3)}#${r.gate}#${pad(r.at, 15)}`;
/**
 * A cohort's report (cohort-signals.ts): one item per (stage, observedAt, cohort, reporter), so a report delivered again is one
 * item. C… sorts before a view's range (>= METRICS#); by time within a stage, so a gate reads from its window's start.
 */
export const cohortReportPrefix = (attempt: number, stage: number) => `COHORTREPORT#${pad(attempt, 6)}#${pad(stage, 3)}#`;
export const cohortReportSk = (attempt: number, stage: number, observedAt: number, cohort: string, reporter: string) =>
  `${cohortReportPrefix(attempt, stage)}${pad(observedAt, 15)}#${cohort}#${reporter}`;
/** A tally is read, recomputed by tallyWith and written back only if unchanged: this many tries before giving up. */
export const TALLY_ATTEMPTS = 8;
export const OUTBOX = 'OUTBOX';
export const ACTUATION = 'ACTUATION#';
export const ACTUATING = 'ACTUATING';
/**
 * The due index (gsi1 under DUE, sorted by when): a running rollout's row
 * carries when it is next due (0: at once) and a mark that every signal and
 * transition replaces, so a reschedule decided on an older reading is
 * refused. On the row itself, a transition's Put of the row makes it due in
 * the same item (no item of its own a promotion).
 *
 * The previous release kept them on the registry item (RUNNING / <id>,
 * entries DUE / <when>#<id> with pk RUNNING). Such entries are still read
 * (loadDue: the legacy layout) and moved onto the row when rescheduled, so a
 * table written by that release, or by its functions still running during
 * the upgrade, loses no due rollout.
 */
export const DUE = 'DUE';
/** ENDED / <id>: a rollout that ended, indexed on gsi1 as ENDED / <when>#<id>, so retention finds the oldest without a scan. */
export const ENDED = 'ENDED';
export const endedItem = (r: Rollout): Item => ({ pk: ENDED, sk: r.id, endedAt: r.updatedAt, [GSI1.pk]: ENDED, [GSI1.sk]: `${pad(r.updatedAt, 15)}#${r.id}` });
export const dueSk = (at: number, id: string) => `${pad(at, 15)}#${id}`;
export const dueNow = (id: string): Item => ({ dueAt: 0, mark: randomUUID(), [GSI1.pk]: DUE, [GSI1.sk]: dueSk(0, id) });
export const rolloutKey = (id: string) => ({ pk: rolloutPk(id), sk: 'ROLLOUT' });
/**
 * A running rollout's registry item: the spec never changes, so the alarms it watches are written with it once.
 * `dueOnRow`: its due time is on its row (the previous release's registry items have none, and carry it themselves).
 */
export const runningItem = (id: string, spec: RolloutSpec): Item => ({
  pk: 'RUNNING',
  sk: id,
  watches: alarmNamesOf(spec),
  watchIndexed: true,
  dueOnRow: true,
});
/** WATCH#<alarm> / <id>: who watches an alarm, so an alarm's change reads its watchers only (filtered by RUNNING: kept while the rollout is). */
export const watchItems = (id: string, spec: RolloutSpec): Item[] => alarmNamesOf(spec).map((a) => ({ pk: `WATCH#${a}`, sk: id }));
/** The row's update that makes a running rollout due at once (a rollout not running is left alone). */
export const markDueUpdate = (id: string) => {
  const due = dueNow(id);
  return {
    Key: rolloutKey(id),
    UpdateExpression: 'SET dueAt = :at, #m = :m, #gp = :gp, #gs = :gs',
    ConditionExpression: '#state = :running',
    ExpressionAttributeNames: { '#m': 'mark', '#gp': GSI1.pk, '#gs': GSI1.sk, '#state': 'state' },
    ExpressionAttributeValues: { ':at': due.dueAt, ':m': due.mark, ':gp': DUE, ':gs': due[GSI1.sk], ':running': 'running' },
  };
};

export type Item = Record<string, unknown>;
export const orNull = <T>(v: unknown): T | null => (v === undefined ? null : (v as T));

export function rolloutItem(r: Rollout): Item {
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
    // Running: due at once, under a new mark (the due index, above); otherwise in no index.
    ...(r.state === 'running' ? dueNow(r.id) : {}),
  };
}

export function rolloutOf(i: Item): Rollout {
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

export function stageItem(id: string, attempt: number, s: StageStatus): Item {
  return { pk: rolloutPk(id), sk: stageSk(attempt, s.index), type: 'stage', attempt, ...s };
}

export function stageOf(i: Item): StageStatus {
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

export function eventOf(i: Item): RolloutEvent {
  return {
    id: String(i.id),
    source: 'ai.rollout',
    detailType: i.detailType as RolloutEvent['detailType'],
    time: Number(i.time),
    detail: i.detail as RolloutEvent['detail'],
  };
}
