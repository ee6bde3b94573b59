import { Counter, Gauge, type Registry } from 'prom-client';
import {
  capRollouts,
  leftOutSamples,
  newestRollouts,
  METRICS,
  MAX_ROLLOUTS,
  MAX_RUNS,
  ROLLOUT_METRICS,
  RUN_METRICS,
  rolloutSamples,
  runSamples,
  type MetricSample,
  type MetricName,
} from '../../api/metrics.js';
import { movesTargets } from '../../rollout/engine.js';
import type { WorkItem } from '../../ledger/model.js';
import { errorMessage } from '../../log.js';
import type { ControlPlaneNode } from './node.js';

/**
 * What someone on call needs of rollouts and runs, on a node's /metrics
 * (docs/operating/observability.md#operating lists every series):
 *
 *   rollout_info, rollout_percent, rollout_stage_index, rollout_stage_seconds,
 *   rollout_last_progress_timestamp_seconds, rollout_progress_deadline_seconds,
 *   rollout_gate_value, rollout_gate_threshold, rollout_gate_readings,
 *   rollout_gate_judgement, rollout_gate_interval (judged gates),
 *   rollout_actuation_drift, rollout_actuation_state, rollout_actuation_lag_seconds,
 *   rollout_hook_answers                          per rollout running or paused
 *   rollout_events_total{type}                    transitions, by the event each emitted
 *   rollout_run_items{run,state}, rollout_run_steals, rollout_run_drains
 *                                                 per open run
 *   rollout_dead_letters_total                    items failed for their dead letters
 *   rollout_run_failures_total{reason}, rollout_run_repends_total
 *                                                 what this node's coordinators did
 *   rollout_metrics_left_out{kind}                rollouts and runs past the caps below
 *
 * Names, labels and values come from shared/api/metrics.ts, which the
 * Lambdas publish as EMF too. The per-rollout and per-run series are read
 * from the store when scraped, by the leader only (one copy in the cluster,
 * whichever node leads), at most once a second however many scrapers: they
 * exist while the rollout runs (or is paused) and the run is open, and are
 * gone from the next scrape after. Their number is capped (MAX_ROLLOUTS,
 * MAX_RUNS: the newest first), and label values are cut to LABEL_MAX
 * characters, so a scrape's size is bounded whatever the store holds.
 */

interface Snapshot {
  readonly samples: ReadonlyMap<MetricName, readonly MetricSample[]>;
}

const EMPTY: Snapshot = { samples: new Map([['rollout_metrics_left_out', leftOutSamples({ rollouts: 0, runs: 0 })]]) };

const ITEM_STATES: readonly WorkItem['state'][] = ['pending', 'running', 'done', 'failed'];

async function snapshot(node: ControlPlaneNode): Promise<Snapshot> {
  if (node.state !== 'leader') return EMPTY;
  const store = node.plane.engine.store;
  // The newest running, then paused ones up to the cap: never a read of every running rollout per scrape.
  const running = await newestRollouts(store, 'running', MAX_ROLLOUTS);
  const paused = await newestRollouts(store, 'paused', MAX_ROLLOUTS - running.views.length);
  const { shown, leftOut } = capRollouts([...running.views, ...paused.views]);
  const now = Date.now();
  const samples: MetricSample[] = [];
  for (const view of shown) {
    samples.push(...rolloutSamples(view, movesTargets(view) ? await store.actuations(view.rollout.id) : [], now));
  }
  const open = await node.plane.stores.ledger.openRuns();
  const { rows } = await node.sql.query<{ id: string; steals: string | number; drains: string | number }>(
    `SELECT r.id, coalesce(s.steals, 0) AS steals, (SELECT count(*) FROM workers w WHERE w.run_id = r.id AND w.drain IS NOT NULL) AS drains
       FROM runs r LEFT JOIN run_stats s ON s.run_id = r.id WHERE r.id = ANY($1::text[]) ORDER BY r.created_at DESC LIMIT ${MAX_RUNS}`,
    [open],
  );
  // Every shown run's items by state in one statement, not one per run.
  const counts = new Map(rows.map((r) => [r.id, Object.fromEntries(ITEM_STATES.map((s) => [s, 0])) as Record<WorkItem['state'], number>]));
  if (rows.length) {
    const grouped = await node.sql.query<{ run_id: string; state: WorkItem['state']; n: string | number }>(
      'SELECT run_id, state, count(*) AS n FROM work_items WHERE run_id = ANY($1::text[]) GROUP BY 1, 2',
      [rows.map((r) => r.id)],
    );
    for (const g of grouped.rows) {
      const c = counts.get(g.run_id);
      if (c && g.state in c) c[g.state] = Number(g.n);
    }
  }
  for (const r of rows) samples.push(...runSamples({ id: r.id, counts: counts.get(r.id)!, steals: Number(r.steals), drains: Number(r.drains) }));
  samples.push(...leftOutSamples({ rollouts: leftOut + (running.more || paused.more ? 1 : 0), runs: Math.max(0, open.length - rows.length) }));
  const byName = new Map<MetricName, MetricSample[]>();
  for (const f of samples) byName.set(f.name, [...(byName.get(f.name) ?? []), f]);
  return { samples: byName };
}

export function operateMetrics(node: ControlPlaneNode, registry: Registry): void {
  // One store read per second serves every gauge of every scrape in it.
  let last: { at: number; value: Promise<Snapshot> } | null = null;
  const read = (): Promise<Snapshot> => {
    if (!last || Date.now() - last.at > 1_000) {
      const value = snapshot(node).catch((err: unknown) => {
        node.logger.warn('metrics: the store could not be read; rollout and run series left out of this scrape', { error: errorMessage(err) });
        return EMPTY;
      });
      last = { at: Date.now(), value };
    }
    return last.value;
  };
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[], fill: (g: Gauge<L>, s: Snapshot) => void) =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const s = await read();
        this.reset();
        fill(this, s);
      },
    });
  for (const name of [...ROLLOUT_METRICS, ...RUN_METRICS, 'rollout_metrics_left_out'] as const) {
    gauge(name, METRICS[name].help, METRICS[name].labels, (g, s) => {
      for (const f of s.samples.get(name) ?? []) g.set(f.labels, f.value);
    });
  }

  // Transitions as they are published from this node (the leader's, mostly), by event type: at least once.
  const events = new Counter({
    name: 'rollout_events_total',
    help: METRICS.rollout_events_total.help,
    labelNames: METRICS.rollout_events_total.labels,
    registers: [registry],
  });
  node.bus.subscribe((e) => {
    if (e.detailType.startsWith('ai.rollout.')) events.inc({ type: e.detailType });
  });
  // Node-only (the Lambdas count ItemsRepended and ItemsFailed per invocation): what this node's coordinators did.
  new Counter({
    name: 'rollout_run_repends_total',
    help: "Running items this node's coordinators gave back to Pending because their worker went silent",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(node.runTotals().repends);
    },
  });
  new Counter({
    name: 'rollout_run_failures_total',
    help: "Items this node's coordinators failed, by why: attempts (started maxAttempts times without a result), cancelled (their run was), dead_letter (their message was given back maxReceiveCount times)",
    labelNames: ['reason'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(node.runTotals().failures)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: 'rollout_dead_letters_total',
    help: `${METRICS.rollout_dead_letters_total.help} (by this node's coordinators)`,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(node.deadLetters());
    },
  });
}
