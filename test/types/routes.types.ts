/**
 * Routes as typed values, checked by the compiler (`npx tsc --noEmit` runs
 * this file with the rest): a table of handlers missing a route, with one of
 * the wrong type, or answering a status its route does not declare does not
 * compile. Each `@ts-expect-error` below fails the check if the line under it
 * compiles.
 */
import type { Handler, Handlers, Parsed } from '../../shared/api/route.js';
import type { Route, SharedRoute } from '../../shared/api/routes/index.js';

type R<Id extends Route['id']> = Extract<Route, { readonly id: Id }>;

// Input is typed by the route: a run's items page has a numeric limit and a state from its enum.
export const runItems: Handler<R<'runItems'>> = ({ params, query }) => {
  const limit: number | undefined = query.limit;
  const state: 'pending' | 'running' | 'done' | 'failed' | undefined = query.state;
  return Promise.resolve({ status: 200, body: { runId: params.id, limit, state } });
};

/* eslint-disable @typescript-eslint/no-unsafe-return -- the lines below are meant not to type */
// @ts-expect-error a path parameter the route does not have
export const noSuchParam = (input: Parsed<R<'getRun'>>) => input.params.runId;

// @ts-expect-error a body on a route that takes none
export const noBody = (input: Parsed<R<'getRun'>>): string => input.body.reason;

// @ts-expect-error a status the route does not declare
export const wrongStatus: Handler<R<'getRun'>> = () => Promise.resolve({ status: 201, body: {} });

// @ts-expect-error another route's handler: createRollout's body has a spec, cancelRun's does not
export const wrongRoute: Handler<R<'cancelRun'>> = (input: Parsed<R<'createRollout'>>) => Promise.resolve({ status: 200, body: input.body.spec });

declare const all: Handlers<SharedRoute>;
// @ts-expect-error a table missing a route (getRun)
export const missing: Handlers<SharedRoute> = { ...all, getRun: undefined };

const { listRuns: _dropped, ...withoutListRuns } = all;
// @ts-expect-error a table without listRuns
export const incomplete: Handlers<SharedRoute> = withoutListRuns;
