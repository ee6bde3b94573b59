import { subscribe } from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

/**
 * The API's answers as the test suites see them, kept for checking against
 * the OpenAPI document (contract-check.ts): with ROLLOUT_CONTRACT_RECORD set
 * to a directory, every process started under the harness (run.ts preloads
 * this through NODE_OPTIONS: vitest's workers and the nodes the suites start)
 * appends the answers the router publishes on its diagnostics channel
 * (shared/api/router.ts, ANSWERS_CHANNEL), a few per route and status, to
 * `<dir>/<pid>.jsonl`. Plain JavaScript: it is loaded before any TypeScript
 * loader is.
 */
const dir = process.env.ROLLOUT_CONTRACT_RECORD;
const PER_KEY = 20;
const seen = new Map();

/** @param {{ route: { id: string }, res: { status: number, body: unknown } }} message */
function record({ route, res }) {
  const key = `${route.id} ${res.status}`;
  const n = seen.get(key) ?? 0;
  if (n >= PER_KEY) return;
  seen.set(key, n + 1);
  // Raw bodies (the page, metrics) are checked by their content type only.
  const raw = typeof res.body === 'object' && res.body !== null && 'contentType' in res.body && typeof res.body.contentType === 'string';
  const line = {
    route: route.id,
    status: res.status,
    contentType: raw ? res.body.contentType : res.status === 304 ? null : 'application/json',
    body: raw ? null : res.body,
  };
  try {
    appendFileSync(join(dir, `${process.pid}.jsonl`), `${JSON.stringify(line)}\n`);
  } catch {
    // A directory removed under a process that outlived its suite.
  }
}

if (dir) subscribe('rollout:api.answer', (message) => record(message));
