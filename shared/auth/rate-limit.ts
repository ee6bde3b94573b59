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
    this.buckets = new BoundedMap(maxKeys);
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
