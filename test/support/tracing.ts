import { context, diag, DiagLogLevel, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/**
 * A user's OpenTelemetry setup, as small as it gets: the SDK's tracer
 * provider registered globally with an in-memory exporter, an
 * AsyncLocalStorage context manager (so parent and child can be asserted),
 * and the API's diagnostics kept (a span ended twice, an invalid attribute
 * and a second registration are reported there).
 */
export interface RecordedSpans {
  /** Finished spans, oldest first; only those named `name` when given. */
  spans(name?: string): ReadableSpan[];
  /** Forget the spans finished so far. */
  reset(): void;
  /** What the API and SDK reported at warn or error. */
  readonly diagnostics: string[];
  stop(): Promise<void>;
}

export function recordSpans(): RecordedSpans {
  const diagnostics: string[] = [];
  const keep = (...args: unknown[]) => void diagnostics.push(args.map(String).join(' '));
  diag.setLogger({ error: keep, warn: keep, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(provider);
  return {
    spans: (name) => exporter.getFinishedSpans().filter((s) => name === undefined || s.name === name),
    reset: () => exporter.reset(),
    diagnostics,
    async stop() {
      trace.disable();
      context.disable();
      diag.disable();
      await provider.shutdown();
    },
  };
}

/** The span's parent span id, or null for a root span. */
export function parentOf(span: ReadableSpan): string | null {
  return span.parentSpanContext?.spanId ?? null;
}
