import { z } from 'zod';
import { gateJudgeSchema, isCountsJudge, type GateJudge } from '../judge/gate.js';

/**
 * Provider gates: a stage's gates that we read ourselves from where the
 * metrics already live (Prometheus, CloudWatch alarms, CloudWatch metrics),
 * beside the thresholds on pushed signals. Every string and list is bounded
 * here, before anything loops over it, and unknown fields are refused, so a
 * misspelt field is an error, not a gate that silently never fails.
 *
 * A reading passes when `value <comparison> threshold` holds: `"comparison":
 * "<", "threshold": 0.05` passes while the value stays under 0.05.
 */

export const COMPARISONS = ['<', '<=', '>', '>='] as const;
export type Comparison = (typeof COMPARISONS)[number];

/** The per-type default read interval: alarms are cheap and batched (read every tick); metrics follow their resolution. */
export const DEFAULT_INTERVAL_SECONDS = { prometheus: 30, cloudwatchAlarm: 10, cloudwatchMetric: 60, webhook: 30, signals: 30 } as const;
/** At most this many provider gates on one stage (a tick reads them all; an event's plan carries their readings). */
export const MAX_PROVIDER_GATES = 10;

const gateName = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'letters, digits, _ . : - (at most 64)');
const region = z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d{1,2}$/, 'an AWS region such as us-east-1');
const finite = z.number().refine(Number.isFinite, 'must be a finite number');

const limits = (type: keyof typeof DEFAULT_INTERVAL_SECONDS) => ({
  name: gateName,
  /** Read at most once per interval while the stage is active. */
  intervalSeconds: z.number().int().min(1).max(3_600).default(DEFAULT_INTERVAL_SECONDS[type]),
  /** A query that takes longer is abandoned and the reading is inconclusive. */
  timeoutSeconds: z.number().int().min(1).max(60).default(10),
  /** Not read until this long after the stage became active (or was resumed): time for the new version's series to appear. */
  initialDelaySeconds: z.number().int().nonnegative().max(86_400).default(0),
  /** The stage rolls back when more readings than this fail (Argo's failureLimit). */
  failureLimit: z.number().int().nonnegative().max(1_000).default(0),
  /** The rollout pauses when more readings than this are inconclusive (Argo's inconclusiveLimit; Argo's default is 0, ours tolerates two blips). */
  inconclusiveLimit: z.number().int().nonnegative().max(1_000).default(2),
  /**
   * What failures past failureLimit do (absent: rollback; hold for a sample-ratio gate, onFailOf): `pause` stops the rollout where it is (a
   * change that cannot be rolled back, such as a migration); `hold` only keeps the stage from
   * promoting while the gate's newest reading fails.
   */
  onFail: z.enum(['rollback', 'pause', 'hold']).optional(),
  /** Read, judged and recorded beside the other gates, never acting: a gate on trial. */
  dryRun: z.boolean().optional(),
  /**
   * The stage may promote only once this many readings in a row have passed (absent: 1, the newest).
   * A failure or an inconclusive reading starts the count again; a resume does too, as it starts the period.
   */
  consecutiveSuccesses: z.number().int().min(1).max(1_000).optional(),
});

const comparisonFields = { comparison: z.enum(COMPARISONS), threshold: finite };

/**
 * A spec never carries or points at a secret: it names a credential the
 * operator bound to the gate's origin (outbound/policy.ts), and the operator
 * says where its secret lives.
 */
const credentialName = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, "the name of a credential in the operator's outbound configuration");

/** A CloudWatch alarm's state, as alarm gates and pushed alarm changes carry it. */
export type AlarmState = 'OK' | 'ALARM' | 'INSUFFICIENT_DATA';

/** Placeholders a judged query names its cohort by: the cohort, or the version it runs. (`{{step}}`, the step as a PromQL duration, may also appear.) */
export const COHORT_PLACEHOLDERS = ['{{cohort}}', '{{version}}'] as const;
/** At most this many points a cohort in one judged reading (window / step). */
export const MAX_JUDGED_POINTS = 1_000;

