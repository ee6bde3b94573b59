import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { parseConfig } from '../config.js';
import { canonicalJson } from './model.js';

/**
 * Execution backends for work items. A backend gets the item's payload and an
 * AbortSignal that fires the moment the worker learns its claim is lost
 * (stolen, re-pended, fenced), so abandoned work stops early.
 */
export type ExecutionBackend = (payload: unknown, signal: AbortSignal, item?: ItemRef) => Promise<unknown>;

/** Which item a backend is running. */
export interface ItemRef {
  readonly runId: string;
  readonly itemId: string;
  /** How many times the item's message has been delivered, 1 the first time; null when it was taken over from another worker (a steal). */
  readonly attempt: number | null;
}

export class BackendError extends Error {
  override readonly name = 'BackendError';
}

const mockSchema = z.object({
  /** How long each item takes. */
  durationMs: z.number().int().nonnegative().default(0),
  /** Fraction of items that fail, chosen deterministically from the payload (so a retry fails again: a poison item). */
  failureRate: z.number().min(0).max(1).default(0),
});

/**
 * Deterministic mock: the result is a hash of the payload; failures are a
 * function of the payload, so the same item always behaves the same.
 */
export function mockBackend(options: z.input<typeof mockSchema> = {}): ExecutionBackend {
  const o = parseConfig('mock backend', mockSchema, options);
  return async (payload, signal) => {
    const digest = createHash('sha256').update(canonicalJson(payload)).digest();
    if (o.durationMs > 0) await sleep(o.durationMs, undefined, { signal });
    signal.throwIfAborted();
    if (digest.readUInt32BE(0) / 0xffffffff < o.failureRate) throw new BackendError(`mock failure for payload ${digest.toString('hex').slice(0, 12)}`);
    return { output: digest.toString('hex') };
  };
}

/** timeoutMs null: no limit of ours; the item is kept by its heartbeats for as long as the call takes. */
const httpSchema = z.object({ url: z.string().url(), timeoutMs: z.number().int().positive().nullable().default(60_000) });

/** POST the payload as JSON to a URL (e.g. an inference server); the result is the response body (JSON, else text). */
export function httpBackend(options: z.input<typeof httpSchema>): ExecutionBackend {
  const o = parseConfig('http backend', httpSchema, options);
  return async (payload, signal) => {
    const res = await fetch(o.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
      signal: o.timeoutMs === null ? signal : AbortSignal.any([signal, AbortSignal.timeout(o.timeoutMs)]),
    });
    const text = await res.text();
    if (!res.ok) throw new BackendError(`POST ${o.url}: HTTP ${res.status} ${text.slice(0, 200)}`);
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  };
}
