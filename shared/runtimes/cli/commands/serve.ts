import type { CommandSpec } from '../command-spec.js';
import { stderrLogger } from '../io.js';
import { days, int, seconds } from '../parsers.js';
import { TRUST_OPTIONS, trustConfig, type TrustOpts } from '../trust.js';
import { DEFAULT_RETENTION } from '../../../retention.js';

/** `rollout serve`: one node of a cluster on PostgreSQL. */
export const serveCommand: CommandSpec = {
  name: 'serve',
  description: 'Run a cluster node on PostgreSQL: membership, leader election, leader-only promoters and coordinators, the API, /metrics and the status page',
  options: [
    ...TRUST_OPTIONS,
    { flags: '--node-id <id>', description: 'unique node id', env: 'CLUSTER_NODE_ID', required: true },
    { flags: '--hostname <name>', description: "this node's host name", env: 'CLUSTER_HOSTNAME' },
    { flags: '--port <port>', description: 'HTTP port', parser: int('--port'), env: 'ROLLOUT_PORT', default: 8000 },
    { flags: '--host <host>', description: 'interface to listen on', env: 'ROLLOUT_HOST', default: '127.0.0.1' },
    { flags: '--api-url <url>', description: 'the URL other nodes and clients reach this node at (default http://<host>:<port>)', env: 'ROLLOUT_API_URL' },
    { flags: '--database-url <url>', description: 'PostgreSQL connection string', env: 'DATABASE_URL', required: true },
    {
      flags: '--elector <kind>',
      description: 'how the leader is chosen',
      choices: ['lease', 'advisory-lock', 'static'],
      env: 'ROLLOUT_ELECTOR',
      default: 'lease',
    },
    { flags: '--lease-ttl <s>', description: 'leadership lease duration', parser: seconds('--lease-ttl'), env: 'CLUSTER_LEASE_TTL', default: 30 },
    {
      flags: '--heartbeat-interval <s>',
      description: 'node heartbeat and lease renewal',
      parser: seconds('--heartbeat-interval'),
      env: 'CLUSTER_HEARTBEAT_INTERVAL',
      default: 10,
    },
    {
      flags: '--election-interval <s>',
      description: 'how often a follower tries for the lease',
      parser: seconds('--election-interval'),
      env: 'CLUSTER_ELECTION_INTERVAL',
      default: 5,
    },
    {
      flags: '--election-timeout <s>',
      description: 'a node silent this long is unhealthy',
      parser: seconds('--election-timeout'),
      env: 'CLUSTER_ELECTION_TIMEOUT',
      default: 15,
    },
    {
      flags: '--monitor-interval <s>',
      description: 'cluster monitor (leader)',
      parser: seconds('--monitor-interval'),
      env: 'CLUSTER_MONITOR_INTERVAL',
      default: 15,
    },
    { flags: '--tick-interval <s>', description: 'BatchPromoter tick', parser: seconds('--tick-interval'), env: 'ROLLOUT_TICK_INTERVAL' },
    {
      flags: '--scan-interval <s>',
      description: "run coordinators' failure scan (silent workers, unsent items, poison)",
      parser: seconds('--scan-interval'),
      env: 'ROLLOUT_SCAN_INTERVAL',
      default: 5,
    },
    { flags: '--redirect-writes', description: 'followers answer writes with 307 to the leader instead of 503', env: 'ROLLOUT_REDIRECT_WRITES' },
    {
      flags: '--retain-rollouts <days>',
      description: 'a rollout that ended is deleted, whole, this many days after',
      parser: days('--retain-rollouts'),
      env: 'ROLLOUT_RETAIN_ROLLOUTS_DAYS',
      default: DEFAULT_RETENTION.rolloutDays,
    },
    {
      flags: '--retain-runs <days>',
      description: 'a finished run is deleted with its items and results this many days after',
      parser: days('--retain-runs'),
      env: 'ROLLOUT_RETAIN_RUNS_DAYS',
      default: DEFAULT_RETENTION.runDays,
    },
    { flags: '--json', description: 'logs as JSON lines', default: false },
  ],
  action: async (
    o: TrustOpts & {
      retainRollouts: number;
      retainRuns: number;
      nodeId: string;
      hostname?: string;
      port: number;
      host: string;
      apiUrl?: string;
      databaseUrl: string;
      elector: 'lease' | 'advisory-lock' | 'static';
      leaseTtl: number;
      heartbeatInterval: number;
      electionInterval: number;
      electionTimeout: number;
      monitorInterval: number;
      tickInterval?: number;
      scanInterval: number;
      redirectWrites?: boolean | string;
      json: boolean;
    },
  ) => {
    const logger = stderrLogger(o.json, 'rollout-node', { nodeId: o.nodeId });
    const node = await import('../../node/node-command.js');
    await node.serveCommand(
      {
        nodeId: o.nodeId,
        ...(o.hostname ? { hostname: o.hostname } : {}),
        host: o.host,
        port: o.port,
        ...(o.apiUrl ? { apiUrl: o.apiUrl } : {}),
        store: { kind: 'postgres', databaseUrl: o.databaseUrl },
        elector: o.elector,
        leaseTtlSeconds: o.leaseTtl,
        heartbeatIntervalSeconds: o.heartbeatInterval,
        electionIntervalSeconds: o.electionInterval,
        electionTimeoutSeconds: o.electionTimeout,
        monitorIntervalSeconds: o.monitorInterval,
        ...(o.tickInterval ? { tickIntervalSeconds: o.tickInterval } : {}),
        scanIntervalSeconds: o.scanInterval,
        retention: { rolloutDays: o.retainRollouts, runDays: o.retainRuns },
        redirectWrites: o.redirectWrites === true || o.redirectWrites === 'true' || o.redirectWrites === '1',
        ...trustConfig(o),
      },
      logger,
    );
  },
};