export const prometheusGateSchema = z
  .object({
    type: z.literal('prometheus'),
    ...limits('prometheus'),
    /** The server's base URL: http://prometheus:9090, or an AMP workspace's https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>. */
    address: z
      .string()
      .max(2_048)
      .url()
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL'),
    /**
     * PromQL answering one number: a scalar, or a vector of exactly one sample. With a `judge`, one
     * series per cohort: `{{cohort}}` (canary, baseline) or `{{version}}` (the version the cohort runs).
     */
    query: z.string().trim().min(1).max(4_096),
    /**
     * With `judge: sequential-rate`: each cohort's requests per step (`query` is then its errors per
     * step), e.g. `sum(increase(http_requests_total{version="{{version}}"}[{{step}}]))`.
     */
    requestsQuery: z.string().trim().min(1).max(4_096).optional(),
    /**
     * With `judge: sequential-rate`: only steps that ended at least this long ago are read (default 60), so a
     * step's counts are whole when first read and the same at every reading after (scrapes and remote
     * writes arrive late).
     */
    settleSeconds: z.number().int().min(0).max(600).optional(),
    comparison: z.enum(COMPARISONS).optional(),
    threshold: finite.optional(),
    /** Judge the canary against the baseline instead of against a threshold (shared/judge/gate.ts). */
    judge: gateJudgeSchema.optional(),
    /** A judged reading's range: the last `windowSeconds` (never before the stage's period began), one point each `stepSeconds`. */
    windowSeconds: z.number().int().min(1).max(86_400).optional(),
    stepSeconds: z.number().int().min(1).max(3_600).optional(),
    /** The operator's credential for this origin (basic, bearer, or SigV4 for Amazon Managed Service for Prometheus). */
    credential: credentialName.optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    if (!g.judge) {
      if (g.comparison === undefined)
        ctx.addIssue({ code: 'custom', path: ['comparison'], message: 'a gate without a judge needs a comparison (<, <=, >, >=)' });
      if (g.threshold === undefined) ctx.addIssue({ code: 'custom', path: ['threshold'], message: 'a gate without a judge needs a threshold' });
      for (const f of ['windowSeconds', 'stepSeconds', 'requestsQuery', 'settleSeconds'] as const) {
        if (g[f] !== undefined) ctx.addIssue({ code: 'custom', path: [f], message: `${f} goes with a judge: a threshold gate reads one instant value` });
      }
      return;
    }
    const kind = g.judge.kind;
    const counts = isCountsJudge(g.judge);
    if (kind === 'sequential-rate' && g.requestsQuery === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['requestsQuery'],
        message: "a sequential-rate gate needs requestsQuery (each cohort's requests per step) beside query (its errors)",
      });
    if (kind === 'sample-ratio' && g.requestsQuery !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['requestsQuery'],
        message: "a sample-ratio gate counts with query alone (each cohort's requests or exposures per step): drop requestsQuery",
      });
    for (const f of ['requestsQuery', 'settleSeconds'] as const) {
      if (!counts && g[f] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [f],
          message: `${f} goes with judge ${f === 'settleSeconds' ? 'sequential-rate or sample-ratio' : 'sequential-rate'}; ${kind} judges one series a cohort`,
        });
    }
    if (counts) {
      for (const f of ['query', 'requestsQuery'] as const) {
        const q = g[f];
        if (q !== undefined && !q.includes('{{step}}'))
          ctx.addIssue({
            code: 'custom',
            path: [f],
            message: `a ${kind} query counts each step: write its range as {{step}}, e.g. sum(increase(x{version="{{version}}"}[{{step}}]))`,
          });
      }
    }
    if (counts && g.windowSeconds !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['windowSeconds'],
        message:
          kind === 'sequential-rate'
            ? 'a sequential-rate gate reads every step since the stage began (its guarantee needs all of them): drop windowSeconds'
            : "a sample-ratio gate reads every step since the stage began (the split of the stage's whole period): drop windowSeconds",
      });
    if (g.requestsQuery !== undefined && !COHORT_PLACEHOLDERS.some((p) => g.requestsQuery!.includes(p))) {
      ctx.addIssue({
        code: 'custom',
        path: ['requestsQuery'],
        message: 'a judged query names its cohort with {{cohort}} or {{version}}: otherwise both cohorts read the same series',
      });
    }
    for (const f of ['comparison', 'threshold'] as const) {
      if (g[f] !== undefined)
        ctx.addIssue({ code: 'custom', path: [f], message: `a judged gate compares the canary with the baseline, not with a ${f}: drop ${f}` });
    }
    if (!COHORT_PLACEHOLDERS.some((p) => g.query.includes(p))) {
      ctx.addIssue({
        code: 'custom',
        path: ['query'],
        message: 'a judged query names its cohort with {{cohort}} or {{version}}: otherwise both cohorts read the same series',
      });
    }
    const { windowSeconds, stepSeconds } = judgedRange(g);
    if (windowSeconds / stepSeconds > MAX_JUDGED_POINTS) {
      ctx.addIssue({
        code: 'custom',
        path: ['stepSeconds'],
        message: `${windowSeconds} s every ${stepSeconds} s is more than ${MAX_JUDGED_POINTS} points a cohort`,
      });
    }
  });

