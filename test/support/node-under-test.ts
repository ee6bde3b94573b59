import { freePort } from '../../infra/local/processes.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { readTls } from '../../shared/runtimes/node/node-command.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode, type NodeConfigInput } from '../../shared/runtimes/node/node.js';

/** A node on embedded PGlite (static elector) served over HTTP on loopback, as `npm start` serves it, with `extra` configuration. */
export async function nodeUnderTest(extra: Partial<NodeConfigInput> = {}): Promise<{ node: ControlPlaneNode; url: string; close(): Promise<void> }> {
  const port = await freePort();
  const node = await ControlPlaneNode.open({
    nodeId: 'target-node',
    port,
    store: { kind: 'pglite', dataDir: null },
    elector: 'static',
    scanIntervalSeconds: 1,
    ...extra,
  });
  // As `rollout serve` and `npm start` listen: with the node's TLS files when it has them.
  const server = await serveApi(nodeApi(node, nodeMetrics(node)), { port, ...(node.config.tls ? { tls: readTls(node.config.tls) } : {}) });
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
