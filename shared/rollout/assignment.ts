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

export const BUCKETS = 10_000;

const utf8 = new TextEncoder();

/** MurmurHash3, x86, 32-bit (Austin Appleby's reference), over bytes: an unsigned 32-bit integer. */
export function murmur3x86_32(bytes: Uint8Array, seed = 0): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = seed >>> 0;
  const blocks = bytes.length & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  switch (bytes.length & 3) {
    case 3:
      k ^= bytes[blocks + 2]! << 16;
    // falls through
    case 2:
      k ^= bytes[blocks + 1]! << 8;
    // falls through
    case 1:
      k ^= bytes[blocks]!;
      k = Math.imul(k, c1);
      k = (k << 15) | (k >>> 17);
      k = Math.imul(k, c2);
      h ^= k;
  }
  h ^= bytes.length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The entity's bucket in this rollout, 0 ≤ bucket < 10,000. */
export function bucketOf(rolloutId: string, entity: string): number {
  return murmur3x86_32(utf8.encode(`${rolloutId}:${entity}`), 0) % BUCKETS;
}

/** Whether a bucket is on the new version at this percent (0–100, two decimals at most). */
export function inCohort(bucket: number, percent: number): boolean {
  return bucket < Math.round(percent * 100);
}