/** How long a sequential-rate gate lets a step settle before reading it, by default. */
export const DEFAULT_SETTLE_SECONDS = 60;

/** A judged gate's range: 10 minutes by default, a point per interval. */
export function judgedRange(g: { windowSeconds?: number | undefined; stepSeconds?: number | undefined; intervalSeconds: number }): {
  windowSeconds: number;
  stepSeconds: number;
} {
  return { windowSeconds: g.windowSeconds ?? 600, stepSeconds: g.stepSeconds ?? Math.min(g.intervalSeconds, 60) };
}

/** What an earlier spec's `auth` now is: said plainly, instead of "unrecognized key". */
function noAuth(g: unknown, ctx: z.RefinementCtx): void {
  if (typeof g === 'object' && g !== null && 'auth' in g) {
    ctx.addIssue({
      code: 'custom',
      path: ['auth'],
      message: 'a spec no longer names secrets or environment variables: name a credential the operator configured for this origin ("credential": "<name>")',
    });
  }
}

const alarmName = z.string().trim().min(1).max(255);

export const cloudwatchAlarmGateSchema = z
  .object({
    type: z.literal('cloudwatchAlarm'),
    ...limits('cloudwatchAlarm'),
    /** AppConfig's monitor semantics: the gate fails while any of these is in ALARM. */
    alarms: z.array(alarmName).min(1).max(100),
    region: region.optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    const seen = new Set<string>();
    g.alarms.forEach((a, i) => {
      if (seen.has(a)) ctx.addIssue({ code: 'custom', path: ['alarms', i], message: `duplicate alarm "${a}"` });
      seen.add(a);
    });
  });

/** CloudWatch's statistics: the named ones, percentiles and trimmed means (p99, p99.9, tm90, …). */
const stat = z
  .string()
  .regex(
    /^(SampleCount|Average|Sum|Minimum|Maximum|(p|tm|wm|tc|ts)\d{1,2}(\.\d{1,3})?|p100|IQM)$/,
    'a CloudWatch statistic: Sum, Average, Minimum, Maximum, SampleCount, pNN, tmNN…',
  );
const dimensionValue = z.string().min(1).max(1_024);
/**
 * A dimension's value: one string, or in a judged gate one a cohort, where no template names both (an
 * ALB's `TargetGroup`, `targetgroup/web-v2/73e2d6bc24d8a067` against `targetgroup/web-v1/9a1c…`).
 */
const cohortValues = z.object({ canary: dimensionValue, baseline: dimensionValue }).strict();
export type DimensionValue = string | z.output<typeof cohortValues>;
/** Every string a dimension's value holds: itself, or each cohort's. */
export const dimensionStrings = (v: DimensionValue): string[] => (typeof v === 'string' ? [v] : [v.canary, v.baseline]);

export const metricSchema = z
  .object({
    namespace: z.string().min(1).max(255),
    metricName: z.string().min(1).max(255),
    dimensions: z
      .record(z.string().min(1).max(255), z.union([dimensionValue, cohortValues]))
      .refine((d) => Object.keys(d).length <= 30, 'at most 30 dimensions')
      .default({}),
    stat,
  })
  .strict();
