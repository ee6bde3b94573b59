import type { EventBus } from '../events/bus.js';
import type { LeaseElector } from '../lease/elector.js';
import type { LeaseTimingsInput } from '../lease/config.js';
import type { LeaseStore } from '../lease/store.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import type { WorkQueue } from '../queue/port.js';
import type { Coordinator, FailureCause, StealNotice } from './coordinator.js';
import { openRunCoordinator } from './open.js';
import { HeartbeatWatch } from './staleness.js';
import { coordinatorLease, type LedgerStore } from './store.js';
import { DAY_MS, DEFAULT_RETENTION, PRUNE_RUN_ITEMS, type Retention } from '../retention.js';

/** Pending items a cancel fails before it answers; the coordinator's scans fail any beyond. */
export const CANCEL_AT_ONCE = 5_000;

export interface RunCoordinator {
  readonly elector: LeaseElector;
  readonly coordinator: Coordinator;
}

export interface RunCoordinatorsOptions {
  readonly holderId: string;
  readonly ledger: LedgerStore;
  /** The coordinator lease store of one run. */
  readonly runLeases: (runId: string) => LeaseStore;
  readonly timings: LeaseTimingsInput & { readonly ttlMs: number };
  readonly bus: EventBus;
  /** Whether this process leads (only the leader coordinates). */
  readonly isLeader: () => Promise<boolean>;
  /** Where a run's re-pended items are sent. */
  readonly queueFor: (runId: string) => WorkQueue;
  /** A run's dead letters (undelivered after maxReceiveCount), when the queue keeps them itself. */
  readonly deadLettersFor?: (runId: string) => WorkQueue;
  /** Items a steal moved, per run (a figure for the status page). */
  readonly onSteal?: (runId: string, items: number) => Promise<void>;
  /** How long a finished run is kept (its `runDays`): the leader's passes delete what is older, PRUNE_RUN_ITEMS a minute. */
  readonly retention?: Retention;
  readonly logger?: Logger;
}

const PRUNE_EVERY_MS = 60_000;

/**
 * The run coordinators of a long-lived leader: one per open run, each under
 * its own lease, opened on first use (a steal request or the scan), kept
 * renewed, replayed from the ledger when opened, and closed when the run
 * finishes or leadership is lost. Passes (the scan, dead letters) take turns
 * with each other and with openings and closings.
 */
export class RunCoordinators {
  private readonly coordinators = new Map<string, RunCoordinator>();
  private readonly opening = new Map<string, Promise<RunCoordinator | null>>();
  /** Heartbeats seen, kept across re-openings (staleness.ts). */
  private readonly watch = new HeartbeatWatch();
  private readonly logger: Logger;
  private pass: Promise<void> = Promise.resolve();
  private stopping = false;
  private prunedAt = Number.NEGATIVE_INFINITY;
  /** Items failed for their dead letters, since this process began (rollout_dead_letters_total). */
  deadLetters = 0;
  /** Since this process began: items re-pended from silent workers, and items failed by cause (rollout_run_repends_total, rollout_run_failures_total). */
  readonly totals = { repends: 0, failures: { attempts: 0, cancelled: 0, dead_letter: 0 } satisfies Record<FailureCause, number> };

  constructor(private readonly o: RunCoordinatorsOptions) {
    this.logger = o.logger ?? silentLogger;
  }

  /** On the leader: a coordinator for every open run, and its scan (silent workers, unsent items, poison); elsewhere, none. */
  scan(): Promise<void> {
    return this.inTurn('coordinator pass failed', async () => {
      if (this.stopping) return;
      if (!(await this.o.isLeader())) {
        await this.closeAll();
        return;
      }
      const open = new Set(await this.o.ledger.openRuns());
      for (const [runId, rc] of this.coordinators) {
        if (!open.has(runId)) {
          this.coordinators.delete(runId);
          this.watch.forget(runId);
          await rc.elector.stop();
        }
      }
      for (const runId of open) {
        const rc = await this.of(runId);
        if (!rc) continue;
        const r = await rc.coordinator.scan();
        this.totals.repends += r.repended.length;
        for (const cause of Object.keys(r.failedBy) as FailureCause[]) this.totals.failures[cause] += r.failedBy[cause];
        this.deadLetters += r.failedBy.dead_letter;
        if (r.repended.length || r.failed.length) this.logger.info('run scanned', { runId, repended: r.repended.length, failed: r.failed.length });
      }
      await this.pruneRuns();
    });
  }

