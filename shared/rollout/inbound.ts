import { z } from 'zod';
import { COHORTS, MAX_REPORT_SAMPLES } from './cohort-signals.js';

/**
 * Inbound rollout events (EventBridge detail-type + detail in AWS, the same
 * shape in-process). Validated strictly; a bad one is refused with the field
 * named, and the caller keeps it (DLQ / error log).
 */

/** The latest instant a JavaScript Date can hold: anything beyond is no time at all. */
const MAX_TIME = 8_640_000_000_000_000;
/** The inbound type of a native CloudWatch alarm state change. */
export const CLOUDWATCH_ALARM_CHANGE = 'cloudwatch.alarm_state_change';
/** How AWS names the event on the default bus. */
export const CLOUDWATCH_SOURCE = 'aws.cloudwatch';
export const CLOUDWATCH_ALARM_DETAIL_TYPE = 'CloudWatch Alarm State Change';

/** Integers as their columns hold them: attempt and stage are `integer`, counts `bigint` read as exact JS numbers. */
const INT32_MAX = 2_147_483_647;
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

const when = z.union([
  z.number().int().nonnegative().max(MAX_TIME),
  z
    .string()
    .datetime({ offset: true })
    .transform((s) => Date.parse(s)),
]);
const id = z.string().trim().min(1).max(200);

export const inboundEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('rollout.created'), rolloutId: id }).strict(),
  z
    .object({
      type: z.literal('rollout.metrics_reported'),
      rolloutId: id,
      /** Defaults to the rollout's current attempt. */
      attempt: z.number().int().positive().max(INT32_MAX).optional(),
      /** Stage index or name. */
      stage: z.union([z.number().int().nonnegative().max(INT32_MAX), z.string().trim().min(1).max(100)]),
      requests: count,
      errors: count,
      p99LatencyMs: z.number().nonnegative().max(86_400_000).nullable().default(null),
      observedAt: when,
      /**
       * A cohort's report (cohort-signals.ts), for the stage's `signals` gates: what the canary or the
       * baseline served since this reporter's previous report. Named, or by the version that served it.
       * Without either, the stage's own reading, judged by its thresholds (newest wins).
       */
      cohort: z.enum(COHORTS).optional(),
      version: z.string().trim().min(1).max(200).optional(),
      /** Who reports, when several reporters count one cohort (each instance of an application): their reports add up. */
      reporter: z.string().trim().min(1).max(200).optional(),
      /** Latencies in ms that the cohort served in the interval (a sample of them, at most MAX_REPORT_SAMPLES). */
      samples: z.array(z.number().nonnegative().max(86_400_000)).min(1).max(MAX_REPORT_SAMPLES).optional(),
    })
    .strict()
    .refine((e) => e.errors <= e.requests, { path: ['errors'], message: 'must not exceed requests' })
    .superRefine((e, ctx) => {
      if (e.cohort !== undefined && e.version !== undefined)
        ctx.addIssue({ code: 'custom', path: ['version'], message: 'name the cohort or the version that served it, not both' });
      const cohorted = e.cohort !== undefined || e.version !== undefined;
      for (const f of ['reporter', 'samples'] as const) {
        if (!cohorted && e[f] !== undefined)
          ctx.addIssue({ code: 'custom', path: [f], message: `${f} goes with a cohort's report: give cohort (canary, baseline) or version` });
      }
      if (cohorted && e.p99LatencyMs !== null)
        ctx.addIssue({
          code: 'custom',
          path: ['p99LatencyMs'],
          message: "a cohort's report carries its latencies as samples; p99LatencyMs goes with the stage's own reading",
        });
    }),
  z
    .object({
      type: z.literal('rollout.alarm_changed'),
      alarm: z.string().trim().min(1).max(255),
      state: z.enum(['OK', 'ALARM', 'INSUFFICIENT_DATA']),
      changedAt: when,
    })
    .strict(),
  z.object({ type: z.literal('rollout.command'), rolloutId: id, command: z.string().min(1).max(64) }).strict(),
  /** A CloudWatch alarm's state change, as AWS puts it on the default bus (see `inboundFromEnvelope`). */
  z
    .object({
      type: z.literal(CLOUDWATCH_ALARM_CHANGE),
      alarm: z.string().trim().min(1).max(255),
      state: z.enum(['OK', 'ALARM', 'INSUFFICIENT_DATA']),
      changedAt: when,
      region: z.string().max(64).optional(),
    })
    .strict(),
]);

export type InboundEvent = z.output<typeof inboundEventSchema>;
/** A signal as a client sends it (`RolloutClient.publishSignal`): the schema's input, so a misspelt field or type does not compile. */
export type SignalInput = z.input<typeof inboundEventSchema>;

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
  const stamped =
    event.type === 'rollout.metrics_reported'
      ? (['observedAt', event.observedAt] as const)
      : event.type === 'rollout.alarm_changed' || event.type === CLOUDWATCH_ALARM_CHANGE
        ? (['changedAt', event.changedAt] as const)
        : null;
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

const envelope = z.object({ source: z.string().optional(), 'detail-type': z.string().min(1), detail: z.record(z.string(), z.unknown()) }).passthrough();

/** AWS writes `2019-10-02T17:04:40.989+0000`: an offset without its colon, which ISO-8601 parsers may refuse. */
const awsTimestamp = z
  .string()
  .max(64)
  .transform((s, ctx) => {
    const ms = Date.parse(s.replace(/([+-]\d{2})(\d{2})$/, '$1:$2'));
    if (Number.isNaN(ms)) {
      ctx.addIssue({ code: 'custom', message: `not a timestamp: ${JSON.stringify(s)}` });
      return z.NEVER;
    }
    return ms;
  });

/**
 * The detail of AWS's `CloudWatch Alarm State Change` event (metric and
 * composite alarms alike). Only what a gate needs is read; the rest of AWS's
 * detail (configuration, reasonData, previousState) passes through unread.
 */
const cloudwatchAlarmDetail = z
  .object({
    alarmName: z.string().trim().min(1).max(255),
    state: z.object({ value: z.enum(['OK', 'ALARM', 'INSUFFICIENT_DATA']), timestamp: awsTimestamp }).passthrough(),
  })
  .passthrough();

/**
 * An event as EventBridge delivers it (source, detail-type + detail), in AWS
 * or on the local bus → an inbound event; refused with the field named. Our
 * own signals carry their type as the detail-type; AWS's CloudWatch alarm
 * state changes are read from AWS's own shape.
 */
export function inboundFromEnvelope(event: unknown): InboundEvent {
  const env = envelope.safeParse(event);
  if (!env.success) throw new InvalidEventError(issues(env.error));
  if (env.data.source === CLOUDWATCH_SOURCE && env.data['detail-type'] === CLOUDWATCH_ALARM_DETAIL_TYPE) {
    const d = cloudwatchAlarmDetail.safeParse(env.data.detail);
    if (!d.success) throw new InvalidEventError(issues(d.error, 'detail'));
    const region = typeof (event as { region?: unknown }).region === 'string' ? String((event as { region: string }).region) : undefined;
    return parseInboundEvent({
      type: CLOUDWATCH_ALARM_CHANGE,
      alarm: d.data.alarmName,
      state: d.data.state.value,
      changedAt: d.data.state.timestamp,
      ...(region ? { region } : {}),
    });
  }
  return parseInboundEvent({ type: env.data['detail-type'], ...env.data.detail });
}

function issues(error: z.ZodError, under?: string): string[] {
  return error.issues.map((i) => `${[...(under ? [under] : []), ...i.path].join('.') || '(root)'}: ${i.message}`);
}