export type MetricStat = z.output<typeof metricSchema>;

const metricId = z.string().regex(/^[a-z][a-zA-Z0-9_]{0,254}$/, 'starts with a lowercase letter; letters, digits and _ (GetMetricData ids)');

/** How long a sequential-rate cloudwatchMetric gate lets a period settle before reading it, by default: CloudWatch data lands a minute or two late. */
export const DEFAULT_CLOUDWATCH_SETTLE_SECONDS = 180;
/** A judged cloudwatchMetric gate's window, by default, in periods. */
export const DEFAULT_JUDGED_PERIODS = 20;
/** The statistics that count a period (a sequential-rate gate's requests and errors). */
const COUNTING_STATS = ['Sum', 'SampleCount'];

/** The placeholders a metric carries outside its dimensions' values, where nothing fills them. */
function misplacedPlaceholder(m: MetricStat): 'namespace' | 'metricName' | 'dimensions' | null {
  const has = (s: string) => COHORT_PLACEHOLDERS.some((p) => s.includes(p));
  if (has(m.namespace)) return 'namespace';
  if (has(m.metricName)) return 'metricName';
  return Object.keys(m.dimensions).some(has) ? 'dimensions' : null;
}

export const cloudwatchMetricGateSchema = z
  .object({
    type: z.literal('cloudwatchMetric'),
    ...limits('cloudwatchMetric'),
    /**
     * One metric and statistic… With a `judge`, one series per cohort: a dimension's value names the cohort
     * with `{{version}}` (the version it runs: `"ExecutedVersion": "{{version}}"` for a Lambda alias) or `{{cohort}}`.
     */
    metric: metricSchema.optional(),
    /** …or a metric math expression over `metrics`, each named by its id (`errors / requests`). Not with a judge. */
    expression: z.string().trim().min(1).max(2_048).optional(),
    metrics: z
      .record(metricId, metricSchema)
      .refine((m) => Object.keys(m).length >= 1 && Object.keys(m).length <= 10, 'between 1 and 10 metrics')
      .optional(),
    /** The value is the statistic over the last whole period; a judged reading has one point a period. */
    periodSeconds: z
      .number()
      .int()
      .refine((p) => [1, 5, 10, 30].includes(p) || (p >= 60 && p <= 86_400 && p % 60 === 0), 'must be 1, 5, 10, 30 or a multiple of 60 up to 86400')
      .default(60),
    comparison: comparisonFields.comparison.optional(),
    threshold: comparisonFields.threshold.optional(),
    /** Judge the canary against the baseline instead of against a threshold (shared/judge/gate.ts). */
    judge: gateJudgeSchema.optional(),
    /** A judged reading's range: the last `windowSeconds` of whole periods (default DEFAULT_JUDGED_PERIODS periods; never before the stage's period began). */
    windowSeconds: z.number().int().min(1).max(86_400).optional(),
    /** A Prometheus gate's step is a CloudWatch gate's period: named here only to say so. */
    stepSeconds: z.never({ error: 'a CloudWatch reading has one point a period: give periodSeconds, not stepSeconds' }).optional(),
    /** With `judge: sequential-rate`: each cohort's requests per period (`metric` is then its errors per period), e.g. Lambda's Invocations, Sum. */
    requestsMetric: metricSchema.optional(),
    /**
     * With `judge: sequential-rate`: only periods that ended at least this long ago are read (default
     * DEFAULT_CLOUDWATCH_SETTLE_SECONDS), so a period's counts are whole when first read.
     */
    settleSeconds: z.number().int().min(0).max(3_600).optional(),
    region: region.optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    if ((g.metric === undefined) === (g.expression === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['metric'], message: 'give either metric, or expression with metrics' });
    }
    if (g.expression !== undefined && g.metrics === undefined)
      ctx.addIssue({ code: 'custom', path: ['metrics'], message: 'an expression needs the metrics it names' });
    if (g.metric !== undefined && g.metrics !== undefined)
      ctx.addIssue({ code: 'custom', path: ['metrics'], message: 'metrics go with an expression, not with metric' });
    if (!g.judge) {
      if (g.comparison === undefined)
        ctx.addIssue({ code: 'custom', path: ['comparison'], message: 'a gate without a judge needs a comparison (<, <=, >, >=)' });
      if (g.threshold === undefined) ctx.addIssue({ code: 'custom', path: ['threshold'], message: 'a gate without a judge needs a threshold' });
      for (const f of ['windowSeconds', 'requestsMetric', 'settleSeconds'] as const) {
        if (g[f] !== undefined) ctx.addIssue({ code: 'custom', path: [f], message: `${f} goes with a judge: a threshold gate reads one value` });
      }
      const metrics = [['metric', g.metric], ...Object.entries(g.metrics ?? {}).map(([id, m]) => [`metrics.${id}`, m] as const)] as const;
      for (const [f, m] of metrics) {
        const split = Object.entries(m?.dimensions ?? {}).find(([, v]) => typeof v !== 'string');
        if (split)
          ctx.addIssue({
            code: 'custom',
            path: [...f.split('.'), 'dimensions', split[0]],
            message: 'a value for each cohort goes with a judge: a threshold gate reads one series',
          });
      }
      return;
    }
    for (const f of ['comparison', 'threshold'] as const) {
      if (g[f] !== undefined)
        ctx.addIssue({ code: 'custom', path: [f], message: `a judged gate compares the canary with the baseline, not with a ${f}: drop ${f}` });
    }
    const kind = g.judge.kind;
    const counts = isCountsJudge(g.judge);
    if (g.expression !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['expression'],
        message: `a judged gate reads one metric a cohort: give metric${kind === 'sequential-rate' ? ' (its errors) and requestsMetric' : ''}, not metric math`,
      });
    if (kind === 'sequential-rate' && g.requestsMetric === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['requestsMetric'],
        message: "a sequential-rate gate needs requestsMetric (each cohort's requests per period) beside metric (its errors)",
      });
    if (kind === 'sample-ratio' && g.requestsMetric !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['requestsMetric'],
        message: "a sample-ratio gate counts with metric alone (each cohort's requests or exposures per period): drop requestsMetric",
      });
    for (const f of ['requestsMetric', 'settleSeconds'] as const) {
      if (!counts && g[f] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [f],
          message: `${f} goes with judge ${f === 'settleSeconds' ? 'sequential-rate or sample-ratio' : 'sequential-rate'}; ${kind} judges one series a cohort`,
        });
    }
    if (counts && g.windowSeconds !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['windowSeconds'],
        message:
          kind === 'sequential-rate'
            ? 'a sequential-rate gate reads every period since the stage began (its guarantee needs all of them): drop windowSeconds'
            : "a sample-ratio gate reads every period since the stage began (the split of the stage's whole period): drop windowSeconds",
      });
    for (const f of ['metric', 'requestsMetric'] as const) {
      const m = g[f];
      if (m === undefined) continue;
      const misplaced = misplacedPlaceholder(m);
      if (misplaced)
        ctx.addIssue({
          code: 'custom',
          path: [f, misplaced],
          message: `{{cohort}} and {{version}} are filled in dimensions' values only, not in a ${misplaced === 'dimensions' ? "dimension's name" : misplaced}`,
        });
      if (!Object.values(m.dimensions).some((v) => typeof v !== 'string' || COHORT_PLACEHOLDERS.some((p) => v.includes(p))))
        ctx.addIssue({
          code: 'custom',
          path: [f, 'dimensions'],
          message:
            'a judged metric names its cohort in a dimension\'s value with {{version}} or {{cohort}} (e.g. "ExecutedVersion": "{{version}}"), or gives a dimension a value for each ({"canary": …, "baseline": …}): otherwise both cohorts read the same series',
        });
      if (counts && !COUNTING_STATS.includes(m.stat))
        ctx.addIssue({
          code: 'custom',
          path: [f, 'stat'],
          message: `a ${kind} gate counts each period: stat Sum (or SampleCount), not ${m.stat}`,
        });
    }
    const { windowSeconds, periodSeconds } = judgedMetricRange(g);
    if (windowSeconds < periodSeconds)
      ctx.addIssue({
        code: 'custom',
        path: ['windowSeconds'],
        message: `${windowSeconds} s is shorter than one period (${periodSeconds} s): a reading would hold no whole period`,
      });
    if (windowSeconds / periodSeconds > MAX_JUDGED_POINTS)
      ctx.addIssue({
        code: 'custom',
        path: [g.windowSeconds === undefined ? 'periodSeconds' : 'windowSeconds'],
        message: `${windowSeconds} s every ${periodSeconds} s is more than ${MAX_JUDGED_POINTS} points a cohort`,
      });
  });

