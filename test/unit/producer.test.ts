/**
 * The producer's pacing (client/producer.ts) on a simulated clock: every item
 * is sent once and accepted once; a refusal halves the requests in flight and
 * holds new ones back until its Retry-After; a request refused for too long,
 * or answered with an error that is not "try again", ends the enqueue with
 * what was accepted before it.
 */
import { describe, expect, it } from 'vitest';
import { enqueueRun, EnqueueError, ProducerWindow, PRODUCER_PACE, type SendRuns } from '../../shared/client/producer.js';
import { ApiError } from '../../shared/client/transport.js';

/** A simulated clock: a sleep moves it on; an answer comes after `latencyMs` of it. */
function rig(answer: (n: number, body: Record<string, unknown>) => 'ok' | ApiError | Error, latencyMs = 100) {
  let t = 0;
  const sends: { n: number; at: number; inFlight: number; body: Record<string, unknown>; key: string }[] = [];
  const stored = new Set<unknown>();
  let inFlight = 0;
  const pending: { at: number; settle: () => void }[] = [];
  // Answers are released in time order whenever the producer waits.
  const advance = (to: number) => {
    pending.sort((a, b) => a.at - b.at);
    while (pending.length && pending[0]!.at <= to) {
      const p = pending.shift()!;
      t = Math.max(t, p.at);
      p.settle();
    }
    t = Math.max(t, to);
  };
  const send: SendRuns = (body, key) => {
    const n = sends.length + 1;
    sends.push({ n, at: t, inFlight: ++inFlight, body, key });
    return new Promise((resolve, reject) => {
      pending.push({
        at: t + latencyMs,
        settle: () => {
          inFlight--;
          const a = answer(n, body);
          if (a !== 'ok') return reject(a);
          const items = body.items as unknown[];
          const added = items.filter((i) => !stored.has(JSON.stringify(i))).length;
          for (const i of items) stored.add(JSON.stringify(i));
          resolve({ id: String(body.id), created: n === 1, items: items.length, added });
        },
      });
    });
  };
  const sleep = (ms: number) => Promise.resolve(advance(t + ms));
  // An answer the producer races for: when nothing is due, time passes to the next one.
  const tick = setInterval(() => advance(pending.length ? Math.min(...pending.map((p) => p.at)) : t), 0);
  return { send, sends, stored, now: () => t, sleep, stop: () => clearInterval(tick) };
}

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ i }));
const throttled = (retryAfterMs = 1_000) => new ApiError(503, { error: 'store throttled: nothing was written, try again later' }, retryAfterMs);

describe('the producer window', () => {
  it('doubles per answer until the first refusal, then grows by one per window; halves once per window of refusals; never below one nor above its cap', () => {
    const w = new ProducerWindow(16, 2);
    expect(w.allowed).toBe(2);
    const s = [w.sent(), w.sent()];
    w.accepted();
    w.accepted();
    expect(w.allowed).toBe(4);
    const more = [w.sent(), w.sent(), w.sent(), w.sent()];
    w.refused(more[0]!, 0, 1_000);
    expect(w.allowed).toBe(2);
    expect(w.pauseUntil).toBe(1_000);
    // The other refusals of that window were sent before the cut: no second cut.
    w.refused(more[1]!, 10, 1_000);
    w.refused(s[0]!, 10, 1_000);
    expect(w.allowed).toBe(2);
    expect(w.pauseUntil).toBe(1_010);
    // Additive now: each answer adds 1/window, so a window of two takes three answers to reach three (2 → 2.5 → 2.9 → 3.24).
    w.accepted();
    w.accepted();
    expect(w.allowed).toBe(2);
    w.accepted();
    expect(w.allowed).toBe(3);
    for (let i = 0; i < 5; i++) w.refused(w.sent(), 0, 0);
    expect(w.allowed).toBe(1);
    const capped = new ProducerWindow(3, 2);
    for (let i = 0; i < 10; i++) capped.accepted();
    expect(capped.allowed).toBe(3);
  });
});

