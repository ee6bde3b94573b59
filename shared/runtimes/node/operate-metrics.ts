import { Counter, Gauge, type Registry } from 'prom-client';
import { gatesJson } from '../../api/rollout-json.js';
import { trafficOf } from '../../rollout/assignment.js';
import { movesTargets } from '../../rollout/engine.js';
import type { RolloutView } from '../../rollout/model.js';
import { errorMessage } from '../../log.js';
import type { ControlPlaneNode } from './node.js';

/**
 * What someone on call needs of rollouts and runs, on a node's /metrics
 * (README "Operating" lists every series):
 *
 *   rollout_info, rollout_percent, rollout_stage_index, rollout_stage_seconds,
 *   rollout_last_progress_timestamp_seconds, rollout_progress_deadline_seconds,
 *   rollout_gate_value, rollout_gate_threshold, rollout_gate_readings,
 *   rollout_actuation_drift                       per rollout running or paused
 *   rollout_events_total{type}                    transitions, by the event each emitted
 *   rollout_run_items{run,state}, rollout_run_steals, rollout_run_drains
 *                                                 per open run
 *   rollout_dead_letters_total                    items failed for their dead letters
 *   rollout_metrics_left_out{kind}                rollouts and runs past the caps below
 *
 * The per-rollout and per-run series are read from the store when scraped,
 * by the leader only (one copy in the cluster, whichever node leads), at
 * most once a second however many scrapers: they exist while the rollout
 * runs (or is paused) and the run is open, and are gone from the next scrape
 * after. Their number is capped (MAX_ROLLOUTS, MAX_RUNS: the newest first),
 * and label values are cut to LABEL_MAX characters, so a scrape's size is
 * bounded whatever the store holds.
 */
export const MAX_ROLLOUTS = 100;
export const MAX_RUNS = 50;
export const LABEL_MAX = 128;

const label = (v: string | null | undefined) => (v ?? '').slice(0, LABEL_MAX);

interface Snapshot {
  readonly rollouts: readonly { readonly view: RolloutView; readonly drift: readonly string[] }[];
  readonly runs: readonly { readonly id: string; readonly counts: Readonly<Record<'pending' | 'running' | 'done' | 'failed', number>>; readonly steals: number; readonly drains: number }[];
  readonly leftOut: { readonly rollouts: number; readonly runs: number };
}

const EMPTY: Snapshot = { rollouts: [], runs: [], leftOut: { rollouts: 0, runs: 0 } };

