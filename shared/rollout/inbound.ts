import { z } from 'zod';

/**
 * Inbound rollout events (EventBridge detail-type + detail in AWS, the same
 * shape in-process). Validated strictly; a bad one is refused with the field
 * named, and the caller keeps it (DLQ / error log).
 */

const when = z.union([z.number().int().nonnegative(), z.string().datetime({ offset: true }).transform((s) => Date.parse(s))]);
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

export function parseInboundEvent(input: unknown): InboundEvent {
  const r = inboundEventSchema.safeParse(input);
  if (r.success) return r.data;
  throw new InvalidEventError(r.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`));
}
