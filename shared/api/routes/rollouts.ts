import { z } from 'zod';
import { storedSpecSchema } from '../../rollout/spec.js';
import { ROLLOUT_STATES, STAGE_PHASES } from '../../rollout/model.js';
import { GATE_OUTCOMES, readingSeriesSchema } from '../../rollout/gates.js';
import { PROVIDER_TYPES } from '../../rollout/gate-spec.js';
import { JUDGE_KINDS } from '../../judge/gate.js';
import { ACTUATION_STATES, type ActuationRecordKind } from '../../rollout/actuation-record.js';
import { TRANSITION_KINDS } from '../../rollout/transition.js';
import { COMMANDS, type Command } from '../../rollout/command-names.js';
import type { Scope } from '../../auth/scopes.js';
import {
  badRequest,
  commandBody,
  type ResponseDef,
  id,
  iso,
  json,
  ms,
  notFound,
  notLeader,
  openString,
  pageQuery,
  read,
  refused,
  route,
  stale,
  toLeader,
  unreadable,
} from '../route.js';

/** Rollouts: create, command, read, assign. */

export const createRolloutBody = z
  .object({ id: id().optional(), spec: z.unknown().describe('a rollout spec: see the RolloutSpec schema (`rollout spec schema`)') })
  .strict();

const stageStatus = z.object({
  index: z.number().int(),
  name: z.string(),
  phase: z.enum(STAGE_PHASES),
  activatedAt: ms().nullable(),
  promotedAt: ms().nullable(),
  promotedEpoch: z.number().int().nullable(),
  promotedBy: z.string().nullable(),
  rolledBackAt: ms().nullable(),
  reason: z.string().nullable(),
});
const gateReading = z
  .object({
    gate: z.string(),
    type: z.enum(PROVIDER_TYPES),
    attempt: z.number().int(),
    stage: z.number().int(),
    at: ms(),
    outcome: z.enum(GATE_OUTCOMES),
    value: z.number().nullable(),
    query: z.string(),
    answer: z.string(),
    reason: z.string().nullable(),
    source: z.enum(['poll', 'event']),
    series: readingSeriesSchema.optional().describe("what a judged reading was judged on: both cohorts' series, or their requests and errors per step"),
  })
  .meta({ id: 'GateReading' });
const gate = z.object({
  stage: z.number().int(),
  name: z.string(),
  type: z.enum(PROVIDER_TYPES),
  judge: z.enum(JUDGE_KINDS).nullable(),
  query: z.string(),
  comparison: z.string().nullable(),
  threshold: z.number().nullable(),
  intervalSeconds: z.number(),
  failureLimit: z.number().int(),
  inconclusiveLimit: z.number().int(),
  consecutiveSuccesses: z.number().int(),
  rolloutWide: z.boolean(),
  status: z.enum([...GATE_OUTCOMES, 'no-data']),
  counts: z.object({ readings: z.number().int(), failures: z.number().int(), inconclusive: z.number().int(), passStreak: z.number().int() }),
  last: gateReading.nullable(),
  readings: z.array(gateReading).optional(),
  series: readingSeriesSchema.nullable().optional().describe("a judged gate's newest reading's series, where readings are shown"),
});
const actuation = z.object({
  target: z.string(),
  kind: openString<ActuationRecordKind>(),
  state: z.enum(ACTUATION_STATES),
  attempt: z.number().int(),
  stage: z.number().int().nullable(),
  percent: z.number(),
  final: z.boolean(),
  epoch: z.number().int(),
  appliedAt: iso().nullable(),
  updatedAt: iso().nullable(),
  observed: z.object({ percent: z.number(), final: z.boolean(), detail: z.string() }).nullable(),
  reason: z.string().nullable(),
  settled: z.boolean(),
});
const rolloutState = z.enum(ROLLOUT_STATES);
export const rolloutBody = z
  .object({
    id: z.string(),
    spec: storedSpecSchema,
    state: rolloutState,
    attempt: z.number().int(),
    version: z.number().int(),
    createdAt: ms(),
    updatedAt: ms(),
    lastProgressAt: ms(),
    deadlineExceededAt: ms().nullable(),
    stateBy: z.string().nullable(),
    stateReason: z.string().nullable(),
    stages: z.array(stageStatus),
    metrics: z.record(z.string(), z.object({ requests: z.number(), errors: z.number(), p99LatencyMs: z.number().nullable(), observedAt: ms() })),
    alarms: z.record(z.string(), z.enum(['OK', 'ALARM', 'INSUFFICIENT_DATA'])),
    gates: z.array(gate),
    actuation: z.array(actuation).optional(),
    waiting: z
      .array(z.string())
      .describe('What a running rollout waits for before its next step; empty when it is not running or would act at its next evaluation'),
  })
  .meta({ id: 'Rollout' });
