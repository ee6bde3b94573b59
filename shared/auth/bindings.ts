import { ID_RULE } from '../api/contract.js';
import type { Identity } from './identity.js';

/**
 * What a `worker` credential is bound to, and the check of a coordinator
 * request against it.
 *
 * A remote worker reaches a node to ask work for one run as one worker: POST
 * /coordinator with `{action: "steal", runId, workerId}`
 * (HttpCoordinatorClient), and, when it has no store of its own, its claims,
 * changes, reads and registration (api/routes/work.ts). So a worker
 * credential names:
 *
 *   runs     the runs it may ask work for: ids, or any ('*', or no binding)
 *   worker   the worker id it may ask as: an id, a prefix ending in `*`
 *            (`host-a-*` for `host-a-<pid>`, the default id), or any
 *
 * The other coordinator actions (`scan`, `scan-all`, and whatever the
 * control plane adds) move or fail other workers' items: they are the
 * control plane's (its schedule, an admin), never a worker's.
 */

/** A worker id a binding names, or a prefix of one ending in `*`; `*` alone: any. */
export const WORKER_BINDING = /^(?:[A-Za-z0-9_.:@/+-]{1,128}\*?|\*)$/;
const WORKER_BINDING_RULE = 'a worker id (letters, digits and _ . : @ / + -, at most 128), a prefix of one ending in *, or * for any';
/** A credential names its runs; a fleet serving more is bound with `*`. */
export const MAX_BOUND_RUNS = 1_000;

/** A binding that cannot be: the message names what is wrong with it. */
export class BindingError extends Error {
  override readonly name = 'BindingError';
}

/** The runs a binding's values name: run ids (as the API takes them), or `*` alone for any. */
export function runsBinding(values: readonly string[]): ReadonlySet<string> | 'any' {
  if (values.length === 1 && values[0] === '*') return 'any';
  if (values.includes('*')) throw new BindingError('runs: * means any run and stands alone');
  if (!values.length) throw new BindingError('runs: at least one run id, or * for any');
  if (values.length > MAX_BOUND_RUNS)
    throw new BindingError(`runs: at most ${MAX_BOUND_RUNS} run ids (${values.length} given); bind a fleet that serves more with *`);
  const bad = values.filter((v) => !ID_RULE.test(v));
  if (bad.length)
    throw new BindingError(
      `runs: ${bad
        .slice(0, 5)
        .map((v) => JSON.stringify(v.slice(0, 130)))
        .join(', ')} ${bad.length === 1 ? 'is not a run id' : 'are not run ids'} (letters, digits, _ . : -, at most 128)`,
    );
  return new Set(values);
}

/** The worker id (or prefix) a binding names; null: any. */
export function workerBinding(value: string): string | null {
  if (!WORKER_BINDING.test(value)) throw new BindingError(`worker: ${WORKER_BINDING_RULE}, got ${JSON.stringify(value.slice(0, 130))}`);
  return value === '*' ? null : value;
}

/** Whether `workerId` is one `binding` allows. */
export function workerMatches(binding: string | null, workerId: string): boolean {
  if (binding === null) return true;
  return binding.endsWith('*') ? workerId.startsWith(binding.slice(0, -1)) : workerId === binding;
}

/** A worker credential bound to nothing: it may ask work for any run, as any worker. */
export function unboundWorker(identity: Pick<Identity, 'scopes' | 'runs'>): boolean {
  return identity.scopes.has('worker') && (identity.runs ?? 'any') === 'any';
}

/** The runs a binding allows, for messages: `*`, or the first few ids. */
export function describeRuns(runs: ReadonlySet<string> | 'any' | undefined): string {
  if (runs === undefined || runs === 'any') return '*';
  const ids = [...runs];
  return ids.length > 5 ? `${ids.slice(0, 5).join(', ')} and ${ids.length - 5} more` : ids.join(', ') || 'none';
}

const quoted = (v: string) => JSON.stringify(v.slice(0, 130));

/**
 * Whether `identity` may send the coordinator `body` (the request's parsed
 * JSON), beyond the `worker` scope the route needs: null when it may, else
 * why not, for a 403.
 *
 *   steal       the run must be one the credential is bound to, and the
 *               worker id one it may act as
 *   any other   the control plane's: refused without the admin scope
 *
 * A steal whose runId or workerId is not a string is not judged here (null):
 * the route's own parse refuses it with 400, naming the field.
 */
export function authorizeWorkerRequest(identity: Identity, body: unknown): string | null {
  const request = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const action = request.action;
  if (action !== 'steal') {
    if (identity.scopes.has('admin')) return null;
    const what = typeof action === 'string' ? `"${action.slice(0, 40)}"` : 'a request without an action';
    return `${identity.actor} may only ask the coordinator for work ("steal"); ${what} is the control plane's and needs the admin scope`;
  }
  const { runId, workerId } = request;
  if (typeof runId !== 'string' || typeof workerId !== 'string') return null;
  return authorizeWorker(identity, runId, workerId);
}

/**
 * Whether `identity` may act in `runId` as `workerId` (a steal, or any call
 * of a remote worker's protocol: api/routes/work.ts): null when it may, else
 * why not, for a 403.
 */
export function authorizeWorker(identity: Identity, runId: string, workerId: string): string | null {
  const runs = identity.runs ?? 'any';
  if (runs !== 'any' && !runs.has(runId))
    return `${identity.actor} may not ask work for run ${quoted(runId)}: its credential is bound to runs ${describeRuns(runs)}`;
  const worker = identity.worker ?? null;
  if (!workerMatches(worker, workerId)) return `${identity.actor} may not ask work as worker ${quoted(workerId)}: its credential is bound to worker ${worker}`;
  return null;
}
