import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { parseConfig } from '../config.js';
import type { OutboundPolicy } from '../outbound/policy.js';
import {
  gateJudgeOf,
  specHooksSchema,
  providerGatesSchema,
  providerGateSchema,
  providerGateUnion,
  MAX_PROVIDER_GATES,
  type CloudwatchMetricGate,
  type ProviderGate,
  type WebhookGate,
} from './gate-spec.js';

/**
 * Rollout specs. A spec names an opaque target and either explicit stages or
 * a preset (AppConfig / CodeDeploy style) that expands to explicit stages.
 * Unknown fields are refused, so a misspelt gate is an error, not a no-op.
 */

export const gatesSchema = z
  .object({
    /** Ceiling on errors / requests, a fraction in [0, 1]. */
    maxErrorRate: z.number().min(0).max(1).optional(),
    /** Ceiling on the stage's reported p99 latency. */
    maxP99LatencyMs: z.number().positive().optional(),
    /** Metric gates are judged only once this many requests were seen; promotion waits for them. */
    minRequests: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).default(0),
    /** Alarms that must be OK to promote; any of them in ALARM during the bake rolls back. */
    alarms: z.array(z.string().trim().min(1).max(255)).max(100).default([]),
    /**
     * Gates read from where the metrics live (gate-spec.ts). Absent rather
     * than empty by default: a spec stored before providers existed reads
     * back equal to the same spec parsed now, so re-creating it stays a no-op.
     */
    providers: providerGatesSchema.optional(),
  })
  .strict();

/** What an operator's target is named (actuation/targets.ts), and what a spec's `actuators` list. */
export const TARGET_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** A year: longer than any bake a person means, and well inside every store's integer range. */
const MAX_SECONDS = 31_536_000;
const bakeSeconds = z.number().int().nonnegative().max(MAX_SECONDS);

export const stageSchema = z
  .object({
    name: z.string().trim().min(1).max(100),
    /** Share of traffic on the new version while this stage runs. */
    percent: z.number().gt(0).max(100),
    bakeSeconds: bakeSeconds,
    gates: gatesSchema.default({ minRequests: 0, alarms: [] }),
    /**
     * How long the bake may stretch while the stage has too little data to judge (fewer than
     * `gates.minRequests`, or a judged gate's "not enough data"); absent: it waits as long as that
     * lasts (up to the progress deadline). Absent rather than defaulted, as `providers` is.
     */
    maxBakeSeconds: bakeSeconds.optional(),
    /**
     * What the stage does once its bake (stretched to maxBakeSeconds) is over with too little data: pause
     * (default), rollback, or pass: promote as if the gates short of data had passed, an explicit opt-in
     * recorded on the promotion (`insufficientData`). Pass never overrides a failure, a breach, an alarm
     * not OK or a gate that has data and does not pass.
     */
    onInsufficientData: z.enum(['pause', 'rollback', 'pass']).optional(),
  })
  .strict()
  .refine((s) => s.maxBakeSeconds === undefined || s.maxBakeSeconds >= s.bakeSeconds, {
    path: ['maxBakeSeconds'],
    message: 'must be at least bakeSeconds: it is how far the bake may stretch',
  });

const targetSchema = z
  .object({
    service: z.string().trim().min(1).max(200),
    version: z.string().trim().min(1).max(200),
    /** The version the new one replaces, when the spec knows it: what assignment answers for the stable cohort. */
    stableVersion: z.string().trim().min(1).max(200).optional(),
    labels: z
      .record(z.string().regex(/^[A-Za-z0-9_.:/-]{1,63}$/, 'a label name: letters, digits, _ . : / - (at most 63)'), z.string().max(256))
      .refine((l) => Object.keys(l).length <= 32, 'at most 32 labels')
      .default({}),
  })
  .strict();

