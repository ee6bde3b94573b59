import type { ItemCas } from '../../ledger/transitions.js';
import { GSI1 } from './table.js';

/**
 * Every ledger transition on DynamoDB, one literal UpdateItem each
 * (transitions.ts says what each change is; here is how it is written). The
 * store adds the item's key; a coordinator's transition (repend, steal, fail)
 * goes in one transaction with the fence's ConditionCheck (fence.ts).
 *
 * Absent means null: a field cleared is REMOVEd. While Running an item is in
 * gsi1 under its shard's RUNNING key by its id, while Pending under its
 * PENDING key by when its message was last sent (never: first), once Failed
 * under its FAILED key (so failures are counted without reading the run);
 * Done leaves the index. The keys are the run layout's (ledger-keys.ts).
 *
 * The RUNNING entry is written when the item is claimed and not again until
 * it leaves: its sort key does not move with the heartbeat, and gsi1
 * projects nothing a start or a heartbeat changes (table.ts GSI1_PROJECTED),
 * so those two, most of a running item's writes, write the item alone. A
 * steal rewrites the entry in place (its worker). An item still under a
 * RUNNING sort key of the heartbeat layout keeps it until it leaves Running:
 * nothing reads that key's order.
 *
 * A Pending item carries `pendingVersion`, its version while it is Pending
 * (a Pending item's version does not move), because gsi1 cannot project
 * `version` itself: the heartbeats move it.
 */

/** An item's conditional update, without its table and key. */
export interface ItemUpdate {
  readonly UpdateExpression: string;
  readonly ConditionExpression: string;
  readonly ExpressionAttributeNames: Record<string, string>;
  readonly ExpressionAttributeValues: Record<string, unknown>;
}

// The sub-conditions the transitions' conditions are made of.
/** The item is Pending. */
const PENDING = '#state = :pending';
/** The item is Running, held by :worker. */
const HELD = '#state = :running AND worker = :worker';
/** The holder has not begun executing it. */
const UNSTARTED = 'started = :false';
/** The exact row that was judged: every transition, a heartbeat too, moves the version on. */
const AT_VERSION = 'version = :version';

/** Reserved words and the index keys, by the names the expressions use. */
const NAMES: Record<string, string> = { '#state': 'state', '#result': 'result', '#error': 'error', '#ipk': GSI1.pk, '#isk': GSI1.sk, '#ttl': 'ttl' };

/** The transitions that end an item (Done or Failed): the ones that stamp its expiry. */
const ENDING = new Set<ItemCas['transition']>(['ack', 'reject', 'fail']);
const CONSTANTS: Record<string, unknown> = {
  ':pending': 'pending',
  ':running': 'running',
  ':done': 'done',
  ':failed': 'failed',
  ':true': true,
  ':false': false,
  ':one': 1,
};

export const pad = (n: number) => String(Math.max(0, Math.trunc(n))).padStart(15, '0');
export const pendingSk = (itemId: string, sentAt: number | null) => `${pad(sentAt ?? 0)}#${itemId}`;
/** The item's index keys, by state (ledger-keys.ts: one run's, or one shard's). */
export interface IndexKeys {
  readonly pending: string;
  readonly running: string;
  readonly failed: string;
}

/** Running: under its RUNNING key by id, where it stays until it leaves Running. */
const running = (c: ItemCas, k: IndexKeys) => ({ ':ipk': k.running, ':isk': c.itemId });
/** Pending with no message sent: first in its PENDING order. */
const unsent = (c: ItemCas, k: IndexKeys) => ({ ':ipk': k.pending, ':isk': pendingSk(c.itemId, null) });
/** Failed: under its FAILED key. */
const failed = (c: ItemCas, k: IndexKeys) => ({ ':ipk': k.failed, ':isk': c.itemId });

interface Parts {
  readonly when: string;
  readonly update: string;
  readonly values: Record<string, unknown>;
}

