/** The worker SDK: your handler runs a run's items in your own process (docs/guides/own-worker.md#the-worker-sdk). */
declare function reindex(payload: unknown, o: { signal: AbortSignal; onPage: () => void }): Promise<{ pages: number }>;

// #region create-worker
import { createWorker } from 'rollout-control-plane/worker';

const worker = createWorker({
  runs: ['nightly-reindex'],
  databaseUrl: process.env.DATABASE_URL,   // or store: 'dynamodb', table, queue: <SQS URL>
  itemTimeoutMs: 30 * 60_000,              // optional: one attempt's cap (default: none)
  handler: async (item, { signal, heartbeat, progress, attempt, runId }) => {
    progress(`${runId}: attempt ${attempt ?? 'taken over'}`); // a heartbeat with a note, logged at debug
    const doc = await reindex(item.payload, { signal, onPage: heartbeat }); // each page says it is alive
    return { pages: doc.pages };           // the item's result (JSON)
  },
});
process.once('SIGTERM', () => worker.drain());
const summary = await worker.run();         // { exit, done, failedAttempts, …, runs: [...] }
// #endregion create-worker
void summary;