/** A judged cloudwatchMetric gate's range: DEFAULT_JUDGED_PERIODS periods by default, a point per period. */
export function judgedMetricRange(g: { windowSeconds?: number | undefined; periodSeconds: number }): { windowSeconds: number; periodSeconds: number } {
  return { windowSeconds: g.windowSeconds ?? DEFAULT_JUDGED_PERIODS * g.periodSeconds, periodSeconds: g.periodSeconds };
}

/** How long a `signals` gate lets a step settle before counting it, by default: reporters send within seconds of a step's end. */
export const DEFAULT_SIGNALS_SETTLE_SECONDS = 30;

/**
 * A gate on pushed reports by cohort (cohort-signals.ts): the canary's against the baseline's, as the
 * reporters sent them, read from the store at the gate's interval. Always judged: a threshold on one
 * number is a stage's `thresholds`.
 *   metric `errors`   each cohort's requests and errors: counted per step since the stage's period began
 *                     by sequential-rate and sample-ratio (its requests); mann-whitney and relative
 *                     compare the error rate step by step over the window
 *   metric `latency`  each cohort's latency samples over the window (mann-whitney, relative)
 */
export const signalsGateSchema = z
  .object({
    type: z.literal('signals'),
    ...limits('signals'),
    metric: z.enum(['errors', 'latency']),
    judge: gateJudgeSchema,
    /** The series judges' range: the last `windowSeconds` (never before the stage's period began); default 600. */
    windowSeconds: z.number().int().min(1).max(86_400).optional(),
    /** The grid reports are counted on (default: the interval, at most 60 s). */
    stepSeconds: z.number().int().min(1).max(3_600).optional(),
    /** Counted steps only once they ended this long ago (default DEFAULT_SIGNALS_SETTLE_SECONDS), so a late report still counts. */
    settleSeconds: z.number().int().min(0).max(600).optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    const kind = g.judge.kind;
    const counts = isCountsJudge(g.judge);
    if (counts && g.metric === 'latency')
      ctx.addIssue({
        code: 'custom',
        path: ['metric'],
        message: `${kind} counts requests${kind === 'sequential-rate' ? ' and errors' : ''}: metric errors (latency samples are judged by mann-whitney or relative)`,
      });
    if (counts && g.windowSeconds !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['windowSeconds'],
        message: `a ${kind} gate counts every step since the stage began: drop windowSeconds`,
      });
    if (!counts && g.settleSeconds !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['settleSeconds'],
        message: `settleSeconds goes with judge sequential-rate or sample-ratio; ${kind} judges the window`,
      });
    const { windowSeconds, stepSeconds } = judgedRange(g);
    if (!counts && g.metric === 'errors' && windowSeconds / stepSeconds > MAX_JUDGED_POINTS)
      ctx.addIssue({
        code: 'custom',
        path: ['stepSeconds'],
        message: `${windowSeconds} s every ${stepSeconds} s is more than ${MAX_JUDGED_POINTS} points a cohort`,
      });
  });

