import { readFileSync } from 'node:fs';
import { errorMessage, lineLogger, type Logger } from '../../log.js';
import { own } from '../../own.js';
import { UsageError } from './errors.js';

/** What the commands share for reading files and writing logs and tables. */

/** Logs on stderr: readable lines, or (`--json`) the one shape every runtime writes, with `fields` on each line. */
export function stderrLogger(json: boolean, service: string, fields: Record<string, unknown> = {}): Logger {
  return lineLogger({ service, write: (line) => process.stderr.write(line), human: !json, ...(json ? { fields } : {}) });
}

/** `npm start` keeps the terminal for its progress: only warnings and errors are logged. */
export function quiet(logger: Logger): Logger {
  return { ...logger, info: () => undefined };
}

export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown): string => (v === null || v === undefined ? '-' : typeof v === 'string' ? v : JSON.stringify(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(own(r, c)).length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(own(r, c)))))].join('\n');
}

export function readPem(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${errorMessage(err)}`);
  }
}

export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${errorMessage(err)}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not JSON: ${errorMessage(err)}`);
  }
}
