/** The logging port. Powertools' Logger and `console` both satisfy it. */
export interface Logger {
  debug(message: string, extra?: Record<string, unknown>): void;
  info(message: string, extra?: Record<string, unknown>): void;
  warn(message: string, extra?: Record<string, unknown>): void;
  error(message: string, extra?: Record<string, unknown>): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The fields that tie a log line to what it is about. Nodes, workers and the
 * Lambdas write them under these names, so one query (`rolloutId = "…"`)
 * finds a rollout's lines wherever they were written.
 */
export const CORRELATION_FIELDS = ['rolloutId', 'runId', 'requestId', 'leaseEpoch'] as const;
export type CorrelationField = (typeof CORRELATION_FIELDS)[number];

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** One log line as every runtime writes it (`--json` on nodes and workers; always in the Lambdas). */
export interface LogLine {
  readonly time: string;
  readonly level: LogLevel;
  readonly service: string;
  readonly message: string;
  readonly [field: string]: unknown;
}

/** The line's keys in a fixed order: the shape first, then the correlation fields, then the rest. */
export function logLine(level: LogLevel, service: string, message: string, fields: Record<string, unknown> = {}, time = new Date()): LogLine {
  const line: Record<string, unknown> = { time: time.toISOString(), level, service, message };
  for (const k of CORRELATION_FIELDS) if (fields[k] !== undefined) line[k] = fields[k];
  for (const [k, v] of Object.entries(fields)) if (!Object.hasOwn(line, k) && v !== undefined) line[k] = v;
  return line as LogLine;
}

/**
 * A logger writing one JSON line per call (or, `human`, one readable line),
 * with `fields` (the service's identity, a node id…) on every line.
 */
export function lineLogger(o: { service: string; write: (line: string) => void; fields?: Record<string, unknown>; human?: boolean; debug?: boolean }): Logger {
  const base = o.fields ?? {};
  const emit = (level: LogLevel) => (message: string, extra?: Record<string, unknown>) => {
    const line = logLine(level, o.service, message, { ...base, ...extra });
    if (!o.human) return o.write(`${JSON.stringify(line)}\n`);
    const { time, level: _l, service: _s, message: _m, ...rest } = line;
    o.write(`${time} ${level.padEnd(5)} ${message}${Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : ''}\n`);
  };
  return { debug: o.debug ? emit('debug') : () => undefined, info: emit('info'), warn: emit('warn'), error: emit('error') };
}
