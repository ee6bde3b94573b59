import { BoundedMap } from '../bounded-map.js';

/**
 * Token buckets, one per key (an address, an actor): `perSecond` sustained,
 * `burst` at once. Keys are forgotten oldest first past `maxKeys`, so a flood
 * of addresses costs bounded memory (a forgotten key starts with a full
 * bucket, which only errs towards letting a request through).
 */
export class RateLimiter {
  private readonly buckets: BoundedMap<string, { tokens: number; at: number }>;

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    private readonly now: () => number = Date.now,
    maxKeys = 10_000,
  ) {
    if (!(Number.isFinite(perSecond) && perSecond > 0)) throw new RangeError(`a rate limit needs a positive number of requests per second, not ${perSecond}`);
    if (!(Number.isFinite(burst) && burst >= 1)) throw new RangeError(`a rate limit's burst must be at least 1 request, not ${burst}`);
    this.buckets = new BoundedMap(maxKeys);
  }

  /** `perSecond` with bursts of `burstSeconds` worth (at least one request); null when `perSecond` is 0 (no limit). */
  static of(perSecond: number, burstSeconds: number, now: () => number = Date.now): RateLimiter | null {
    if (perSecond === 0) return null;
    if (!(Number.isFinite(burstSeconds) && burstSeconds > 0))
      throw new RangeError(`a rate limit's burst must be a positive number of seconds, not ${burstSeconds}`);
    return new RateLimiter(perSecond, Math.max(1, perSecond * burstSeconds), now);
  }

  /** Takes one request's token: null if allowed, or the seconds until one is free. */
  take(key: string): number | null {
    const now = this.now();
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.perSecond);
    b.at = now;
    this.buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return null;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.perSecond));
  }
}
