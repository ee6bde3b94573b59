/**
 * The actuator port: how a rollout's committed traffic reaches something
 * outside the store (a Lambda alias, a load balancer rule, nginx). The store
 * is the truth; an actuator converges one target to it and reports what the
 * target carries. The decisions (whether to write, drift, who may overwrite
 * whom) are made once, in reconcile.ts; an actuator only reads and writes.
 *
 * The rule every actuator keeps (docs/concepts/actuators-and-assignment.md#moving-traffic-actuators):
 * - a write is idempotent: "make the target carry attempt A, stage S, P %";
 * - it carries a stamp (rollout, attempt, stage, lease epoch, the percent
 *   written), kept on the target where the target can keep one;
 * - where the target can condition a write (Lambda's RevisionId), the write
 *   is conditioned on the reading it was decided on: TargetMovedError when
 *   the target changed in between; where it cannot (ELBv2, nginx), the write
 *   is read back and the caller re-decides on what it finds.
 */

import type { ActuatorKind, Stamp } from '../rollout/actuation-record.js';

export type { ActuatorKind, Stamp };

/** What a target is asked to carry: a share of traffic on the rollout's new version. */
export interface Desired {
  readonly rolloutId: string;
  readonly attempt: number;
  /** The stage whose percent is in force; null before the first activation and after a rollback or abort. */
  readonly stage: number | null;
  /** 0–100, at most two decimals. */
  readonly percent: number;
  /** Completed: the target is finalised on the new version (no split left). */
  readonly final: boolean;
  /** The rollout's new version (spec.target.version): for a Lambda alias, a published version number. */
  readonly newVersion: string;
  /** The rollout's version (+1 at every transition) of the committed state this is: an older state never overwrites a newer one. */
  readonly version: number;
  /**
   * The version the rollout's judged gates read as the baseline (spec.target.stableVersion), set only
   * when one of them names its cohorts by `{{version}}`: a target that reports the version it serves
   * (`Observed.servedVersion`) must serve this one before the rollout first moves it.
   */
  readonly baselineVersion?: string;
}

/**
 * Why a stamp found on a target outranks the one we are about to write (null
 * when it does not): a higher lease epoch, or a newer state of the same
 * rollout (two processes of one leader converging at once, one on an older
 * reading). Checked by actuators that cannot condition a write, just before it.
 */
export function outranks(found: Stamp | null, ours: Stamp): string | null {
  if (!found) return null;
  if (found.epoch > ours.epoch) return `it carries a stamp of epoch ${found.epoch}, ours is ${ours.epoch}`;
  if (found.rolloutId === ours.rolloutId && found.version !== undefined && ours.version !== undefined && found.version > ours.version) {
    return `it carries version ${found.version} of the rollout, ours is ${ours.version}`;
  }
  return null;
}

/** Two readings of a target that carry the same: a write decided on one may be made on the other. */
export function sameReading(a: Observed, b: Observed): boolean {
  const text = (s: Stamp | null) => (s === null ? null : stampText(s));
  return a.percent === b.percent && a.final === b.final && (a.foreignSplit ?? null) === (b.foreignSplit ?? null) && text(a.stamp) === text(b.stamp);
}

/** A target as read. */
export interface Observed {
  /**
   * Share on the new side now, 0–100. Where the target carries a write of
   * ours it reads back exactly the stamp's percent (ELBv2 weights that only
   * approximate it read as the stamp's). A finalised target may read 100 (a
   * split all on the new side) or 0 (an alias that no longer splits):
   * `final` is what counts, and the reconciler takes it as 100.
   */
  readonly percent: number;
  /** Nothing is split and the target serves the rollout's new version (a finalised alias). */
  readonly final: boolean;
  /** Our stamp as the target keeps it; null when it carries none (never written by us, or by someone else). */
  readonly stamp: Stamp | null;
  /** The target as found, in a line: for drift reasons, `rollout rollouts get` and the status page. */
  readonly detail: string;
  /** An opaque token of this reading (Lambda's RevisionId) that a conditioned write is made against. */
  readonly revision?: string;
  /** A split the target carries towards something other than the new version (an alias weighted to another version): never ours. */
  readonly foreignSplit?: string;
  /** The version the target serves outside any split (a Lambda alias's own version), where the target names versions. */
  readonly servedVersion?: string;
}

export interface Actuator {
  /** The operator's name for the target: what a spec's `actuators` list names. */
  readonly target: string;
  readonly kind: ActuatorKind;
  /** The target now, its shares counted towards `newVersion` (the rollout's spec.target.version). */
  read(newVersion: string): Promise<Observed>;
  /**
   * Make the target carry `desired`, stamped with `stamp`, decided on
   * `observed`. Throws TargetMovedError when the target refused a write
   * conditioned on `observed` (it changed since), TargetRefusedError when it
   * refused the content (nginx -t failed, a weight out of range): nothing
   * changed in either case. Returns the target as read back after the write.
   */
  write(desired: Desired, stamp: Stamp, observed: Observed): Promise<Observed>;
}

/** The target changed between our reading and our conditioned write: read it again and decide again. */
export class TargetMovedError extends Error {
  override readonly name = 'TargetMovedError';
  constructor(
    readonly target: string,
    detail: string,
  ) {
    super(`${target}: changed since it was read (${detail})`);
  }
}

/** The target refused what we asked it to carry; nothing was changed. */
export class TargetRefusedError extends Error {
  override readonly name = 'TargetRefusedError';
  constructor(
    readonly target: string,
    detail: string,
  ) {
    super(`${target}: refused the write (${detail})`);
  }
}

/** The stamp a write carries, as one line of text: for a tag, an alias description or a comment. */
export function stampText(s: Stamp): string {
  const parts = [`rollout=${s.rolloutId}`, `attempt=${s.attempt}`, `stage=${s.stage ?? '-'}`, `epoch=${s.epoch}`, `percent=${s.percent}`, `final=${s.final}`];
  if (s.version !== undefined) parts.push(`version=${s.version}`);
  if (s.base !== undefined) parts.push(`base=${s.base}`);
  return parts.join(' ');
}

/** A stamp read back from stampText's line; null when the text is not one (a description someone else wrote). */
export function parseStamp(text: string | undefined | null): Stamp | null {
  if (!text) return null;
  const fields = new Map<string, string>();
  for (const part of text.trim().split(/\s+/)) {
    const eq = part.indexOf('=');
    if (eq <= 0) return null;
    fields.set(part.slice(0, eq), part.slice(eq + 1));
  }
  const int = (k: string) => {
    const v = fields.get(k);
    return v !== undefined && /^\d{1,15}$/.test(v) ? Number(v) : null;
  };
  const rolloutId = fields.get('rollout');
  const attempt = int('attempt');
  const epoch = int('epoch');
  const stageText = fields.get('stage');
  const stage = stageText === '-' ? null : int('stage');
  const percent = Number(fields.get('percent'));
  const final = fields.get('final');
  if (!rolloutId || attempt === null || attempt < 1 || epoch === null || (stage === null && stageText !== '-')) return null;
  if (!Number.isFinite(percent) || percent < 0 || percent > 100 || (final !== 'true' && final !== 'false')) return null;
  const base = fields.get('base');
  const version = fields.has('version') ? int('version') : undefined;
  if (version === null) return null;
  return {
    rolloutId,
    attempt,
    stage,
    epoch,
    percent,
    final: final === 'true',
    ...(version !== undefined ? { version } : {}),
    ...(base !== undefined ? { base } : {}),
  };
}
