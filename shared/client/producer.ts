import { randomUUID } from 'node:crypto';
import { errorMessage } from '../log.js';
import { MAX_RUN_ITEMS, type createRun } from '../api/routes/runs.js';
import type { Request, Result } from '../api/route.js';
import { ApiError, TRY_AGAIN as TRANSPORT_TRY_AGAIN } from './transport.js';

/** A run request: a new run's spec and layout (shards or itemsPerSecond), and its items (at most MAX_RUN_ITEMS a request). */
export type CreateRunInput = NonNullable<Request<typeof createRun>['body']>;
/** Items in this request, and how many of them were new to the run. */
export type CreatedRun = Result<typeof createRun>;

/**
 * A run's items sent in requests of at most MAX_RUN_ITEMS, as fast as the
 * control plane takes them and no faster. Without this a producer keeps its
 * rate while the table refuses it: retries queue behind new requests, the
 * producer takes the table's capacity from the workers, and a request waits
 * minutes.
 *
 * Pacing is congestion control on the requests in flight: the window grows by
 * one per request answered (doubling each window) until the first refusal,
 * then by one per window answered, and halves on a refusal (once per window: the refusals of
 * requests sent before the cut do not cut it again). After a refusal no
 * request starts before its Retry-After. A refusal is a "not now" answer
 * (429, 502, 503, 504): the store was throttled or contended, a rate limit
 * or Lambda's concurrency was reached, no leader was elected, or a proxy
 * lost the request. Every request carries the run's id,
 * and an enqueue is idempotent on content, so a request whose answer was lost
 * is safe to send again whatever it stored.
 */
export const PRODUCER_PACE = {
  /** Requests in flight at the start. */
  initialWindow: 2,
  /** Never more in flight than this, by default. */
  maxInFlight: 16,
  /** The window after a refusal, as a share of what it was. */
  decrease: 0.5,
  /** Without a Retry-After, the wait after a refusal. */
  retryAfterMs: 1_000,
  /** A request refused for this long without a break ends the enqueue (EnqueueError). */
  giveUpAfterMs: 300_000,
} as const;

/** The pacing state alone, so the capacity model runs the same rules. */
export class ProducerWindow {
  private size: number;
  private slowStart = true;
  /** Sends since the last cut are numbered above this: a refusal of an older send does not cut again. */
  private cutAt = 0;
  private sends = 0;
  pauseUntil = 0;

  constructor(
    private readonly max: number = PRODUCER_PACE.maxInFlight,
    initial: number = PRODUCER_PACE.initialWindow,
  ) {
    this.size = Math.min(max, initial);
  }

  /** Requests allowed in flight now. */
  get allowed(): number {
    return Math.max(1, Math.floor(this.size));
  }

  /** A send's number, to hand back with its answer. */
  sent(): number {
    return ++this.sends;
  }

  accepted(): void {
    this.size = Math.min(this.max, this.size + (this.slowStart ? 1 : 1 / this.size));
  }

  refused(send: number, now: number, retryAfterMs: number): void {
    this.pauseUntil = Math.max(this.pauseUntil, now + retryAfterMs);
    if (send <= this.cutAt) return;
    this.slowStart = false;
    this.size = Math.max(1, this.size * PRODUCER_PACE.decrease);
    this.cutAt = this.sends;
  }
}

/**
 * A run request (POST /runs) whose items may be any (async) iterable. The id
 * is made up when absent: every request must name the run, so that a resend
 * cannot create another. Spec and layout go with the first request only.
 */
export type EnqueueRunInput = Omit<CreateRunInput, 'items'> & { readonly items: Iterable<unknown> | AsyncIterable<unknown> };

