import { z } from 'zod';

/**
 * How long what has finished is kept, per deployment. What runs, and what a
 * paused rollout needs, is never pruned; see README, "What is kept" (a run's
 * items are not pruned yet: it says so).
 */
export const retentionSchema = z
  .object({
    /** A rollout that ended (completed, rolled back, aborted): its stages, readings, history and target records, this many days after it ended. */
    rolloutDays: z.number().positive().max(36_500).default(90),
  })
  .strict();

export type Retention = z.output<typeof retentionSchema>;

export const DEFAULT_RETENTION: Retention = retentionSchema.parse({});

export const DAY_MS = 86_400_000;
