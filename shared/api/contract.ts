import { RegExpRouter } from 'hono/router/reg-exp-router';
import { z } from 'zod';
import { storedSpecSchema } from '../rollout/spec.js';
import { ROLLOUT_STATES, STAGE_PHASES } from '../rollout/model.js';
import { GATE_OUTCOMES } from '../rollout/gates.js';
import { PROVIDER_TYPES } from '../rollout/gate-spec.js';
import { ACTUATION_STATES } from '../rollout/actuation-record.js';
import { TRANSITION_KINDS } from '../rollout/transitions.js';
import { COMMANDS } from '../rollout/commands.js';
import type { Scope } from '../auth/scopes.js';
import { MAX_RUN_SHARDS } from '../ledger/capacity.js';
import { ID_MESSAGE, ID_RULE } from '../ids.js';

export { ID_MESSAGE, ID_RULE } from '../ids.js';

/**
 * The HTTP API, defined once: every route with what it takes and what it
 * answers. The Lambda behind API Gateway (handler.ts) and a node
 * (node-api.ts) serve these routes and no others, matched by Hono's
 * RegExpRouter; the OpenAPI 3.1 document (`GET /openapi.json`,
 * `npm run openapi`) is generated from the same schemas by zod's JSON Schema
 * emitter (draft 2020-12, OpenAPI 3.1's dialect).
 */

export const API_VERSION = '0.1.0';

const id = () => z.string().regex(ID_RULE, ID_MESSAGE);
const iso = () => z.string().describe('ISO 8601');
const ms = () => z.number().describe('milliseconds since the epoch');

// ——— Bodies taken ———

export const MAX_RUN_ITEMS = 10_000;
export const createRolloutBody = z
  .object({ id: id().optional(), spec: z.unknown().describe('a rollout spec: see the RolloutSpec schema (`rollout spec schema`)') })
  .strict();
export const commandBody = z.object({ reason: z.string().max(1_000).optional() }).strict();
/** Checked further by the route (shards against itemsPerSecond); see handler.ts. */
export const createRunFields = z
  .object({
    id: id().optional(),
    /** Omitted on a request that adds items to an existing run. */
    spec: z.record(z.string(), z.unknown()).optional(),
    items: z
      .array(z.unknown())
      .min(1, 'at least one item')
      .max(MAX_RUN_ITEMS, `at most ${MAX_RUN_ITEMS} items per request; add more with further requests on the same id`),
    /** A new run's layout, fixed at creation: its shards, or the rate it is expected to run at (they follow from it). */
    shards: z.number().int().min(1).max(MAX_RUN_SHARDS).optional(),
    itemsPerSecond: z.number().positive().max(1_000_000).optional(),
  })
  .strict();

// ——— Answers ———

/** Every refusal: what is wrong in words, and fields that say more (issues, leader, …). */
export const errorBody = z.looseObject({ error: z.string(), issues: z.array(z.string()).optional() }).meta({ id: 'Error' });
const stale = z.object({ asOf: iso(), reason: z.string() }).describe('present when answered from the last good read because the store did not answer');
/** A read's answer: a node answering from its last good copy adds `stale`. */
const read = <T extends z.ZodRawShape>(shape: T) => z.looseObject({ ...shape, stale: stale.optional() });

const leader = z
  .object({
    leader_id: z.string(),
    term: z.number().int(),
    hostname: z.string().nullable(),
    api_url: z.string().nullable(),
    acquired_at: iso(),
    renewed_at: iso(),
    expires_at: iso(),
  })
  .meta({ id: 'Leader' });
