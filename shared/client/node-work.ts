import {
  MAX_WORK_CHANGES,
  workChanges,
  workClaim,
  workHeartbeat,
  workHolders,
  workItem,
  workLeave,
  workRegister,
  workRun,
  type WorkChange,
} from '../api/routes/work.js';
import type { ItemCasOutcome, RunningEntry } from '../ledger/store.js';
import type { ItemCas } from '../ledger/transitions.js';
import type { WorkerLedger } from '../ledger/worker/options.js';
import type { QueueMessage, ReceiveOptions, WorkQueue } from '../queue/port.js';
import type { AgentRegistry, Registered, Registration, WorkerKey, WorkerRecord } from '../registry/registry.js';
import { callRoute } from './route-call.js';
import { ApiError, type Target } from './transport.js';

/**
 * A worker without a store of its own: its ledger, queue and registry are a
 * node's API (api/routes/work.ts), so a worker of `npm start` (whose PGlite
 * lives inside the node's process) or of a cluster needs a URL and a worker
 * credential, not database credentials. The worker runs unchanged on these
 * ports: the node makes each change on its store, judged there as it would
 * be judged for a worker with a store.
 */

/** A change's body stays well under a node's 1 MiB limit (a result is at most 256 KiB). */
const MAX_CHANGES_BYTES = 768 * 1024;

export class NodeWork {
  /** Writes are sent once: the worker's own loop retries, reading back what an unanswered write did. */
  private readonly target: Target;

  constructor(
    target: Target,
    private readonly workerId: string,
  ) {
    this.target = { ...target, retryWritesForMs: 0 };
  }

  readonly ledger: WorkerLedger = {
    getRun: async (runId) => {
      const run = await this.run(runId);
      return run && { id: run.id, coordinatorEpoch: run.coordinatorEpoch };
    },
    // A run that does not exist has nothing Pending or Running, as a store answers.
    isDone: async (runId) => (await this.run(runId))?.done ?? true,
    get: async (runId, itemId) => (await callRoute(this.target, workItem, { params: { id: runId, item: itemId }, query: { workerId: this.workerId } })).item,
    holders: async (runId): Promise<RunningEntry[]> =>
      (await callRoute(this.target, workHolders, { params: { id: runId }, query: { workerId: this.workerId } })).holders,
    casMany: (changes) => this.changes(changes, 'outcomes'),
    applyMany: (changes) => this.changes(changes, 'applied'),
    // The node's queue is its ledger: nothing is sent, so nothing is recorded as sent.
    markSent: () => Promise.reject(new Error('a worker of a node sends no messages: nothing to mark sent')),
  };

  /** The queue of one run: a claim is the node's long poll; a row is the message, so deleting and extending have nothing to do. */
  queue(runId: string): WorkQueue {
    const claimed = async (max: number, waitSeconds: number, signal?: AbortSignal, options: ReceiveOptions = {}): Promise<QueueMessage[]> => {
      const target = signal ? { ...this.target, signal } : this.target;
      const { messages } = await callRoute(target, workClaim, {
        params: { id: runId },
        body: { workerId: this.workerId, max, waitSeconds: Math.min(waitSeconds, 20), start: options.start === true },
      });
      return messages.map((m) => ({
        runId,
        itemId: m.itemId,
        receipt: m.itemId,
        receiveCount: m.receiveCount,
        claimed: true,
        ...(m.started ? { started: true, payload: m.payload } : {}),
      }));
    };
    const nothing = () => Promise.resolve();
    return {
      deliversFromLedger: true,
      receive: async (max, waitSeconds, signal, options) => {
        try {
          return await claimed(max, waitSeconds, signal, options);
        } catch (err) {
          // Stopped while waiting: nothing was delivered to us.
          if (signal?.aborted) return [];
          throw err;
        }
      },
      // The node wakes the run's waiting workers when a nack applies: a send or a release has nothing more to do.
      send: nothing,
      release: nothing,
      delete: nothing,
      deleteMany: nothing,
      extend: nothing,
    };
  }

