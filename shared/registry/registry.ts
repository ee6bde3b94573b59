import type { PreemptionNotice, Provider } from '../drain/compute-hint.js';

/**
 * Where workers register themselves (worker id, instance id, provider,
 * heartbeat) so the coordinator and the drain handler can find them. Records
 * are keyed by instance first: a preemption notice names an instance, and one
 * instance may run several workers.
 *
 * A gone worker's record stays (marked gone, expiring later) so that a notice
 * arriving after the worker left is recognised as late, not unknown.
 */
export type WorkerState = 'active' | 'draining' | 'gone';

export interface DrainRequest {
  readonly kind: PreemptionNotice['kind'];
  readonly provider: Provider;
  /** When the cloud issued the notice: the drain deadline counts from here, not from when it was read. */
  readonly noticeAt: number;
  readonly requestedAt: number;
}

export interface WorkerRecord {
  readonly workerId: string;
  readonly instanceId: string;
  readonly provider: Provider | 'local';
  readonly runId: string | null;
  readonly state: WorkerState;
  readonly registeredAt: number;
  readonly heartbeatAt: number;
  readonly drain: DrainRequest | null;
  readonly goneAt: number | null;
}

export interface Registration {
  readonly workerId: string;
  readonly instanceId: string;
  readonly provider: Provider | 'local';
  readonly runId: string | null;
}

export type DrainOutcome =
  /** Active workers on the instance were asked to drain. */
  | 'requested'
  /** They are draining already (a second notice, or an interruption after a rebalance recommendation). */
  | 'duplicate'
  /** No worker ever registered on that instance (not ours, or long forgotten). */
  | 'unknown'
  /** The workers there have left or stopped heartbeating: the notice came too late. */
  | 'gone';

/**
 * The registry's storage: small field-level conditional writes, one port for
 * PostgreSQL, PGlite and DynamoDB. A heartbeat never conflicts with a state
 * change (each touches its own fields), so a drain request cannot be starved
 * by a worker that heartbeats often.
 */
export interface RegistryStore {
  put(record: WorkerRecord): Promise<void>;
  byInstance(instanceId: string): Promise<WorkerRecord[]>;
  /** Raise the heartbeat (never lower it) unless the worker is gone; the record as stored, null if unknown. */
  heartbeat(instanceId: string, workerId: string, now: number): Promise<WorkerRecord | null>;
  /** Move to `to` only from one of the states in `from`; false when the worker was in none of them. */
  setState(instanceId: string, workerId: string, from: readonly WorkerState[], to: { state: WorkerState; drain?: DrainRequest; goneAt?: number }): Promise<boolean>;
  list(): Promise<WorkerRecord[]>;
}

export interface RegistryOptions {
  /** A worker whose heartbeat is older than this is treated as gone (it crashed without deregistering). */
  staleAfterMs?: number;
}

export class WorkerRegistry {
  readonly staleAfterMs: number;

  constructor(
    private readonly store: RegistryStore,
    options: RegistryOptions = {},
  ) {
    this.staleAfterMs = options.staleAfterMs ?? 60_000;
    if (!(this.staleAfterMs > 0)) throw new Error(`invalid registry config: staleAfterMs: must be positive, got ${this.staleAfterMs}`);
  }

  async register(r: Registration, now: number): Promise<WorkerRecord> {
    for (const [field, v] of [['workerId', r.workerId], ['instanceId', r.instanceId]] as const) {
      if (!v.trim()) throw new Error(`invalid worker registration: ${field}: must not be empty`);
    }
    const record: WorkerRecord = { ...r, state: 'active', registeredAt: now, heartbeatAt: now, drain: null, goneAt: null };
    await this.store.put(record);
    return record;
  }

  /** Refresh the heartbeat; returns the record as stored (a drain request shows up here), null if unknown. */
  heartbeat(instanceId: string, workerId: string, now: number): Promise<WorkerRecord | null> {
    return this.store.heartbeat(instanceId, workerId, now);
  }

  /**
   * A preemption notice for an instance. Never throws for an instance it does
   * not know, a duplicate or a late notice: those are answered (and logged by
   * the caller) so the event source does not retry them forever.
   */
  async requestDrain(notice: Pick<PreemptionNotice, 'instanceId' | 'kind' | 'provider'> & { noticeAt: number }, now: number): Promise<{ outcome: DrainOutcome; workers: string[] }> {
    const workers = await this.store.byInstance(notice.instanceId);
    if (!workers.length) return { outcome: 'unknown', workers: [] };
    const live = workers.filter((w) => w.state !== 'gone' && now - w.heartbeatAt <= this.staleAfterMs);
    const active = live.filter((w) => w.state === 'active');
    if (!active.length) return { outcome: live.length ? 'duplicate' : 'gone', workers: live.map((w) => w.workerId) };
    const drain: DrainRequest = { kind: notice.kind, provider: notice.provider, noticeAt: notice.noticeAt, requestedAt: now };
    const asked: string[] = [];
    for (const w of active) if (await this.store.setState(notice.instanceId, w.workerId, ['active'], { state: 'draining', drain })) asked.push(w.workerId);
    // None moved: another notice got there first (or they left meanwhile).
    return asked.length ? { outcome: 'requested', workers: asked } : { outcome: 'duplicate', workers: active.map((w) => w.workerId) };
  }

  /** The worker has left: the record stays, marked gone, so a late notice is recognised as late. */
  async deregister(instanceId: string, workerId: string, now: number): Promise<void> {
    await this.store.setState(instanceId, workerId, ['active', 'draining'], { state: 'gone', goneAt: now });
  }

  list(): Promise<WorkerRecord[]> {
    return this.store.list();
  }
}
