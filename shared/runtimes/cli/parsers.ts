import { InvalidArgumentError } from 'commander';

/** Parsers of flag values: each names its flag in the error, which commander reports with exit 2. */

/** `30m`, `90s`, `2h`, `1500ms` or a number of seconds, as milliseconds. */
export function duration(name: string): (v: string) => number {
  return (v) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
    if (!m) throw new InvalidArgumentError(`${name}: a duration such as 30m, 90s, 2h or 1500ms, not "${v}"`);
    const n = Number(m[1]);
    return Math.round(n * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h']);
  };
}

export const int = (name: string) => (v: string) => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}"`);
  return Number(v);
};

export const days = (name: string) => (v: string) => {
  const n = Number(v);
  if (!(n > 0 && n <= 36_500)) throw new InvalidArgumentError(`${name} must be a number of days, more than 0 and at most 36500, got "${v}"`);
  return n;
};

export const seconds = (name: string) => (v: string) => {
  const n = Number(v);
  if (!(n > 0)) throw new InvalidArgumentError(`${name} must be a positive number of seconds, got "${v}"`);
  return n;
};

export function nonNegative(name: string, v: string): number {
  const n = Number(v);
  if (!(n >= 0)) throw new InvalidArgumentError(`${name} must be a number ≥ 0, got "${v}"`);
  return n;
}
