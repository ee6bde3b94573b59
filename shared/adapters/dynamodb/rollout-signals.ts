import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../../concurrency.js';
import { StoreContendedError } from '../../errors.js';
import { READING_RETENTION_DAYS, tallyWith, type GateReading, type GateTally, type ReadingSeries, type ReadingToStore } from '../../rollout/gates.js';
import type { AlarmState, RolloutView, StageMetrics } from '../../rollout/model.js';
import { stageIndexOf, stageProviders, type RolloutSpec } from '../../rollout/spec.js';
import { beforeRolloutHooks } from '../../rollout/gate-spec.js';
import {
  UnknownRolloutError,
  type CohortReportsQuery,
  type CountedReading,
  type GateReadingsQuery,
  type MetricsTarget,
  type SignalOutcome,
} from '../../rollout/store.js';
import { queryAll, batchPut } from './query.js';
import type { DueIndex } from './rollout-due.js';
import { cohortOf, unknownVersion, type CohortReport, type CohortReportInput } from '../../rollout/cohort-signals.js';
import { InvalidEventError } from '../../rollout/inbound.js';
import {
  cohortReportPrefix,
  cohortReportSk,
  metricsSk,
  pad,
  readingPrefix,
  readingSk,
  rolloutPk,
  seriesSk,
  TALLY_ATTEMPTS,
  tallySk,
  type RolloutTable,
} from './rollout-items.js';
import type { RolloutReads } from './rollout-reads.js';

/** The signals a rollout's gates read: stage metrics, alarm states, provider readings and their tallies; each stored one makes its rollouts due. */
export class RolloutSignals {
  constructor(
    private readonly t: RolloutTable,
    private readonly reads: RolloutReads,
    private readonly due: DueIndex,
  ) {}

  /** The rollout row's attempt and spec (what resolves a signal's stage and attempt), read strongly; null for an unknown rollout. */
  private async head(rolloutId: string): Promise<{ attempt: number; spec: RolloutSpec } | null> {
    const got = await this.t.doc.send(
      new GetCommand({
        TableName: this.t.table,
        Key: { pk: rolloutPk(rolloutId), sk: 'ROLLOUT' },
        ProjectionExpression: 'attempt, spec',
        ConsistentRead: true,
      }),
    );
    return got.Item ? { attempt: Number(got.Item.attempt), spec: got.Item.spec as RolloutSpec } : null;
  }

