import { systemClock, type Clock } from '../clock.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import { StepLoop, type StepOutcome } from './step-loop.js';
import { casSettled } from './cas.js';
import { parseConfig } from '../config.js';
import { holderIdSchema, leaseNameSchema, leaseTimingsSchema, type LeaseTimingsInput } from './config.js';
import { PROMOTION_LEASE } from './names.js';
import { staleReply, tokenOf, type HolderMeta, type LeaseRecord, type LeaseToken } from './record.js';
import type { LeaseStore } from './store.js';
import { acquire, release, renew, stealable, steal, validFor } from './transitions.js';
import { z } from 'zod';

/**
 * Leader election over a lease row (any LeaseStore backend).
 *
 * Guarantees
 * - At most one holder per epoch, epochs strictly increasing: every change of
 *   the row is a compare-and-swap on its exact prior version.
 * - `isLeader()` and `token()` never answer for a lease past this node's own
 *   view of expiry minus `clockSkewMs`.
 * - A contender takes an expired lease at expiry + `clockSkewMs` by its clock,
 *   not one retry interval or one TTL later.
 * - A lost or timed-out write is settled by re-reading the row.
 * - Replies are applied in the order of what they saw, not the order they
 *   arrive: a leadership check reads outside the campaign's turn, so its
 *   reply may come back after our own later write. A row older by version
 *   than the one we hold, or an absent row from a request issued before the
 *   reply we hold, never replaces it (`staleReply`).
 *
 * Non-guarantees
 * - Two nodes may *believe* they lead at once (a paused process, a clock far
 *   outside the skew margin). Safety therefore never rests on `isLeader()`:
 *   every effectful write goes through the store's fenced write with `token()`,
 *   and the store rejects a deposed holder's write.
 * - Callbacks run on this process's event loop; a blocked loop delays them.
 *
 * Holder ids: nodes that share a holder id are one node (concurrent Lambda
 * invocations of one stack, by design). Give distinct processes distinct ids.
 */

export type ElectorState = 'follower' | 'candidate' | 'leader' | 'stopped';
/**
 * fenced: the store shows another holder or epoch. expired: our own view of the
 * lease ran out unrenewed. lost: the session holding an advisory lock died.
 * resigned / stopped: we let go.
 */
export type StopReason = 'fenced' | 'expired' | 'lost' | 'resigned' | 'stopped';

export interface LeaderElector {
  readonly holderId: string;
  readonly state: ElectorState;
  /** The token to carry on fenced writes, or null when not (or no longer) leading by the local clock. */
  token(): LeaseToken | null;
  isLeader(): Promise<boolean>;
  start(): void;
  /** Stops the loop; resigns unless `resign: false` (a crash-like stop). */
  stop(options?: { resign?: boolean }): Promise<Stopped>;
  /** Try for leadership now, not at the next retry (a leader announced it resigned); a no-op where there is nothing to try. */
  tryNow(): void;
  /** Renewals of the lease so far, and those that failed while leading; zeros where there is no lease to renew. */
  renewalCounts(): { readonly renewals: number; readonly renewFailures: number };
}

export interface Stopped {
  /**
   * This stop released a lease row held in our name, so another node may take
   * it now: worth telling the followers. True also when we held the row
   * without knowing it (an unsettled write, a step-down on our own clock).
   */
  readonly released: boolean;
}

export interface ElectorCallbacks {
  onStartedLeading?: (token: LeaseToken) => void;
  onStoppedLeading?: (token: LeaseToken, reason: StopReason) => void;
  /** The observed leader changed (holder null: nobody leads). */
  onNewLeader?: (leader: { holder: string | null; epoch: number }) => void;
}

const electorOptionsSchema = z.object({
  name: leaseNameSchema.default(PROMOTION_LEASE),
  holderId: holderIdSchema,
  hostname: z.string().nullish(),
  apiUrl: z.string().nullish(),
  /** ± fraction applied to follower retries so contenders do not move in lockstep. */
  retryJitter: z.number().min(0).max(0.5).default(0.1),
  /**
   * For processes that share a holder id (a stack's Lambda sandboxes): the
   * first campaign reads the row before writing, and a lease already ours
   * with more than half its TTL left is led on without a write. Otherwise a
   * fleet of cold sandboxes would each write the one lease item twice (an
   * acquire refused, then a renewal) within the same second. For the same
   * reason a write refused because another of them wrote first is not sent
   * again while what that one wrote is fresh.
   */
  readFirst: z.boolean().default(false),
});

export type LeaseElectorOptions = z.input<typeof electorOptionsSchema> & LeaseTimingsInput & ElectorCallbacks & { clock?: Clock; logger?: Logger };