/**
 * A hook (Flagger's, as a gate): an HTTP POST we make while the stage is
 * active, every interval, judged like any reading so no hook can stall a
 * rollout silently.
 *   confirm-promotion  2xx passes (the stage may promote); 4xx fails
 *   rollback           2xx fails (roll back now); 4xx passes
 *   confirm-rollout,   (the spec's `hooks`, before the first stage of an attempt:
 *   pre-rollout        no traffic moves until they pass) 2xx passes; 4xx fails
 *   post-rollout       (the spec's `hooks`, once the rollout has ended: completed,
 *                      rolled back or aborted) sent until a 2xx, counted against
 *                      the same limits; it changes nothing about the rollout
 * Anything else (3xx, 5xx, a timeout, no answer) is inconclusive.
 */
export const WEBHOOK_HOOKS = ['confirm-promotion', 'rollback', 'confirm-rollout', 'pre-rollout', 'post-rollout'] as const;
/** Hooks a stage's gates take; the others are asked once per attempt, before its first stage (the spec's `hooks`). */
export const STAGE_HOOKS: readonly (typeof WEBHOOK_HOOKS)[number][] = ['confirm-promotion', 'rollback'];
export const BEFORE_ROLLOUT_HOOKS: readonly (typeof WEBHOOK_HOOKS)[number][] = ['confirm-rollout', 'pre-rollout'];
export const SPEC_HOOKS: readonly (typeof WEBHOOK_HOOKS)[number][] = [...BEFORE_ROLLOUT_HOOKS, 'post-rollout'];
export const webhookGateSchema = z
  .object({
    type: z.literal('webhook'),
    ...limits('webhook'),
    hook: z.enum(WEBHOOK_HOOKS),
    url: z
      .string()
      .max(2_048)
      .url()
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL'),
    /** The operator's credential for this origin: hmac signs the body; bearer or basic authorize it. */
    credential: credentialName.optional(),
    /** Sent as given in the body: what the hook needs to know beyond the rollout (a ticket, a test suite). */
    metadata: z
      .record(z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/), z.string().max(1_024))
      .refine((m) => Object.keys(m).length <= 20, 'at most 20 entries')
      .optional(),
  })
  .strict();

