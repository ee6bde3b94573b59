import { z } from 'zod';
import { iso, json, read, refused, route } from '../route.js';

/** Who leads, and health: every runtime answers these (a node with more of what it knows: api/cluster.ts). */

export const leader = z
  .object({
    leader_id: z.string(),
    term: z.number().int(),
    hostname: z.string().nullable(),
    api_url: z.string().nullable(),
    acquired_at: iso(),
    renewed_at: iso(),
    expires_at: iso(),
  })
  .meta({ id: 'Leader' });
const nodeState = z.enum(['leader', 'follower', 'candidate', 'stopped']);
const clusterStatusBody = read({
  node_id: z.string(),
  hostname: z.string().nullable().optional(),
  api_url: z.string().nullable().optional(),
  state: nodeState,
  is_leader: z.boolean(),
  leader_id: z.string().nullable(),
  term: z.number().int(),
  elector: z.enum(['lease', 'advisory-lock', 'static']),
  leader: leader.nullable(),
  cluster_size: z.number().int().optional(),
  healthy_nodes: z.number().int().optional(),
  nodes: z
    .array(
      z.object({
        node_id: z.string(),
        hostname: z.string().nullable(),
        port: z.number().int().nullable(),
        api_url: z.string().nullable(),
        state: nodeState,
        term: z.number().int(),
        is_healthy: z.boolean(),
        last_heartbeat: iso(),
      }),
    )
    .optional(),
  time: iso(),
});
const healthBody = z.object({
  status: z.enum(['healthy', 'degraded']),
  clustering: z.enum(['enabled', 'disabled']),
  node_id: z.string(),
  state: nodeState,
  is_leader: z.boolean(),
  leader_id: z.string().nullable(),
  cluster_size: z.number().int().optional(),
  cluster_ready: z.boolean(),
  /** reachable, or unreachable with why. */
  store: z.string(),
  timestamp: z.number(),
  version: z.string(),
});

export const clusterStatus = route({
  id: 'clusterStatus',
  method: 'GET',
  path: '/cluster/status',
  tag: 'cluster',
  scope: 'read',
  summary: 'this process, who leads, and (on a node) the members',
  responses: { 200: json('the cluster as this process sees it', clusterStatusBody), 503: refused('the store cannot be read and nothing was read before') },
});

export const clusterLeader = route({
  id: 'clusterLeader',
  method: 'GET',
  path: '/cluster/leader',
  tag: 'cluster',
  scope: 'read',
  summary: 'who holds the promotion lease',
  responses: { 200: json('the leader', read(leader.shape)), 503: refused('no leader elected, or the store cannot be read') },
});

export const clusterHealth = route({
  id: 'clusterHealth',
  method: 'GET',
  path: '/cluster/health',
  tag: 'cluster',
  scope: null,
  summary: 'liveness: 200 while the process answers, with whether the store answers and a leader is known',
  responses: { 200: json('healthy or degraded, with why', healthBody) },
});

export const openapi = route({
  id: 'openapi',
  method: 'GET',
  path: '/openapi.json',
  tag: 'cluster',
  scope: 'read',
  summary: 'this document',
  responses: { 200: json('the OpenAPI 3.1 document of this API', z.record(z.string(), z.unknown())) },
});
