/**
 * What a caller may do, by scope (DESIGN.md "Trust boundaries"):
 *
 *   read      every GET: rollouts, runs, the cluster, /metrics, the status page's data
 *   signal    POST /events with a rollout signal (metrics, alarm changes)
 *   forward   POST /events with an AWS-shaped envelope (`source: aws.*`): what
 *             EventBridge would deliver (spot notices, CloudWatch alarm changes)
 *   operate   commands on a rollout: promote, promote-full, pause, resume, retry
 *             (of a rolled-back rollout: an abort is final for operate)
 *   admin     create rollouts and runs, abort rollouts and retry aborted ones,
 *             cancel runs
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

/** An AWS service's event, as EventBridge delivers it. */
function isAwsEnvelope(body: unknown): boolean {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as { source?: unknown }).source === 'string' &&
    (body as { source: string }).source.startsWith('aws.') &&
    'detail-type' in body
  );
}

/**
 * The scope a request needs: its route's (api/contract.ts), where POST
 * /events is judged by what it carries (`body`, its parsed JSON); a path no
 * route names needs read to be told so, and admin to be written to.
 * null: open (the status page's HTML, /cluster/health).
 */
export function scopeFor(route: { readonly id: string; readonly scope: Scope | null } | null, method: string, body: unknown): Scope | null {
  if (route?.id === 'postEvent') return isAwsEnvelope(body) ? 'forward' : 'signal';
  if (route) return route.scope;
  const m = method.toUpperCase();
  return m === 'GET' || m === 'HEAD' || m === 'OPTIONS' ? 'read' : 'admin';
}
