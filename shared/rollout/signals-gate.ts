import { mapLimit } from '../concurrency.js';
import { countGrid, isCountsJudge } from '../judge/gate.js';
import { countsOnGrid, MAX_STAGE_REPORTS, samplesSince, type CohortReport } from './cohort-signals.js';
import { DEFAULT_SIGNALS_SETTLE_SECONDS, judgedRange, MAX_JUDGED_POINTS, type SignalsGate } from './gate-spec.js';
import type { GateContext, GateProvider } from './gate-provider.js';
import type { ProviderResult } from './gates.js';
import type { RolloutStore } from './store.js';

/** Gates of one tick read from the store at once, at most. */
const READ_CONCURRENCY = 8;

/**
 * The provider of `signals` gates: the stage's pushed cohort reports, as the
 * store holds them, laid out as a judge reads them. Every GateReader has it
 * (it needs only the store), so a signals gate reads the same on a node, in
 * a cluster and in AWS.
 *   counts judges  each cohort's requests and errors per step, on a grid fixed
 *                  at the stage's period start, settled steps only (so each
 *                  reading sees the steps the last one saw, and more)
 *   latency        each cohort's samples over the window, newest kept
 *   errors         each cohort's error rate per step over the window
 */
export class SignalsGateProvider implements GateProvider<SignalsGate> {
  constructor(private readonly store: Pick<RolloutStore, 'cohortReports'>) {}

  read(gates: readonly SignalsGate[], o: { readonly now: number; readonly contexts: readonly GateContext[] }): Promise<ProviderResult[]> {
    return mapLimit([...gates], READ_CONCURRENCY, (gate, i) => this.readOne(gate, o.contexts[i]!, o.now));
  }

  private async readOne(gate: SignalsGate, context: GateContext, now: number): Promise<ProviderResult> {
    const periodStart = context.periodStart ?? now;
    const { windowSeconds, stepSeconds } = judgedRange(gate);
    const reports = (since: number, order: 'oldest' | 'newest', samples: boolean) =>
      this.store.cohortReports(context.rolloutId, context.attempt, context.stage.index, { since, limit: MAX_STAGE_REPORTS + 1, order, samples });
    const tooMany = (n: number): ProviderResult | null =>
      n > MAX_STAGE_REPORTS
        ? {
            kind: 'error',
            message: `more than ${MAX_STAGE_REPORTS} reports in the stage's ${isCountsJudge(gate.judge) ? 'period' : 'window'}: report less often, or sum each cohort's counts across instances before reporting`,
            answer: '',
          }
        : null;

    if (isCountsJudge(gate.judge)) {
      const grid = countGrid({ periodStart, now, stepSeconds, settleSeconds: gate.settleSeconds ?? DEFAULT_SIGNALS_SETTLE_SECONDS });
      if (grid.steps > MAX_JUDGED_POINTS)
        return {
          kind: 'error',
          message: `the stage has run ${grid.steps} steps of ${stepSeconds} s, more than the ${MAX_JUDGED_POINTS} a reading holds: give the gate a longer stepSeconds`,
          answer: '',
        };
      const got = await reports(grid.anchor * 1000, 'oldest', false);
      const refused = tooMany(got.length);
      if (refused) return refused;
      const counts = countsOnGrid(got, { ...grid, stepSeconds });
      return { kind: 'counts', canary: counts.canary, baseline: counts.baseline, percent: context.stage.percent, answer: said(got, grid.steps) };
    }

    // Never before the stage's period began: older reports are another split's.
    const since = Math.max(periodStart, now - windowSeconds * 1000);
    if (gate.metric === 'latency') {
      // Newest first: the window's newest samples are the ones a reading keeps.
      const got = await reports(since, 'newest', true);
      const refused = tooMany(got.length);
      if (refused) return refused;
      const samples = samplesSince(got.reverse(), since, MAX_JUDGED_POINTS);
      return { kind: 'cohorts', canary: samples.canary, baseline: samples.baseline, answer: said(got, null) };
    }
    const anchor = Math.ceil(since / 1000);
    const steps = Math.max(0, Math.floor((now / 1000 - anchor) / stepSeconds));
    const got = await reports(anchor * 1000, 'oldest', false);
    const refused = tooMany(got.length);
    if (refused) return refused;
    const counts = countsOnGrid(got, { anchor, steps, stepSeconds });
    const rates = (c: { requests: number[]; errors: number[] }) => c.requests.map((n, i) => (n > 0 ? c.errors[i]! / n : null));
    return { kind: 'cohorts', canary: rates(counts.canary), baseline: rates(counts.baseline), answer: said(got, steps) };
  }
}

/** What a reading read, in a line: how many reports from how many reporters, on how many steps. */
function said(reports: readonly CohortReport[], steps: number | null): string {
  const reporters = new Set(reports.map((r) => `${r.cohort}#${r.reporter}`));
  const n = (c: string) => reports.filter((r) => r.cohort === c).length;
  return `${n('canary')} canary and ${n('baseline')} baseline reports from ${reporters.size} reporters${steps === null ? '' : ` on ${steps} steps`}`;
}
