import type { PreemptionNotice, Provider } from '../drain/compute-hint.js';

/**
 * Where workers register themselves (worker id, run, instance id, provider,
 * heartbeat) so the coordinator and the drain handler can find them. Records
 * are keyed by instance first: a preemption notice names an instance, and one
 * instance may run several workers, of several runs. Within an instance a
 * record is one worker of one run: the same worker id in two runs is two
 * workers, each drained, heartbeated and deregistered on its own. An
 * instance is named as a notice names it: its id, or its ARN (a worker
 * fleet's instances: the ARN is what their registry grant is bound to).
 *
 * Guarantees:
 * - A notice asks every active worker of its instance to drain, whatever its
 *   run, and however old its heartbeat looks: a stamp made by the worker's
 *   clock is never the sole reason to skip a worker (a live worker with a
 *   slow clock must drain; a dead one never reads the request).
 * - Registration never erases a pending drain request: a worker registering
 *   while its record is draining gets that record back, and drains at once.
 * - A gone worker's record stays (marked gone, expiring later) so that a
 *   notice arriving after the worker left is recognised as late, not unknown.
 *
 * Not guaranteed: a worker that registers on an instance after its notice was
 * handled, under a new identity, is not asked to drain (the notice named the
 * workers it found).
 */
export type WorkerState = 'active' | 'draining' | 'gone';

export interface DrainRequest {
  readonly kind: PreemptionNotice['kind'];
  readonly provider: Provider;
  /** When the cloud issued the notice: the drain deadline counts from here, not from when it was read. */
  readonly noticeAt: number;
  readonly requestedAt: number;
}

/** One worker of one run on one instance. */
export interface WorkerKey {
  readonly instanceId: string;
  readonly runId: string;
  readonly workerId: string;
}

export interface Registration extends WorkerKey {
  readonly provider: Provider | 'local';
}

export interface WorkerRecord extends Registration {
  readonly state: WorkerState;
  readonly registeredAt: number;
  /** Stamped by the worker's clock: shown, and compared only with a margin. */
  readonly heartbeatAt: number;
  readonly drain: DrainRequest | null;
  readonly goneAt: number | null;
  /** How long since the store last heard from the worker, on the store's own clock; null where the store has none (DynamoDB). */
  readonly silentForMs: number | null;
}

/**
 * A registration's answer: the record as stored, and whether one was stored
 * before under this key (this worker of this run on this instance). A worker
 * new to its key has never claimed anything in the run under it, so it has
 * nothing of a previous life to adopt (Worker.firstLife).
 */
export type Registered = WorkerRecord & { readonly known: boolean };

export type DrainOutcome =
  /** Active workers on the instance were asked to drain. */
  | 'requested'
  /** They are draining already (a second notice, or an interruption after a rebalance recommendation). */
  | 'duplicate'
  /** No worker ever registered on that instance (not ours, or long forgotten). */
  | 'unknown'
  /** The workers there have left or stopped heartbeating (any still registered were asked all the same): the notice came too late. */
  | 'gone';

/**
 * The registry's storage: small field-level conditional writes, one port for
 * PostgreSQL, PGlite and DynamoDB. A heartbeat never conflicts with a state
 * change (each touches its own fields), so a drain request cannot be starved
 * by a worker that heartbeats often.
 */
export interface RegistryStore {
  /**
   * Write the record (active, fresh heartbeat) unless the worker is draining,
   * in one conditional write; returns the record as stored afterwards — the
   * draining one, untouched, when a drain request is pending — and whether a
   * record was there before, told by the same write.
   */
  register(record: Omit<WorkerRecord, 'silentForMs'>): Promise<Registered>;
  byInstance(instanceId: string): Promise<WorkerRecord[]>;
  /** Raise the heartbeat (never lower it) unless the worker is gone; the record as stored, null if unknown. */
  heartbeat(key: WorkerKey, now: number): Promise<WorkerRecord | null>;
  /** Move to `to` only from one of the states in `from`; false when the worker was in none of them. */
  setState(key: WorkerKey, from: readonly WorkerState[], to: { state: WorkerState; drain?: DrainRequest; goneAt?: number }): Promise<boolean>;
  list(): Promise<WorkerRecord[]>;
  /**
   * The record of this worker of this run, wherever it registered; null when
   * there is none. Kept where a worker fleet asks the coordinator for work
   * (DynamoDB: a run's roster, which only that run's fleet may write, names
   * the instance; PostgreSQL: the newest row of that run and worker).
   */
  worker(runId: string, workerId: string): Promise<WorkerRecord | null>;
}

/** What a worker asks of the registry: the registry itself, or a node's API for a worker without a store (client/node-work.ts). */
export type AgentRegistry = Pick<WorkerRegistry, 'register' | 'heartbeat' | 'deregister'>;

export interface RegistryOptions {
  /** A worker not heard from for this long is reported silent (it crashed without deregistering). */
  staleAfterMs?: number;
  /** Where the store has no clock, how far the worker's clock may be from ours before its stamp is read as silence. */
  clockSkewMs?: number;
}

export class WorkerRegistry {
  readonly staleAfterMs: number;
  readonly clockSkewMs: number;