const rolloutSummary = z
  .object({
    id: z.string(),
    state: rolloutState,
    attempt: z.number().int(),
    version: z.number().int(),
    service: z.string(),
    newVersion: z.string(),
    stableVersion: z.string().nullable(),
    stages: z.number().int(),
    createdAt: iso().nullable(),
    updatedAt: iso().nullable(),
    stateBy: z.string().nullable(),
    stateReason: z.string().nullable(),
  })
  .meta({ id: 'RolloutSummary' });
const historyEntry = z.looseObject({
  /** Orders a rollout's events (null on events stored before it existed). */
  seq: z.number().int().nullable(),
  type: z.string(),
  at: iso(),
  /** `promoter:<node>` for automatic steps, the caller's identity for commands. */
  actor: z.string(),
  epoch: z.number().int(),
  attempt: z.number().int(),
  stage: z.object({ index: z.number().int(), name: z.string(), percent: z.number() }).nullable(),
  percent: z.number().nullable(),
  reason: z.string().nullable(),
  target: z.string().optional(),
  /** A stage promoted by `onInsufficientData: "pass"`: what it was short of when its stretched bake ended. */
  insufficientData: z.string().optional(),
});
const assignment = {
  entity: z.string(),
  version: z.string().nullable(),
  variant: z.enum(['stable', 'new']),
  percent: z.number(),
  stage: z.string().nullable(),
  attempt: z.number().int(),
  bucket: z.number().int().min(0).max(9_999),
};
const traffic = read({
  rolloutId: z.string(),
  version: z.number().int(),
  state: rolloutState,
  service: z.string(),
  newVersion: z.string(),
  stableVersion: z.string().nullable(),
  attempt: z.number().int(),
  percent: z.number(),
  stage: z.object({ index: z.number().int(), name: z.string() }).nullable(),
  final: z.boolean(),
}).meta({ id: 'Traffic' });
const headers = { etag: "the rollout's attempt and version: send it as If-None-Match", 'cache-control': 'private, max-age=5 (no-store on a stale answer)' };
const rolloutId = { id: 'rollout id' };

const COMMAND_SUMMARY: Record<(typeof COMMANDS)[number], string> = {
  promote: 'promote the active stage now (its gates are not waited for)',
  'promote-full': 'promote every remaining stage: all traffic on the new version',
  pause: 'pause: the active stage stays as it is until resumed',
  resume: 'resume a paused rollout',
  abort: 'abort: traffic back on the stable version, for good',
  retry: 'start a rolled-back or aborted rollout again as a new attempt (an aborted one: admin only)',
};

/** What retrying an aborted rollout needs: an abort is an admin's decision, final for whoever may only operate. */
export const RETRY_ABORTED_SCOPE: Scope = 'admin';

/** Retry's own refusal: the rollout is aborted and the caller may only operate. */
const abortIsFinal = { 403: refused(`the rollout is aborted and the caller lacks the ${RETRY_ABORTED_SCOPE} scope`) };

type Camel<S extends string> = S extends `${infer A}-${infer B}` ? `${A}${Capitalize<Camel<B>>}` : S;
/** A command's operationId, as a type: rolloutPromoteFull for promote-full. */
export type CommandRouteId<C extends Command = Command> = `rollout${Capitalize<Camel<C>>}`;

/** A command's operationId: rolloutPromoteFull for promote-full. */
export function commandRouteId<C extends Command>(command: C): CommandRouteId<C> {
  return `rollout${command.replace(/(^|-)([a-z])/g, (_m, _d, c: string) => c.toUpperCase())}` as CommandRouteId<C>;
}

/** Entities one assignment request may ask about. */
export const MAX_ASSIGNMENT_ENTITIES = 100;
const ENTITY_COUNT = {
  error: (i: { readonly input?: unknown }) => `give 1 to ${MAX_ASSIGNMENT_ENTITIES} (?entity=E&entity=F…), got ${Array.isArray(i.input) ? i.input.length : 0}`,
};
const ENTITY_LENGTH = { error: () => '1 to 256 characters' };

