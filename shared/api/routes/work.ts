import { z } from 'zod';
import { MAX_RESULT_BYTES } from '../../ledger/model.js';
import { badRequest, json, notFound, refused, route } from '../route.js';

/**
 * A remote worker's protocol: what a worker process (`createWorker({ url })`,
 * `rollout worker --url`) sends a node instead of talking to the store. Each
 * route is a port operation the worker already makes (ledger/worker), for
 * one run, as one worker: the node checks the credential's binding (run and
 * worker id), builds the change itself from the worker's transition helpers
 * (a worker names a transition and its values, never a raw compare-and-swap,
 * and never a coordinator's fenced one), and stamps it with its own clock,
 * the one its coordinators judge heartbeats by. Any node answers (the store
 * is shared); idle steals still go to the leader (POST /coordinator).
 */

/** A worker id as bindings name them (auth/bindings.ts WORKER_BINDING, without the wildcard). */
const workerId = z.string().regex(/^[A-Za-z0-9_.:@/+-]{1,128}$/, 'a worker id: letters, digits and _ . : @ / + - (at most 128)');
const itemId = z.string().min(1).max(128);
const reason = z.string().max(4_096);
/** A write carries at most this many changes (the worker sends a chunk at a time: 64 by default). */
export const MAX_WORK_CHANGES = 1_000;
/** Messages one claim asks for at most (a worker's --batch is at most 1,000). */
export const MAX_WORK_CLAIM = 1_000;
/** The longest a claim waits for work (a long poll, as SQS's 20 s). */
export const MAX_WORK_WAIT_SECONDS = 20;

/** A work item as the ledger holds it: times in milliseconds since the epoch. */
export const wireItem = z
  .object({
    runId: z.string(),
    id: z.string(),
    payload: z.unknown(),
    state: z.enum(['pending', 'running', 'done', 'failed']),
    worker: z.string().nullable(),
    epoch: z.number().int().nullable(),
    claimedAt: z.number().nullable(),
    started: z.boolean(),
    heartbeatAt: z.number().nullable(),
    resultHash: z.string().nullable(),
    result: z.unknown(),
    error: z.string().nullable(),
    sentAt: z.number().nullable(),
    attempts: z.number().int(),
    version: z.number().int(),
  })
  .meta({ id: 'LedgerItem' });

/** A worker's transition (ledger/transitions.ts), by name and the values it takes. */
export const workChange = z.discriminatedUnion('transition', [
  z.object({ transition: z.literal('claim'), itemId, epoch: z.number().int().min(0) }).strict(),
  z.object({ transition: z.literal('start'), itemId }).strict(),
  z.object({ transition: z.literal('heartbeat'), itemId }).strict(),
  z.object({ transition: z.literal('ack'), itemId, result: z.unknown() }).strict(),
  z.object({ transition: z.literal('nack'), itemId, reason, counts: z.boolean() }).strict(),
  z.object({ transition: z.literal('reject'), itemId, reason }).strict(),
]);
export type WorkChange = z.output<typeof workChange>;

const runParam = { id: 'run id' };
const asWorker = { workerId };
const forbidden = refused('outside the credential: another run, or another worker id');

export const workRun = route({
  id: 'workRun',
  method: 'GET',
  path: '/runs/{id}/work',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  summary: 'what a worker needs of its run: the coordinator epoch, whether it is done, whether it was cancelled',
  query: z.object(asWorker),
  responses: {
    200: json('the run', z.object({ id: z.string(), coordinatorEpoch: z.number().int(), done: z.boolean(), cancelled: z.boolean() })),
    400: badRequest,
    403: forbidden,
    404: notFound,
  },
});

export const workItem = route({
  id: 'workItem',
  method: 'GET',
  path: '/runs/{id}/work/items/{item}',
  params: { ...runParam, item: 'item id' },
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  summary: 'one item as the ledger holds it (a worker reading back what an unanswered write did)',
  query: z.object(asWorker),
  responses: {
    200: json('the item, or null when there is none', z.object({ item: wireItem.nullable() })),
    400: badRequest,
    403: forbidden,
  },
});

export const workHolders = route({
  id: 'workHolders',
  method: 'GET',
  path: '/runs/{id}/work/holders',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  summary: 'who holds each Running item of the run, and whether it started (a worker finding what it holds after a restart or a lost answer)',
  query: z.object(asWorker),
  responses: {
    200: json(
      'the running set',
      z.object({
        holders: z.array(
          z.object({ runId: z.string(), id: z.string(), worker: z.string().nullable(), claimedAt: z.number().nullable(), started: z.boolean() }),
        ),
      }),
    ),
    400: badRequest,
    403: forbidden,
  },
});