export interface CampaignResult {
  readonly leader: boolean;
  /** The row as last seen (or written) by this elector. */
  readonly record: LeaseRecord | null;
}

export interface ElectorStats {
  campaigns: number;
  acquisitions: number;
  renewals: number;
  renewFailures: number;
  errors: number;
}

export class LeaseElector implements LeaderElector {
  readonly holderId: string;
  readonly name: string;
  readonly timings;
  readonly stats: ElectorStats = { campaigns: 0, acquisitions: 0, renewals: 0, renewFailures: 0, errors: 0 };

  private readonly meta: HolderMeta;
  private readonly retryJitter: number;
  private readonly readFirst: boolean;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly callbacks: ElectorCallbacks;

  /** Last row this elector saw or wrote. */
  private observed: LeaseRecord | null = null;
  /** Store requests issued so far: each reply is stamped with its request's place in this order. */
  private issued = 0;
  /** The latest-issued request whose reply has been applied (or found current). */
  private appliedTicket = 0;
  /** Our row while we lead (same object as `observed` then). */
  private leading: LeaseRecord | null = null;
  private lastLeader: { holder: string | null; epoch: number } | undefined;
  private lastCheckAt = Number.NEGATIVE_INFINITY;
  private lastAttemptFailed = false;
  private campaigning = false;

