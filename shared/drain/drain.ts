import { systemClock, type Clock } from '../clock.js';
import { errorMessage } from '../log.js';
import { PROVIDER_DEADLINES, type PreemptionNotice } from './compute-hint.js';

/**
 * The drain state machine, run when this worker's instance gets a preemption
 * notice, within the provider's drain deadline (AWS 60 s of a 120 s notice,
 * GCP 15 s of 30 s):
 *
 *   stop pulling → nack every in-flight item (back to Pending, back on the queue)
 *     → snapshot, only if the remaining budget covers its cost → deregister → exit
 *
 * A drain that cannot finish in time still records what it did and what it
 * left; nothing is lost either way: what was not nacked is re-pended by the
 * coordinator's failure scan once its heartbeat stops.
 */

export interface DrainTarget {
  /** Stop pulling and give back every held or running item; returns the ids given back. */
  stopAndNack(): Promise<string[]>;
  deregister(): Promise<void>;
}

export interface Snapshot {
  readonly estimatedCostMs: number;
  take(signal: AbortSignal): Promise<void>;
}

export type DrainStep = 'stop_pulling_and_nack' | 'snapshot' | 'snapshot_skipped' | 'deregister' | 'exit';

export interface DrainReport {
  readonly notice: PreemptionNotice;
  readonly deadlineMs: number;
  readonly elapsedMs: number;
  readonly withinDeadline: boolean;
  readonly steps: readonly DrainStep[];
  readonly nacked: readonly string[];
  /** What could not be done, and why (the failure scan picks up the rest). */
  readonly problems: readonly string[];
}

export async function drain(
  target: DrainTarget,
  notice: PreemptionNotice,
  options: { snapshot?: Snapshot; clock?: Clock; exit?: () => void } = {},
): Promise<DrainReport> {
  const clock = options.clock ?? systemClock;
  const started = clock.now();
  const { drainDeadlineMs } = PROVIDER_DEADLINES[notice.provider];
  // From the notice's time, or from now if the notice claims a later one: a stamp from the future never buys time.
  const deadline = Math.min(notice.receivedAt, started) + drainDeadlineMs;
  const steps: DrainStep[] = [];
  const problems: string[] = [];
  let nacked: string[] = [];
  const remaining = () => deadline - clock.now();

  try {
    nacked = await target.stopAndNack();
    steps.push('stop_pulling_and_nack');
  } catch (err) {
    problems.push(`nack: ${errorMessage(err)}`);
  }
  if (options.snapshot) {
    if (remaining() > options.snapshot.estimatedCostMs) {
      try {
        await options.snapshot.take(AbortSignal.timeout(Math.max(1, remaining())));
        steps.push('snapshot');
      } catch (err) {
        problems.push(`snapshot: ${errorMessage(err)}`);
      }
    } else {
      steps.push('snapshot_skipped');
      problems.push(`snapshot skipped: ${Math.max(0, remaining())} ms left, it needs ~${options.snapshot.estimatedCostMs} ms`);
    }
  }
  try {
    await target.deregister();
    steps.push('deregister');
  } catch (err) {
    problems.push(`deregister: ${errorMessage(err)}`);
  }
  steps.push('exit');
  const elapsedMs = clock.now() - started;
  options.exit?.();
  return { notice, deadlineMs: drainDeadlineMs, elapsedMs, withinDeadline: clock.now() <= deadline, steps, nacked, problems };
}