/** Each transition: the condition (`when`), the update, and the values they use. */
function parts(c: ItemCas, k: IndexKeys): Parts {
  switch (c.transition) {
    // claim — a worker takes the item: Running(worker), unstarted, heartbeat now, stamped with the epoch it saw.
    case 'claim':
      return {
        when: PENDING,
        update:
          'SET #state = :running, worker = :worker, epoch = :epoch, claimedAt = :claimedAt, started = :false, heartbeatAt = :heartbeatAt, #ipk = :ipk, #isk = :isk, version = version + :one, updatedAt = :now REMOVE pendingVersion',
        values: { ':worker': c.set.worker, ':epoch': c.set.epoch, ':claimedAt': c.set.claimedAt, ':heartbeatAt': c.set.heartbeatAt, ...running(c, k) },
      };
    // start — the holder begins executing it; from now on it is never stolen.
    case 'start':
      return {
        when: `${HELD} AND ${UNSTARTED}`,
        update: 'SET started = :true, heartbeatAt = :heartbeatAt, version = version + :one, updatedAt = :now',
        values: { ':worker': c.expect.worker, ':heartbeatAt': c.set.heartbeatAt },
      };
    // heartbeat — the holder is alive.
    case 'heartbeat':
      return {
        when: HELD,
        update: 'SET heartbeatAt = :heartbeatAt, version = version + :one, updatedAt = :now',
        values: { ':worker': c.expect.worker, ':heartbeatAt': c.set.heartbeatAt },
      };
    // ack — the holder records the result: Done, once (the worker stays: who produced it).
    case 'ack':
      return {
        when: HELD,
        update:
          'SET #state = :done, resultHash = :resultHash, #result = :result, started = :false, version = version + :one, updatedAt = :now REMOVE #error, epoch, claimedAt, heartbeatAt, #ipk, #isk',
        values: { ':worker': c.expect.worker, ':resultHash': c.set.resultHash, ':result': c.set.result ?? null },
      };
    // nack — the holder gives it back: Pending with no message on record; an attempt counts when the backend failed it.
    case 'nack':
      return {
        when: HELD,
        update:
          'SET #state = :pending, #error = :error, started = :false, attempts = attempts + :counts, #ipk = :ipk, #isk = :isk, version = version + :one, pendingVersion = version + :one, updatedAt = :now REMOVE worker, epoch, claimedAt, heartbeatAt, sentAt',
        values: { ':worker': c.expect.worker, ':error': c.set.error, ':counts': c.bumpAttempts ? 1 : 0, ...unsent(c, k) },
      };
    // reject — the holder ran it but cannot record the result: Failed with the reason, an attempt counted.
    case 'reject':
      return {
        when: HELD,
        update:
          'SET #state = :failed, #error = :error, started = :false, attempts = attempts + :one, #ipk = :ipk, #isk = :isk, version = version + :one, updatedAt = :now REMOVE epoch, claimedAt, heartbeatAt',
        values: { ':worker': c.expect.worker, ':error': c.set.error, ...failed(c, k) },
      };
    // repend (fenced) — a silent worker's item goes back to Pending with no message on record, only if it is still
    // the row judged stale (a heartbeat since keeps it with its worker); an attempt counts when it had started.
    case 'repend':
      return {
        when: `${HELD} AND ${AT_VERSION}`,
        update:
          'SET #state = :pending, #error = :error, started = :false, attempts = attempts + :counts, #ipk = :ipk, #isk = :isk, version = version + :one, pendingVersion = version + :one, updatedAt = :now REMOVE worker, epoch, claimedAt, heartbeatAt, sentAt',
        values: { ':worker': c.expect.worker, ':version': c.expect.version, ':error': c.set.error, ':counts': c.bumpAttempts ? 1 : 0, ...unsent(c, k) },
      };
    // steal (fenced) — an unstarted item moves from the victim (:worker) to the thief in one step, no Pending in
    // between; a start racing it: exactly one of them wins. It stays under its RUNNING key, its entry rewritten in place.
    case 'steal':
      return {
        when: `${HELD} AND ${UNSTARTED}`,
        update:
          'SET worker = :thief, epoch = :epoch, claimedAt = :claimedAt, started = :false, heartbeatAt = :heartbeatAt, version = version + :one, updatedAt = :now',
        values: { ':worker': c.expect.worker, ':thief': c.set.worker, ':epoch': c.set.epoch, ':claimedAt': c.set.claimedAt, ':heartbeatAt': c.set.heartbeatAt },
      };
    // fail (fenced) — a poison item (or a cancelled run's) ends Failed with the reason; an attempt counts when one ended
    // here (a started item whose worker went silent). Found as judged: Pending, or Running held by the worker seen; at
    // the version seen when one is given.
    case 'fail':
      return {
        when: [c.expect.state === 'pending' ? PENDING : HELD, ...(c.expect.version === undefined ? [] : [AT_VERSION])].join(' AND '),
        update:
          'SET #state = :failed, #error = :error, started = :false, attempts = attempts + :counts, #ipk = :ipk, #isk = :isk, version = version + :one, updatedAt = :now REMOVE worker, epoch, claimedAt, heartbeatAt, pendingVersion',
        values: {
          ':worker': c.expect.state === 'running' ? c.expect.worker : null,
          ':version': c.expect.version,
          ':error': c.set.error,
          ':counts': c.bumpAttempts ? 1 : 0,
          ...failed(c, k),
        },
      };
  }
}

/** The transition's update, with the names and values its expressions use (DynamoDB refuses unused ones). */
/**
 * `expiresAt` (epoch seconds): a transition that ends the item sets the
 * table's TTL attribute to it, in the same write, so a finished item's
 * retention costs no write of its own (docs/operating/retention.md#what-is-kept).
 */
export function ledgerUpdate(c: ItemCas, now: number, keys: IndexKeys, expiresAt?: number): ItemUpdate {
  const ends = expiresAt !== undefined && ENDING.has(c.transition);
  const { when, update: base, values: own } = parts(c, keys);
  const update = ends ? base.replace(/^SET /, 'SET #ttl = :ttl, ') : base;
  const values = ends ? { ...own, ':ttl': expiresAt } : own;
  const text = `${update} ${when}`;
  const used = (placeholder: string) => new RegExp(`${placeholder}(?![A-Za-z0-9_])`).test(text);
  const pick = (from: Record<string, unknown>) => Object.entries(from).filter(([k]) => used(k));
  return {
    UpdateExpression: update,
    ConditionExpression: when,
    ExpressionAttributeNames: Object.fromEntries(pick(NAMES)) as Record<string, string>,
    ExpressionAttributeValues: Object.fromEntries(pick({ ...CONSTANTS, ...values, ':now': now })),
  };
}
