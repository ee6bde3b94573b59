/**
 * What a caller may do, by scope (DESIGN.md "Trust boundaries"):
 *
 *   read      every GET: rollouts, runs, the cluster, /metrics, the status page's data
 *   signal    POST /events with a rollout signal (metrics, alarm changes)
 *   forward   POST /events with an AWS-shaped envelope (`source: aws.*`): what
 *             EventBridge would deliver (spot notices, CloudWatch alarm changes)
 *   operate   commands on a rollout: promote, promote-full, pause, resume, retry
 *   admin     create rollouts and runs, abort rollouts, cancel runs
 *   worker    a worker's steal request (POST /coordinator)
 *
 * Open without a credential: the status page's HTML (it holds no data; it asks
 * for a credential to read with) and /cluster/health (for load balancers).
 */
export const SCOPES = ['read', 'signal', 'forward', 'operate', 'admin', 'worker'] as const;
export type Scope = (typeof SCOPES)[number];

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}

/** The routes a request may make without a credential. */
export function isOpen(method: string, path: string): boolean {
  const m = method.toUpperCase();
  return (m === 'GET' || m === 'HEAD') && (path === '/' || path === '/cluster/health');
}

/** An AWS service's event, as EventBridge delivers it. */
function isAwsEnvelope(body: unknown): boolean {
  return typeof body === 'object' && body !== null && typeof (body as { source?: unknown }).source === 'string' && (body as { source: string }).source.startsWith('aws.') && 'detail-type' in body;
}

/** The scope a request needs; `body` is its parsed JSON (POST /events is judged by what it carries). */
export function scopeFor(method: string, path: string, body: unknown): Scope {
  const m = method.toUpperCase();
  if (m === 'GET' || m === 'HEAD' || m === 'OPTIONS') return 'read';
  if (path === '/events') return isAwsEnvelope(body) ? 'forward' : 'signal';
  if (path === '/coordinator') return 'worker';
  if (path === '/rollouts' || path === '/runs') return 'admin';
  if (/^\/rollouts\/[^/]+\/abort$/.test(path) || /^\/runs\/[^/]+\/cancel$/.test(path)) return 'admin';
  return 'operate';
}
