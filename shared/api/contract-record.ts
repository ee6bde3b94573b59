import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteDef } from './contract.js';

/**
 * The API's answers as the test suites see them, kept for checking against
 * the OpenAPI document (test/harness/contract-check.ts): with
 * ROLLOUT_CONTRACT_RECORD set to a directory, every process appends the
 * answers it gives, a few per route and status, to `<dir>/<pid>.jsonl`.
 * Unset (always, outside the tests), this does nothing.
 */
const dir = process.env.ROLLOUT_CONTRACT_RECORD;
const PER_KEY = 20;
const seen = new Map<string, number>();

export interface RecordedAnswer {
  readonly route: string;
  readonly status: number;
  readonly contentType: string | null;
  readonly body: unknown;
}

export function recordAnswer(
  route: RouteDef | null,
  res: { readonly status: number; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> },
): void {
  if (!dir || !route) return;
  const key = `${route.id} ${res.status}`;
  const n = seen.get(key) ?? 0;
  if (n >= PER_KEY) return;
  seen.set(key, n + 1);
  // Raw bodies (the page, metrics) are checked by their content type only.
  const raw = typeof res.body === 'object' && res.body !== null && 'contentType' in res.body && typeof res.body.contentType === 'string';
  const line: RecordedAnswer = {
    route: route.id,
    status: res.status,
    contentType: raw ? (res.body as { contentType: string }).contentType : res.status === 304 ? null : 'application/json',
    body: raw ? null : res.body,
  };
  try {
    appendFileSync(join(dir, `${process.pid}.jsonl`), `${JSON.stringify(line)}\n`);
  } catch {
    // A directory removed under a process that outlived its suite.
  }
}
