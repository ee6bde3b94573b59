import { z } from 'zod';

/**
 * How long what has finished is kept, per deployment. What runs, and what a
 * paused rollout needs, is never pruned; see docs/operating/retention.md#what-is-kept.
 */
export const retentionSchema = z
  .object({
    /** A rollout that ended (completed, rolled back, aborted): its stages, readings, history and target records, this many days after it ended. */
    rolloutDays: z.number().positive().max(36_500).default(90),
    /** A run with nothing left to do: its items and their results, this many days after it finished (DynamoDB: after each item finished, by TTL), then the run itself. */
    runDays: z.number().positive().max(36_500).default(30),
  })
  .strict();

export type Retention = z.output<typeof retentionSchema>;

export const DEFAULT_RETENTION: Retention = retentionSchema.parse({});

export const DAY_MS = 86_400_000;

/** Items of finished runs deleted per pruning pass, at most (a pass a minute, on a node or the coordinator Lambda). */
export const PRUNE_RUN_ITEMS = 5_000;