  /** Finished runs past their retention, deleted a bounded batch a minute (after the scan, off its path). */
  private async pruneRuns(): Promise<void> {
    const now = Date.now();
    if (now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    const days = (this.o.retention ?? DEFAULT_RETENTION).runDays;
    try {
      const pruned = await this.o.ledger.pruneRuns(now - days * DAY_MS, PRUNE_RUN_ITEMS, now);
      if (pruned.runs || pruned.items) this.logger.info('finished runs deleted past their retention', { ...pruned, days });
    } catch (err) {
      this.logger.warn('finished runs not pruned this pass', { error: errorMessage(err) });
    }
  }

  /** The dead letters of every run coordinated here, failed with the reason (under each run's coordinator lease). */
  failDeadLetters(): Promise<void> {
    const dlq = this.o.deadLettersFor;
    if (!dlq) return Promise.resolve();
    return this.inTurn('dead-letter pass failed', async () => {
      for (const [runId, rc] of this.coordinators) {
        const r = await rc.coordinator.failDeadLetters(dlq(runId));
        this.deadLetters += r.failed.length;
        this.totals.failures.dead_letter += r.failed.length;
        if (r.failed.length) this.logger.info('dead letters failed', { runId, failed: r.failed.length });
      }
    });
  }

  /** A run just cancelled: its Pending items failed now, under its coordinator lease; null when this process does not coordinate it. */
  async cancelled(runId: string): Promise<number | null> {
    let failed: number | null = null;
    await this.inTurn("failing a cancelled run's items failed; the scan goes on with it", async () => {
      const rc = await this.of(runId);
      // Bounded, as the request waits for it and other runs' passes wait behind it: the scan fails the rest, a batch per pass.
      if (rc) failed = (await rc.coordinator.failCancelled(CANCEL_AT_ONCE)).length;
      this.totals.failures.cancelled += failed ?? 0;
    });
    return failed;
  }

  /** A worker's steal request: the notice, or who coordinates the run instead. */
  async stealFor(runId: string, workerId: string): Promise<{ leader: true; notice: StealNotice } | { leader: false; holder: string | null }> {
    const rc = await this.of(runId);
    if (!rc) return { leader: false, holder: (await this.o.runLeases(runId).read(coordinatorLease(runId)))?.holder ?? null };
    const notice = await rc.coordinator.stealFor(workerId);
    if (notice.items.length) await this.o.onSteal?.(runId, notice.items.length);
    return { leader: true, notice };
  }

  /** The run's coordinator here, opened on first use; concurrent callers share one opening. */
  of(runId: string): Promise<RunCoordinator | null> {
    const pending = this.opening.get(runId);
    if (pending) return pending;
    const opening = this.open(runId).finally(() => this.opening.delete(runId));
    this.opening.set(runId, opening);
    return opening;
  }

  /** Leadership lost: every coordinator closes (its lease resigned). */
  async closeAll(): Promise<void> {
    const all = [...this.coordinators.values()];
    this.coordinators.clear();
    await Promise.all(all.map((rc) => rc.elector.stop().catch(() => undefined)));
  }

  /** Shutting down: no pass starts, the one under way ends, then every coordinator closes. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.pass;
    await this.closeAll();
  }

  private inTurn(failure: string, step: () => Promise<void>): Promise<void> {
    this.pass = this.pass.then(step).catch((err: unknown) => this.logger.warn(failure, { error: errorMessage(err) }));
    return this.pass;
  }

  private async open(runId: string): Promise<RunCoordinator | null> {
    const existing = this.coordinators.get(runId);
    if (existing && existing.elector.token()) return existing;
    if (existing) {
      this.coordinators.delete(runId);
      await existing.elector.stop({ resign: false });
    }
    if (this.stopping || !(await this.o.isLeader())) return null;
    let rc: RunCoordinator | null = null;
    const opened = await openRunCoordinator({
      runId,
      leases: this.o.runLeases(runId),
      holderId: this.o.holderId,
      timings: this.o.timings,
      ledger: this.o.ledger,
      bus: this.o.bus,
      watch: this.watch,
      queue: this.o.queueFor(runId),
      logger: this.logger,
      onFenced: () => {
        if (rc && this.coordinators.get(runId) === rc) this.coordinators.delete(runId);
        void rc?.elector.stop({ resign: false });
      },
    });
    // Another process's coordinator may still hold the run until its lease runs out.
    if (!opened.coordinator) return null;
    opened.elector.start();
    rc = { elector: opened.elector, coordinator: opened.coordinator };
    await rc.coordinator.replay();
    this.coordinators.set(runId, rc);
    return rc;
  }
}
