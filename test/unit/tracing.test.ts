/**
 * The tracing helpers (shared/tracing.ts) without an SDK, where every span is
 * the API's no-op and nothing is made active, and then with the SDK's
 * in-memory exporter registered: a span per call, active while its work runs,
 * failed with the exception on a throw, ended once.
 */
import { readFileSync } from 'node:fs';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeIn, failSpan, inSpan, startSpan, TRACER_VERSION } from '../../shared/tracing.js';
import { parentOf, recordSpans, type RecordedSpans } from '../support/tracing.js';

it("the tracer's version is the package's", () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  expect(TRACER_VERSION).toBe(pkg.version);
});

describe('with no SDK registered', () => {
  it('a span is the no-op: not recording, of no trace, and never made active', async () => {
    let inside: unknown = 'not run';
    const out = await inSpan('t.noop', { 'rollout.id': 'r1' }, (span) => {
      expect(span.isRecording()).toBe(false);
      expect(trace.isSpanContextValid(span.spanContext())).toBe(false);
      inside = trace.getActiveSpan();
      return Promise.resolve(42);
    });
    expect(out).toBe(42);
    expect(inside).toBeUndefined();
  });

  it('a throw propagates as it was, and failing a no-op span does nothing', async () => {
    const boom = new Error('boom');
    await expect(inSpan('t.noop', {}, () => Promise.reject(boom))).rejects.toBe(boom);
    const span = startSpan('t.noop', {});
    expect(() => failSpan(span, boom)).not.toThrow();
    expect(activeIn(span, () => trace.getActiveSpan())).toBeUndefined();
    span.end();
  });
});

describe('with the SDK registered', () => {
  let recorded: RecordedSpans;
  beforeAll(() => {
    recorded = recordSpans();
  });
  afterAll(() => recorded.stop());

  it('inSpan: one span with its attributes, active while the work runs, so what the work starts is its child', async () => {
    recorded.reset();
    const out = await inSpan('t.outer', { 'rollout.id': 'r1', 'rollout.stage.index': 0, 'rollout.stage.name': undefined }, async (span) => {
      expect(trace.getActiveSpan()).toBe(span);
      await inSpan('t.inner', {}, () => Promise.resolve());
      span.setAttribute('rollout.outcome', 'applied');
      return 'done';
    });
    expect(out).toBe('done');
    const [inner, outer] = recorded.spans();
    expect(outer).toMatchObject({ name: 't.outer', ended: true, status: { code: SpanStatusCode.UNSET } });
    expect(outer!.attributes).toEqual({ 'rollout.id': 'r1', 'rollout.stage.index': 0, 'rollout.outcome': 'applied' });
    expect(outer!.instrumentationScope).toMatchObject({ name: 'rollout-control-plane', version: TRACER_VERSION });
    expect(parentOf(inner!)).toBe(outer!.spanContext().spanId);
    expect(parentOf(outer!)).toBeNull();
    expect(recorded.diagnostics).toEqual([]);
  });

  it('a throw: the exception recorded, status ERROR with its message, the span ended once, the error propagated as it was', async () => {
    recorded.reset();
    const boom = new TypeError('the store refused');
    await expect(inSpan('t.fails', {}, () => Promise.reject(boom))).rejects.toBe(boom);
    const [span] = recorded.spans('t.fails');
    expect(span!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'the store refused' });
    expect(span!.events.map((e) => [e.name, e.attributes?.['exception.type'], e.attributes?.['exception.message']])).toEqual([
      ['exception', 'TypeError', 'the store refused'],
    ]);
    expect(recorded.diagnostics).toEqual([]);
  });

  it('failSpan with a reason and no exception: status ERROR, no exception event', () => {
    recorded.reset();
    const span = startSpan('t.reason', {});
    failSpan(span, 'connect ECONNREFUSED');
    span.end();
    expect(recorded.spans('t.reason')[0]).toMatchObject({ status: { code: SpanStatusCode.ERROR, message: 'connect ECONNREFUSED' }, events: [] });
  });
});