  private stopped = false;
  private readonly loop = new StepLoop(() => this.tick());
  private stepDownTimer: NodeJS.Timeout | undefined;
  private inFlight: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: LeaseStore,
    options: LeaseElectorOptions,
  ) {
    const { clock, logger, onStartedLeading, onStoppedLeading, onNewLeader, ttlMs, renewIntervalMs, retryIntervalMs, clockSkewMs, isLeaderCacheMs, ...rest } =
      options;
    const opts = parseConfig('lease elector', electorOptionsSchema, rest);
    this.timings = parseConfig('lease timing', leaseTimingsSchema, { ttlMs, renewIntervalMs, retryIntervalMs, clockSkewMs, isLeaderCacheMs });
    this.name = opts.name;
    this.holderId = opts.holderId;
    this.meta = { hostname: opts.hostname ?? null, apiUrl: opts.apiUrl ?? null };
    this.retryJitter = opts.retryJitter;
    this.readFirst = opts.readFirst;
    this.clock = clock ?? systemClock;
    this.logger = logger ?? silentLogger;
    this.callbacks = { onStartedLeading, onStoppedLeading, onNewLeader };
  }

  get state(): ElectorState {
    if (this.stopped) return 'stopped';
    if (this.leading) return 'leader';
    return this.campaigning ? 'candidate' : 'follower';
  }

  token(): LeaseToken | null {
    this.expireIfDue();
    return this.leading ? tokenOf(this.leading) : null;
  }

  /** The row as this elector last saw it: who leads, at which epoch, until when. */
  lastObserved(): LeaseRecord | null {
    return this.observed;
  }

  /**
   * IsLeader: holder == me and unexpired, cached for
   * `isLeaderCacheMs` — but never true past our expiry minus the skew margin.
   */
  async isLeader(): Promise<boolean> {
    const now = this.clock.now();
    this.expireIfDue(now);
    if (this.stopped) return false;
    if (now - this.lastCheckAt < this.timings.isLeaderCacheMs) return this.leading !== null;
    // Outside the campaign's turn: a campaign may write while this read is in flight.
    const ticket = ++this.issued;
    const row = await this.store.read(this.name);
    this.observe(row, this.clock.now(), ticket);
    this.lastCheckAt = now;
    return this.leading !== null;
  }

  /**
   * One election step: renew if leading, otherwise acquire an absent row or
   * steal an expired or released one, otherwise note who leads. Serialised:
   * concurrent calls on one elector run one after the other.
   */
  campaign(): Promise<CampaignResult> {
    const run = this.inFlight.then(() => this.campaignOnce());
    this.inFlight = run.catch(() => undefined);
    return run;
  }

  private async campaignOnce(): Promise<CampaignResult> {
    if (this.stopped) return { leader: false, record: this.observed };
    this.stats.campaigns++;
    this.campaigning = true;
    try {
      const wasLeading = this.leading !== null;
      // Plan from what we last saw; if it says "write", CAS straight away
      // (one round trip) and let a failed condition hand us the current row.
      let row = this.observed;
      /** The row was just read: not read again before planning from it. */
      let justRead = false;
      if (row === null && this.readFirst && this.issued === 0) {
        const ticket = ++this.issued;
        row = await this.store.read(this.name);
        const now = this.clock.now();
        this.observe(row, now, ticket);
        // Ours, and fresh enough that a renewal now would be early: lead on it as it stands (observe made it ours).
        if (this.leading && this.fresh(this.leading, now)) {
          this.lastAttemptFailed = false;
          this.lastCheckAt = now;
          return { leader: true, record: this.observed };
        }
        row = this.observed;
        justRead = true;
      }
      for (let attempt = 0; attempt < 2; attempt++) {
        const now = this.clock.now();
        const next = this.plan(row, now);
        if (next === null) {
          if (row === this.observed && attempt === 0 && !justRead) {
            const ticket = ++this.issued;
            row = await this.store.read(this.name);
            this.observe(row, this.clock.now(), ticket);
            continue;
          }
          break;
        }
        const ticket = ++this.issued;
        const outcome = await casSettled(this.store, row, next);
        if (outcome.ok) {
          this.lastAttemptFailed = false;
          if (wasLeading && next.epoch === this.leading?.epoch) this.stats.renewals++;
          else this.stats.acquisitions++;
          this.observe(outcome.record, this.clock.now(), ticket);
          break;
        }
        if (wasLeading) this.stats.renewFailures++;
        row = outcome.current;
        this.observe(row, this.clock.now(), ticket);
        // Another process of this holder id wrote it first (an acquire, a renewal): fresh, it is led on as it stands.
        if (this.readFirst && this.leading && this.fresh(this.leading, this.clock.now())) break;
      }
      this.lastCheckAt = this.clock.now();
      return { leader: this.leading !== null, record: this.observed };
    } catch (err) {
      this.stats.errors++;
      this.lastAttemptFailed = true;
      if (this.leading) this.stats.renewFailures++;
      this.expireIfDue();
      throw err;
    } finally {
      this.campaigning = false;
    }
  }

  /** Ours with more than half the TTL (and the skew margin) left: a renewal now would be early. */
  private fresh(row: LeaseRecord, now: number): boolean {
    return validFor(row, this.holderId, now + this.timings.ttlMs / 2, this.timings.clockSkewMs);
  }

  /** The row to write next, or null to wait. */
  private plan(row: LeaseRecord | null, now: number): LeaseRecord | null {
    const { ttlMs, clockSkewMs } = this.timings;
    if (row === null) return acquire(this.name, this.holderId, now, ttlMs, this.meta);
    if (row.holder === this.holderId) return renew(row, now, ttlMs);
    if (stealable(row, now, clockSkewMs)) return steal(row, this.holderId, now, ttlMs, this.meta);
    return null;
  }

  /** Whether the reply to the request with `ticket` shows an older state than the row we hold (see `staleReply`). */
  private stale(row: LeaseRecord | null, ticket: number): boolean {
    return staleReply(this.observed, row, ticket < this.appliedTicket);
  }

  /** Single place where leadership changes and callbacks fire. */
  private observe(row: LeaseRecord | null, now: number, ticket: number): void {
    if (this.stale(row, ticket)) return;
    this.appliedTicket = Math.max(this.appliedTicket, ticket);
    this.observed = row;
    const mine = validFor(row, this.holderId, now, this.timings.clockSkewMs) ? row : null;
    const before = this.leading;
    if (before && (!mine || mine.epoch !== before.epoch)) {
      this.leading = null;
      const reason: StopReason = row && (row.holder !== this.holderId || row.epoch !== before.epoch) ? 'fenced' : 'expired';
      this.fire('onStoppedLeading', () => this.callbacks.onStoppedLeading?.(tokenOf(before), reason));
    }
    this.leading = mine;
    if (mine && (!before || before.epoch !== mine.epoch)) {
      this.fire('onStartedLeading', () => this.callbacks.onStartedLeading?.(tokenOf(mine)));
    }
    this.armStepDown(now);
    const leader = row && row.holder !== null && !stealable(row, now, 0) ? { holder: row.holder, epoch: row.epoch } : { holder: null, epoch: row?.epoch ?? -1 };
    if (!this.lastLeader || this.lastLeader.holder !== leader.holder || this.lastLeader.epoch !== leader.epoch) {
      this.lastLeader = leader;
      this.fire('onNewLeader', () => this.callbacks.onNewLeader?.(leader));
    }
  }

  /** Stop acting the moment our own view of the lease runs out, whatever the loop is doing. */
  private armStepDown(now: number): void {
    clearTimeout(this.stepDownTimer);
    this.stepDownTimer = undefined;
    if (!this.leading) return;
    const deadline = this.leading.expiresAt - this.timings.clockSkewMs;
    this.stepDownTimer = setTimeout(() => this.expireIfDue(), Math.max(0, deadline - now));
    this.stepDownTimer.unref();
  }

  private expireIfDue(now = this.clock.now()): void {
    const held = this.leading;
    if (held && now >= held.expiresAt - this.timings.clockSkewMs) {
      this.leading = null;
      clearTimeout(this.stepDownTimer);
      this.logger.warn('lease expired before renewal; stepping down', { lease: this.name, leaseEpoch: held.epoch });
      this.fire('onStoppedLeading', () => this.callbacks.onStoppedLeading?.(tokenOf(held), 'expired'));
    }
  }

  private fire(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.error(`${what} callback threw`, { lease: this.name, error: errorMessage(err) });
    }
  }

  /** Release the lease (row kept, epoch kept) so the next holder is epoch + 1. True when a row held in our name was released. */
  async resign(): Promise<boolean> {
    const run = this.inFlight.then(() => this.resignOnce());
    this.inFlight = run.catch(() => undefined);
    return run;
  }

  private async resignOnce(): Promise<boolean> {
    const held = this.leading;
    let released = false;
    // We may hold the row without knowing it (an unsettled write): look.
    let row = held ?? (await this.store.read(this.name));
    for (let attempt = 0; row && row.holder === this.holderId && attempt < 3; attempt++) {
      const ticket = ++this.issued;
      const outcome = await casSettled(this.store, row, release(row, this.clock.now()));
      row = outcome.ok ? null : outcome.current;
      released ||= outcome.ok;
      if (outcome.ok && !this.stale(outcome.record, ticket)) {
        this.observed = outcome.record;
        this.appliedTicket = Math.max(this.appliedTicket, ticket);
      }
    }
    if (held) {
      this.leading = null;
      clearTimeout(this.stepDownTimer);
      this.fire('onStoppedLeading', () => this.callbacks.onStoppedLeading?.(tokenOf(held), 'resigned'));
    }
    return released;
  }

  /**
   * A step of the loop now, so what the campaign finds sets the next step: a
   * win renews at the renew interval, a store error retries with the loop's
   * WakeBackoff rather than at the next retry (else the news that the lease
   * is free would be lost with the one attempt).
   */
  tryNow(): void {
    // A no-op when not started or stopping: a stopping node must not take the lease back.
    this.loop.now();
  }

  renewalCounts(): { readonly renewals: number; readonly renewFailures: number } {
    return { renewals: this.stats.renewals, renewFailures: this.stats.renewFailures };
  }

  start(): void {
    if (!this.stopped) this.loop.start();
  }

  async stop(options: { resign?: boolean } = {}): Promise<Stopped> {
    if (this.stopped) return { released: false };
    await this.loop.stop();
    await this.inFlight;
    let released = false;
    if (options.resign !== false) {
      try {
        released = await this.resign();
      } catch (err) {
        this.logger.warn('resign failed; the lease will expire instead', { lease: this.name, error: errorMessage(err) });
      }
    }
    const held = this.leading;
    this.leading = null;
    clearTimeout(this.stepDownTimer);
    this.stopped = true;
    if (held) this.fire('onStoppedLeading', () => this.callbacks.onStoppedLeading?.(tokenOf(held), 'stopped'));
    return { released };
  }

  /** One step of the loop: a campaign, then the delay to the next. */
  private async tick(): Promise<StepOutcome> {
    try {
      await this.campaign();
    } catch (err) {
      this.logger.warn('campaign failed', { lease: this.name, error: errorMessage(err) });
      if (!this.leading) return { unanswered: this.nextDelay(this.clock.now()) };
    }
    return this.nextDelay(this.clock.now());
  }

  /**
   * Leader: renew every renewInterval (every retryInterval after a failure),
   * never later than the step-down deadline. Follower: retry with jitter, but
   * wake exactly when the observed lease becomes stealable.
   */
  nextDelay(now: number): number {
    const { renewIntervalMs, retryIntervalMs, clockSkewMs } = this.timings;
    if (this.leading) {
      const due = this.lastAttemptFailed ? now + retryIntervalMs : this.leading.renewedAt + renewIntervalMs;
      return Math.max(0, Math.min(due, this.leading.expiresAt - clockSkewMs) - now);
    }
    const jitter = 1 + this.retryJitter * (2 * Math.random() - 1);
    let wake = now + retryIntervalMs * jitter;
    const row = this.observed;
    if (row && row.holder !== null && row.holder !== this.holderId) wake = Math.min(wake, row.expiresAt + clockSkewMs);
    return Math.max(0, wake - now);
  }
}
