/**
 * Work runs on a control-plane node (`rollout serve`, `npm start`): the
 * node's own coordinator scan is what ends a poison item there — there is no
 * SQS DLQ — so a run with one finishes and `--exit-when-done` workers exit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { WorkerAgent } from '../../shared/ledger/agent.js';
import type { ExecutionBackend } from '../../shared/ledger/backends.js';
import { contentId } from '../../shared/ledger/model.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';
import { uniqueName } from '../support/backends.js';
import { databaseForFile } from '../support/database.js';

const database = databaseForFile('node_runs');

describe.each([
  { kind: 'pglite', elector: 'static' },
  { kind: 'postgres', elector: 'lease' },
] as const)('runs on a node: $kind, $elector elector', ({ kind, elector }) => {
  let node: ControlPlaneNode;
  beforeAll(async () => {
    node = await ControlPlaneNode.open({
      nodeId: uniqueName('runs-node'),
      store: kind === 'pglite' ? { kind, dataDir: null } : { kind, databaseUrl: database.url },
      elector,
      leaseTtlSeconds: 2,
      heartbeatIntervalSeconds: 0.6,
      electionIntervalSeconds: 0.4,
      scanIntervalSeconds: 0.2,
    });
    await node.start();
  });
  afterAll(async () => {
    await node?.stop();
  });

  it('poison_item_ends_failed_on_a_node: the node’s scan fails it with the reason, the run finishes and an exit-when-done worker exits', async () => {
    const runId = uniqueName('run');
    const items = [{ poison: true }, { poison: false }, { n: 3 }];
    const res = await node.api()({ method: 'POST', path: '/runs', body: JSON.stringify({ id: runId, items }), actor: 'test' });
    expect(res.status).toBe(201);
    const alwaysFails: ExecutionBackend = (payload) =>
      (payload as { poison?: boolean }).poison ? Promise.reject(new Error('always fails')) : Promise.resolve('ok');
    const queue = new LedgerWorkQueue(node.sql, node.wake, runId, null).forWorker('w1');
    const worker = new Worker({ runId, workerId: 'w1', ledger: node.plane.stores.ledger, queue, backend: alwaysFails, waitSeconds: 1, heartbeatMs: 200 });
    const agent = new WorkerAgent({
      worker,
      registry: node.plane.registry,
      registration: { workerId: 'w1', instanceId: 'local-1', provider: 'local', runId },
      ledger: node.plane.stores.ledger,
      registryHeartbeatMs: 200,
      exitWhenDone: true,
    });
    const stop = new AbortController();
    const exit = agent.run(stop.signal);
    try {
      const poison = contentId(items[0]);
      // Bounded by the poll, not by the run: a node that never fails it leaves the worker waiting forever.
      await expect.poll(async () => (await node.plane.stores.ledger.get(runId, poison))?.state, { interval: 100, timeout: 30_000 }).toBe('failed');
      const item = (await node.plane.stores.ledger.get(runId, poison))!;
      expect(item.error).toMatch(/^poison: delivered 5 times without a result; last error: always fails/);
      expect((await exit).reason).toBe('done');
      expect(await node.plane.stores.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 2, failed: 1 });
    } finally {
      stop.abort();
      await exit.catch(() => undefined);
    }
  });
});
