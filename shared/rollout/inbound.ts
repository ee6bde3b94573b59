import { z } from 'zod';

/**
 * Inbound rollout events (EventBridge detail-type + detail in AWS, the same
 * shape in-process). Validated strictly; a bad one is refused with the field
 * named, and the caller keeps it (DLQ / error log).
 */

/** The latest instant a JavaScript Date can hold: anything beyond is no time at all. */
const MAX_TIME = 8_640_000_000_000_000;
const when = z.union([z.number().int().nonnegative().max(MAX_TIME), z.string().datetime({ offset: true }).transform((s) => Date.parse(s))]);
const id = z.string().trim().min(1).max(200);

export const inboundEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('rollout.created'), rolloutId: id }).strict(),
  z
    .object({
      type: z.literal('rollout.metrics_reported'),
      rolloutId: id,
      /** Defaults to the rollout's current attempt. */
      attempt: z.number().int().positive().optional(),
      /** Stage index or name. */
      stage: z.union([z.number().int().nonnegative(), z.string().trim().min(1)]),
      requests: z.number().int().nonnegative(),
      errors: z.number().int().nonnegative(),
      p99LatencyMs: z.number().nonnegative().nullable().default(null),
      observedAt: when,
    })
    .strict()
    .refine((e) => e.errors <= e.requests, { path: ['errors'], message: 'must not exceed requests' }),
  z
    .object({
      type: z.literal('rollout.alarm_changed'),
      alarm: z.string().trim().min(1).max(255),
      state: z.enum(['OK', 'ALARM', 'INSUFFICIENT_DATA']),
      changedAt: when,
    })
    .strict(),
  z.object({ type: z.literal('rollout.command'), rolloutId: id, command: z.string().min(1) }).strict(),
]);

export type InboundEvent = z.output<typeof inboundEventSchema>;

export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
  constructor(readonly issues: readonly string[]) {
    super(`invalid rollout event: ${issues.join('; ')}`);
  }
}

/**
 * How far ahead of our clock a reading's `observedAt` (or an alarm's
 * `changedAt`) may be: the clock skew we allow a reporter. Each stage keeps
 * its newest reading, so a reading from further ahead would outrank every
 * real one until its time came: a breach reported meanwhile would be "older"
 * and ignored. Within the margin, such a reading can hide later ones for at
 * most this long.
 */
export const READING_SKEW_MARGIN_MS = 30_000;

/** Refuses a signal stamped later than now + the margin, naming the field (InvalidEventError: the caller keeps the event). */
export function refuseFromTheFuture(event: InboundEvent, now: number, marginMs = READING_SKEW_MARGIN_MS): void {
  const stamped = event.type === 'rollout.metrics_reported' ? (['observedAt', event.observedAt] as const) : event.type === 'rollout.alarm_changed' ? (['changedAt', event.changedAt] as const) : null;
  if (!stamped || stamped[1] <= now + marginMs) return;
  const [field, at] = stamped;
  throw new InvalidEventError([
    `${field}: ${new Date(at).toISOString()} is later than now + ${marginMs / 1000} s (${new Date(now).toISOString()}); a reading from the future would outrank every real one — check the reporter's clock`,
  ]);
}

export function parseInboundEvent(input: unknown): InboundEvent {
  const r = inboundEventSchema.safeParse(input);
  if (r.success) return r.data;
  throw new InvalidEventError(r.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`));
}

const envelope = z.object({ 'detail-type': z.string().min(1), detail: z.record(z.string(), z.unknown()) }).passthrough();

/** An event as EventBridge delivers it (detail-type + detail), in AWS or on the local bus → a rollout event; refused with the field named. */
export function inboundFromEnvelope(event: unknown): InboundEvent {
  const env = envelope.safeParse(event);
  if (!env.success) throw new InvalidEventError(env.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`));
  return parseInboundEvent({ type: env.data['detail-type'], ...env.data.detail });
}