const common = {
  target: targetSchema,
  /** A running rollout that makes no progress for this long is flagged. */
  progressDeadlineSeconds: z.number().int().positive().max(MAX_SECONDS).default(3_600),
  /** …and aborted (rolled back) when this is set. */
  progressDeadlineAbort: z.boolean().default(false),
  /**
   * The operator's targets (by name, actuation/targets.ts) this rollout moves. Absent rather than
   * empty by default: a spec stored before actuation existed reads back equal to the same spec parsed now.
   */
  /** confirm-rollout and pre-rollout hooks: asked before the first stage of each attempt; post-rollout: sent once it has ended (gate-spec.ts). */
  hooks: specHooksSchema.optional(),
  /**
   * Gates that watch every stage from `fromStage` (a name or an index; absent: the first) to the end,
   * declared once (Argo's background analysis): read and counted in each of those stages like the
   * stage's own gates (see stageProviders). A judged one skips stages at 100 %, where no baseline is left.
   */
  rolloutGates: z
    .object({
      fromStage: z.union([z.number().int().nonnegative(), z.string().trim().min(1).max(100)]).optional(),
      /**
       * `stage` (absent): each stage counts its own failures and inconclusive readings against the limits.
       * `rollout`: they add up from fromStage on (one failureLimit for the whole run, as Argo's background
       * analysis counts); each stage still waits for its own pass, and passes in a row never cross stages.
       */
      count: z.enum(['stage', 'rollout']).optional(),
      providers: providerGatesSchema.refine((g) => g.length > 0, 'at least one gate (or no rolloutGates)'),
    })
    .strict()
    .optional(),
  actuators: z
    .array(z.string().regex(TARGET_NAME, 'a target name: lower-case letters, digits and - (at most 63)'))
    .min(1)
    .max(8)
    .refine((a) => new Set(a).size === a.length, 'each target at most once')
    .optional(),
};

/** A promote-full must fit one DynamoDB transaction (100 items): stages + their events + rollout + fence. */
export const MAX_STAGES = 40;

const presetGates = { gates: gatesSchema.default({ minRequests: 0, alarms: [] }) };

const explicitSpec = z.object({ ...common, stages: z.array(stageSchema).min(1, 'a rollout needs at least one stage').max(MAX_STAGES) }).strict();
const linearSpec = z.object({ ...common, preset: z.literal('linear'), stepPercent: z.number().gt(0).max(100), bakeSeconds, ...presetGates }).strict();
const exponentialSpec = z
  .object({
    ...common,
    preset: z.literal('exponential'),
    initialPercent: z.number().gt(0).max(100).default(1),
    growthFactor: z.number().gt(1).max(100).default(2),
    bakeSeconds,
    ...presetGates,
  })
  .strict();
const canarySpec = z
  .object({ ...common, preset: z.literal('canary'), canaryPercent: z.number().gt(0).lt(100).default(10), bakeSeconds, ...presetGates })
  .strict();
const allAtOnceSpec = z.object({ ...common, preset: z.literal('all-at-once'), bakeSeconds: bakeSeconds.default(0), ...presetGates }).strict();

const presets = { linear: linearSpec, exponential: exponentialSpec, canary: canarySpec, 'all-at-once': allAtOnceSpec } as const;
type ParsedInput = z.output<(typeof presets)[keyof typeof presets]> | z.output<typeof explicitSpec>;

export type RolloutSpecInput = z.input<typeof explicitSpec> | z.input<(typeof presets)[keyof typeof presets]>;
export type Stage = z.output<typeof stageSchema>;
export type Gates = z.output<typeof gatesSchema>;

/** A validated spec with explicit stages. */
export interface RolloutSpec {
  readonly target: z.output<typeof targetSchema>;
  readonly stages: readonly Stage[];
  readonly progressDeadlineSeconds: number;
  readonly progressDeadlineAbort: boolean;
  readonly actuators?: readonly string[];
  readonly hooks?: readonly WebhookGate[];
  readonly rolloutGates?: { readonly fromStage?: number | string; readonly count?: 'stage' | 'rollout'; readonly providers: readonly ProviderGate[] };
}

/**
 * The provider gates read in stage `index`: its own, then the spec's rolloutGates from their
 * fromStage on (a judged one only where a baseline is left, below 100 %). Every reader of a stage's
 * gates goes through here: the evaluator, the reader, the schedule, the API and the stores' fences.
 */