  async recordMetrics(rolloutId: string, at: MetricsTarget, m: StageMetrics): Promise<SignalOutcome> {
    const head = await this.head(rolloutId);
    if (!head) throw new UnknownRolloutError(rolloutId);
    const { outcome } = await this.putMetrics(rolloutId, head.spec, head.attempt, at, m);
    await this.due.markDue([rolloutId]);
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
      await this.t.doc.send(
        new PutCommand({
          TableName: this.t.table,
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
    const before = await this.reads.load(rolloutId);
    if (!before) throw new UnknownRolloutError(rolloutId);
    const { outcome, stage, attempt } = await this.putMetrics(rolloutId, before.rollout.spec, before.rollout.attempt, at, m);
    await this.due.markDue([rolloutId]);
    if (outcome === 'stale') return { outcome, view: (await this.reads.load(rolloutId))! };
    if (attempt === before.rollout.attempt) (before.metrics as Map<number, StageMetrics>).set(stage, m);
    return { outcome, view: before };
  }

  async recordCohortReport(rolloutId: string, at: MetricsTarget, r: CohortReportInput): Promise<SignalOutcome> {
    const head = await this.head(rolloutId);
    if (!head) throw new UnknownRolloutError(rolloutId);
    const { spec } = head;
    const stage = stageIndexOf(spec, at.stage);
    if (stage === null) throw new UnknownRolloutError(rolloutId, at.stage);
    const cohort = cohortOf(spec, r.cohort);
    if (cohort === null) throw new InvalidEventError([unknownVersion(spec, typeof r.cohort === 'string' ? r.cohort : r.cohort.version)]);
    const attempt = at.attempt ?? head.attempt;
    const report: CohortReport = { ...r, cohort };
    try {
      await this.t.doc.send(
        new PutCommand({
          TableName: this.t.table,
          Item: {
            pk: rolloutPk(rolloutId),
            sk: cohortReportSk(attempt, stage, r.observedAt, cohort, r.reporter),
            type: 'cohortReport',
            report,
            // Kept as long as gate readings are: what a backtest reads of a stage is gone by then in any case.
            ttl: Math.floor(r.observedAt / 1000) + READING_RETENTION_DAYS * 86_400,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return 'stored';
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return 'stale';
      throw err;
    }
  }

  async cohortReports(rolloutId: string, attempt: number, stage: number, o: CohortReportsQuery): Promise<CohortReport[]> {
    const prefix = cohortReportPrefix(attempt, stage);
    const fields = ['cohort', 'reporter', 'requests', 'errors', 'observedAt', ...(o.samples ? ['samples'] : [])];
    const items = await queryAll(
      this.t.doc,
      {
        TableName: this.t.table,
        KeyConditionExpression: 'pk = :p AND sk BETWEEN :from AND :to',
        ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':from': `${prefix}${pad(Math.max(0, o.since), 15)}`, ':to': `${prefix}~` },
        // Samples are most of a report's bytes: a counting gate leaves them in the table.
        ProjectionExpression: fields.map((_, i) => `#r.#f${i}`).join(', '),
        ExpressionAttributeNames: { '#r': 'report', ...Object.fromEntries(fields.map((f, i) => [`#f${i}`, f])) },
        ScanIndexForward: o.order === 'oldest',
        ConsistentRead: true,
      },
      o.limit,
    );
    return items.map((i) => {
      const r = i.report as Omit<CohortReport, 'samples'> & { samples?: number[] | null };
      return { ...r, samples: r.samples ?? null };
    });
  }

  async recordAlarm(name: string, state: AlarmState, changedAt: number): Promise<SignalOutcome> {
    let outcome: SignalOutcome = 'stored';
    try {
      await this.t.doc.send(
        new PutCommand({
          TableName: this.t.table,
          Item: { pk: `ALARM#${name}`, sk: 'ALARM', type: 'alarm', name, state, changedAt },
          ConditionExpression: 'attribute_not_exists(pk) OR changedAt < :c',
          ExpressionAttributeValues: { ':c': changedAt },
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      outcome = 'stale';
    }
    await this.due.markDue(await this.reads.watching(name));
    return outcome;
  }

  async recordGateReadings(readings: readonly ReadingToStore[]): Promise<CountedReading[]> {
    // Readings of one gate in order, one after another (each tally after its own reading, the last one standing); gates in parallel.
    const byTally = new Map<string, ReadingToStore[]>();
    for (const r of readings) {
      const key = JSON.stringify([r.rolloutId, r.reading.attempt, r.reading.stage, r.reading.gate]);
      byTally.set(key, [...(byTally.get(key) ?? []), r]);
    }
    const counted = await mapLimit([...byTally.values()], this.t.readConcurrency, async (same) => {
      const out: CountedReading[] = [];
      for (const r of same) {
        const tally = await this.countReading(r, same.length > 1 ? undefined : r.prior);
        if (tally) out.push({ rolloutId: r.rolloutId, tally });
      }
      return out;
    });
    // The history is for people, not decisions: written after the counts, in batches, whatever they said.
    const ttl = (reading: GateReading) => Math.floor(reading.at / 1000) + READING_RETENTION_DAYS * 86_400;
    await batchPut(this.t.doc, this.t.table, [
      ...readings.map(({ rolloutId, reading }) => ({ pk: rolloutPk(rolloutId), sk: readingSk(reading), type: 'reading', reading, ttl: ttl(reading) })),
      ...readings.flatMap(({ rolloutId, reading, series }) =>
        series ? [{ pk: rolloutPk(rolloutId), sk: seriesSk(reading), type: 'series', series, ttl: ttl(reading) }] : [],
      ),
    ]);
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
      (await this.t.doc.send(new GetCommand({ TableName: this.t.table, Key: key, ConsistentRead: true }))).Item?.tally as GateTally | undefined;
    let current = prior === undefined ? await read() : (prior ?? undefined);
    for (let attempt = 0; attempt < TALLY_ATTEMPTS; attempt++) {
      const next = tallyWith(current, reading, origin);
      if (next === null) return null;
      try {
        await this.t.doc.send(
          new PutCommand({
            TableName: this.t.table,
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

  async gateReadings(rolloutId: string, o: GateReadingsQuery = {}): Promise<GateReading[]> {
    const head = await this.head(rolloutId);
    if (!head) return [];
    const attempt = o.attempt ?? head.attempt;
    const { spec } = head;
    // Stage 0 also counts the spec's before-rollout hooks.
    const gates = spec.stages
      .flatMap((_, i) => [...(i === 0 ? beforeRolloutHooks(spec.hooks) : []), ...stageProviders(spec, i)].map((g) => ({ stage: i, gate: g.name })))
      .filter((g) => o.gate === undefined || g.gate === o.gate);
    // One query per gate, newest first, so a long bake's history is never read in full.
    const perGate = await mapLimit(gates, this.t.readConcurrency, ({ stage, gate }) =>
      queryAll(
        this.t.doc,
        {
          TableName: this.t.table,
          KeyConditionExpression: 'pk = :p AND begins_with(sk, :r)',
          ExpressionAttributeValues: { ':p': rolloutPk(rolloutId), ':r': `${readingPrefix(attempt)}${pad(stage, 3)}#${gate}#` },
          ScanIndexForward: false,
        },
        o.perGate ?? 50,
      ),
    );
    const readings = perGate.map((items) => items.map((i) => i.reading as GateReading));
    if (!o.series) return readings.flat();
    // The series are items of their own, under the same keys: each gate's newest one, or as many as its readings.
    const series = await mapLimit(gates, this.t.readConcurrency, (_gate, i) =>
      readings[i]!.length
        ? queryAll(
            this.t.doc,
            {
              TableName: this.t.table,
              KeyConditionExpression: 'pk = :p AND sk BETWEEN :from AND :to',
              ExpressionAttributeValues: {
                ':p': rolloutPk(rolloutId),
                ':from': seriesSk(readings[i]!.at(-1)!),
                ':to': seriesSk(readings[i]![0]!),
              },
              ScanIndexForward: false,
            },
            o.series === 'newest' ? 1 : readings[i]!.length,
          )
        : Promise.resolve([]),
    );
    return readings.flatMap((list, i) => {
      const kept = new Map(series[i]!.map((item) => [String(item.sk), item.series as ReadingSeries]));
      return list.map((r, n) => {
        const s = o.series === 'newest' && n > 0 ? undefined : kept.get(seriesSk(r));
        return s ? { ...r, series: s } : r;
      });
    });
  }
}