  constructor(
    private readonly store: RegistryStore,
    options: RegistryOptions = {},
  ) {
    this.staleAfterMs = options.staleAfterMs ?? 60_000;
    this.clockSkewMs = options.clockSkewMs ?? 5_000;
    if (!(this.staleAfterMs > 0)) throw new Error(`invalid registry config: staleAfterMs: must be positive, got ${this.staleAfterMs}`);
    if (!(this.clockSkewMs >= 0)) throw new Error(`invalid registry config: clockSkewMs: must not be negative, got ${this.clockSkewMs}`);
  }

  /** Register (or re-register after a restart); the record as stored: check its state, a drain may be pending. */
  async register(r: Registration, now: number): Promise<Registered> {
    for (const [field, v] of [
      ['workerId', r.workerId],
      ['instanceId', r.instanceId],
      ['runId', r.runId],
    ] as const) {
      if (!v.trim()) throw new Error(`invalid worker registration: ${field}: must not be empty`);
    }
    return this.store.register({ ...r, state: 'active', registeredAt: now, heartbeatAt: now, drain: null, goneAt: null });
  }

  /** Refresh the heartbeat; returns the record as stored (a drain request shows up here), null if unknown. */
  heartbeat(key: WorkerKey, now: number): Promise<WorkerRecord | null> {
    return this.store.heartbeat(key, now);
  }

  /**
   * A preemption notice for an instance: every active worker there, of any
   * run, is asked to drain. Never throws for an instance it does not know, a
   * duplicate or a late notice: those are answered (and logged by the caller)
   * so the event source does not retry them forever.
   */
  async requestDrain(
    notice: Pick<PreemptionNotice, 'instanceId' | 'kind' | 'provider'> & { noticeAt: number; instanceArn?: string | null },
    now: number,
  ): Promise<{ outcome: DrainOutcome; workers: string[] }> {
    const workers = await this.onInstance(notice);
    if (!workers.length) return { outcome: 'unknown', workers: [] };
    const present = workers.filter((w) => w.state !== 'gone');
    const active = present.filter((w) => w.state === 'active');
    if (!active.length) return { outcome: present.length ? 'duplicate' : 'gone', workers: present.map((w) => w.workerId) };
    const drain: DrainRequest = { kind: notice.kind, provider: notice.provider, noticeAt: notice.noticeAt, requestedAt: now };
    const asked: WorkerRecord[] = [];
    // Silent-looking workers are asked too: the look may be a clock's fault, and asking a dead worker costs nothing.
    for (const w of active) if (await this.store.setState(w, ['active'], { state: 'draining', drain })) asked.push(w);
    // None moved: another notice got there first (or they left meanwhile).
    if (!asked.length) return { outcome: 'duplicate', workers: active.map((w) => w.workerId) };
    return { outcome: asked.some((w) => !this.silent(w, now)) ? 'requested' : 'gone', workers: asked.map((w) => w.workerId) };
  }

  /**
   * Why `workerId` may not be given work in `runId` (null: it may): a worker
   * a fleet asks for must be registered for that run (for a fleet, on one of
   * its own instances: see RegistryStore.worker) and neither gone nor
   * draining. A made-up id, another run's worker, one that left or one on an
   * instance being reclaimed would only hold what it takes until the failure
   * scan gives it back.
   */
  async stealRefusal(runId: string, workerId: string): Promise<string | null> {
    const w = await this.store.worker(runId, workerId);
    if (!w) return `worker ${JSON.stringify(workerId)} is not registered for run ${runId} by any instance of its fleet`;
    if (w.state === 'gone') return `worker ${JSON.stringify(workerId)} of run ${runId} left ${w.instanceId} at ${new Date(w.goneAt ?? 0).toISOString()}`;
    if (w.state === 'draining')
      return `worker ${JSON.stringify(workerId)} of run ${runId} is draining (${w.instanceId} is being reclaimed): it takes no more work`;
    return null;
  }

  /**
   * The workers on a notice's instance: registered under its ARN (a worker
   * fleet's instances, whose registry grant is bound to their own ARN) or its
   * id (a worker started by hand with `--instance-id auto`, and a fleet's
   * records written before fleets registered by ARN).
   */
  private async onInstance(notice: { instanceId: string; instanceArn?: string | null }): Promise<WorkerRecord[]> {
    const names = [...new Set([notice.instanceArn, notice.instanceId].filter((n): n is string => !!n))];
    const found = (await Promise.all(names.map((n) => this.store.byInstance(n)))).flat();
    return found.sort((a, b) => a.workerId.localeCompare(b.workerId) || a.runId.localeCompare(b.runId) || a.instanceId.localeCompare(b.instanceId));
  }

  /** The worker has left: the record stays, marked gone, so a late notice is recognised as late. */
  async deregister(key: WorkerKey, now: number): Promise<void> {
    await this.store.setState(key, ['active', 'draining'], { state: 'gone', goneAt: now });
  }

  list(): Promise<WorkerRecord[]> {
    return this.store.list();
  }

  /**
   * One clock per comparison: the store's own when it has one; otherwise the
   * worker's stamp against ours, allowing for the skew between the two.
   */
  private silent(w: WorkerRecord, now: number): boolean {
    if (w.silentForMs !== null) return w.silentForMs > this.staleAfterMs;
    return now - w.heartbeatAt > this.staleAfterMs + this.clockSkewMs;
  }
}
