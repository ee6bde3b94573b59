import { z } from 'zod';
import { TRANSITION_KINDS } from '../../rollout/transition.js';
import { badRequest, iso, json, notLeader, pageQuery, read, refused, route, toLeader, unreadable } from '../route.js';

/** What only a node serves: its page, metrics and events, signals, and a remote worker's steal requests. */

export const clusterEvents = route({
  id: 'clusterEvents',
  method: 'GET',
  path: '/cluster/events',
  tag: 'node',
  nodeOnly: true,
  scope: 'read',
  summary: 'the newest cluster events (elections, joins, leaves)',
  query: z.object({ limit: pageQuery(500, 50) }),
  responses: {
    200: json(
      'newest first',
      read({ events: z.array(z.object({ id: z.number().int(), node_id: z.string(), event_type: z.string(), event_data: z.unknown(), timestamp: iso() })) }),
    ),
    400: badRequest,
    503: unreadable,
  },
});

export const statusPage = route({
  id: 'statusPage',
  method: 'GET',
  path: '/',
  tag: 'node',
  nodeOnly: true,
  scope: null,
  summary: "the status page (it reads /ui/state with the viewer's credential)",
  responses: { 200: { description: 'HTML', content: { type: 'text/html' } } },
});

export const metrics = route({
  id: 'metrics',
  method: 'GET',
  path: '/metrics',
  tag: 'node',
  nodeOnly: true,
  scope: 'read',
  summary: 'Prometheus metrics',
  responses: { 200: { description: 'the text exposition format', content: { type: 'text/plain' } } },
});

export const uiState = route({
  id: 'uiState',
  method: 'GET',
  path: '/ui/state',
  tag: 'node',
  nodeOnly: true,
  scope: 'read',
  summary: 'everything the status page shows, in one read',
  responses: {
    200: json(
      'cluster, recent rollouts and runs, events',
      read({
        cluster: z.record(z.string(), z.unknown()),
        notes: z.array(z.string()),
        rollouts: z.array(z.record(z.string(), z.unknown())),
        runs: z.array(z.record(z.string(), z.unknown())),
        events: z.array(z.record(z.string(), z.unknown())),
      }),
    ),
    503: unreadable,
  },
});

export const postEvent = route({
  id: 'postEvent',
  method: 'POST',
  path: '/events',
  tag: 'node',
  nodeOnly: true,
  scope: 'signal',
  summary: 'a rollout signal (metrics, alarm, created, command), or any event as EventBridge delivers it (scope forward for aws.* sources)',
  anyNode: true,
  body: z.record(z.string(), z.unknown()).describe('a signal ({type, rolloutId, …}) or an envelope ({source, detail-type, detail})'),
  responses: {
    202: json(
      'stored and evaluated (a signal), or delivered to the functions its rules name (an envelope)',
      z.union([
        z.object({
          /** stored, stale (older than what is kept) or none (nothing to keep). */
          stored: z.enum(['stored', 'stale', 'none']),
          /** False when the node asked does not lead: the leader evaluates it within one tick. */
          evaluated: z.boolean(),
          actions: z.array(z.object({ rolloutId: z.string(), transition: z.enum(TRANSITION_KINDS), applied: z.boolean() })),
        }),
        z.object({ delivered: z.array(z.object({ function: z.string(), result: z.unknown() })) }),
      ]),
    ),
    400: badRequest,
  },
});

export const coordinator = route({
  id: 'coordinator',
  method: 'POST',
  path: '/coordinator',
  tag: 'node',
  nodeOnly: true,
  scope: 'worker',
  summary: "a remote worker's steal request (the coordinator function's invoke)",
  body: z.record(z.string(), z.unknown()),
  responses: {
    200: json("the coordinator's answer", z.unknown()),
    400: badRequest,
    403: refused('a worker asking outside its credential: another run or worker id, or an action other than steal'),
    503: notLeader,
    307: toLeader,
  },
});
