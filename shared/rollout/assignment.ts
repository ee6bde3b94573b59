/**
 * Which entities a rollout puts on its new version: a deterministic bucket
 * per (rollout, entity), so a growing percent only adds entities, a rollback
 * returns everyone to stable, and any tool that uses the same rule puts the
 * same entities in the cohort.
 *
 * The rule: bucket = murmur3_x86_32("<rolloutId>:<entity>" as UTF-8, seed 0)
 * mod 10,000; an entity is on the new version when bucket < percent × 100.
 * It is Unleash's gradual-rollout normalisation (hash32("<groupId>:<id>", 0)
 * % normalizer + 1) with the rollout id as the group, a normaliser of 10,000,
 * and minus one. For ASCII ids the two agree to the bucket; beyond ASCII we
 * hash UTF-8 bytes, where Unleash's JavaScript client hashes the low byte of
 * each UTF-16 unit.
 */

import type { RolloutState, RolloutView } from './model.js';

export const BUCKETS = 10_000;

const utf8 = new TextEncoder();

/** MurmurHash3, x86, 32-bit (Austin Appleby's reference), over the first `length` bytes: an unsigned 32-bit integer. */
export function murmur3x86_32(bytes: Uint8Array, seed = 0, length = bytes.length): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = seed >>> 0;
  const blocks = length & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const tail = length & 3;
  if (tail) {
    let k = bytes[blocks]!;
    if (tail > 1) k ^= bytes[blocks + 1]! << 8;
    if (tail > 2) k ^= bytes[blocks + 2]! << 16;
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
  }
  h ^= length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Where an ASCII key's bytes are laid out: one buffer reused, not one allocated per question. */
let scratch = new Uint8Array(512);

/** The entity's bucket in this rollout, 0 ≤ bucket < 10,000. */
export function bucketOf(rolloutId: string, entity: string): number {
  const key = `${rolloutId}:${entity}`;
  if (key.length > scratch.length) scratch = new Uint8Array(key.length * 2);
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    // Beyond ASCII a character is several UTF-8 bytes: the encoder lays them out.
    if (c > 0x7f) return murmur3x86_32(utf8.encode(key), 0) % BUCKETS;
    scratch[i] = c;
  }
  return murmur3x86_32(scratch, 0, key.length) % BUCKETS;
}

/** Whether a bucket is on the new version at this percent (0–100, two decimals at most). */
export function inCohort(bucket: number, percent: number): boolean {
  return bucket < Math.round(percent * 100);
}

/** The traffic a rollout's state asks for: what actuators converge to and assignment answers from. */
export interface Traffic {
  readonly attempt: number;
  /** Share on the new version, 0–100. */
  readonly percent: number;
  /** The stage whose percent is in force; null before the first activation and after a rollback or abort. */
  readonly stage: { readonly index: number; readonly name: string } | null;
  /** Completed: the new version is the version, nothing is split any more. */
  readonly final: boolean;
}

/**
 * As committed: the active stage's percent while running or paused, the last stage's 100 once
 * completed, 0 after a rollback or an abort, and 0 before any stage is active.
 */
export function trafficOf(view: Pick<RolloutView, 'rollout' | 'stages'>): Traffic {
  const { rollout, stages } = view;
  const at = (index: number) => ({ index, name: rollout.spec.stages[index]!.name });
  switch (rollout.state) {
    case 'completed':
      return { attempt: rollout.attempt, percent: 100, stage: at(rollout.spec.stages.length - 1), final: true };
    case 'rolled_back':
    case 'aborted':
      return { attempt: rollout.attempt, percent: 0, stage: null, final: false };
    case 'running':
    case 'paused': {
      const active = stages.find((s) => s.phase === 'active');
      return active
        ? { attempt: rollout.attempt, percent: rollout.spec.stages[active.index]!.percent, stage: at(active.index), final: false }
        : { attempt: rollout.attempt, percent: 0, stage: null, final: false };
    }
  }
}

/**
 * A rollout's traffic as a client evaluates it in process: everything
 * assignment reads, so `assign(traffic, entity)` on a client answers what
 * `GET /rollouts/{id}/assignment` answers on the server.
 */
export interface RolloutTraffic extends Traffic {
  readonly rolloutId: string;
  /** The rollout's version: with the attempt, what the ETag names. */
  readonly version: number;
  readonly state: RolloutState;
  readonly service: string;
  readonly newVersion: string;
  readonly stableVersion: string | null;
}

export function trafficJson(view: Pick<RolloutView, 'rollout' | 'stages'>): RolloutTraffic {
  const { rollout } = view;
  const { target } = rollout.spec;
  return {
    rolloutId: rollout.id,
    version: rollout.version,
    state: rollout.state,
    service: target.service,
    newVersion: target.version,
    stableVersion: target.stableVersion ?? null,
    ...trafficOf(view),
  };
}

export interface Assignment {
  /** The version this entity should run: the new one, or the stable one when the spec names it (else null). */
  readonly version: string | null;
  readonly variant: 'stable' | 'new';
  readonly percent: number;
  readonly stage: string | null;
  readonly attempt: number;
  readonly bucket: number;
}

/** Which version an entity should run under this traffic: a pure function, the same on server and client. */
export function assign(traffic: RolloutTraffic, entity: string): Assignment {
  const bucket = bucketOf(traffic.rolloutId, entity);
  const variant = traffic.final || inCohort(bucket, traffic.percent) ? 'new' : 'stable';
  return {
    version: variant === 'new' ? traffic.newVersion : traffic.stableVersion,
    variant,
    percent: traffic.percent,
    stage: traffic.stage?.name ?? null,
    attempt: traffic.attempt,
    bucket,
  };
}

/** Which version an entity should run now: a pure function of the rollout's committed state. */
export function assignmentOf(view: Pick<RolloutView, 'rollout' | 'stages'>, entity: string): Assignment {
  return assign(trafficJson(view), entity);
}
