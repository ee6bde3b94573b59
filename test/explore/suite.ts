import { explore, type ExploreResult, type Model } from './explorer.js';
import { leaseModel, type LeaseScope } from './models/lease.js';
import { ledgerModel, type LedgerScope } from './models/ledger.js';
import { promotionModel, type PromotionScope } from './models/promotion.js';
import { aliasModel, type AliasScope } from './models/alias.js';
import type { Variant } from './store.js';

/**
 * What the explorer runs: each model in the correct form (it must find
 * nothing) and each broken variant on the models that can express it (it
 * must find a counterexample of every invariant listed). Shared by the CLI
 * and the unit test, so both check the same thing.
 */

export type ModelName = 'lease' | 'ledger' | 'promotion' | 'held' | 'judged' | 'stretch' | 'alias';
export const MODELS: readonly ModelName[] = ['lease', 'ledger', 'promotion', 'held', 'judged', 'stretch', 'alias'];

export interface Scope {
  readonly lease: LeaseScope;
  readonly ledger: LedgerScope;
  readonly promotion: PromotionScope;
  /** The promotion model's held-view scope: a metrics reading and its decision in one write on a view a promoter held. */
  readonly held: PromotionScope;
  /** The promotion model's judged-gate scope: provider gate readings counted into tallies, pause and resume. */
  readonly judged: PromotionScope;
  /** The judged-gate scope whose stages stretch for data, then pass on too little of it (onInsufficientData pass). */
  readonly stretch: PromotionScope;
  /** Leaders in turn converging a Lambda alias, each deposed one a zombie. */
  readonly alias: AliasScope;
}

export const SCOPES = {
  /** Fast enough for every `npm test`. */
  default: {
    lease: { nodes: 2, budget: { ticks: 2, crashes: 1, lost: 1, checks: 1 }, maxDepth: 12 },
    ledger: { coordinators: 2, workers: 2, items: 2, budget: { ticks: 1, crashes: 1, lost: 1, failures: 0 }, maxDepth: 6 },
    promotion: {
      promoters: [2, 1],
      commands: ['abort', 'retry'],
      budget: { ticks: 1, crashes: 1, lost: 1, signals: 2, commands: 2, readings: 0, bakes: 0 },
      maxDepth: 7,
    },
    held: {
      held: true,
      promoters: [1, 1],
      commands: [],
      budget: { ticks: 1, crashes: 0, lost: 0, signals: 1, commands: 0, readings: 2, bakes: 1 },
      maxDepth: 7,
    },
    judged: {
      judged: true,
      promoters: [1, 1],
      commands: ['pause', 'resume'],
      budget: { ticks: 1, crashes: 0, lost: 0, signals: 0, commands: 2, readings: 3, bakes: 0 },
      maxDepth: 9,
    },
    stretch: {
      judged: true,
      stretch: true,
      promoters: [1, 1],
      commands: ['pause', 'resume'],
      budget: { ticks: 0, crashes: 0, lost: 0, signals: 0, commands: 2, readings: 2, bakes: 1 },
      maxDepth: 10,
    },
    alias: { leaders: 3, maxDepth: 20 },
  },
  /** More processes, items, faults and depth: minutes, not seconds. */
  large: {
    lease: { nodes: 3, budget: { ticks: 2, crashes: 1, lost: 1, checks: 2 }, maxDepth: 12 },
    ledger: { coordinators: 2, workers: 2, items: 3, budget: { ticks: 1, crashes: 1, lost: 1, failures: 1 }, maxDepth: 8 },
    promotion: {
      promoters: [2, 2],
      commands: ['abort', 'retry', 'pause', 'resume', 'promote_full'],
      budget: { ticks: 2, crashes: 1, lost: 1, signals: 3, commands: 3, readings: 0, bakes: 0 },
      maxDepth: 9,
    },
    held: {
      held: true,
      promoters: [1, 1],
      commands: ['abort', 'retry'],
      budget: { ticks: 2, crashes: 1, lost: 1, signals: 2, commands: 1, readings: 2, bakes: 1 },
      maxDepth: 8,
    },
    judged: {
      judged: true,
      promoters: [2, 1],
      commands: ['pause', 'resume', 'abort', 'retry'],
      budget: { ticks: 1, crashes: 1, lost: 1, signals: 0, commands: 2, readings: 3, bakes: 0 },
      maxDepth: 9,
    },
    stretch: {
      judged: true,
      stretch: true,
      promoters: [2, 1],
      commands: ['pause', 'resume', 'abort', 'retry'],
      budget: { ticks: 1, crashes: 1, lost: 1, signals: 0, commands: 2, readings: 3, bakes: 2 },
      maxDepth: 9,
    },
    alias: { leaders: 4, maxDepth: 24, aliasAtRest: true },
  },
} as const satisfies Record<string, Scope>;