const nodeState = z.enum(['leader', 'follower', 'candidate', 'stopped']);
const clusterStatusBody = read({
  node_id: z.string(),
  hostname: z.string().nullable().optional(),
  api_url: z.string().nullable().optional(),
  state: nodeState,
  is_leader: z.boolean(),
  leader_id: z.string().nullable(),
  term: z.number().int(),
  elector: z.enum(['lease', 'advisory-lock', 'static']),
  leader: leader.nullable(),
  cluster_size: z.number().int().optional(),
  healthy_nodes: z.number().int().optional(),
  nodes: z
    .array(
      z.object({
        node_id: z.string(),
        hostname: z.string().nullable(),
        port: z.number().int().nullable(),
        api_url: z.string().nullable(),
        state: nodeState,
        term: z.number().int(),
        is_healthy: z.boolean(),
        last_heartbeat: iso(),
      }),
    )
    .optional(),
  time: iso(),
});
const healthBody = z.object({
  status: z.enum(['healthy', 'degraded']),
  clustering: z.enum(['enabled', 'disabled']),
  node_id: z.string(),
  state: nodeState,
  is_leader: z.boolean(),
  leader_id: z.string().nullable(),
  cluster_size: z.number().int().optional(),
  cluster_ready: z.boolean(),
  store: z.string(),
  timestamp: z.number(),
  version: z.string(),
});

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
  })
  .meta({ id: 'GateReading' });