/** The gates themselves, by `type` (providerGateSchema checks a spec's old `auth` first, to say what replaced it). */
export const providerGateUnion = z.discriminatedUnion('type', [
  prometheusGateSchema,
  cloudwatchAlarmGateSchema,
  cloudwatchMetricGateSchema,
  webhookGateSchema,
  signalsGateSchema,
]);

export const providerGateSchema = z.unknown().superRefine(noAuth).pipe(providerGateUnion);

export const providerGatesSchema = z
  .array(providerGateSchema)
  .max(MAX_PROVIDER_GATES)
  .superRefine((gates, ctx) => {
    gates.forEach((g, i) => {
      if (g.type === 'webhook' && !STAGE_HOOKS.includes(g.hook))
        ctx.addIssue({
          code: 'custom',
          path: [i, 'hook'],
          message: `${g.hook} is asked ${g.hook === 'post-rollout' ? 'once the rollout ends' : 'before the first stage'}: declare it in the spec's hooks, not in a stage's gates`,
        });
    });
    const names = new Set<string>();
    gates.forEach((g, i) => {
      if (names.has(g.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate gate name "${g.name}"` });
      names.add(g.name);
    });
  });

/**
 * The spec's `hooks`: confirm-rollout and pre-rollout are asked before the
 * first stage of each attempt (traffic moves only once all pass);
 * post-rollout is sent once the rollout has ended.
 */
export const specHooksSchema = z
  .array(webhookGateSchema)
  .min(1)
  .max(5)
  .superRefine((hooks, ctx) => {
    const names = new Set<string>();
    hooks.forEach((h, i) => {
      if (!SPEC_HOOKS.includes(h.hook))
        ctx.addIssue({
          code: 'custom',
          path: [i, 'hook'],
          message: `${h.hook} is a stage's gate: declare it in the stages' gates.providers; here: ${SPEC_HOOKS.join(', ')}`,
        });
      if (names.has(h.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate hook name "${h.name}"` });
      names.add(h.name);
    });
  });

export type PrometheusGate = z.output<typeof prometheusGateSchema>;
export type CloudwatchAlarmGate = z.output<typeof cloudwatchAlarmGateSchema>;
export type CloudwatchMetricGate = z.output<typeof cloudwatchMetricGateSchema>;
export type WebhookGate = z.output<typeof webhookGateSchema>;
export type SignalsGate = z.output<typeof signalsGateSchema>;

/** The spec's hooks asked before the first stage of an attempt (counted with stage 0). */
export function beforeRolloutHooks(hooks: readonly WebhookGate[] | undefined): readonly WebhookGate[] {
  return hooks?.filter((h) => BEFORE_ROLLOUT_HOOKS.includes(h.hook)) ?? [];
}

