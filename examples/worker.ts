/**
 * Your worker module: a WorkerFleet bundles it and runs it under `rollout
 * worker --module`; `createWorker` (client.ts) runs the same handler in a
 * process of yours.
 */
// #region handler
// worker.ts: your code runs each item; what it returns is the item's result
import type { WorkHandler } from 'rollout-control-plane/worker';
const reindex: WorkHandler = async (item, { signal, heartbeat }) => {
  heartbeat(); // still at it: the item stays yours (a long item calls it now and then)
  const answer = await fetch(`https://search.internal/reindex/${item.id}`, { method: 'POST', body: JSON.stringify(item.payload), signal });
  if (!answer.ok) throw new Error(`reindex: HTTP ${answer.status}`); // tried again, 5 times in all, then failed with this reason
  return { indexed: item.id };
};
export default reindex;
// #endregion handler
