/**
 * A control-plane node on PostgreSQL serving its HTTP API, that may reach the
 * given origins (a test's Prometheus): what the gate tests run rollouts on.
 */
import { freePort } from '../../infra/local/processes.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import type { GateJson } from '../../shared/api/rollout-json.js';
import type { NginxTarget } from '../../shared/actuation/targets.js';

export interface ServedNode {
  readonly node: ControlPlaneNode;
  readonly url: string;
  close(): Promise<void>;
}

export async function servedNode(o: {
  nodeId: string;
  databaseUrl: string;
  origins: readonly string[];
  /** Actuation targets by name, for a spec's `actuators`. */
  targets?: Record<string, NginxTarget>;
}): Promise<ServedNode> {
  const port = await freePort();
  // The operator allows the test's servers by address: a loopback server is reached only so.
  const node = await ControlPlaneNode.open({
    nodeId: o.nodeId,
    port,
    store: { kind: 'postgres', databaseUrl: o.databaseUrl },
    elector: 'static',
    tickIntervalSeconds: 0.25,
    outbound: { origins: [...o.origins] },
    ...(o.targets ? { targets: o.targets } : {}),
  });
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

/** A two-stage spec of checkout (stable v1) whose canary stage, at 10 %, holds one provider gate. */
export const gatedSpec = (version: string, gate: unknown, bakeSeconds: number) => ({
  target: { service: 'checkout', version, stableVersion: 'v1' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds, gates: { providers: [gate] } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});

/** What the gate tests read of a rollout. */
export interface GatedRollout {
  state: string;
  stateReason: string | null;
  gates: GateJson[];
}

/** POST /rollouts with `spec` under `id`: the raw answer. */
export const postRollout = (url: string, id: string, spec: unknown) =>
  fetch(`${url}/rollouts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, spec }) });

export const getRollout = async (url: string, id: string) => (await (await fetch(`${url}/rollouts/${id}`)).json()) as GatedRollout;