export function stageProviders(spec: Pick<RolloutSpec, 'stages' | 'rolloutGates'>, index: number): readonly ProviderGate[] {
  const stage = spec.stages[index];
  const own = stage?.gates.providers ?? [];
  const wide = spec.rolloutGates;
  if (!wide || !stage) return own;
  const from = stageIndexOf(spec, wide.fromStage ?? 0);
  if (from === null || index < from) return own;
  const extra = wide.providers.filter((g) => stage.percent < 100 || !isJudged(g));
  return extra.length ? [...own, ...extra] : own;
}

/** Whether a gate compares the canary with the baseline (and so needs a baseline to read). */
export function isJudged(g: ProviderGate): boolean {
  return gateJudgeOf(g) !== null;
}

/** Whether any stage of the spec reads a provider gate. */
export function hasProviderGates(spec: Pick<RolloutSpec, 'stages' | 'rolloutGates'>): boolean {
  return spec.stages.some((s) => s.gates.providers?.length) || (spec.rolloutGates?.providers.length ?? 0) > 0;
}

const round2 = (n: number) => Math.round(n * 100) / 100;

export interface SteppedPercents {
  /** The percents visited below 100, at most MAX_STAGES of them. */
  readonly percents: readonly number[];
  /** reaches100: the next step is 100 or more; tooMany: MAX_STAGES below 100 and still short; stalls: a step did not rise. */
  readonly outcome: 'reaches100' | 'tooMany' | 'stalls';
}

/**
 * The percents a stepped preset visits below 100: `first`, then `next(p)`
 * while below 100. Bounded by the stage limit, not by the numbers: `next` is
 * called at most MAX_STAGES times, so expansion generates at most
 * MAX_STAGES + 1 candidates with the final 100, and it stops at the first
 * step that does not rise (a step that rounds to nothing at two decimals
 * would otherwise run forever, holding the event loop and filling the heap).
 */
export function steppedPercents(first: number, next: (p: number) => number): SteppedPercents {
  const percents: number[] = [];
  let p = first;
  while (p < 100) {
    if (percents.length === MAX_STAGES) return { percents, outcome: 'tooMany' };
    percents.push(round2(p));
    const q = next(p);
    if (!(q > p)) return { percents, outcome: 'stalls' };
    p = q;
  }
  return { percents, outcome: 'reaches100' };
}

function expand(input: ParsedInput): Stage[] {
  if ('stages' in input) return input.stages;
  const stage = (percent: number): Stage => ({ name: `${percent}%`, percent, bakeSeconds: input.bakeSeconds, gates: input.gates });
  switch (input.preset) {
    case 'linear': {
      const step = input.stepPercent;
      return stepped(
        steppedPercents(step, (p) => round2(p + step)),
        {
          stalls: (at) => `stepPercent: ${step} does not advance at two decimals (it stays at ${at}%): the preset never reaches 100`,
          tooMany: () => `stepPercent: ${step} needs about ${Math.ceil(100 / step)} stages to reach 100; at most ${MAX_STAGES}`,
        },
      ).map(stage);
    }
    case 'exponential': {
      const { initialPercent: first, growthFactor: g } = input;
      const from = `growthFactor: ${g} from initialPercent ${first}`;
      return stepped(
        steppedPercents(first, (p) => round2(p * g)),
        {
          stalls: (at) => `${from} does not grow at two decimals (it stays at ${at}%): the preset never reaches 100`,
          tooMany: () => `${from} needs about ${Math.ceil(Math.log(100 / first) / Math.log(g)) + 1} stages to reach 100; at most ${MAX_STAGES}`,
        },
      ).map(stage);
    }
    case 'canary':
      return [stage(input.canaryPercent), stage(100)];
    case 'all-at-once':
      return [stage(100)];
  }
}

/** The preset's percents ending with 100, or a ConfigError naming the field and why it cannot be expanded. */
function stepped(r: SteppedPercents, why: { stalls: (at: number) => string; tooMany: () => string }): number[] {
  if (r.outcome === 'stalls') throw new ConfigError('rollout spec', [why.stalls(r.percents.at(-1)!)]);
  // Below 100 plus the final 100: MAX_STAGES below is one too many.
  if (r.outcome === 'tooMany' || r.percents.length === MAX_STAGES) throw new ConfigError('rollout spec', [why.tooMany()]);
  return [...r.percents, 100];
}

