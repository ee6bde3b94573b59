import type { LeaseToken } from '../lease/record.js';
import { canonicalJson, hashText, type WorkItem } from './model.js';

/**
 * Every change to a work item, one small named compare-and-swap each. `expect`
 * is the exact prior state the change applies to (equality on each field);
 * `set` is what it becomes. Coordinator transitions also carry the
 * coordinator's lease token: the store checks it in the same atomic write.
 */

export type ItemFields = Omit<WorkItem, 'runId' | 'id' | 'payload' | 'version'>;
/** Expected fields; `version` pins the exact row that was judged (a heartbeat changes it). */
export type Expect = Partial<Pick<ItemFields, 'state' | 'worker' | 'started' | 'heartbeatAt'>> & { readonly version?: number };

export type Transition = 'claim' | 'start' | 'heartbeat' | 'ack' | 'nack' | 'repend' | 'steal' | 'fail' | 'reject';

/** Any change as plain data: what a model of the store (the explorer's) applies field by field. */
export interface ItemChange {
  readonly transition: Transition;
  readonly runId: string;
  readonly itemId: string;
  readonly expect: Expect;
  readonly set: Partial<ItemFields>;
  /** Set: the attempts counter goes up by one (a run that ended without a result by the item's doing). */
  readonly bumpAttempts?: boolean;
  /** Coordinator writes only. */
  readonly fence?: LeaseToken;
}

/**
 * One transition's change, typed exactly: the stores write each transition
 * with its own literal statement (postgres/ledger-statements.ts,
 * dynamodb/ledger-updates.ts), which reads its values from these fields.
 */
interface Change<T extends Transition, E extends Expect, S extends Partial<ItemFields>> extends ItemChange {
  readonly transition: T;
  readonly expect: E;
  readonly set: S;
}
type Held = { readonly state: 'running'; readonly worker: string };
type Cleared = { readonly worker: null; readonly epoch: null; readonly claimedAt: null; readonly started: false; readonly heartbeatAt: null };
type ClearedButWorker = Omit<Cleared, 'worker'> & { readonly worker: string };
/** Coordinator transitions carry the coordinator's lease token; a worker's carry none. */
type Fenced = { readonly fence: LeaseToken };
type Unfenced = { readonly fence?: undefined };

export type ClaimCas = Change<
  'claim',
  { readonly state: 'pending' },
  {
    readonly state: 'running';
    readonly worker: string;
    readonly epoch: number;
    readonly claimedAt: number;
    readonly started: false;
    readonly heartbeatAt: number;
  }
> &
  Unfenced;
export type StartCas = Change<'start', Held & { readonly started: false }, { readonly started: true; readonly heartbeatAt: number }> & Unfenced;
export type HeartbeatCas = Change<'heartbeat', Held, { readonly heartbeatAt: number }> & Unfenced;
export type AckCas = Change<
  'ack',
  Held,
  ClearedButWorker & { readonly state: 'done'; readonly resultHash: string; readonly result: unknown; readonly error: null }
> &
  Unfenced;
export type NackCas = Change<'nack', Held, Cleared & { readonly state: 'pending'; readonly error: string; readonly sentAt: null }> &
  Unfenced & { readonly bumpAttempts: boolean };
export type RejectCas = Change<'reject', Held, ClearedButWorker & { readonly state: 'failed'; readonly error: string }> &
  Unfenced & { readonly bumpAttempts: true };
export type RependCas = Change<
  'repend',
  { readonly state: 'running'; readonly worker: string | null; readonly version: number },
  Cleared & { readonly state: 'pending'; readonly error: string; readonly sentAt: null }
> &
  Fenced & { readonly bumpAttempts: boolean };
export type StealCas = Change<
  'steal',
  Held & { readonly started: false },
  { readonly worker: string; readonly epoch: number; readonly claimedAt: number; readonly started: false; readonly heartbeatAt: number }
> &
  Fenced;
/** What `fail` may find: Pending, or Running with the worker seen; at the version seen, when given. */
export type FailFrom = ({ readonly state: 'pending' } | { readonly state: 'running'; readonly worker: string | null }) & { readonly version?: number };
export type FailCas = Change<'fail', FailFrom, Cleared & { readonly state: 'failed'; readonly error: string }> & Fenced & { readonly bumpAttempts: boolean };

/** Every change a store is asked to make: one of the transitions below. */
export type ItemCas = ClaimCas | StartCas | HeartbeatCas | AckCas | NackCas | RejectCas | RependCas | StealCas | FailCas;

const runningCleared = { worker: null, epoch: null, claimedAt: null, started: false, heartbeatAt: null } as const;

