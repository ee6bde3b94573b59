import { authorizeWorker } from '../../auth/bindings.js';
import { HttpError, type Caller, type Handlers } from '../../api/route.js';
import type { WORK_ROUTES, WorkChange } from '../../api/routes/work.js';
import { systemClock } from '../../clock.js';
import { LedgerWorkQueue } from '../../adapters/postgres/ledger-queue.js';
import { ack, claim, heartbeat, nack, reject, start, type ItemCas } from '../../ledger/transitions.js';
import type { ControlPlaneNode } from './node.js';

/**
 * A node's half of a remote worker's protocol (api/routes/work.ts): each call
 * is the port operation a worker with a store makes, done here on the node's
 * store for one run as one worker. The credential's binding is checked on
 * the run and worker id of every call; a change is built from the worker's
 * own transition helpers (never a coordinator's fenced one) and stamped with
 * this node's clock.
 */
type WorkRoute = (typeof WORK_ROUTES)[number];

/** Refused (403) unless the caller's credential may act in `runId` as `workerId`. */
function authorize(caller: Caller, runId: string, workerId: string): void {
  // The guard identified every caller it let through (with authentication off: a local identity holding every scope).
  if (!caller.identity) throw new HttpError(403, 'a remote worker is answered only once the guard identified it');
  const refused = authorizeWorker(caller.identity, runId, workerId);
  if (refused) throw new HttpError(403, refused);
}

/** The store change a worker's transition names, made as the worker would make it. */
function casOf(runId: string, workerId: string, c: WorkChange, now: number): ItemCas {
  switch (c.transition) {
    case 'claim':
      return claim(runId, c.itemId, workerId, c.epoch, now);
    case 'start':
      return start(runId, c.itemId, workerId, now);
    case 'heartbeat':
      return heartbeat(runId, c.itemId, workerId, now);
    case 'ack':
      return ack(runId, c.itemId, workerId, c.result);
    case 'nack':
      return nack(runId, c.itemId, workerId, c.reason, { counts: c.counts });
    case 'reject':
      return reject(runId, c.itemId, workerId, c.reason);
  }
}

export function workHandlers(node: ControlPlaneNode): Handlers<WorkRoute> {
  const { ledger } = node.plane.stores;
  const registry = node.plane.registry;
  const clock = systemClock;
  return {
    workRun: async ({ params, query, caller }) => {
      authorize(caller, params.id, query.workerId);
      const run = await ledger.getRun(params.id);
      if (!run) return { status: 404, body: { error: `no run ${params.id}` } };
      return {
        status: 200,
        body: { id: run.id, coordinatorEpoch: run.coordinatorEpoch, done: await ledger.isDone(run.id), cancelled: Boolean(run.cancelled) },
      };
    },
    workItem: async ({ params, query, caller }) => {
      authorize(caller, params.id, query.workerId);
      return { status: 200, body: { item: await ledger.get(params.id, params.item) } };
    },
    workHolders: async ({ params, query, caller }) => {
      authorize(caller, params.id, query.workerId);
      const items = await ledger.running(params.id);
      return {
        status: 200,
        body: { holders: items.map((i) => ({ runId: i.runId, id: i.id, worker: i.worker, claimedAt: i.claimedAt, started: i.started })) },
      };
    },
    workClaim: async ({ params, body, caller }) => {
      authorize(caller, params.id, body.workerId);
      const queue = new LedgerWorkQueue(node.sql, node.wake, params.id, body.workerId);
      const got = await queue.receive(body.max, body.waitSeconds, caller.signal, { start: body.start });
      return {
        status: 200,
        body: {
          messages: got.map((m) => ({
            itemId: m.itemId,
            receiveCount: m.receiveCount,
            started: m.started === true,
            ...(m.started ? { payload: m.payload } : {}),
          })),
        },
      };
    },
    workChanges: async ({ params, body, caller }) => {
      authorize(caller, params.id, body.workerId);
      const seen = new Set<string>();
      for (const c of body.changes) {
        if (seen.has(c.itemId)) throw new HttpError(400, `changes: more than one for item ${c.itemId} (one per item per call: two would have no order)`);
        seen.add(c.itemId);
      }
      const now = clock.now();
      const changes = body.changes.map((c) => casOf(params.id, body.workerId, c, now));
      // Items given back are Pending again: whoever waits for work in this run is woken (what a worker's release of
      // its message does; a remote worker's queue leaves that to this call).
      const wakes = body.changes.some((c) => c.transition === 'nack');
      if (body.answer === 'applied') {
        const applied = await ledger.applyMany(changes, now);
        if (wakes) await node.wake.notify(params.id);
        return { status: 200, body: { applied } };
      }
      const outcomes = await ledger.casMany(changes, now);
      if (wakes) await node.wake.notify(params.id);
      return {
        status: 200,
        body: { outcomes: outcomes.map((o) => (o.ok ? { ok: true as const, item: o.item } : { ok: false as const, current: o.current })) },
      };
    },
    workRegister: async ({ params, body, caller }) => {
      authorize(caller, params.id, body.workerId);
      const record = await registry.register({ ...body, runId: params.id }, clock.now());
      return { status: 200, body: { record } };
    },
    workHeartbeat: async ({ params, body, caller }) => {
      authorize(caller, params.id, body.workerId);
      return { status: 200, body: { record: await registry.heartbeat({ ...body, runId: params.id }, clock.now()) } };
    },
    workLeave: async ({ params, body, caller }) => {
      authorize(caller, params.id, body.workerId);
      await registry.deregister({ ...body, runId: params.id }, clock.now());
      return { status: 200, body: { left: true } };
    },
  };
}
