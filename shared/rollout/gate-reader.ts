import { stageProviders } from './spec.js';
import { setMaxListeners } from 'node:events';
import type { Attributes } from '@opentelemetry/api';
import { systemClock, type Clock } from '../clock.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import { beforeRolloutHooks, type ProviderGate, type ProviderType } from './gate-spec.js';
import type { GateContext, GateProvider, GateProviders } from './gate-provider.js';
import { dueGates, judge, seriesOf, type GateReading, type GateTally, type ProviderResult, type ReadingSeries, type ReadingToStore } from './gates.js';
import { activeStage, withTallies, type RolloutView } from './model.js';
import type { RolloutStore } from './store.js';
import { failSpan, SPAN, startSpan } from '../tracing.js';
import { SignalsGateProvider } from './signals-gate.js';

export type { GateContext, GateProvider, GateProviders } from './gate-provider.js';

/** A timeout as a provider reports it, in the words a reading keeps. */
export class GateTimeoutError extends Error {
  override readonly name = 'GateTimeoutError';
  constructor(readonly ms: number) {
    super(`timed out after ${ms / 1000} s`);
  }
}

/**
 * `fn` given a signal that aborts after `ms` (or with `outer`), and settled
 * by then whatever `fn` does with it: a provider that ignores its signal
 * cannot hold a tick past the gate's timeout.
 */
