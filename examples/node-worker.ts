/**
 * A worker of a node (docs/guides/own-worker.md#a-worker-of-npm-start-or-of-a-cluster): no database, no AWS
 * credentials, only the node's URL (and, with authentication on, a token
 * with the worker scope).
 */
// #region node-worker
import { createWorker } from 'rollout-control-plane/worker';

const worker = createWorker({
  runs: ['thumbnails'],
  url: 'http://127.0.0.1:8000',             // the node: npm start, or nginx in front of a cluster
  token: process.env.ROLLOUT_TOKEN,          // with authentication on: a worker-scope token (bound to its runs)
  exitWhenDone: true,                        // return within a second of the run's last item
  handler: (item) => ({ size: JSON.stringify(item.payload).length }),
});
const summary = await worker.run();
console.log(`${summary.exit}: ${summary.done} done, ${summary.failedAttempts} failed attempts`);
// #endregion node-worker
