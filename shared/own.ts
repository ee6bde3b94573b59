/**
 * Lookups by a name that came from outside (a spec, a request, a token, the
 * operator's config): only what the object holds itself, never what it
 * inherits from Object.prototype, so "constructor", "__proto__", "toString"
 * or "hasOwnProperty" are names like any other, declared or not. The lint
 * rule `local/own-properties` (eslint.config.js) sends every such lookup here.
 */

/** What `record` holds itself under `key`; undefined when it holds nothing there (whatever it inherits). */
export function own<T>(record: Readonly<Record<string, T>> | null | undefined, key: string): T | undefined {
  // eslint-disable-next-line local/own-properties -- guarded: an own property only
  return record !== null && record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}