export interface EnqueueOptions {
  /** Items per request (at most the API's 10,000). */
  readonly requestItems?: number;
  readonly maxInFlight?: number;
  readonly giveUpAfterMs?: number;
  readonly signal?: AbortSignal;
  /** After each accepted request. */
  readonly onProgress?: (report: EnqueueReport) => void;
  readonly now?: () => number;
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface EnqueueReport {
  readonly id: string;
  /** Whether the first request created the run (false: it existed). */
  created: boolean;
  /** Requests accepted, and the items they carried and stored new. */
  requests: number;
  items: number;
  added: number;
  /** Requests refused and sent again (each one slowed the producer). */
  refused: number;
  /** The most requests in flight at once. */
  inFlightPeak: number;
}

/** An enqueue that stopped: what was accepted before it did. Sending every item again is safe (idempotent on content). */
export class EnqueueError extends Error {
  override readonly name = 'EnqueueError';
  constructor(
    message: string,
    readonly report: EnqueueReport,
    override readonly cause: unknown,
  ) {
    super(message);
  }
}

/** One POST /runs, not retried (the producer paces and resends). */
export type SendRuns = (body: CreateRunInput, idempotencyKey: string) => Promise<CreatedRun>;

/** "Not now": the transport's, and a rate limit's 429 (a resend is safe: every request names the run). */
const TRY_AGAIN: ReadonlySet<number> = new Set([429, ...TRANSPORT_TRY_AGAIN]);

/** A pause that ends early when `signal` aborts, leaving no timer or listener behind. */
const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

const positive = (name: string, v: number | undefined, integer: boolean): void => {
  if (v !== undefined && !(v > 0 && Number.isFinite(v) && (!integer || Number.isInteger(v))))
    throw new Error(`invalid enqueue options: ${name}: a positive ${integer ? 'integer' : 'number'}, got ${v}`);
};

export async function enqueueRun(send: SendRuns, input: EnqueueRunInput, o: EnqueueOptions = {}): Promise<EnqueueReport> {
  const per = o.requestItems ?? MAX_RUN_ITEMS;
  if (!Number.isInteger(per) || per < 1 || per > MAX_RUN_ITEMS)
    throw new Error(`invalid enqueue options: requestItems: an integer from 1 to ${MAX_RUN_ITEMS.toLocaleString('en-US')}, got ${per}`);
  positive('maxInFlight', o.maxInFlight, true);
  positive('giveUpAfterMs', o.giveUpAfterMs, false);
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? defaultSleep;
  const giveUpAfterMs = o.giveUpAfterMs ?? PRODUCER_PACE.giveUpAfterMs;
  const window = new ProducerWindow(o.maxInFlight ?? PRODUCER_PACE.maxInFlight);
  const report: EnqueueReport = { id: input.id ?? `run_${randomUUID()}`, created: false, requests: 0, items: 0, added: 0, refused: 0, inFlightPeak: 0 };
  const layout = {
    ...(input.spec ? { spec: input.spec } : {}),
    ...(input.shards !== undefined ? { shards: input.shards } : {}),
    ...(input.itemsPerSecond !== undefined ? { itemsPerSecond: input.itemsPerSecond } : {}),
  };

  type Batch = { readonly items: unknown[]; readonly key: string; firstSentAt: number | null; readonly first: boolean };
  const source = Symbol.asyncIterator in input.items ? input.items[Symbol.asyncIterator]() : input.items[Symbol.iterator]();
  let exhausted = false;
  let made = 0;
  /** Refused batches, sent again before any new one. */
  const retry: Batch[] = [];
  const inFlight = new Set<Promise<void>>();
  let failure: { message: string; cause: unknown } | null = null;
  const fail = (message: string, cause: unknown) => void (failure ??= { message, cause });
  // Resolves when the caller aborts: every wait below ends then.
  let onAbort = () => undefined as void;
  const aborted = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    if (o.signal?.aborted) resolve();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
  });

  const nextBatch = async (): Promise<Batch | null> => {
    if (retry.length) return retry.shift()!;
    if (exhausted) return null;
    const items: unknown[] = [];
    try {
      while (items.length < per) {
        const r = await source.next();
        if (r.done) {
          exhausted = true;
          break;
        }
        items.push(r.value);
      }
    } catch (err) {
      // The items read before it are not sent: the enqueue stops with what was accepted.
      exhausted = true;
      fail(`reading the items failed: ${errorMessage(err)}`, err);
      return null;
    }
    if (!items.length) return null;
    return { items, key: randomUUID(), firstSentAt: null, first: made++ === 0 };
  };

  const attempt = (b: Batch): Promise<void> => {
    const n = window.sent();
    b.firstSentAt ??= now();
    const body = { id: report.id, items: b.items, ...(b.first ? layout : {}) };
    return send(body, b.key).then(
      (a) => {
        window.accepted();
        if (b.first) report.created = a.created;
        report.requests++;
        report.items += a.items;
        report.added += a.added;
        o.onProgress?.(report);
      },
      (err: unknown) => {
        if (!(err instanceof ApiError) || !TRY_AGAIN.has(err.status)) return fail(errorMessage(err), err);
        report.refused++;
        const refusedForMs = now() - b.firstSentAt!;
        if (refusedForMs >= giveUpAfterMs)
          return fail(`a request of ${b.items.length} items was refused for ${Math.round(refusedForMs / 1000)} s: ${errorMessage(err)}`, err);
        window.refused(n, now(), err.retryAfterMs ?? PRODUCER_PACE.retryAfterMs);
        retry.push(b);
      },
    );
  };
  const track = (p: Promise<void>) => {
    const t = p.finally(() => inFlight.delete(t));
    inFlight.add(t);
    report.inFlightPeak = Math.max(report.inFlightPeak, inFlight.size);
  };
  /** Whether a request may start now: nothing failed, no pause, room in the window (the first request alone: it creates the run). */
  const mayStart = (): boolean => {
    if (failure || o.signal?.aborted || window.pauseUntil > now()) return false;
    const creating = made === 0 || (made === 1 && report.requests === 0);
    return inFlight.size < (creating ? 1 : window.allowed);
  };

  try {
    for (;;) {
      if (o.signal?.aborted) fail('aborted', o.signal.reason);
      if (failure) break;
      const wait = window.pauseUntil - now();
      if (wait > 0) {
        // Refused: nothing new starts before the Retry-After; answers of what is in flight still count.
        const pause = new AbortController();
        await Promise.race([sleep(wait, pause.signal), aborted, ...inFlight]);
        pause.abort();
        continue;
      }
      if (mayStart()) {
        const b = await nextBatch();
        if (b) {
          // Reading the batch took time: answers that came meanwhile (a refusal, a failure, an abort) decide first.
          if (mayStart()) track(attempt(b));
          else retry.unshift(b);
          continue;
        }
      }
      if (!inFlight.size) {
        if (!retry.length && exhausted) break;
        continue;
      }
      await Promise.race([aborted, ...inFlight]);
    }
    // What is in flight is answered before the report is final (an abort does not wait for it).
    await Promise.race([Promise.all(inFlight), aborted]);
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    if (!exhausted) await Promise.resolve(source.return?.()).catch(() => undefined);
  }
  if (failure) {
    const f = failure as { message: string; cause: unknown };
    // Refused before anything was stored (a bad spec, no permission): the answer as it came.
    if (!report.requests && !(f.cause instanceof ApiError && TRY_AGAIN.has(f.cause.status))) throw f.cause;
    throw new EnqueueError(
      `enqueue into run ${report.id} stopped after ${report.items} items in ${report.requests} requests: ${f.message}. Send every item again to finish it: items stored already are kept once.`,
      report,
      f.cause,
    );
  }
  if (!report.requests) throw new Error('invalid enqueue: items: at least one item');
  return report;
}
