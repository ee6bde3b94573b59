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

/**
 * Group commit: items added while the sender is busy go out together.
 *
 * An item added while fewer than `maxInFlight` batches are in flight is sent
 * at once, with whatever else is waiting; one added while they are all in
 * flight waits for the next batch, which takes every item added meanwhile
 * (at most `maxBatch`). A lone item is therefore never held back, and many at
 * once cost one send per batch instead of one each.
 *
 * Each `add` settles with its own item's result (`send` answers one result per
 * item, in order); a `send` that throws rejects every item of its batch.
 */
export class Batcher<T, R> {
  private readonly waiting: { item: T; resolve: (r: R) => void; reject: (err: unknown) => void }[] = [];
  private inFlight = 0;
  private lingering = false;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;
  private readonly linger: boolean;

  constructor(
    private readonly send: (items: readonly T[]) => Promise<readonly R[]>,
    o: { readonly maxInFlight?: number; readonly maxBatch?: number; readonly linger?: boolean } = {},
  ) {
    this.maxInFlight = Math.max(1, o.maxInFlight ?? 1);
    this.maxBatch = Math.max(1, o.maxBatch ?? 100);
    this.linger = o.linger ?? false;
  }

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    if (this.linger) {
      // Once this turn's callbacks have run: items that callers resumed by one reply add at once go together.
      if (!this.lingering && this.inFlight < this.maxInFlight && this.waiting.length > 0) {
        this.lingering = true;
        setImmediate(() => {
          this.lingering = false;
          this.sendWaiting();
        });
      }
      return;
    }
    this.sendWaiting();
  }

  private sendWaiting(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      this.inFlight++;
      void this.sendBatch(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async sendBatch(batch: { item: T; resolve: (r: R) => void; reject: (err: unknown) => void }[]): Promise<void> {
    try {
      const results = await this.send(batch.map((b) => b.item));
      if (results.length !== batch.length) throw new Error(`Batcher: ${results.length} results for ${batch.length} items`);
      batch.forEach((b, i) => b.resolve(results[i]!));
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
}
