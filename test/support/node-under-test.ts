import { freePort } from '../../infra/local/processes.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode, type NodeConfigInput } from '../../shared/runtimes/node/node.js';

/** A node on embedded PGlite (static elector) served over HTTP on loopback, as `npm start` serves it, with `extra` configuration. */
export async function nodeUnderTest(extra: Partial<NodeConfigInput> = {}): Promise<{ node: ControlPlaneNode; url: string; close(): Promise<void> }> {
  const port = await freePort();
  const node = await ControlPlaneNode.open({ nodeId: 'target-node', port, store: { kind: 'pglite', dataDir: null }, elector: 'static', scanIntervalSeconds: 1, ...extra });
  const server = await serveApi(nodeApi(node, nodeMetrics(node)), { port });
  await node.start();
  return {
    node,
    url: server.url,
    close: async () => {
      await server.close();
      await node.stop();
    },
  };
}