/** Worker: take a Pending item. `epoch` is the run's coordinator epoch as the worker last saw it. */
export function claim(runId: string, itemId: string, worker: string, epoch: number, now: number): ClaimCas {
  return {
    transition: 'claim',
    runId,
    itemId,
    expect: { state: 'pending' },
    set: { state: 'running', worker, epoch, claimedAt: now, started: false, heartbeatAt: now },
  };
}

/** Worker: mark a held item started before executing it. From here on it is never stolen. */
export function start(runId: string, itemId: string, worker: string, now: number): StartCas {
  return { transition: 'start', runId, itemId, expect: { state: 'running', worker, started: false }, set: { started: true, heartbeatAt: now } };
}

/** Worker: still alive and working on it. */
export function heartbeat(runId: string, itemId: string, worker: string, now: number): HeartbeatCas {
  return { transition: 'heartbeat', runId, itemId, expect: { state: 'running', worker }, set: { heartbeatAt: now } };
}

/**
 * Worker: submit the result. Only the holder can; the first result recorded is the only one.
 * `canonical` is the result's canonical JSON when the caller has it already (it measured it).
 */
export function ack(runId: string, itemId: string, worker: string, result: unknown, canonical: string = canonicalJson(result)): AckCas {
  return {
    transition: 'ack',
    runId,
    itemId,
    expect: { state: 'running', worker },
    set: { ...runningCleared, state: 'done', worker, resultHash: hashText(canonical), result, error: null },
  };
}

export interface NackOptions {
  /** The backend failed it (counts toward poison); a drain we chose does not. */
  readonly counts: boolean;
}

/**
 * Worker: give a held item back (backend failure, drain, restart). It has no
 * message on record (`sentAt` null) until the caller has released its own or
 * sent a new one and recorded that (`markSent`), so a crash in between leaves
 * it for the scan to send.
 */
export function nack(runId: string, itemId: string, worker: string, reason: string, o: NackOptions): NackCas {
  return {
    transition: 'nack',
    runId,
    itemId,
    expect: { state: 'running', worker },
    set: { ...runningCleared, state: 'pending', error: reason, sentAt: null },
    bumpAttempts: o.counts,
  };
}

/**
 * Worker: the item ran, but its result cannot be recorded (larger than
 * MAX_RESULT_BYTES). Like ack, only the holder can, and it is final: the
 * item ends Failed with the reason instead of being retried forever.
 */
export function reject(runId: string, itemId: string, worker: string, reason: string): RejectCas {
  return {
    transition: 'reject',
    runId,
    itemId,
    expect: { state: 'running', worker },
    set: { ...runningCleared, state: 'failed', worker, error: reason },
    bumpAttempts: true,
  };
}

/**
 * Coordinator: a Running item whose heartbeat went stale goes back to Pending,
 * without a message until the caller sends one. Conditioned on the exact
 * version judged stale, so a heartbeat that lands meanwhile keeps the item
 * with its worker. Only a started item counts an attempt: it may be what
 * killed its worker; an unstarted one never ran.
 */
export function repend(fence: LeaseToken, runId: string, item: Pick<WorkItem, 'id' | 'worker' | 'version' | 'started'>, why: string): RependCas {
  return {
    transition: 'repend',
    runId,
    itemId: item.id,
    expect: { state: 'running', worker: item.worker, version: item.version },
    set: { ...runningCleared, state: 'pending', error: why, sentAt: null },
    bumpAttempts: item.started,
    fence,
  };
}

/**
 * Coordinator: move an item the victim has not started to the thief, in one
 * step — no Pending window in which the victim's ack is lost or a third worker
 * takes it. If the victim's `start` races this, exactly one of them wins.
 */
export function steal(fence: LeaseToken, runId: string, itemId: string, victim: string, thief: string, now: number): StealCas {
  return {
    transition: 'steal',
    runId,
    itemId,
    expect: { state: 'running', worker: victim, started: false },
    set: { worker: thief, epoch: fence.epoch, claimedAt: now, started: false, heartbeatAt: now },
    fence,
  };
}

/**
 * Coordinator (poison item, attempts exhausted; a cancelled run's items): Pending or Running(worker) → Failed with a
 * reason. `from` may pin the version. An attempt counts only when one ended here (`counts`: a started item whose
 * worker went silent); failing what was already tried, or never run, leaves `attempts` as tried.
 */
export function fail(fence: LeaseToken, runId: string, itemId: string, from: FailFrom, error: string, o: { readonly counts: boolean }): FailCas {
  return { transition: 'fail', runId, itemId, expect: from, set: { ...runningCleared, state: 'failed', error }, bumpAttempts: o.counts, fence };
}