  readonly registry: AgentRegistry = {
    register: async (r: Registration) => {
      const { record } = await callRoute(this.target, workRegister, {
        params: { id: r.runId },
        body: { workerId: r.workerId, instanceId: r.instanceId, provider: r.provider },
      });
      return record as Registered;
    },
    heartbeat: async (key: WorkerKey) => {
      const { record } = await callRoute(this.target, workHeartbeat, {
        params: { id: key.runId },
        body: { workerId: key.workerId, instanceId: key.instanceId },
      });
      return record as WorkerRecord | null;
    },
    deregister: async (key: WorkerKey) => {
      await callRoute(this.target, workLeave, { params: { id: key.runId }, body: { workerId: key.workerId, instanceId: key.instanceId } });
    },
  };

  private async run(runId: string) {
    try {
      return await callRoute(this.target, workRun, { params: { id: runId }, query: { workerId: this.workerId } });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  }

  /** The changes in order, in as few requests as fit a body; each is judged on its own, as a store's casMany judges them. */
  private async changes(changes: readonly ItemCas[], answer: 'outcomes'): Promise<ItemCasOutcome[]>;
  private async changes(changes: readonly ItemCas[], answer: 'applied'): Promise<boolean[]>;
  private async changes(changes: readonly ItemCas[], answer: 'outcomes' | 'applied'): Promise<(ItemCasOutcome | boolean)[]> {
    const out: (ItemCasOutcome | boolean)[] = [];
    const runId = changes[0]?.runId;
    if (changes.some((c) => c.runId !== runId)) throw new Error("a worker of a node changes one run's items per call");
    for (const batch of batches(changes.map((c) => wireChange(c, this.workerId)))) {
      const res = await callRoute(this.target, workChanges, { params: { id: runId! }, body: { workerId: this.workerId, changes: batch, answer } });
      if ('applied' in res) out.push(...res.applied);
      else out.push(...(res.outcomes as ItemCasOutcome[]));
    }
    return out;
  }
}

/** A worker's change as the node takes it: the transition and its values (the node builds the change itself). */
function wireChange(c: ItemCas, workerId: string): WorkChange {
  if (c.fence) throw new Error(`a worker of a node makes a worker's changes only, not a coordinator's ${c.transition}`);
  const as = c.transition === 'claim' ? c.set.worker : c.expect.worker;
  if (as !== workerId) throw new Error(`a change of item ${c.itemId} as another worker (${String(as)}) than this one (${workerId})`);
  switch (c.transition) {
    case 'claim':
      return { transition: 'claim', itemId: c.itemId, epoch: c.set.epoch };
    case 'start':
    case 'heartbeat':
      return { transition: c.transition, itemId: c.itemId };
    case 'ack':
      return { transition: 'ack', itemId: c.itemId, result: c.set.result };
    case 'nack':
      return { transition: 'nack', itemId: c.itemId, reason: c.set.error, counts: c.bumpAttempts };
    case 'reject':
      return { transition: 'reject', itemId: c.itemId, reason: c.set.error };
    default:
      throw new Error(`a worker of a node makes a worker's changes only, not a coordinator's ${(c as ItemCas).transition}`);
  }
}

/** Consecutive runs of changes whose JSON fits one request body (a change larger than that goes alone: the node names what is wrong). */
function* batches(changes: readonly WorkChange[]): Generator<WorkChange[]> {
  let batch: WorkChange[] = [];
  let bytes = 0;
  for (const c of changes) {
    const size = Buffer.byteLength(JSON.stringify(c));
    if (batch.length && (bytes + size > MAX_CHANGES_BYTES || batch.length >= MAX_WORK_CHANGES)) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(c);
    bytes += size;
  }
  if (batch.length) yield batch;
}