const expandedSchema = z
  .object({ stages: z.array(stageSchema) })
  .passthrough()
  .superRefine((spec, ctx) => {
    const names = new Set<string>();
    spec.stages.forEach((s, i) => {
      if (names.has(s.name)) ctx.addIssue({ code: 'custom', path: ['stages', i, 'name'], message: `duplicate stage name "${s.name}"` });
      names.add(s.name);
      const prev = spec.stages[i - 1];
      if (prev && s.percent <= prev.percent) {
        ctx.addIssue({ code: 'custom', path: ['stages', i, 'percent'], message: `must increase: ${s.percent} after ${prev.percent}` });
      }
    });
    if (spec.stages.length > MAX_STAGES) {
      ctx.addIssue({ code: 'custom', path: ['stages'], message: `at most ${MAX_STAGES} stages, the preset expands to ${spec.stages.length}` });
    }
    const last = spec.stages.at(-1);
    if (last && last.percent !== 100) {
      ctx.addIssue({ code: 'custom', path: ['stages', spec.stages.length - 1, 'percent'], message: `the last stage must reach 100, got ${last.percent}` });
    }
  });

/** Largest spec accepted, as JSON: a spec is read on every evaluation and carried in plans. */
export const MAX_SPEC_BYTES = 65_536;

/** Validate and expand; throws ConfigError naming every bad field. */
export function parseRolloutSpec(input: unknown): RolloutSpec {
  const size = Buffer.byteLength(JSON.stringify(input) ?? '');
  if (size > MAX_SPEC_BYTES) throw new ConfigError('rollout spec', [`(root): ${size} bytes as JSON; at most ${MAX_SPEC_BYTES}`]);
  // Dispatch on `preset` ourselves: a union would report "invalid input" instead of the field.
  const preset = input !== null && typeof input === 'object' && 'preset' in input ? input.preset : undefined;
  let schema: z.ZodType<ParsedInput> = explicitSpec;
  if (preset !== undefined) {
    if (typeof preset !== 'string' || !Object.hasOwn(presets, preset)) {
      throw new ConfigError('rollout spec', [`preset: unknown preset ${JSON.stringify(preset)}; expected one of ${Object.keys(presets).join(', ')}`]);
    }
    schema = presets[preset as keyof typeof presets];
  }
  const parsed = parseConfig('rollout spec', schema, input);
  const stages = expand(parsed);
  parseConfig('rollout spec', expandedSchema, { stages });
  // Before-rollout hooks are counted with the first stage's gates (one tally per name): their names must differ.
  const first = new Set((stages[0]?.gates.providers ?? []).map((g) => g.name));
  // A stretch past the progress deadline would never be reached: the deadline fires first.
  const late = stages.findIndex((s) => (s.maxBakeSeconds ?? 0) > parsed.progressDeadlineSeconds);
  if (late >= 0)
    throw new ConfigError('rollout spec', [
      `stages.${late}.maxBakeSeconds: ${stages[late]!.maxBakeSeconds} is longer than progressDeadlineSeconds (${parsed.progressDeadlineSeconds}): the deadline would fire first; raise it or shorten the stretch`,
    ]);
  // A judged gate compares the canary with the baseline: at 100 % there is no baseline left to compare with.
  for (const [i, st] of stages.entries()) {
    const g = st.percent === 100 ? (st.gates.providers ?? []).findIndex((p) => 'judge' in p && p.judge !== undefined) : -1;
    if (g >= 0)
      throw new ConfigError('rollout spec', [
        `stages.${i}.gates.providers.${g}.judge: stage ${st.name} sends 100 % to the new version, so no baseline is left to judge the canary against; judge an earlier stage`,
      ]);
  }
  const wide = parsed.rolloutGates;
  if (wide) {
    const from = stageIndexOf({ stages }, wide.fromStage ?? 0);
    if (from === null)
      throw new ConfigError('rollout spec', [
        `rolloutGates.fromStage: ${JSON.stringify(wide.fromStage)} names no stage; the stages are ${stages.map((st, i) => `${i} "${st.name}"`).join(', ')}`,
      ]);
    for (const [i, st] of stages.entries()) {
      if (i < from) continue;
      const own = new Set((st.gates.providers ?? []).map((g) => g.name));
      const j = wide.providers.findIndex((g) => own.has(g.name));
      if (j >= 0)
        throw new ConfigError('rollout spec', [
          `rolloutGates.providers.${j}.name: "${wide.providers[j]!.name}" is also a gate of stage ${st.name}; a stage counts each gate by its name, so give one of them another`,
        ]);
      const n = stageProviders({ stages, rolloutGates: wide }, i).length;
      if (n > MAX_PROVIDER_GATES)
        throw new ConfigError('rollout spec', [
          `rolloutGates.providers: stage ${st.name} would read ${n} provider gates with its own; at most ${MAX_PROVIDER_GATES} a stage`,
        ]);
    }
    if (from === 0) {
      const j = (parsed.hooks ?? []).findIndex((h) => wide.providers.some((g) => g.name === h.name));
      if (j >= 0)
        throw new ConfigError('rollout spec', [
          `hooks.${j}.name: "${parsed.hooks![j]!.name}" is also a rollout gate read in the first stage; give the hook another name`,
        ]);
    }
  }
  const clash = (parsed.hooks ?? []).findIndex((h) => first.has(h.name));
  if (clash >= 0)
    throw new ConfigError('rollout spec', [
      `hooks.${clash}.name: "${parsed.hooks![clash]!.name}" is also a gate of the first stage; give the hook another name`,
    ]);
  return {
    target: parsed.target,
    stages,
    progressDeadlineSeconds: parsed.progressDeadlineSeconds,
    progressDeadlineAbort: parsed.progressDeadlineAbort,
    ...(parsed.actuators ? { actuators: parsed.actuators } : {}),
    ...(parsed.hooks ? { hooks: parsed.hooks } : {}),
    ...(wide ? { rolloutGates: wide } : {}),
  };
}