/** The spec's hooks sent once the rollout has ended. */
export function postRolloutHooks(hooks: readonly WebhookGate[] | undefined): readonly WebhookGate[] {
  return hooks?.filter((h) => h.hook === 'post-rollout') ?? [];
}
export type ProviderGate = z.output<typeof providerGateSchema>;
export type ProviderType = ProviderGate['type'];
export const PROVIDER_TYPES = ['prometheus', 'cloudwatchAlarm', 'cloudwatchMetric', 'webhook', 'signals'] as const satisfies readonly ProviderType[];

/** What a reading of the gate asks, in words a person can check: the PromQL, the alarms, the metric query. */
export function queryOf(g: ProviderGate): string {
  switch (g.type) {
    case 'prometheus':
      if (!g.judge) return g.query;
      return g.requestsQuery === undefined
        ? `${g.judge.kind} of the canary against the baseline: ${g.query}`
        : `${g.judge.kind} of the canary against the baseline: errors ${g.query}; requests ${g.requestsQuery}`;
    case 'cloudwatchAlarm':
      return `alarms ${g.alarms.join(', ')}`;
    case 'cloudwatchMetric': {
      const m = (x: MetricStat) =>
        `${x.stat}(${x.namespace} ${x.metricName}${
          Object.keys(x.dimensions).length
            ? ` {${Object.entries(x.dimensions)
                .map(([k, v]) => `${k}=${typeof v === 'string' ? v : `canary:${v.canary}|baseline:${v.baseline}`}`)
                .join(', ')}}`
            : ''
        })`;
      if (g.judge && g.metric) {
        const what = g.requestsMetric === undefined ? m(g.metric) : `errors ${m(g.metric)}; requests ${m(g.requestsMetric)}`;
        return `${g.judge.kind} of the canary against the baseline: ${what} over ${g.periodSeconds} s`;
      }
      const what = g.metric
        ? m(g.metric)
        : `${g.expression} where ${Object.entries(g.metrics ?? {})
            .map(([id, x]) => `${id} = ${m(x)}`)
            .join('; ')}`;
      return `${what} over ${g.periodSeconds} s`;
    }
    case 'webhook':
      return `${g.hook} hook: POST ${g.url}`;
    case 'signals':
      return `${g.judge.kind} of the canary against the baseline: pushed ${g.metric === 'errors' ? 'requests and errors' : 'latency samples'} by cohort`;
  }
}

/** The judge a stored reading's query names (`queryOf` writes "<judge> of the canary against the baseline: …"), or null: a threshold gate's. */
export function judgeOfQuery(query: string): (typeof JUDGE_KIND_NAMES)[number] | null {
  const kind = /^([a-z-]+) of the canary against the baseline: /.exec(query)?.[1];
  return JUDGE_KIND_NAMES.find((k) => k === kind) ?? null;
}
const JUDGE_KIND_NAMES = ['mann-whitney', 'relative', 'sequential-rate', 'sample-ratio'] as const;

/**
 * What a gate's failures past failureLimit do: its `onFail`, or by default `rollback`, but `hold` for a
 * sample-ratio gate, whose failure says the split is not the one meant (nothing about the canary's health).
 */
export function onFailOf(g: ProviderGate): 'rollback' | 'pause' | 'hold' {
  if (g.onFail) return g.onFail;
  return gateJudgeOf(g)?.kind === 'sample-ratio' ? 'hold' : 'rollback';
}

/** The judge a gate names: a judged Prometheus or CloudWatch gate's, a signals gate's (always judged); null for a threshold gate, an alarm or a hook. */
export function gateJudgeOf(g: ProviderGate): GateJudge | null {
  return g.type === 'prometheus' || g.type === 'cloudwatchMetric' || g.type === 'signals' ? (g.judge ?? null) : null;
}

/** Whether `value` passes `comparison threshold`. */
export function passes(value: number, comparison: Comparison, threshold: number): boolean {
  switch (comparison) {
    case '<':
      return value < threshold;
    case '<=':
      return value <= threshold;
    case '>':
      return value > threshold;
    case '>=':
      return value >= threshold;
  }
}