describe('enqueueRun', () => {
  it('sends every item once, in requests of requestItems, all naming the run; the first alone, carrying the layout; never more in flight than allowed', async () => {
    const r = rig(() => 'ok');
    try {
      const report = await enqueueRun(r.send, { id: 'r1', items: items(95), spec: { k: 1 }, shards: 4 }, { requestItems: 10, now: r.now, sleep: r.sleep });
      expect(report).toMatchObject({ id: 'r1', created: true, requests: 10, items: 95, added: 95, refused: 0 });
      expect(r.stored.size).toBe(95);
      expect(r.sends.map((s) => s.body.id)).toEqual(Array(10).fill('r1'));
      expect(r.sends[0]!.body).toMatchObject({ spec: { k: 1 }, shards: 4 });
      expect(r.sends.slice(1).every((s) => s.body.spec === undefined && s.body.shards === undefined)).toBe(true);
      // The second request starts once the first is answered.
      expect(r.sends[1]!.at).toBeGreaterThanOrEqual(100);
      expect(Math.max(...r.sends.map((s) => s.inFlight))).toBeLessThanOrEqual(PRODUCER_PACE.maxInFlight);
      expect(report.inFlightPeak).toBeGreaterThan(1);
    } finally {
      r.stop();
    }
  });

  it('makes up an id when none is given, so a resent first request cannot create a second run', async () => {
    const r = rig((n) => (n === 1 ? throttled(0) : 'ok'));
    try {
      const report = await enqueueRun(r.send, { items: items(3) }, { requestItems: 10, now: r.now, sleep: r.sleep });
      expect(report.id).toMatch(/^run_[0-9a-f-]{36}$/);
      expect(r.sends.map((s) => s.body.id)).toEqual([report.id, report.id]);
      expect(r.sends[0]!.key).toBe(r.sends[1]!.key);
      expect(report).toMatchObject({ requests: 1, items: 3, refused: 1 });
    } finally {
      r.stop();
    }
  });

  it('a refusal halves what is in flight, nothing starts before its Retry-After, and everything refused is stored in the end', async () => {
    // The table takes 3 requests of every 5 from the sixth on.
    const r = rig((n) => (n > 5 && n % 5 < 2 ? throttled(1_000) : 'ok'));
    try {
      const report = await enqueueRun(r.send, { id: 'r2', items: items(400) }, { requestItems: 10, now: r.now, sleep: r.sleep });
      expect(report.items).toBe(400);
      expect(r.stored.size).toBe(400);
      expect(report.refused).toBeGreaterThan(0);
      expect(report.requests + report.refused).toBe(r.sends.length);
      // After each refusal's answer (at its send + 100), no send until that answer + 1,000.
      for (const s of r.sends.filter((x) => x.n > 5 && x.n % 5 < 2)) {
        const answeredAt = s.at + 100;
        expect(r.sends.filter((x) => x.at > answeredAt && x.at < answeredAt + 1_000)).toEqual([]);
      }
    } finally {
      r.stop();
    }
  });

  it('a request refused for longer than giveUpAfterMs ends the enqueue: EnqueueError with what was accepted; an error that is not "try again" ends it too', async () => {
    const r = rig((n) => (n <= 2 ? 'ok' : throttled(1_000)));
    try {
      const err = await enqueueRun(r.send, { id: 'r3', items: items(50) }, { requestItems: 10, giveUpAfterMs: 5_000, now: r.now, sleep: r.sleep }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(EnqueueError);
      expect((err as EnqueueError).report).toMatchObject({ id: 'r3', requests: 2, items: 20 });
      expect((err as Error).message).toMatch(
        /^enqueue into run r3 stopped after 20 items in 2 requests: a request of 10 items was refused for \d+ s: HTTP 503: store throttled.*Send every item again/,
      );
    } finally {
      r.stop();
    }
    const r2 = rig((n) => (n <= 1 ? 'ok' : new ApiError(403, { error: 'forbidden' })));
    try {
      const err = await enqueueRun(r2.send, { id: 'r4', items: items(30) }, { requestItems: 10, now: r2.now, sleep: r2.sleep }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EnqueueError);
      expect((err as EnqueueError).report.items).toBe(10);
    } finally {
      r2.stop();
    }
    // Refused before anything was stored: the answer itself, not wrapped.
    const r3 = rig(() => new ApiError(400, { error: 'invalid run: spec' }));
    try {
      await expect(enqueueRun(r3.send, { id: 'r5', items: items(5) }, { now: r3.now, sleep: r3.sleep })).rejects.toMatchObject({
        name: 'ApiError',
        status: 400,
      });
    } finally {
      r3.stop();
    }
    await expect(enqueueRun(r3.send, { id: 'r6', items: items(1) }, { requestItems: 10_001 })).rejects.toThrow(
      /requestItems: an integer from 1 to 10,000, got 10001/,
    );
    await expect(enqueueRun(r3.send, { id: 'r6', items: items(1) }, { maxInFlight: Number.NaN })).rejects.toThrow(/maxInFlight: a positive integer, got NaN/);
    await expect(enqueueRun(r3.send, { id: 'r6', items: [] })).rejects.toThrow(/items: at least one item/);
  });

  it('an item source that fails, or an abort, ends the enqueue with what was accepted; the source is closed', async () => {
    const r = rig(() => 'ok');
    try {
      let closed = false;
      // An async source (a file being read, say) that fails part-way.
      async function* failing() {
        try {
          for (let i = 0; i < 25; i++) yield await Promise.resolve({ i });
          throw new Error('disk gone');
        } finally {
          closed = true;
        }
      }
      const err = await enqueueRun(r.send, { id: 'r7', items: failing() }, { requestItems: 10, now: r.now, sleep: r.sleep }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EnqueueError);
      expect((err as EnqueueError).report).toMatchObject({ requests: 2, items: 20 });
      expect((err as Error).message).toMatch(/reading the items failed: disk gone/);
      expect(closed).toBe(true);

      const abort = new AbortController();
      let closedAfterAbort = false;
      function* endless() {
        try {
          for (let i = 0; ; i++) yield { i };
        } finally {
          closedAfterAbort = true;
        }
      }
      const aborted = await enqueueRun(
        r.send,
        { id: 'r8', items: endless() },
        { requestItems: 10, now: r.now, sleep: r.sleep, signal: abort.signal, onProgress: (p) => p.requests === 3 && abort.abort() },
      ).catch((e: unknown) => e);
      expect(aborted).toBeInstanceOf(EnqueueError);
      expect((aborted as EnqueueError).report.requests).toBeGreaterThanOrEqual(3);
      expect((aborted as Error).message).toMatch(/: aborted\./);
      expect(closedAfterAbort).toBe(true);
    } finally {
      r.stop();
    }
  });
});