export async function deadline<T>(ms: number, outer: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  // Past the batch's deadline already: no request of it starts (an abort listener added now would never fire).
  outer?.throwIfAborted();
  const controller = new AbortController();
  // A batch's signal is the outer one of each of its requests' deadlines: many listeners, by design.
  setMaxListeners(0, controller.signal);
  let timer: NodeJS.Timeout | undefined;
  const abort = () => controller.abort(outer?.reason);
  outer?.addEventListener('abort', abort, { once: true });
  try {
    return await Promise.race([
      fn(controller.signal),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const err = new GateTimeoutError(ms);
          // Settle first: what `fn` throws when aborted must not win the race over the timeout.
          reject(err);
          controller.abort(err);
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', abort);
  }
}

interface Due {
  readonly view: RolloutView;
  readonly stage: number;
  readonly gate: ProviderGate;
}

/**
 * Reads the provider gates that are due on the active stages of running
 * rollouts, on the BatchPromoter's tick, outside the fence: each gate at most
 * once per its interval, each kind of provider asked once per tick with all of
 * its gates (the adapter batches and bounds its own concurrency), every
 * request within its gate's timeout. Every answer, errors included, becomes a
 * stored reading; the views come back with the tallies those readings made,
 * so the evaluator decides from exactly what was stored.
 */
export class GateReader {
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly providers: GateProviders;

  constructor(
    providers: GateProviders,
    private readonly store: RolloutStore,
    o: { clock?: Clock; logger?: Logger } = {},
  ) {
    // Pushed cohort reports are read from the store itself: every reader has their provider.
    this.providers = { signals: new SignalsGateProvider(store), ...providers };
    this.clock = o.clock ?? systemClock;
    this.logger = o.logger ?? silentLogger;
  }

  async read(views: readonly RolloutView[], o: { readonly epoch?: number } = {}): Promise<{ views: RolloutView[]; readings: readonly GateReading[] }> {
    const now = this.clock.now();
    const due: Due[] = [];
    for (const view of views) {
      if (view.rollout.state !== 'running') continue;
      const active = activeStage(view);
      // Before the attempt's first stage: its before-rollout hooks (counted with stage 0).
      const gates = active
        ? stageProviders(view.rollout.spec, active.index)
        : view.stages[0]?.phase === 'pending'
          ? beforeRolloutHooks(view.rollout.spec.hooks)
          : undefined;
      const stage = active?.index ?? 0;
      if (!gates?.length) continue;
      for (const gate of dueGates(gates, view.gates, stage, view.rollout.lastProgressAt, now)) due.push({ view, stage, gate });
    }
    if (!due.length) return { views: [...views], readings: [] };

    const byType = new Map<ProviderType, Due[]>();
    for (const d of due) byType.set(d.gate.type, [...(byType.get(d.gate.type) ?? []), d]);
    const results = new Map<Due, ProviderResult>();
    // A span per gate over its provider's call and its judgement; gates read in one call share its timing.
    const spans = due.map((d) => startSpan(SPAN.gateRead, gateAttributes(d, o.epoch)));
    let toStore: ReadingToStore[];
    try {
      await Promise.all(
        [...byType].map(async ([type, list]) => {
          for (const [d, r] of zip(list, await this.ask(type, list, now, o.epoch ?? null))) results.set(d, r);
        }),
      );
      const at = this.clock.now();
      toStore = due.map((d, i) => {
        const result = results.get(d)!;
        const judged = toStoreOf(
          d.view,
          d.gate,
          judge(d.gate, result, { attempt: d.view.rollout.attempt, stage: d.stage, at, source: 'poll' }),
          seriesOf(result),
        );
        const span = spans[i]!;
        span.setAttributes({ 'rollout.gate.outcome': judged.reading.outcome, 'rollout.gate.value': judged.reading.value ?? undefined });
        // A provider that could not answer is the span's failure; a threshold not met is an answer.
        if (result.kind === 'error') failSpan(span, judged.reading.reason ?? result.message);
        return judged;
      });
    } finally {
      for (const span of spans) span.end();
    }
    const inconclusive = toStore.filter((r) => r.reading.outcome === 'inconclusive');
    if (inconclusive.length) {
      this.logger.warn('gate readings inconclusive', {
        count: inconclusive.length,
        first: { rolloutId: inconclusive[0]!.rolloutId, gate: inconclusive[0]!.reading.gate, reason: inconclusive[0]!.reading.reason },
      });
    }
    return { views: await recordReadings(this.store, views, toStore), readings: toStore.map((r) => r.reading) };
  }

  /**
   * Reads `gate` for `stage` of the view now, as a tick would, and judges the answer: the reading a
   * tick would store, neither stored nor counted (`rollout gates test`). Outside any leader's tick.
   */
  async readNow(view: RolloutView, stage: number, gate: ProviderGate): Promise<GateReading> {
    const now = this.clock.now();
    const [result] = await this.ask(gate.type, [{ view, stage, gate }], now, null);
    const reading = judge(gate, result!, { attempt: view.rollout.attempt, stage, at: this.clock.now(), source: 'poll' });
    const series = seriesOf(result!);
    return series ? { ...reading, series } : reading;
  }

  /** One kind's gates through its provider, bounded by the longest of their timeouts; a failure of the whole call is every gate's error. */
  private async ask(type: ProviderType, list: readonly Due[], now: number, epoch: number | null): Promise<ProviderResult[]> {
    // Each provider reads its own kind: `list` holds only gates of `type`.
    const provider: GateProvider | undefined = this.providers[type];
    if (!provider) return list.map(() => ({ kind: 'error', message: `no ${type} provider is configured where the promoter runs`, answer: '' }));
    const ms = Math.max(...list.map((d) => d.gate.timeoutSeconds)) * 1000;
    try {
      const contexts = list.map((d) => contextOf(d.view, d.stage, epoch));
      const results = await deadline(ms, undefined, (signal) =>
        provider.read(
          list.map((d) => d.gate),
          { now, signal, contexts },
        ),
      );
      if (results.length !== list.length) throw new Error(`the ${type} provider answered ${results.length} results for ${list.length} gates`);
      return results;
    } catch (err) {
      this.logger.warn('gate provider failed', { type, gates: list.length, error: errorMessage(err) });
      return list.map(() => ({ kind: 'error', message: errorMessage(err), answer: '' }));
    }
  }
}

/** What a `rollout.gate.read` span carries (docs/operating/observability.md#operating: traces): names and ids, never the gate's address or query. */
function gateAttributes(d: Due, epoch: number | undefined): Attributes {
  const { rollout } = d.view;
  return {
    'rollout.id': rollout.id,
    'rollout.attempt': rollout.attempt,
    'rollout.stage.index': d.stage,
    'rollout.stage.name': rollout.spec.stages[d.stage]?.name,
    'rollout.gate.name': d.gate.name,
    'rollout.gate.type': d.gate.type,
    'lease.epoch': epoch,
  };
}

export function contextOf(view: RolloutView, index: number, epoch: number | null): GateContext {
  const { rollout } = view;
  const stage = rollout.spec.stages[index]!;
  const { target } = rollout.spec;
  return {
    rolloutId: rollout.id,
    attempt: rollout.attempt,
    stage: { index, name: stage.name, percent: stage.percent },
    epoch,
    service: target.service,
    newVersion: target.version,
    stableVersion: target.stableVersion ?? null,
    labels: target.labels,
    periodStart: rollout.lastProgressAt,
  };
}

/** A reading of one of the view's gates, to be counted in the period the view is in, with the tally the view holds as a hint. */
export function toStoreOf(view: RolloutView, gate: ProviderGate, reading: GateReading, series: ReadingSeries | null = null): ReadingToStore {
  return {
    rolloutId: view.rollout.id,
    origin: view.rollout.lastProgressAt,
    reading,
    ...(series ? { series } : {}),
    prior: view.gates.get(reading.stage)?.get(gate.name) ?? null,
  };
}

/** Stores the readings; the views come back with the tallies they made, so a decision is made from exactly what was stored. */
export async function recordReadings(store: RolloutStore, views: readonly RolloutView[], toStore: readonly ReadingToStore[]): Promise<RolloutView[]> {
  if (!toStore.length) return [...views];
  const byRollout = new Map<string, GateTally[]>();
  for (const c of await store.recordGateReadings(toStore)) byRollout.set(c.rolloutId, [...(byRollout.get(c.rolloutId) ?? []), c.tally]);
  return views.map((v) => withTallies(v, byRollout.get(v.rollout.id) ?? []));
}

function zip<A, B>(a: readonly A[], b: readonly B[]): [A, B][] {
  return a.map((x, i) => [x, b[i]!]);
}
