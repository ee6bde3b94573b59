/**
 * The typed client takes what it sends and what it resolves to from the
 * routes (shared/client/route-call.ts): a call with a body, query or path
 * parameters its route does not take does not compile, and the client's
 * result types are the routes' answers. Checked by `npx tsc --noEmit`; each
 * `@ts-expect-error` fails the check if the line under it compiles. Nothing
 * here runs.
 */
import type { Result } from '../../shared/api/route.js';
import type { getRollout, rolloutTraffic } from '../../shared/api/routes/rollouts.js';
import { cancelRun, createRun, getRun, runItems } from '../../shared/api/routes/runs.js';
import type { RolloutClient, AssignmentAnswer, RunJson } from '../../shared/client/client.js';
import { callRoute } from '../../shared/client/route-call.js';
import type { Target } from '../../shared/client/transport.js';
import type { Assignment, RolloutTraffic } from '../../shared/rollout/assignment.js';
import type { RolloutJson } from '../../shared/api/rollout-json.js';

declare const target: Target;
declare const client: RolloutClient;

export function calls() {
  return [
    // Parameters, query and body as their routes take them; the result is the route's answer.
    callRoute(target, getRun, { params: { id: 'run_1' } }).then((run: RunJson) => run.counts.pending),
    callRoute(target, runItems, { params: { id: 'run_1' }, query: { state: 'failed', limit: '10' } }),
    callRoute(target, createRun, { body: { items: Object.freeze([1, 2]), shards: 2 } }),
    callRoute(target, cancelRun, { params: { id: 'run_1' } }),
    client.createRun({ id: 'run_1', items: [{ n: 1 }] }),

    // @ts-expect-error a missing path parameter
    callRoute(target, getRun, {}),
    // @ts-expect-error a path parameter of another name
    callRoute(target, getRun, { params: { runId: 'run_1' } }),
    // @ts-expect-error a body of the wrong shape: items is a list
    callRoute(target, createRun, { body: { items: 'one' } }),
    // @ts-expect-error a body field the route does not take
    callRoute(target, createRun, { body: { items: [1], priority: 'high' } }),
    // @ts-expect-error a body its route requires, missing
    callRoute(target, createRun, {}),
    // @ts-expect-error a body on a route that takes none
    callRoute(target, getRun, { params: { id: 'run_1' }, body: { reason: 'x' } }),
    // @ts-expect-error a query value outside the route's enum
    callRoute(target, runItems, { params: { id: 'run_1' }, query: { state: 'lost' } }),
    // @ts-expect-error the client's own call with a body of the wrong shape
    client.createRun({ items: [1], shards: 'two' }),
    // @ts-expect-error the client's call without the rollout's id
    client.getRollout(),
  ];
}

// What the routes answer is what the domain's types promise a client (assign() takes the traffic).
export const traffic = (r: Result<typeof rolloutTraffic>): RolloutTraffic => r;
export const rollout = (r: Result<typeof getRollout>): RolloutJson => r;
export const assignment = (a: AssignmentAnswer): Assignment => a;

// @ts-expect-error a result read for a field its route does not answer
export const noSuchField = (run: RunJson): unknown => run.priority;