export const createRollout = route({
  id: 'createRollout',
  method: 'POST',
  path: '/rollouts',
  tag: 'rollouts',
  scope: 'admin',
  summary: 'create a rollout from a spec; idempotent on id (the same id with another spec: 409)',
  body: createRolloutBody,
  nodeHooks: { afterAnswer: 'firstEvaluation' },
  responses: {
    201: json('created', z.object({ id: z.string(), created: z.literal(true) }), { headers: { location: '/rollouts/{id}' } }),
    200: json('it existed with this spec', z.object({ id: z.string(), created: z.literal(false) }), { headers: { location: '/rollouts/{id}' } }),
    400: badRequest,
    409: refused('a rollout with this id exists with another spec'),
    503: notLeader,
    307: toLeader,
  },
});

export const listRollouts = route({
  id: 'listRollouts',
  method: 'GET',
  path: '/rollouts',
  tag: 'rollouts',
  scope: 'read',
  summary: 'bare: the running rollouts, whole; with state, cursor or limit: every rollout (or those in state), newest first, a page of rows',
  query: z.object({
    state: z.enum(['all', ...ROLLOUT_STATES], { error: (i) => `all or one of ${ROLLOUT_STATES.join(', ')}, got "${String(i.input).slice(0, 40)}"` }).optional(),
    cursor: z.string().optional(),
    limit: pageQuery(500, 50),
  }),
  responses: {
    200: json('the rollouts', z.union([read({ rollouts: z.array(rolloutBody) }), read({ rollouts: z.array(rolloutSummary), next: z.string().nullable() })])),
    400: badRequest,
    503: unreadable,
  },
});

export const getRollout = route({
  id: 'getRollout',
  method: 'GET',
  path: '/rollouts/{id}',
  params: rolloutId,
  tag: 'rollouts',
  scope: 'read',
  summary: "a rollout: its stages, signals, each gate's recent readings and what was applied to each target",
  responses: {
    200: json('the rollout', z.looseObject({ ...rolloutBody.shape, stale: stale.optional() })),
    400: badRequest,
    404: notFound,
    503: unreadable,
  },
});

export const rolloutHistory = route({
  id: 'rolloutHistory',
  method: 'GET',
  path: '/rollouts/{id}/history',
  params: rolloutId,
  tag: 'rollouts',
  scope: 'read',
  summary: 'every transition, oldest first: what, when, who, under which epoch, why',
  responses: {
    200: json('its transitions', read({ rolloutId: z.string(), history: z.array(historyEntry) })),
    400: badRequest,
    404: notFound,
    503: unreadable,
  },
});

export const rolloutAssignment = route({
  id: 'rolloutAssignment',
  method: 'GET',
  path: '/rollouts/{id}/assignment',
  params: rolloutId,
  tag: 'rollouts',
  scope: 'read',
  summary: 'which version each entity should run: murmur3_x86_32("<rolloutId>:<entity>", 0) mod 10000 < percent × 100 runs the new one',
  query: z.object({
    entity: z
      .array(z.string().min(1, ENTITY_LENGTH).max(256, ENTITY_LENGTH))
      .min(1, ENTITY_COUNT)
      .max(MAX_ASSIGNMENT_ENTITIES, ENTITY_COUNT)
      .describe('1 to 100 entities: ?entity=E&entity=F'),
  }),
  responses: {
    200: json(
      'one entity: its assignment; several: assignments in the order asked',
      z.union([read({ rolloutId: z.string(), ...assignment }), read({ rolloutId: z.string(), assignments: z.array(z.object(assignment)) })]),
      { headers },
    ),
    304: { description: 'unchanged since the ETag sent as If-None-Match', headers },
    400: badRequest,
    404: notFound,
    503: refused('the store cannot be read and no good read of the rollout is kept'),
  },
});

export const rolloutTraffic = route({
  id: 'rolloutTraffic',
  method: 'GET',
  path: '/rollouts/{id}/traffic',
  params: rolloutId,
  tag: 'rollouts',
  scope: 'read',
  summary: 'what assignment answers from (percent, stage, versions), for clients that evaluate in process',
  responses: {
    200: json('the traffic in force', traffic, { headers }),
    304: { description: 'unchanged since the ETag sent as If-None-Match', headers },
    400: badRequest,
    404: notFound,
    503: refused('the store cannot be read and no good read of the rollout is kept'),
  },
});

