import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { GetCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { canonicalJson } from '../../canonical-json.js';
import { FencedError } from '../../lease/fencing.js';
import type { LeaseToken } from '../../lease/record.js';
import { signalsRead } from '../../rollout/evaluate.js';
import { TERMINAL_STATES, type Rollout, type RolloutView, type StageMetrics } from '../../rollout/model.js';
import type { RolloutSpec } from '../../rollout/spec.js';
import { RolloutConflictError, type HeldReading, type MetricsTarget, type ReadingApplied } from '../../rollout/store.js';
import { freshStages, type TransitionPlan } from '../../rollout/transitions.js';
import { own } from '../../own.js';
import { transactWrite } from './conflicts.js';
import { WriteConditionFailedError } from './fence.js';
import { FencedBatches } from './fenced-batch.js';
import { batchPut } from './query.js';
import {
  ENDED,
  endedItem,
  listSk,
  metricsSk,
  OUTBOX,
  pad,
  ROLLOUTS,
  rolloutItem,
  rolloutPk,
  runningItem,
  stageItem,
  stageSk,
  tallySk,
  watchItems,
  type Item,
  type RolloutTable,
} from './rollout-items.js';
import type { RolloutSignals } from './rollout-signals.js';
import { GSI1 } from './table.js';

/**
 * A rollout's transitions: its creation, and every plan applied as one
 * fenced transaction conditioned on the state it was made on (with the
 * reading it was decided on, when there is one).
 */
export class RolloutTransitions {
  /** Transitions written at once (a tick's) go in as few transactions as they fit, each still fenced and conditioned as alone. */
  private readonly fenced: FencedBatches;

  constructor(
    private readonly t: RolloutTable,
    private readonly signals: RolloutSignals,
  ) {
    this.fenced = new FencedBatches(t.doc, t.table);
  }

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
    await batchPut(this.t.doc, this.t.table, watchItems(id, spec));
    try {
      // A second create of the same id in flight at once conflicts: retried, it then finds the first.
      await transactWrite(this.t.doc, {
        TransactItems: [
          { Put: { TableName: this.t.table, Item: rolloutItem(rollout), ConditionExpression: 'attribute_not_exists(pk)' } },
          ...freshStages({ rollout }).map((s) => ({ Put: { TableName: this.t.table, Item: stageItem(id, 1, s) } })),
          { Put: { TableName: this.t.table, Item: runningItem(id, spec) } },
          // The list of every rollout, newest last by key (read newest first): one small item per rollout, never rewritten.
          { Put: { TableName: this.t.table, Item: { pk: ROLLOUTS, sk: listSk(rollout) } } },
        ],
      });
      return { created: true };
    } catch (err) {
      if (!(err instanceof TransactionCanceledException) || err.CancellationReasons?.[0]?.Code !== 'ConditionalCheckFailed') throw err;
      const existing = await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: { pk: rolloutPk(id), sk: 'ROLLOUT' }, ConsistentRead: true }));
      // Key order does not survive a DynamoDB map: compare specs canonically.
      if (!existing.Item || canonicalJson(existing.Item.spec) !== canonicalJson(spec)) throw new RolloutConflictError(id);
      return { created: false };
    }
  }

  async apply(token: LeaseToken, plan: TransitionPlan): Promise<boolean> {
    try {
      await this.fenced.write(token, this.planItems(plan));
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
    const usual = async (): Promise<ReadingApplied> => ({ applied: false, ...(await this.signals.recordMetricsAndLoad(id, target, reading.metrics)) });
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
      await this.fenced.write(token, items);
      return { applied: true };
    } catch (err) {
      // Stored whoever leads, as a signal always is.
      if (err instanceof FencedError) await this.signals.recordMetrics(id, target, reading.metrics);
      if (!(err instanceof WriteConditionFailedError)) throw err;
    }
    return usual();
  }

  /** The reading of the held view's attempt, put only over the reading the view held (or none). */
  private metricsPut(id: string, attempt: number, reading: HeldReading, prior: StageMetrics | undefined) {
    return {
      Put: {
        TableName: this.t.table,
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
        TableName: this.t.table,
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
          TableName: this.t.table,
          Item: rolloutItem(next),
          // The rollout row exactly as evaluated. Left running, it is due at once in the same item (rolloutItem:
          // the due index is on the row), so the next tick looks at it from where it is now. Put whole: an update
          // of the changed fields alone (not the spec) measured slower on DynamoDB Local.
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
          TableName: this.t.table,
          Key: { pk: rolloutPk(id), sk: stageSk(expect.attempt, change.index) },
          UpdateExpression: `SET ${entries.map((_, i) => `#f${i} = :f${i}`).join(', ')}`,
          ConditionExpression: 'phase = :expectPhase',
          ExpressionAttributeNames: Object.fromEntries(entries.map(([k], i) => [`#f${i}`, k])),
          ExpressionAttributeValues: { ':expectPhase': change.expect, ...Object.fromEntries(entries.map(([, v], i) => [`:f${i}`, v])) },
        },
      });
    }
    for (const s of plan.newStages) {
      items.push({ Put: { TableName: this.t.table, Item: stageItem(id, next.attempt, s), ConditionExpression: 'attribute_not_exists(pk)' } });
    }
    plan.events.forEach((e, i) => {
      items.push({
        Put: {
          TableName: this.t.table,
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
    if (expect.state !== 'running' && next.state === 'running') items.push({ Put: { TableName: this.t.table, Item: runningItem(id, next.spec) } });
    const ended = (state: Rollout['state']) => TERMINAL_STATES.includes(state);
    if (!ended(expect.state) && ended(next.state)) items.push({ Put: { TableName: this.t.table, Item: endedItem(next) } });
    if (ended(expect.state) && !ended(next.state)) items.push({ Delete: { TableName: this.t.table, Key: { pk: ENDED, sk: id } } });
    if (expect.state === 'running' && next.state !== 'running') items.push({ Delete: { TableName: this.t.table, Key: { pk: 'RUNNING', sk: id } } });
    return items;
  }
}