const gate = z.object({
  stage: z.number().int(),
  name: z.string(),
  type: z.enum(PROVIDER_TYPES),
  query: z.string(),
  comparison: z.string().nullable(),
  threshold: z.number().nullable(),
  intervalSeconds: z.number(),
  failureLimit: z.number().int(),
  inconclusiveLimit: z.number().int(),
  status: z.enum([...GATE_OUTCOMES, 'no-data']),
  counts: z.object({ readings: z.number().int(), failures: z.number().int(), inconclusive: z.number().int() }),
  last: gateReading.nullable(),
  readings: z.array(gateReading).optional(),
});
const actuation = z.object({
  target: z.string(),
  kind: z.string(),
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
  seq: z.number().int().nullable(),
  type: z.string(),
  at: iso(),
  actor: z.string(),
  epoch: z.number().int(),
  attempt: z.number().int(),
  stage: z.object({ index: z.number().int(), name: z.string(), percent: z.number() }).nullable(),
  percent: z.number().nullable(),
  reason: z.string().nullable(),
  target: z.string().optional(),
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
const cancel = z.object({ at: iso(), by: z.string(), reason: z.string().nullable() });
const counts = z.object({ pending: z.number().int(), running: z.number().int(), done: z.number().int(), failed: z.number().int() });
const runRecord = {
  id: z.string(),
  spec: z.record(z.string(), z.unknown()),
  createdAt: iso(),
  coordinatorEpoch: z.number().int(),
  shards: z.number().int().nullable(),
  cancelled: cancel.nullable(),
};
const item = z
  .object({
    id: z.string(),
    state: z.enum(['pending', 'running', 'done', 'failed']),
    payload: z.unknown(),
    result: z.unknown(),
    error: z.string().nullable(),
    attempts: z.number().int(),
    worker: z.string().nullable(),
    claimedAt: iso().nullable(),
    heartbeatAt: iso().nullable(),
  })
  .meta({ id: 'WorkItem' });
const headers = { etag: "the rollout's attempt and version: send it as If-None-Match", 'cache-control': 'private, max-age=5 (no-store on a stale answer)' };

// ——— Routes ———

type Content = { readonly schema: z.ZodType; readonly type?: 'application/json' } | { readonly type: 'text/html' | 'text/plain'; readonly schema?: undefined };
export interface ResponseDef {
  readonly description: string;
  readonly content?: Content;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface RouteDef {
  /** operationId: how the runtimes name the route they implement. */
  readonly id: string;
  readonly method: 'GET' | 'POST';
  /** OpenAPI's template: /rollouts/{id}. */
  readonly path: string;
  readonly summary: string;
  readonly tag: 'cluster' | 'rollouts' | 'runs' | 'node';
  /** Only a node serves it (npm start, a cluster): the deployed API has none. */
  readonly nodeOnly?: true;
  /** What the caller needs (auth/scopes.ts); null: open. */
  readonly scope: Scope | null;
  /** A further scope the route needs in some states of what it acts on, decided by the handler on the state it acts on: scope → when. */
  readonly scopeWhen?: Readonly<Partial<Record<Scope, string>>>;
  readonly query?: z.ZodObject;
  readonly body?: z.ZodType;
  /** The body may be left out (a command's reason). */
  readonly optionalBody?: true;
  readonly responses: Readonly<Record<number, ResponseDef>>;
}

const json = (description: string, schema: z.ZodType, extra: Omit<ResponseDef, 'description' | 'content'> = {}): ResponseDef => ({
  description,
  content: { schema },
  ...extra,
});
const refused = (description: string): ResponseDef => json(description, errorBody);
const notLeader = refused('this node does not lead (the body and x-rollout-leader-* headers name who does), or no leader is elected');
/** A node told to redirect writes (--redirect-writes) sends them to the leader. */
const toLeader: ResponseDef = json('a node that does not lead sends the write to the leader (with --redirect-writes)', errorBody, {
  headers: { location: "the same path on the leader's API URL" },
});
const notFound = refused('no such rollout or run');
const badRequest = refused('the request is malformed: the body says what is wrong');
const pageQuery = (max: number, fallback: number) => z.string().regex(/^\d+$/).optional().describe(`1 to ${max}, default ${fallback}`);
const rolloutId = { id: 'rollout id' };
const runId = { id: 'run id' };

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
function abortIsFinal(command: (typeof COMMANDS)[number]): Readonly<Record<number, ResponseDef>> {
  return command === 'retry' ? { 403: refused(`the rollout is aborted and the caller lacks the ${RETRY_ABORTED_SCOPE} scope`) } : {};
}

/** A command's operationId: rolloutPromoteFull for promote-full. */
export function commandRouteId(command: (typeof COMMANDS)[number]): string {
  return `rollout${command.replace(/(^|-)([a-z])/g, (_m, _d, c: string) => c.toUpperCase())}`;
}

/** Path parameters, by route: what each names. */
export const PATH_PARAMS: ReadonlyMap<string, Readonly<Record<string, string>>> = new Map();

function route(def: RouteDef & { params?: Readonly<Record<string, string>> }): RouteDef {
  const { params, ...rest } = def;
  if (params) (PATH_PARAMS as Map<string, Readonly<Record<string, string>>>).set(def.id, params);
  return rest;
}

export const ROUTES: readonly RouteDef[] = [
  route({
    id: 'clusterStatus',
    method: 'GET',
    path: '/cluster/status',
    tag: 'cluster',
    scope: 'read',
    summary: 'this process, who leads, and (on a node) the members',
    responses: { 200: json('the cluster as this process sees it', clusterStatusBody), 503: refused('the store cannot be read and nothing was read before') },
  }),
  route({
    id: 'clusterLeader',
    method: 'GET',
    path: '/cluster/leader',
    tag: 'cluster',
    scope: 'read',
    summary: 'who holds the promotion lease',
    responses: { 200: json('the leader', read(leader.shape)), 503: refused('no leader elected, or the store cannot be read') },
  }),
  route({
    id: 'clusterHealth',
    method: 'GET',
    path: '/cluster/health',
    tag: 'cluster',
    scope: null,
    summary: 'liveness: 200 while the process answers, with whether the store answers and a leader is known',
    responses: { 200: json('healthy or degraded, with why', healthBody) },
  }),
  route({
    id: 'clusterEvents',
    method: 'GET',
    path: '/cluster/events',
    tag: 'node',
    nodeOnly: true,
    scope: 'read',
    summary: 'the newest cluster events (elections, joins, leaves)',
    query: z.object({ limit: pageQuery(500, 50) }),
    responses: {
      200: json(
        'newest first',
        read({ events: z.array(z.object({ id: z.number().int(), node_id: z.string(), event_type: z.string(), event_data: z.unknown(), timestamp: iso() })) }),
      ),
      400: badRequest,
      503: refused('the store cannot be read'),
    },
  }),
  route({
    id: 'openapi',
    method: 'GET',
    path: '/openapi.json',
    tag: 'cluster',
    scope: 'read',
    summary: 'this document',
    responses: { 200: json('the OpenAPI 3.1 document of this API', z.record(z.string(), z.unknown())) },
  }),
  route({
    id: 'createRollout',
    method: 'POST',
    path: '/rollouts',
    tag: 'rollouts',
    scope: 'admin',
    summary: 'create a rollout from a spec; idempotent on id (the same id with another spec: 409)',
    body: createRolloutBody,
    responses: {
      201: json('created', z.object({ id: z.string(), created: z.literal(true) }), { headers: { location: '/rollouts/{id}' } }),
      200: json('it existed with this spec', z.object({ id: z.string(), created: z.literal(false) }), { headers: { location: '/rollouts/{id}' } }),
      400: badRequest,
      409: refused('a rollout with this id exists with another spec'),
      503: notLeader,
      307: toLeader,
    },
  }),
  route({
    id: 'listRollouts',
    method: 'GET',
    path: '/rollouts',
    tag: 'rollouts',
    scope: 'read',
    summary: 'bare: the running rollouts, whole; with state, cursor or limit: every rollout (or those in state), newest first, a page of rows',
    query: z.object({ state: z.enum(['all', ...ROLLOUT_STATES]).optional(), cursor: z.string().optional(), limit: pageQuery(500, 50) }),
    responses: {
      200: json('the rollouts', z.union([read({ rollouts: z.array(rolloutBody) }), read({ rollouts: z.array(rolloutSummary), next: z.string().nullable() })])),
      400: badRequest,
      503: refused('the store cannot be read'),
    },
  }),
  route({
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
      503: refused('the store cannot be read'),
    },
  }),
  route({
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
      503: refused('the store cannot be read'),
    },
  }),
  route({
    id: 'rolloutAssignment',
    method: 'GET',
    path: '/rollouts/{id}/assignment',
    params: rolloutId,
    tag: 'rollouts',
    scope: 'read',
    summary: 'which version each entity should run: murmur3_x86_32("<rolloutId>:<entity>", 0) mod 10000 < percent × 100 runs the new one',
    query: z.object({ entity: z.array(z.string().min(1).max(256)).min(1).max(100).describe('1 to 100 entities: ?entity=E&entity=F') }),
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
  }),
  route({
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
  }),
  ...COMMANDS.map((command) =>
    route({
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
      responses: {
        200: json(
          'what the command did',
          z.object({
            action: z.object({ transition: z.enum(TRANSITION_KINDS), applied: z.boolean(), stage: z.number().int().nullable(), events: z.array(z.string()) }),
          }),
        ),
        400: badRequest,
        ...abortIsFinal(command),
        404: notFound,
        409: refused("the rollout's state does not allow it (transition, reason say why), or it moved meanwhile: try again"),
        503: notLeader,
        307: toLeader,
      },
    }),
  ),
  route({
    id: 'createRun',
    method: 'POST',
    path: '/runs',
    tag: 'runs',
    scope: 'admin',
    summary: "create a work run and enqueue its items; the same id adds items (a spec, if sent, must be the run's)",
    body: createRunFields,
    responses: {
      201: json('created', z.object({ id: z.string(), created: z.literal(true), items: z.number().int(), added: z.number().int() }), {
        headers: { location: '/runs/{id}' },
      }),
      200: json('items added to the run', z.object({ id: z.string(), created: z.literal(false), items: z.number().int(), added: z.number().int() }), {
        headers: { location: '/runs/{id}' },
      }),
      400: badRequest,
      409: refused('the run exists with another spec, or was cancelled'),
      503: notLeader,
      307: toLeader,
    },
  }),
  route({
    id: 'listRuns',
    method: 'GET',
    path: '/runs',
    tag: 'runs',
    scope: 'read',
    summary: 'runs newest first, a page of records',
    query: z.object({ cursor: z.string().optional(), limit: pageQuery(500, 50) }),
    responses: {
      200: json('a page', read({ runs: z.array(z.object(runRecord)), next: z.string().nullable() })),
      400: badRequest,
      503: refused('the store cannot be read'),
    },
  }),
  route({
    id: 'getRun',
    method: 'GET',
    path: '/runs/{id}',
    params: runId,
    tag: 'runs',
    scope: 'read',
    summary: 'a run: its counts, its shards, when its store last throttled it',
    responses: {
      200: json(
        'the run',
        read({
          ...runRecord,
          counts,
          done: z.boolean(),
          throttled: z.object({ at: iso(), secondsAgo: z.number().int(), keyFamily: z.string(), requests: z.number().int() }).nullable(),
        }),
      ),
      400: badRequest,
      404: notFound,
      503: refused('the store cannot be read'),
    },
  }),
  route({
    id: 'runItems',
    method: 'GET',
    path: '/runs/{id}/items',
    params: runId,
    tag: 'runs',
    scope: 'read',
    summary: "a page of a run's items, with their results and failure reasons",
    query: z.object({ state: z.enum(['pending', 'running', 'done', 'failed']).optional(), cursor: z.string().optional(), limit: pageQuery(1_000, 100) }),
    responses: {
      200: json('a page', read({ runId: z.string(), items: z.array(item), next: z.string().nullable() })),
      400: badRequest,
      404: notFound,
      503: refused('the store cannot be read'),
    },
  }),
  route({
    id: 'cancelRun',
    method: 'POST',
    path: '/runs/{id}/cancel',
    params: runId,
    tag: 'runs',
    scope: 'admin',
    summary: 'cancel a run: its Pending items are failed (fenced), running ones end as they finish, it takes no more items',
    body: commandBody,
    optionalBody: true,
    responses: {
      200: json(
        'the cancel (the first one, when the run was cancelled before)',
        z.object({
          id: z.string(),
          cancelled: cancel,
          first: z.boolean(),
          counts,
          pendingLeft: z.number().int().nullable().optional().describe("a node: Pending items left once the run's coordinator has passed"),
        }),
      ),
      400: badRequest,
      404: notFound,
      503: notLeader,
      307: toLeader,
    },
  }),
  route({
    id: 'statusPage',
    method: 'GET',
    path: '/',
    tag: 'node',
    nodeOnly: true,
    scope: null,
    summary: "the status page (it reads /ui/state with the viewer's credential)",
    responses: { 200: { description: 'HTML', content: { type: 'text/html' } } },
  }),
  route({
    id: 'metrics',
    method: 'GET',
    path: '/metrics',
    tag: 'node',
    nodeOnly: true,
    scope: 'read',
    summary: 'Prometheus metrics',
    responses: { 200: { description: 'the text exposition format', content: { type: 'text/plain' } } },
  }),
  route({
    id: 'uiState',
    method: 'GET',
    path: '/ui/state',
    tag: 'node',
    nodeOnly: true,
    scope: 'read',
    summary: 'everything the status page shows, in one read',
    responses: {
      200: json(
        'cluster, recent rollouts and runs, events',
        read({
          cluster: z.record(z.string(), z.unknown()),
          rollouts: z.array(z.record(z.string(), z.unknown())),
          runs: z.array(z.record(z.string(), z.unknown())),
          events: z.array(z.record(z.string(), z.unknown())),
        }),
      ),
      503: refused('the store cannot be read'),
    },
  }),
  route({
    id: 'postEvent',
    method: 'POST',
    path: '/events',
    tag: 'node',
    nodeOnly: true,
    scope: 'signal',
    summary: 'a rollout signal (metrics, alarm, created, command), or any event as EventBridge delivers it (scope forward for aws.* sources)',
    body: z.record(z.string(), z.unknown()).describe('a signal ({type, rolloutId, …}) or an envelope ({source, detail-type, detail})'),
    responses: {
      202: json(
        'stored and evaluated (a signal), or delivered to the functions its rules name (an envelope)',
        z.union([
          z.object({
            stored: z.enum(['stored', 'stale', 'none']),
            evaluated: z.boolean(),
            actions: z.array(z.object({ rolloutId: z.string(), transition: z.enum(TRANSITION_KINDS), applied: z.boolean() })),
          }),
          z.object({ delivered: z.array(z.object({ function: z.string(), result: z.unknown() })) }),
        ]),
      ),
      400: badRequest,
    },
  }),
  route({
    id: 'coordinator',
    method: 'POST',
    path: '/coordinator',
    tag: 'node',
    nodeOnly: true,
    scope: 'worker',
    summary: "a remote worker's steal request (the coordinator function's invoke)",
    body: z.record(z.string(), z.unknown()),
    responses: {
      200: json("the coordinator's answer", z.unknown()),
      400: badRequest,
      403: refused('a worker asking outside its credential: another run or worker id, or an action other than steal'),
      503: notLeader,
      307: toLeader,
    },
  }),
];

/** Routes by operationId. */
export const ROUTE_BY_ID: ReadonlyMap<string, RouteDef> = new Map(ROUTES.map((r) => [r.id, r]));

/** What the router found: the route and its path parameters (decoded), or the methods the path takes (405). */
export type Match =
  { readonly route: RouteDef; readonly params: Readonly<Record<string, string>> } | { readonly route: null; readonly allowed: readonly string[] };

/** A request target that names no path in one spelling: answered 400 with this message. */
export class TargetError extends Error {
  override readonly name = 'TargetError';
}

/*
 * A path has one spelling. Every decision about a request (scope, signature,
 * leadership, what is cached or carried out after a commit) is made on the
 * router's match, and the router matches the path as it was sent; so a
 * spelling that a client, a proxy or URL parsing would read as another path
 * is refused, never normalised here into something the layer in front did not
 * see: an empty segment (a doubled or trailing slash), a dot segment (`.`,
 * `..`, `%2e`…), a character a path does not carry unencoded, a malformed
 * percent-escape, a fragment. A fixed segment spelled otherwise (another case,
 * a needless escape) is simply no route: 404. Parameters are decoded once,
 * here; an id's own rule (ID_RULE) is its handler's.
 */
const CANONICAL_PATH = /^\/$|^(?:\/(?!\.\.?(?:\/|$))(?:[\w\-.~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+)+$/;
const ENCODED_DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?=\/|$)/i;

function canonical(path: string): boolean {
  return CANONICAL_PATH.test(path) && !(path.includes('%') && ENCODED_DOT_SEGMENT.test(path));
}

/** Why `path` is not in its one spelling (it is not: canonical() said so). */
function whyNotCanonical(path: string): string {
  const shown = JSON.stringify(path.slice(0, 200));
  if (!path.startsWith('/')) return `request target ${shown} is not a path: it must start with /`;
  if (path !== '/' && /\/(?:\/|$)/.test(path))
    return `path ${shown} has an empty segment (a doubled or trailing slash): send each segment once, with no slash at the end`;
  if (ENCODED_DOT_SEGMENT.test(path)) return `path ${shown} has a dot segment (. or ..): send the path it means`;
  const escape = /%(?![0-9A-Fa-f]{2})/.exec(path);
  if (escape) return `path ${shown} has a malformed percent-escape at character ${escape.index + 1}: % must be followed by two hex digits`;
  const bad = /[^\w\-.~!$&'()*+,;=:@/%]/.exec(path)!;
  return `path ${shown} has the character ${JSON.stringify(bad[0])} (code ${bad[0].codePointAt(0)}), which a path carries only percent-encoded`;
}

/**
 * A request target (origin-form: path and query) split into its path, in its
 * one spelling (see above), and its query; TargetError naming what is wrong
 * otherwise. What a transport hands the router and the guard.
 */
export function parseTarget(raw: string): { readonly path: string; readonly query: string } {
  if (raw.includes('#')) throw new TargetError('a request target carries no fragment (#)');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  if (!canonical(path)) throw new TargetError(whyNotCanonical(path));
  return { path, query: q < 0 ? '' : raw.slice(q + 1) };
}

function decodeParam(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new TargetError(`path segment ${JSON.stringify(raw.slice(0, 200))} is not valid percent-encoding (UTF-8 bytes as %XX)`);
  }
}

/**
 * A router over `routes` (Hono's RegExpRouter: every path in one regular
 * expression), for paths in their one spelling: any other spelling throws
 * TargetError (a 400), so what the router matches is what was sent.
 */
export function routerOf(routes: readonly RouteDef[]): (method: string, path: string) => Match {
  const router = new RegExpRouter<RouteDef>();
  for (const r of routes) router.add(r.method, r.path.replace(/\{([^}]+)\}/g, ':$1'), r);
  const methods = [...new Set(routes.map((r) => r.method))];
  const find = (method: string, path: string): { route: RouteDef; params: Record<string, string> } | null => {
    const [found, stash] = router.match(method, path);
    const first = found[0];
    if (!first) return null;
    const params: Record<string, string> = {};
    for (const [name, at] of Object.entries(first[1] as Record<string, number | string>)) params[name] = decodeParam(stash ? stash[at as number]! : String(at));
    return { route: first[0], params };
  };
  return (method, path) => {
    if (!canonical(path)) throw new TargetError(whyNotCanonical(path));
    const m = method.toUpperCase();
    const hit = find(m === 'HEAD' ? 'GET' : m, path);
    if (hit) return hit;
    return { route: null, allowed: methods.filter((x) => x !== m && find(x, path)) };
  };
}

// ——— The document ———

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  // Named schemas (meta id) become components: the caller gathers them.
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

/** The OpenAPI 3.1 document of the API as a node serves it (routes only a node serves say so). */
export function openApiDocument(): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const gather = (schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> => {
    const s = JSON.parse(JSON.stringify(schemaOf(schema, io)).replaceAll('"#/$defs/', '"#/components/schemas/')) as Record<string, unknown>;
    const defs = s.$defs as Record<string, unknown> | undefined;
    if (defs) {
      for (const [name, def] of Object.entries(defs)) components[name] = def;
      delete s.$defs;
    }
    return s;
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of ROUTES) {
    const parameters: unknown[] = Object.entries(PATH_PARAMS.get(r.id) ?? {}).map(([name, description]) => ({
      name,
      in: 'path',
      required: true,
      description,
      schema: { type: 'string', pattern: ID_RULE.source },
    }));
    for (const [name, field] of Object.entries(r.query?.shape ?? {})) {
      const schema = gather(field as z.ZodType, 'input');
      const many = JSON.stringify(schema).includes('"type":"array"');
      parameters.push({
        name,
        in: 'query',
        required: !(field as z.ZodType).safeParse(undefined).success,
        ...(schema.description ? { description: schema.description } : {}),
        schema,
        ...(many ? { style: 'form', explode: true } : {}),
      });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, res] of Object.entries(r.responses)) {
      const content = res.content
        ? { [res.content.type ?? 'application/json']: res.content.schema ? { schema: gather(res.content.schema, 'output') } : {} }
        : undefined;
      responses[status] = {
        description: res.description,
        ...(res.headers
          ? { headers: Object.fromEntries(Object.entries(res.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }])) }
          : {}),
        ...(content ? { content } : {}),
      };
    }
    responses.default = {
      description: 'refused: by the node in front (401 no credential, 403 scope, 421 host, 429 rate, 413 body) or otherwise',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
    (paths[r.path] ??= {})[r.method.toLowerCase()] = {
      operationId: r.id,
      summary: r.summary,
      tags: [r.tag],
      ...(r.nodeOnly ? { 'x-node-only': true } : {}),
      'x-scope': r.scope,
      ...(r.scopeWhen ? { 'x-scope-when': r.scopeWhen } : {}),
      security: r.scope ? [{ bearer: [r.scope] }, { sigv4: [] }] : [],
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: !r.optionalBody, content: { 'application/json': { schema: gather(r.body, 'input') } } } } : {}),
      responses,
    };
  }
  components.Error ??= gather(errorBody, 'output');
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Rollout control plane',
      version: API_VERSION,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      description:
        'Progressive rollouts and work runs, fenced by leases. A node (`rollout serve`) serves every route; the deployed API (API Gateway, SigV4) serves those not marked x-node-only.',
    },
    tags: [
      { name: 'cluster', description: 'who leads, health' },
      { name: 'rollouts', description: 'progressive rollouts: create, command, read, assign' },
      { name: 'runs', description: 'work runs: submit, read back, cancel' },
      { name: 'node', description: 'served by a node only' },
    ],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: "a node with --tokens-file or --oidc: a token carrying the route's scope" },
        sigv4: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'the deployed API: AWS SigV4 (IAM authorization; grantRead/Operate/Admin)' },
      },
    },
  };
}
