/** How often a worker writes an item it holds (heartbeats) and extends its message, as shared/ledger/worker/ does. */
import { extensionDue, heartbeatDue, HEARTBEAT_ROUNDS } from '../../shared/ledger/worker/index.js';

export interface HeldTimes {
  readonly batch: number;
  readonly chunk: number;
  readonly itemSeconds: number;
  readonly dynamodbSeconds: number;
  readonly sqsSeconds: number;
  /** Ledger requests in flight per round (DynamoLedgerStore concurrency). */
  readonly concurrency: number;
  readonly heartbeatSeconds: number;
  readonly visibilitySeconds: number;
}

/**
 * What a worker writes for a received batch's items while it holds them, per
 * item, as worker.ts does it: heartbeat rounds HEARTBEAT_ROUNDS times an
 * interval at a phase of their own, each writing the items `heartbeatDue` and
 * extending the messages `extensionDue` (one ChangeMessageVisibilityBatch of
 * up to ten a round). Times from the claims (sent at 0): the messages are
 * extended once the claims are in, chunk m starts at m chunk-times after
 * that, an item is held until its chunk's acks are in. Averaged over the
 * rounds' phase.
 */
export function heldWrites(t: HeldTimes): { heartbeats: number; extensions: number; extensionCalls: number } {
  const hb = t.heartbeatSeconds * 1000;
  const period = hb / HEARTBEAT_ROUNDS;
  const visibility = t.visibilitySeconds * 1000;
  const ld = t.dynamodbSeconds * 1000;
  const rounds = (n: number) => Math.ceil(n / t.concurrency);
  const extendedAt = rounds(t.batch) * ld;
  const chunkMs = 2 * rounds(t.chunk) * ld + t.sqsSeconds * 1000 + t.chunk * t.itemSeconds * 1000;
  const start = Array.from({ length: t.batch }, (_, k) => extendedAt + t.sqsSeconds * 1000 + Math.floor(k / t.chunk) * chunkMs);
  const end = start.map((s) => s + 2 * rounds(t.chunk) * ld + t.chunk * t.itemSeconds * 1000);
  const last = Math.max(...end);
  const PHASES = 256;
  let beats = 0;
  let extensions = 0;
  let calls = 0;
  for (let p = 0; p < PHASES; p++) {
    const wrote = start.map(() => 0);
    const visibleUntil = start.map(() => extendedAt + visibility);
    for (let r = ((p + 0.5) / PHASES) * period; r < last; r += period) {
      let extended = 0;
      for (let k = 0; k < t.batch; k++) {
        if (r >= end[k]!) continue;
        if (r >= start[k]! && wrote[k]! < start[k]!) wrote[k] = start[k]!;
        if (heartbeatDue(r, wrote[k]!, hb)) {
          beats++;
          wrote[k] = r;
        }
        if (extensionDue(r, visibleUntil[k]!, visibility, hb)) {
          extended++;
          visibleUntil[k] = r + visibility;
        }
      }
      extensions += extended;
      calls += Math.ceil(extended / 10);
    }
  }
  const per = PHASES * t.batch;
  return { heartbeats: beats / per, extensions: extensions / per, extensionCalls: calls / per };
}
