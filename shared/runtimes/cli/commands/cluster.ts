import type { CommandSpec } from '../command-spec.js';
import { run, TARGET_OPTIONS, type ClientOpts } from '../client-options.js';
import { table } from '../io.js';
import { int } from '../parsers.js';

type Status = { node_id: string; is_leader: boolean; leader: { leader_id: string; term: number; expires_at: string } | null };
const leaderLine = (l: Status['leader']) => (l ? `${l.leader_id} (epoch ${l.term}, lease until ${l.expires_at})` : 'none elected');

const statusAction = (o: ClientOpts) =>
  run(o, 'GET', '/cluster/status', undefined, (r) => {
    const s = r as Status;
    return `node ${s.node_id}${s.is_leader ? ' (leader)' : ''}\nleader ${leaderLine(s.leader)}`;
  });

/** `rollout status`: the same as `rollout cluster status`, at the top for the first thing one asks. */
export const statusCommand: CommandSpec = {
  name: 'status',
  description: 'The control plane at a glance: this node and the leader',
  options: TARGET_OPTIONS,
  action: statusAction,
};

/** `rollout cluster`: membership and leadership. */
export const clusterCommand: CommandSpec = {
  name: 'cluster',
  description: 'Cluster membership and leadership',
  commands: [
    { name: 'status', description: 'This node and the leader', options: TARGET_OPTIONS, action: statusAction },
    {
      name: 'leader',
      description: 'The current leader',
      options: TARGET_OPTIONS,
      action: (o: ClientOpts) => run(o, 'GET', '/cluster/leader', undefined, (r) => leaderLine(r as Status['leader'])),
    },
    {
      name: 'events',
      description: 'The newest cluster events (a node only)',
      options: [{ flags: '--limit <n>', description: 'how many, 1–500', parser: int('--limit'), default: 20 }, ...TARGET_OPTIONS],
      action: (o: ClientOpts & { limit: number }) =>
        run(o, 'GET', `/cluster/events?limit=${o.limit}`, undefined, (r) =>
          table(
            (r as { events: { timestamp: string; node_id: string; event_type: string; event_data: Record<string, unknown> | null }[] }).events.map((e) => ({
              time: e.timestamp,
              node: e.node_id,
              event: e.event_type,
              details: Object.entries(e.event_data ?? {})
                .filter(([k]) => k !== 'at')
                .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
                .join(' '),
            })),
            ['time', 'node', 'event', 'details'],
          ),
        ),
    },
  ],
};