async function snapshot(node: ControlPlaneNode): Promise<Snapshot> {
  if (node.state !== 'leader') return EMPTY;
  const store = node.plane.engine.store;
  const running = await store.loadRunning();
  const paused = await store.list({ state: 'paused', limit: MAX_ROLLOUTS });
  const views = [...running];
  for (const p of paused.rollouts) {
    if (views.length >= MAX_ROLLOUTS) break;
    const v = await store.load(p.id);
    if (v) views.push(v);
  }
  views.sort((a, b) => b.rollout.createdAt - a.rollout.createdAt);
  const shown = views.slice(0, MAX_ROLLOUTS);
  const rollouts = [];
  for (const view of shown) {
    const drift = movesTargets(view) ? (await store.actuations(view.rollout.id)).filter((a) => a.state === 'drift').map((a) => a.target) : [];
    rollouts.push({ view, drift });
  }
  const open = await node.plane.stores.ledger.openRuns();
  const { rows } = await node.sql.query<{ id: string; steals: string | number; drains: string | number }>(
    `SELECT r.id, coalesce(s.steals, 0) AS steals, (SELECT count(*) FROM workers w WHERE w.run_id = r.id AND w.drain IS NOT NULL) AS drains
       FROM runs r LEFT JOIN run_stats s ON s.run_id = r.id WHERE r.id = ANY($1::text[]) ORDER BY r.created_at DESC LIMIT ${MAX_RUNS}`,
    [open],
  );
  const runs = [];
  for (const r of rows) runs.push({ id: r.id, counts: await node.plane.stores.ledger.counts(r.id), steals: Number(r.steals), drains: Number(r.drains) });
  return { rollouts, runs, leftOut: { rollouts: views.length + (paused.next ? 1 : 0) - shown.length, runs: Math.max(0, open.length - rows.length) } };
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
  const now = () => Date.now();
  const each = (s: Snapshot, fn: (v: RolloutView, drift: readonly string[]) => void) => s.rollouts.forEach((r) => fn(r.view, r.drift));

  gauge('rollout_info', 'A rollout running or paused (1), with its service, versions and state', ['rollout', 'service', 'new_version', 'stable_version', 'state'], (g, s) =>
    each(s, (v) => g.set({ rollout: label(v.rollout.id), service: label(v.rollout.spec.target.service), new_version: label(v.rollout.spec.target.version), stable_version: label(v.rollout.spec.target.stableVersion), state: v.rollout.state }, 1)),
  );
  gauge('rollout_percent', 'The share of traffic on the new version in force, 0-100', ['rollout'], (g, s) => each(s, (v) => g.set({ rollout: label(v.rollout.id) }, trafficOf(v).percent)));
  gauge('rollout_stage_index', 'The active stage, by index (its name as a label)', ['rollout', 'stage'], (g, s) =>
    each(s, (v) => {
      const active = v.stages.find((x) => x.phase === 'active');
      if (active) g.set({ rollout: label(v.rollout.id), stage: label(active.name) }, active.index);
    }),
  );
  gauge('rollout_stage_seconds', 'How long the active stage has been active', ['rollout'], (g, s) =>
    each(s, (v) => {
      const active = v.stages.find((x) => x.phase === 'active');
      if (active?.activatedAt != null) g.set({ rollout: label(v.rollout.id) }, Math.max(0, (now() - active.activatedAt) / 1000));
    }),
  );
  gauge('rollout_last_progress_timestamp_seconds', 'The rollout\'s last activation, promotion, resume or retry: what its progress deadline measures from', ['rollout'], (g, s) => each(s, (v) => g.set({ rollout: label(v.rollout.id) }, v.rollout.lastProgressAt / 1000)));
  gauge('rollout_progress_deadline_seconds', 'The rollout\'s progress deadline (progressDeadlineSeconds)', ['rollout'], (g, s) => each(s, (v) => g.set({ rollout: label(v.rollout.id) }, v.rollout.spec.progressDeadlineSeconds)));
  const activeGates = (v: RolloutView) => {
    const active = v.stages.find((x) => x.phase === 'active');
    return active ? gatesJson(v).filter((x) => x.stage === active.index) : [];
  };
  gauge('rollout_gate_value', 'The last value a provider gate of the active stage read', ['rollout', 'gate', 'type'], (g, s) =>
    each(s, (v) => {
      for (const x of activeGates(v)) if (x.last?.value != null) g.set({ rollout: label(v.rollout.id), gate: label(x.name), type: x.type }, x.last.value);
    }),
  );
  gauge('rollout_gate_threshold', 'The threshold a provider gate of the active stage compares its value with', ['rollout', 'gate', 'type', 'comparison'], (g, s) =>
    each(s, (v) => {
      for (const x of activeGates(v)) if (x.threshold !== null) g.set({ rollout: label(v.rollout.id), gate: label(x.name), type: x.type, comparison: x.comparison ?? '' }, x.threshold);
    }),
  );
  gauge('rollout_gate_readings', 'Readings of each provider gate of the active stage in its current period, by outcome', ['rollout', 'gate', 'outcome'], (g, s) =>
    each(s, (v) => {
      for (const x of activeGates(v)) {
        const base = { rollout: label(v.rollout.id), gate: label(x.name) };
        g.set({ ...base, outcome: 'pass' }, x.counts.readings - x.counts.failures - x.counts.inconclusive);
        g.set({ ...base, outcome: 'fail' }, x.counts.failures);
        g.set({ ...base, outcome: 'inconclusive' }, x.counts.inconclusive);
      }
    }),
  );
  gauge('rollout_actuation_drift', 'A target someone else changed (1): the rollout is paused and nothing is written to it until a person acts', ['rollout', 'target'], (g, s) =>
    each(s, (v, drift) => {
      for (const target of drift) g.set({ rollout: label(v.rollout.id), target: label(target) }, 1);
    }),
  );
  gauge('rollout_run_items', 'Items of an open run, by state', ['run', 'state'], (g, s) => {
    for (const r of s.runs) for (const [state, n] of Object.entries(r.counts)) g.set({ run: label(r.id), state }, n);
  });
  gauge('rollout_run_steals', 'Items of an open run taken over from silent workers, since it began', ['run'], (g, s) => {
    for (const r of s.runs) g.set({ run: label(r.id) }, r.steals);
  });
  gauge('rollout_run_drains', 'Workers of an open run that drained (a spot notice or a drain request)', ['run'], (g, s) => {
    for (const r of s.runs) g.set({ run: label(r.id) }, r.drains);
  });
  gauge('rollout_metrics_left_out', 'Rollouts and runs with no series of their own this scrape, past the caps (100 rollouts, 50 runs)', ['kind'], (g, s) => {
    g.set({ kind: 'rollouts' }, s.leftOut.rollouts);
    g.set({ kind: 'runs' }, s.leftOut.runs);
  });

  // Transitions as they are published from this node (the leader's, mostly), by event type: at least once.
  const events = new Counter({ name: 'rollout_events_total', help: 'Rollout events this node published, by type (ai.rollout.stage_promoted, …): each transition emits its own', labelNames: ['type'] as const, registers: [registry] });
  node.bus.subscribe((e) => {
    if (e.detailType.startsWith('ai.rollout.')) events.inc({ type: e.detailType });
  });
  new Counter({
    name: 'rollout_dead_letters_total',
    help: "Items this node's coordinators failed because their message was given back maxReceiveCount times",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(node.deadLetters());
    },
  });
}