export const workClaim = route({
  id: 'workClaim',
  method: 'POST',
  path: '/runs/{id}/work/claim',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  anyNode: true,
  summary: "claim Pending items for the worker (with start: and start them), waiting up to waitSeconds for some: the ledger queue's receive",
  body: z
    .object({
      ...asWorker,
      max: z.number().int().min(1).max(MAX_WORK_CLAIM),
      waitSeconds: z.number().min(0).max(MAX_WORK_WAIT_SECONDS),
      start: z.boolean().default(false),
    })
    .strict(),
  responses: {
    200: json(
      'what was claimed (none when the wait ran out)',
      z.object({
        messages: z.array(z.object({ itemId: z.string(), receiveCount: z.number().int(), started: z.boolean(), payload: z.unknown().optional() })),
      }),
    ),
    400: badRequest,
    403: forbidden,
  },
});

export const workChanges = route({
  id: 'workChanges',
  method: 'POST',
  path: '/runs/{id}/work/changes',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  anyNode: true,
  summary:
    "the worker's transitions on items it holds or claims (start, heartbeat, ack, nack, reject, claim), each judged on its own; a nack wakes the run's waiting workers",
  body: z
    .object({
      ...asWorker,
      changes: z.array(workChange).min(1).max(MAX_WORK_CHANGES),
      /** outcomes: each change's item as it is now; applied: only whether each applied (heartbeats, acks). */
      answer: z.enum(['outcomes', 'applied']),
    })
    .strict()
    .describe(`a result is at most ${MAX_RESULT_BYTES} bytes of JSON (larger ones are rejected by the worker before they are sent)`),
  responses: {
    200: json(
      'in the order sent',
      z.union([
        z.object({
          outcomes: z.array(z.union([z.object({ ok: z.literal(true), item: wireItem }), z.object({ ok: z.literal(false), current: wireItem.nullable() })])),
        }),
        z.object({ applied: z.array(z.boolean()) }),
      ]),
    ),
    400: badRequest,
    403: forbidden,
  },
});

const workerKey = z.object({ ...asWorker, instanceId: z.string().min(1).max(2_048) });
const registration = workerKey.extend({ provider: z.enum(['aws', 'gcp', 'local']) });
const drainRequest = z.object({ kind: z.string(), provider: z.string(), noticeAt: z.number(), requestedAt: z.number() }).nullable();
/** A worker's registry record: a drain requested for it shows here. */
const workerRecord = z.object({
  workerId: z.string(),
  instanceId: z.string(),
  provider: z.string(),
  runId: z.string(),
  state: z.enum(['active', 'draining', 'gone']),
  registeredAt: z.number(),
  heartbeatAt: z.number(),
  drain: drainRequest,
  goneAt: z.number().nullable(),
  silentForMs: z.number().nullable(),
});

export const workRegister = route({
  id: 'workRegister',
  method: 'POST',
  path: '/runs/{id}/work/register',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  anyNode: true,
  summary: 'register the worker on its instance (again after a restart): a drain asked meanwhile is in the record',
  body: registration.strict(),
  responses: {
    200: json('the record as stored', z.object({ record: workerRecord.extend({ known: z.boolean() }) })),
    400: badRequest,
    403: forbidden,
  },
});

export const workHeartbeat = route({
  id: 'workHeartbeat',
  method: 'POST',
  path: '/runs/{id}/work/heartbeat',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  anyNode: true,
  summary: "the worker's registry heartbeat: answers its record, where a drain request shows up",
  body: workerKey.strict(),
  responses: { 200: json('the record, null when unknown', z.object({ record: workerRecord.nullable() })), 400: badRequest, 403: forbidden },
});

export const workLeave = route({
  id: 'workLeave',
  method: 'POST',
  path: '/runs/{id}/work/leave',
  params: runParam,
  tag: 'work',
  nodeOnly: true,
  scope: 'worker',
  anyNode: true,
  summary: 'the worker has left (done, stopped or drained): its record is kept, marked gone',
  body: workerKey.strict(),
  responses: { 200: json('left', z.object({ left: z.literal(true) })), 400: badRequest, 403: forbidden },
});

export const WORK_ROUTES = [workRun, workItem, workHolders, workClaim, workChanges, workRegister, workHeartbeat, workLeave] as const;
