/** Canonical JSON: object keys sorted at every level, so equal content hashes equally. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) throw new TypeError('payload must not be undefined');
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    // Own enumerable keys, sorted as Array.prototype.sort sorts strings (by UTF-16 code units).
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`)
      .join(',')}}`;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) throw new TypeError(`payload has a non-finite number: ${value}`);
  return JSON.stringify(value);
}