export type ScopeName = keyof typeof SCOPES;

export interface VariantRun {
  readonly variant: Exclude<Variant, 'correct'>;
  readonly model: ModelName;
  /** Every invariant the variant must be caught breaking in this model. */
  readonly breaks: readonly string[];
  /** What is broken, in a few words. */
  readonly what: string;
}

/**
 * The depth within which every variant must be caught, in any scope. Its
 * counterexamples are a handful of steps; a variant that got past this bound
 * would make the run fail, not hang.
 */
export const VARIANT_DEPTH = 9;

export const VARIANT_RUNS: readonly VariantRun[] = [
  { variant: 'fence-holder-only', model: 'lease', breaks: ['fenced-write-under-current-epoch'], what: 'the fence checks the holder, not the epoch' },
  { variant: 'fence-holder-only', model: 'ledger', breaks: ['fenced-write-under-current-epoch'], what: 'a deposed coordinator of the same name steals' },
  { variant: 'fence-holder-only', model: 'promotion', breaks: ['fenced-write-under-current-epoch'], what: 'a plan of an earlier leadership applies' },
  { variant: 'fence-epoch-only', model: 'lease', breaks: ['fenced-write-under-current-epoch'], what: 'the fence checks the epoch, not the holder' },
  { variant: 'fence-check-then-write', model: 'lease', breaks: ['fenced-write-under-current-epoch'], what: 'the fence is read, then the write lands later' },
  {
    variant: 'resign-deletes-row',
    model: 'lease',
    breaks: ['lease-one-holder-per-epoch', 'lease-epoch-monotonic', 'fenced-write-under-current-epoch'],
    what: 'resign deletes the row: the next acquire is epoch 0',
  },
  {
    variant: 'late-read-applied',
    model: 'lease',
    breaks: ['lease-view-never-regresses'],
    what: "a leadership check's reply of no row, read before the holder's acquire, is applied after it",
  },
  {
    variant: 'promote-if-not-promoted',
    model: 'promotion',
    breaks: ['no-promotion-after-rollback'],
    what: "promotion WHERE phase != 'promoted', no rollout version",
  },
  {
    variant: 'promote-fence-only',
    model: 'promotion',
    breaks: ['stage-promoted-at-most-once', 'promotion-monotonic'],
    what: 'a plan is applied on the fence alone',
  },
  { variant: 'steal-started', model: 'ledger', breaks: ['steal-only-unstarted'], what: 'the coordinator steals items already started' },
  { variant: 'steal-two-step', model: 'ledger', breaks: ['no-item-lost'], what: 'a steal re-pends, then claims, in two writes' },
  { variant: 'ack-any-worker', model: 'ledger', breaks: ['done-by-holder'], what: 'an ack is conditioned on Running, not on the worker' },
  { variant: 'ack-by-worker-only', model: 'ledger', breaks: ['one-result-per-item'], what: 'an ack is conditioned on the worker, not on Running' },
  {
    variant: 'held-no-alarm-check',
    model: 'held',
    breaks: ['held-decision-current'],
    what: "a reading's decision on a held view ignores an alarm changed since",
  },
  {
    variant: 'held-no-metrics-check',
    model: 'held',
    breaks: ['held-decision-current'],
    what: "a reading's decision on a held view ignores the active stage's newer reading",
  },
  {
    variant: 'gates-any-period',
    model: 'judged',
    breaks: ['promotion-needs-passing-verdict'],
    what: "the verdict counts a gate's tally of an older period (before a resume) as the current one's",
  },
  {
    variant: 'gates-no-streak',
    model: 'judged',
    breaks: ['promotion-needs-passing-verdict'],
    what: 'the verdict promotes on one pass, ignoring consecutiveSuccesses',
  },
  {
    variant: 'gates-dry-run',
    model: 'judged',
    breaks: ['promotion-needs-passing-verdict'],
    what: 'the verdict takes a gate that is not dryRun for a dry run: it promotes on no reading',
  },
  {
    variant: 'tally-late-pass',
    model: 'judged',
    breaks: ['promotion-needs-passing-verdict'],
    what: 'the store adds a pass that arrives after a newer failure to the streak',
  },
  {
    variant: 'insufficient-pass-early',
    model: 'stretch',
    breaks: ['promotion-needs-passing-verdict'],
    what: 'the verdict passes a stage on too little data before its stretch (maxBakeSeconds) is over',
  },
  {
    variant: 'actuate-without-revision',
    model: 'alias',
    breaks: ['alias-never-ahead', 'alias-stays-converged'],
    what: "UpdateAlias without the RevisionId read: a zombie's late write lands over the rollback",
  },
];

