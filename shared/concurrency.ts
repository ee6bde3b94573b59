/**
 * Runs `fn` over `items` with at most `limit` in flight; results keep the input order.
 * On the first failure no further item starts, and the call rejects with that
 * error only once every call already started has settled: a caller that looks
 * at the store after a failure sees every write this call will ever make.
 */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed: { err: unknown } | null = null;
  const lane = async () => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        out[i] = await fn(items[i]!, i);
      } catch (err) {
        failed ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  if (failed) throw (failed as { err: unknown }).err;
  return out;
}