/**
 * Which stage a signal means: an index within the spec, or a stage's name
 * (names are unique, see `duplicate stage name`); null when it names none.
 * The rule every store follows: DynamoDB applies this function, and
 * PostgreSQL's single-statement reading applies the same rule in SQL (so a
 * reading stays one round trip); the readings contract test holds both to it.
 */
export function stageIndexOf(spec: Pick<RolloutSpec, 'stages'>, stage: number | string): number | null {
  const index = typeof stage === 'number' ? stage : spec.stages.findIndex((s) => s.name === stage);
  return Number.isInteger(index) && index >= 0 && index < spec.stages.length ? index : null;
}

/**
 * What a spec would make us request that the operator has not allowed: one
 * `field: why` line per gate address outside the allow-list and per
 * credential unknown or bound to another origin. Checked when a spec is
 * accepted (a 400 naming the field, not an inconclusive gate at the first
 * tick), and again at every read, since the operator's list may change.
 */
export function outboundIssues(spec: Pick<RolloutSpec, 'stages' | 'hooks' | 'rolloutGates'>, policy: OutboundPolicy): string[] {
  const out: string[] = [];
  spec.hooks?.forEach((h, i) => {
    const url = policy.refuseUrl(h.url, `hooks.${i}.url`);
    if (url) out.push(url);
    else if (h.credential !== undefined) {
      const cred = policy.refuseCredential(h.credential, h.url, `hooks.${i}.credential`);
      if (cred) out.push(cred);
    }
  });
  const declared = [
    ...spec.stages.map((stage, i) => [`stages.${i}.gates.providers`, stage.gates.providers] as const),
    ['rolloutGates.providers', spec.rolloutGates?.providers] as const,
  ];
  declared.forEach(([where, providers]) => {
    providers?.forEach((g, j) => {
      if (g.type !== 'prometheus' && g.type !== 'webhook') return;
      const at = `${where}.${j}`;
      const [address, field] = g.type === 'prometheus' ? [g.address, 'address'] : [g.url, 'url'];
      const url = policy.refuseUrl(address, `${at}.${field}`);
      if (url) out.push(url);
      else if (g.credential !== undefined) {
        const cred = policy.refuseCredential(g.credential, address, `${at}.credential`);
        if (cred) out.push(cred);
      }
    });
  });
  return out;
}