function modelOf(scope: Scope, name: ModelName, variant: Variant): { model: Model<unknown>; maxDepth: number } {
  switch (name) {
    case 'lease':
      return { model: leaseModel(scope.lease, variant) as Model<unknown>, maxDepth: scope.lease.maxDepth };
    case 'ledger':
      return { model: ledgerModel(scope.ledger, variant) as Model<unknown>, maxDepth: scope.ledger.maxDepth };
    case 'promotion':
      return { model: promotionModel(scope.promotion, variant) as Model<unknown>, maxDepth: scope.promotion.maxDepth };
    case 'held':
      return { model: promotionModel(scope.held, variant) as Model<unknown>, maxDepth: scope.held.maxDepth };
    case 'judged':
      return { model: promotionModel(scope.judged, variant) as Model<unknown>, maxDepth: scope.judged.maxDepth };
    case 'stretch':
      return { model: promotionModel(scope.stretch, variant) as Model<unknown>, maxDepth: scope.stretch.maxDepth };
    case 'alias':
      return { model: aliasModel(scope.alias, variant) as Model<unknown>, maxDepth: scope.alias.maxDepth };
  }
}

export interface RunResult extends ExploreResult {
  readonly variant: Variant;
  /** Invariants the run had to break (none for a correct model). */
  readonly expected: readonly string[];
  /** Correct model: no violation. Variant: every expected invariant broken. */
  readonly ok: boolean;
}

export function runCorrect(scopeName: ScopeName, name: ModelName): RunResult {
  const { model, maxDepth } = modelOf(SCOPES[scopeName], name, 'correct');
  const r = explore(model, { maxDepth });
  return { ...r, variant: 'correct', expected: [], ok: r.violations.length === 0 };
}

/** A variant hunts for its invariants: the search stops once each has a counterexample. */
export function runVariant(scopeName: ScopeName, run: VariantRun): RunResult {
  const { model } = modelOf(SCOPES[scopeName], run.model, run.variant);
  const r = explore(model, { maxDepth: VARIANT_DEPTH, stopWhen: run.breaks });
  const caught = new Set(r.violations.map((v) => v.invariant));
  return { ...r, variant: run.variant, expected: run.breaks, ok: run.breaks.every((b) => caught.has(b)) };
}
