import type { WorkItem } from './model.js';

/**
 * When is a Running item's worker gone? Judged on one clock: the observer's.
 *
 * A heartbeat is stamped with the worker's clock, and the worker's clock is
 * not ours: a worker 30 s behind would look dead on every scan (its items
 * re-pended, its next heartbeat refused: a livelock), and a dead worker 10
 * minutes ahead would look alive for 10 minutes. So the stamp is never
 * compared with our clock alone. Instead the observer remembers each item's
 * version (every heartbeat changes it) with the time *it* first saw that
 * version; an item is stale once the same version has been seen for
 * `timeoutMs` of the observer's own time. That span is a lower bound on the
 * worker's silence, so the judgement errs towards waiting, never towards
 * taking work from a live worker.
 *
 * Memory is per process (a node, a Lambda sandbox). A new observer — after a
 * failover or a cold start — knows nothing and would wait a whole timeout; so
 * an item whose stamp is older than `timeoutMs + maxClockSkewMs` by our clock
 * is stale at once. That fallback is what tolerates at most `maxClockSkewMs`
 * of skew between a worker and the coordinator; the remembered versions
 * tolerate any.
 *
 * Guarantee: a live worker that heartbeats more often than `timeoutMs` is
 * never judged stale by the remembered versions, whatever its clock says.
 * Non-guarantee: a worker more than `maxClockSkewMs` behind can be judged
 * stale by a coordinator that has no memory of it yet.
 */
export interface StalenessOptions {
  readonly timeoutMs: number;
  readonly maxClockSkewMs: number;
}

interface Seen {
  readonly version: number;
  readonly since: number;
}

export class HeartbeatWatch {
  private readonly runs = new Map<string, Map<string, Seen>>();

  /**
   * Record one observation of a run's Running items at `now` (the observer's
   * clock) and return the stale ones, oldest first. Items no longer Running
   * are forgotten.
   */
  observe(runId: string, running: readonly WorkItem[], now: number, o: StalenessOptions): WorkItem[] {
    const before = this.runs.get(runId) ?? new Map<string, Seen>();
    const after = new Map<string, Seen>();
    const stale: { item: WorkItem; since: number }[] = [];
    for (const item of running) {
      if (item.state !== 'running' || item.worker === null) continue;
      const prior = before.get(item.id);
      const seen = prior && prior.version === item.version ? prior : { version: item.version, since: now };
      after.set(item.id, seen);
      const unchangedFor = now - seen.since;
      const stampAge = item.heartbeatAt === null ? Infinity : now - item.heartbeatAt;
      if (unchangedFor >= o.timeoutMs || stampAge >= o.timeoutMs + o.maxClockSkewMs) stale.push({ item, since: seen.since });
    }
    if (after.size) this.runs.set(runId, after);
    else this.runs.delete(runId);
    return stale.sort((a, b) => a.since - b.since).map((s) => s.item);
  }

  forget(runId: string): void {
    this.runs.delete(runId);
  }
}
