import { z } from 'zod';
import { MAX_RUN_SHARDS, shardsFor } from '../../ledger/capacity.js';
import { badRequest, commandBody, id, iso, json, notFound, notLeader, pageQuery, read, refused, route, toLeader, unreadable } from '../route.js';

/** Work runs: submit, read back, cancel. */

export const MAX_RUN_ITEMS = 10_000;
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
/** A run request: its fields, and the rules across them (shards or itemsPerSecond, within what a run takes). */
export const createRunBody = createRunFields.superRefine((b, ctx) => {
  if (b.shards !== undefined && b.itemsPerSecond !== undefined)
    ctx.addIssue({ code: 'custom', path: ['shards'], message: 'give shards or itemsPerSecond, not both' });
  if (b.itemsPerSecond !== undefined && shardsFor(b.itemsPerSecond) > MAX_RUN_SHARDS) {
    ctx.addIssue({
      code: 'custom',
      path: ['itemsPerSecond'],
      message: `${b.itemsPerSecond} items/s needs ${shardsFor(b.itemsPerSecond)} shards of 1 KB items; a run takes at most ${MAX_RUN_SHARDS}: split it into runs`,
    });
  }
});

/** `POST /runs`'s body as JSON Schema (draft 2020-12), from the schema the route checks with (the cross-field rules are the route's). */
export function runRequestJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(createRunBody, { io: 'input', unrepresentable: 'any' });
  return {
    ...schema,
    $id: 'https://rollout-control-plane.dev/schemas/run-request.json',
    title: 'Run request',
    description: 'POST /runs: a run and its items (payloads: any JSON), or more items for an existing run.',
  };
}

const ITEM_STATES = ['pending', 'running', 'done', 'failed'] as const;
/** Items one page of GET /runs/{id}/items holds at most (default 100). */
export const MAX_ITEMS_PAGE = 1_000;

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
    /** Done: what the worker returned. */
    result: z.unknown(),
    /** Failed (and a retried failure): why. */
    error: z.string().nullable(),
    attempts: z.number().int(),
    worker: z.string().nullable(),
    claimedAt: iso().nullable(),
    heartbeatAt: iso().nullable(),
  })
  .meta({ id: 'WorkItem' });
const runId = { id: 'run id' };

export const createRun = route({
  id: 'createRun',
  method: 'POST',
  path: '/runs',
  tag: 'runs',
  scope: 'admin',
  summary: "create a work run and enqueue its items; the same id adds items (a spec, if sent, must be the run's)",
  body: createRunBody,
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
});

export const listRuns = route({
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
    503: unreadable,
  },
});

export const getRun = route({
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
    503: unreadable,
  },
});

export const runItems = route({
  id: 'runItems',
  method: 'GET',
  path: '/runs/{id}/items',
  params: runId,
  tag: 'runs',
  scope: 'read',
  summary: "a page of a run's items, with their results and failure reasons",
  query: z.object({
    state: z.enum(ITEM_STATES, { error: (i) => `one of ${ITEM_STATES.join(', ')}, got "${String(i.input).slice(0, 40)}"` }).optional(),
    cursor: z.string().optional(),
    limit: pageQuery(MAX_ITEMS_PAGE, 100),
  }),
  responses: {
    200: json('a page', read({ runId: z.string(), items: z.array(item), next: z.string().nullable() })),
    400: badRequest,
    404: notFound,
    503: unreadable,
  },
});

export const cancelRun = route({
  id: 'cancelRun',
  method: 'POST',
  path: '/runs/{id}/cancel',
  params: runId,
  tag: 'runs',
  scope: 'admin',
  summary: 'cancel a run: its Pending items are failed (fenced), running ones end as they finish, it takes no more items',
  body: commandBody,
  optionalBody: true,
  nodeHooks: { afterAnswer: 'cancelFollowUp' },
  responses: {
    200: json(
      'the cancel (the first one, when the run was cancelled before)',
      z.object({
        id: z.string(),
        cancelled: cancel,
        first: z.boolean(),
        counts,
        /** On a node: Pending items left once its coordinator has passed, 0 when all are failed (null: not coordinated here; its next scans fail them). Absent on a replayed answer and in AWS. */
        pendingLeft: z.number().int().nullable().optional().describe("a node: Pending items left once the run's coordinator has passed"),
      }),
    ),
    400: badRequest,
    404: notFound,
    503: notLeader,
    307: toLeader,
  },
});
