import { z } from 'zod';
import type { StealNotice } from './coordinator.js';

/**
 * What a worker outside the coordinator's process sends it and gets back,
 * whatever carries it (a Lambda invocation, HTTP). The answer is checked by
 * the worker's EpochGuard either way; a lost answer costs nothing (the items
 * it moved are adopted by the worker's reconcile).
 */

export const coordinatorRequest = z.discriminatedUnion('action', [
  z.object({ action: z.literal('steal'), runId: z.string().min(1), workerId: z.string().min(1) }).strict(),
  z.object({ action: z.literal('scan'), runId: z.string().min(1) }).strict(),
  /** The schedule's request: scan every open run. */
  z.object({ action: z.literal('scan-all') }).strict(),
]);
export type CoordinatorRequest = z.infer<typeof coordinatorRequest>;

const noticeSchema = z.object({ epoch: z.number().int().nonnegative(), victim: z.string().nullable(), items: z.array(z.string()) });
const replySchema = z.union([
  z.object({ leader: z.literal(true), notice: noticeSchema }),
  z.object({ leader: z.literal(false), holder: z.string().nullable() }),
]);
export type CoordinatorReply = z.infer<typeof replySchema>;

/** A reply as a steal notice; a malformed one is an error naming the field and who sent it. */
export function noticeFromReply(reply: unknown, from: string): StealNotice {
  const parsed = replySchema.safeParse(reply);
  if (!parsed.success)
    throw new Error(`coordinator reply from ${from} is malformed: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  // No coordinator right now (it is being elected): no work to hand out, ask again later.
  return parsed.data.leader ? parsed.data.notice : { epoch: 0, victim: null, items: [] };
}
