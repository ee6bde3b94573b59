import { context, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';

/**
 * Spans through the OpenTelemetry API, recorded by whatever SDK the process
 * registers (docs/operating/observability.md#operating: traces). We register none.
 *
 * Guarantees:
 * - With no SDK registered every span is the API's no-op: one small object,
 *   no context switch, nothing recorded or sent.
 * - A span is made active while its work runs, so spans the work makes (a
 *   user's handler, an instrumented HTTP or AWS call) are its children.
 * - A span whose work throws records the exception and ends with status
 *   ERROR; the error propagates unchanged. Every span is ended once.
 * - Attributes carry ids, names, numbers and outcomes only: never a URL, a
 *   credential, a payload or a result.
 *
 * Not guaranteed: that a user's SDK samples or exports anything; spans of
 * gates read in one provider call share that call's timing.
 */

/** Span names: stable, documented in docs/operating/observability.md#operating. */
export const SPAN = {
  /** One transition decided on a rollout and written (fenced), its events published. */
  decide: 'rollout.decide',
  /** One gate read through its provider and judged. */
  gateRead: 'rollout.gate.read',
  /** One target converged to a committed state (read, decide, write, read back), or a post-rollout hook sent. */
  actuate: 'rollout.actuate',
  /** One item run by a worker's backend (a createWorker handler, a Lambda, an HTTP endpoint). */
  item: 'run.item',
} as const;

/** The package's version, as the tracer's (test/unit/tracing.test.ts keeps it equal to package.json's). */
export const TRACER_VERSION = '0.1.0';

export const tracer = trace.getTracer('rollout-control-plane', TRACER_VERSION);

/** A span started now as a child of the active one. */
export function startSpan(name: string, attributes: Attributes): Span {
  return tracer.startSpan(name, { attributes });
}

/**
 * `fn` with `span` active. A span of no trace (the no-op's, with nothing to
 * propagate) leaves the context as it is: no allocation on the hot path.
 */
export function activeIn<T>(span: Span, fn: () => T): T {
  if (!trace.isSpanContextValid(span.spanContext())) return fn();
  return context.with(trace.setSpan(context.active(), span), fn);
}

/** The span's work failed: the exception recorded (when there is one) and status ERROR. */
export function failSpan(span: Span, err: unknown): void {
  if (!span.isRecording()) return;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof Error) span.recordException(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** `fn` in an active span of its own, ended when `fn` settles; a throw fails the span and propagates. */
export async function inSpan<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
  const span = startSpan(name, attributes);
  try {
    return await activeIn(span, () => fn(span));
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}
