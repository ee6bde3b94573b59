/** How a reading with too little data to judge begins its reason: the evaluator stretches a bake on it (rollout/evaluate.ts). */
export const NOT_ENOUGH_DATA = 'not enough data';

/** One reading's judgement of the canary against the baseline. */
export interface SeriesJudgement {
  readonly outcome: 'pass' | 'fail' | 'inconclusive';
  /** The figure compared: the shift estimate (mann-whitney), or the ratio or difference (relative); null when none. */
  readonly value: number | null;
  /** Why it failed or was inconclusive; null on a pass. */
  readonly reason: string | null;
  /** The figures behind it, for people: each cohort's size and middle, and the judge's own numbers. */
  readonly detail: Readonly<Record<string, unknown>>;
}

/** One cohort's requests and errors in each step of the period, oldest first (null: no point for that step). */
export interface StepCounts {
  readonly requests: readonly (number | null)[];
  readonly errors: readonly (number | null)[];
}
