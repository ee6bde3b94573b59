import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { ControlPlaneNode } from './node.js';
import { operateMetrics } from './operate-metrics.js';

/**
 * Prometheus metrics of a node (`GET /metrics`): the key metrics of a leader-elected
 * controller — leadership duration, elections, lease renewal success, node
 * health, last failover — read from the node when scraped.
 */
export function nodeMetrics(node: ControlPlaneNode): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ node_id: node.nodeId });
  collectDefaultMetrics({ register: registry, prefix: 'rollout_process_' });
  const renewals = () => node.plane.elector?.renewalCounts() ?? { renewals: 0, renewFailures: 0 };

  new Gauge({
    name: 'rollout_is_leader',
    help: '1 while this node holds promotion_leader',
    registers: [registry],
    collect() {
      this.set(node.state === 'leader' ? 1 : 0);
    },
  });
  new Gauge({
    name: 'rollout_leadership_term',
    help: 'Epoch of the lease this node leads under (or last saw)',
    registers: [registry],
    collect() {
      this.set(node.term);
    },
  });
  new Gauge({
    name: 'rollout_leadership_duration_seconds',
    help: 'How long this node has led without interruption (0 when following)',
    registers: [registry],
    collect() {
      this.set(node.stats.leaderSince === null ? 0 : (Date.now() - node.stats.leaderSince) / 1000);
    },
  });
  new Counter({
    name: 'rollout_leadership_seconds_total',
    help: 'Time this node has spent leading, over completed and current terms',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(node.stats.leadershipSecondsTotal + (node.stats.leaderSince === null ? 0 : (Date.now() - node.stats.leaderSince) / 1000));
    },
  });
  new Counter({
    name: 'rollout_elections_won_total',
    help: 'Elections this node won',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(node.stats.elections);
    },
  });
  new Counter({
    name: 'rollout_leader_changes_total',
    help: 'Changes of leader this node observed',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(node.stats.leaderChanges);
    },
  });
  new Counter({
    name: 'rollout_lease_renewals_total',
    help: 'Lease renewals by this node, by result',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const s = renewals();
      this.inc({ result: 'success' }, s.renewals);
      this.inc({ result: 'failure' }, s.renewFailures);
    },
  });
  new Gauge({
    name: 'rollout_last_failover_timestamp_seconds',
    help: 'When this node last saw a new leader take over (0: never)',
    registers: [registry],
    collect() {
      this.set(node.stats.lastFailoverAt === null ? 0 : node.stats.lastFailoverAt / 1000);
    },
  });
  new Gauge({
    name: 'rollout_cluster_nodes',
    help: 'Nodes in cluster_nodes as last read, by health',
    labelNames: ['health'] as const,
    registers: [registry],
    collect() {
      const healthy = node.member.nodes.filter((n) => n.isHealthy).length;
      this.set({ health: 'healthy' }, healthy);
      this.set({ health: 'unhealthy' }, node.member.nodes.length - healthy);
    },
  });
  new Counter({
    name: 'rollout_node_heartbeats_total',
    help: 'Heartbeats of this node, by result',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'success' }, node.stats.heartbeats);
      this.inc({ result: 'failure' }, node.stats.heartbeatFailures);
    },
  });
  new Gauge({
    name: 'rollout_store_reachable',
    help: '1 when the last store call of a loop succeeded',
    registers: [registry],
    collect() {
      this.set(node.stats.storeReachable ? 1 : 0);
    },
  });
  operateMetrics(node, registry);
  return registry;
}