/** Metric math that reads beyond the metrics a gate names: a search, a Metrics Insights query, another data source. */
const REACHES_OUT = /\b(SEARCH|SELECT|INSIGHT_RULE_METRIC|SERVICE_QUOTA|LAMBDA)\b/i;

/** Why a cloudwatchMetric gate may not be read under the namespaces allowed (`field: why`, relative to the gate), or null. */
export function namespaceIssue(
  gate: Pick<CloudwatchMetricGate, 'metric' | 'metrics' | 'expression' | 'requestsMetric'>,
  allowed: readonly string[],
): string | null {
  if (gate.expression !== undefined) {
    const found = REACHES_OUT.exec(gate.expression);
    if (found) return `expression: ${found[1]} reads beyond the gate's own metrics; only metric math over them is allowed`;
  }
  const metrics: (readonly [string, NonNullable<CloudwatchMetricGate['metric']>])[] = gate.metric
    ? [['metric', gate.metric]]
    : Object.entries(gate.metrics ?? {}).map(([id, m]) => [`metrics.${id}`, m] as const);
  if (gate.requestsMetric) metrics.push(['requestsMetric', gate.requestsMetric]);
  for (const [path, m] of metrics) {
    if (!allowed.includes(m.namespace))
      return `${path}.namespace: "${m.namespace}" is not a namespace this deployment's gates may read (${allowed.length ? allowed.join(', ') : 'none: the gateNamespaces setting names them'})`;
  }
  return null;
}

/**
 * The cloudwatchMetric gates a spec names that read outside the CloudWatch
 * namespaces allowed (null: no limit): one `field: why` line per gate,
 * naming its stage and gate. Checked when a spec is accepted (a 400, not an
 * error reading that rolls the rollout back), and again at every read.
 */
export function gateNamespaceIssues(spec: Pick<RolloutSpec, 'stages' | 'rolloutGates'>, allowed: readonly string[] | null): string[] {
  if (allowed === null) return [];
  const out: string[] = [];
  const check = (providers: readonly ProviderGate[] | undefined, where: string, what: string) =>
    providers?.forEach((g, j) => {
      if (g.type !== 'cloudwatchMetric') return;
      const issue = namespaceIssue(g, allowed);
      if (issue) out.push(`${where}.${j}.${issue} (${what}gate "${g.name}")`);
    });
  spec.stages.forEach((stage, i) => check(stage.gates.providers, `stages.${i}.gates.providers`, `stage "${stage.name}", `));
  check(spec.rolloutGates?.providers, 'rolloutGates.providers', 'rollout ');
  return out;
}

/**
 * The rollout spec as JSON Schema (draft 2020-12), as a user writes it
 * (defaults optional): for editors and CI, from the same schemas
 * parseRolloutSpec checks with. It checks the shape; a few rules only the
 * parser applies (percents increasing, stage names unique, what a preset
 * expands to, hook names) — the API names those when it refuses a spec.
 */
export function rolloutSpecJsonSchema(): Record<string, unknown> {
  // A provider gate is checked as `unknown` first (to name a spec's old `auth`): its JSON Schema is the gates' own, so editors know them.
  const { $schema: _, ...gates } = z.toJSONSchema(providerGateUnion, { io: 'input', unrepresentable: 'any' });
  const schema = z.toJSONSchema(z.union([explicitSpec, ...Object.values(presets)]), {
    io: 'input',
    unrepresentable: 'any',
    // Each form's stages name the same gates: once, under $defs.
    reused: 'ref',
    override: (ctx) => {
      if (ctx.zodSchema === providerGateSchema) Object.assign(ctx.jsonSchema, gates);
    },
  });
  return {
    ...schema,
    $id: 'https://rollout-control-plane.dev/schemas/rollout-spec.json',
    title: 'Rollout spec',
    description: 'A rollout: its target and explicit stages, or a preset (linear, exponential, canary, all-at-once) that expands to stages.',
  };
}

/** A spec as stored and answered: its stages explicit (a preset expanded), its defaults filled in. */
export const storedSpecSchema = explicitSpec;