/** At most this many readings of each gate of each stage a `GET /rollouts/{id}/readings` answers (the newest). */
export const MAX_READINGS_PER_GATE = 2_000;
/** With `series=true`, at most this many readings a stage, since each may carry up to 1,000 points a cohort. */
export const MAX_SERIES_READINGS = 200;
/** At most this many series points in one answer (about 3 MB of JSON, inside API Gateway's and Lambda's 6 MB); older readings' series past it are left out and counted. */
export const SERIES_POINTS_BUDGET = 300_000;

export const rolloutReadings = route({
  id: 'rolloutReadings',
  method: 'GET',
  path: '/rollouts/{id}/readings',
  params: rolloutId,
  tag: 'rollouts',
  scope: 'read',
  summary: "the current attempt's stored gate readings, newest first by stage and gate (what `rollout gates backtest` replays)",
  query: z.object({
    gate: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'a gate name')
      .optional()
      .describe('only this gate'),
    limit: pageQuery(MAX_READINGS_PER_GATE, 1_000),
    series: z
      .enum(['true', 'false'])
      .optional()
      .transform((v) => v === 'true')
      .describe(`with each judged reading's series (then \`limit\` is at most ${MAX_SERIES_READINGS}, default ${MAX_SERIES_READINGS})`),
  }),
  responses: {
    200: json(
      'its readings',
      z.object({
        rolloutId: z.string(),
        attempt: z.number().int(),
        readings: z.array(gateReading),
        seriesOmitted: z
          .number()
          .int()
          .optional()
          .describe(`with series=true: the older readings whose series were left out to keep the answer under ${SERIES_POINTS_BUDGET} points`),
      }),
    ),
    400: badRequest,
    404: notFound,
    503: unreadable,
  },
});

export const testRolloutGate = route({
  id: 'testRolloutGate',
  method: 'POST',
  path: '/rollouts/{id}/gates/{gate}/test',
  params: { ...rolloutId, gate: 'the gate name' },
  tag: 'rollouts',
  // It makes the gate's requests (with the operator's credentials) now: as much an act as a command.
  scope: 'operate',
  storesNothing: true,
  summary: "read one of the rollout's gates now and judge the answer, without storing or acting on it",
  query: z.object({
    stage: z
      .string()
      .regex(/^\d{1,3}$/, 'a stage index')
      .transform(Number)
      .optional()
      .describe("the stage to read it for (absent: the active one): its percent, period and cohorts' versions"),
  }),
  responses: {
    200: json(
      'the reading, as the promoter would have stored it',
      z.object({ rolloutId: z.string(), stage: z.number().int(), stored: z.literal(false), reading: gateReading }),
    ),
    400: badRequest,
    404: refused('no such rollout, or no such gate in that stage'),
    409: refused('no stage is active and none was named, or the gate is a webhook (a call into another system, never made as a test)'),
    503: refused('the store cannot be read, or gates cannot be read where this API runs'),
  },
});

/** A command's route: on a node, its traffic is carried out once its answer is committed. */
function commandRoute<C extends Command>(command: C) {
  const refusals: Readonly<Record<number, ResponseDef>> = command === 'retry' ? abortIsFinal : {};
  return route({
    id: commandRouteId(command),
    method: 'POST',
    path: `/rollouts/{id}/${command}`,
    params: rolloutId,
    tag: 'rollouts',
    scope: command === 'abort' ? 'admin' : 'operate',
    ...(command === 'retry' ? { scopeWhen: { [RETRY_ABORTED_SCOPE]: 'the rollout is aborted (an abort is final for operate)' } } : {}),
    summary: COMMAND_SUMMARY[command],
    body: commandBody,
    optionalBody: true,
    family: 'command',
    nodeHooks: { afterCommit: 'actuate' },
    responses: {
      200: json(
        'what the command did',
        z.object({
          action: z.object({
            transition: z.enum(TRANSITION_KINDS),
            /** False: the rollout had moved on and nothing was written. */
            applied: z.boolean(),
            stage: z.number().int().nullable(),
            /** The event types the transition emitted (`ai.rollout.promoted`, …). */
            events: z.array(z.string()),
          }),
        }),
      ),
      400: badRequest,
      ...refusals,
      404: notFound,
      409: refused("the rollout's state does not allow it (transition, reason say why), or it moved meanwhile: try again"),
      503: notLeader,
      307: toLeader,
    },
  });
}

/** promote, promote-full, pause, resume, abort, retry: a route each. */
export const commandRoutes = COMMANDS.map(commandRoute);
