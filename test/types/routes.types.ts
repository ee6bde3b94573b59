/**
 * Routes as typed values, checked by the compiler (`npx tsc --noEmit` runs
 * this file with the rest): a table of handlers missing a route, with one of
 * the wrong type, answering a status its route does not declare or a body of
 * another shape does not compile. Each `@ts-expect-error` below fails the
 * check if the line under it compiles.
 */
import type { Answer, Handler, Handlers, Parsed } from '../../shared/api/route.js';
import type { Route, SharedRoute } from '../../shared/api/routes/index.js';

type R<Id extends Route['id']> = Extract<Route, { readonly id: Id }>;

// Input is typed by the route: a run's items page has a numeric limit and a state from its enum.
export const runItems: Handler<R<'runItems'>> = ({ params, query }) => {
  const limit: number | undefined = query.limit;
  const state: 'pending' | 'running' | 'done' | 'failed' | undefined = query.state;
  return Promise.resolve({ status: 200, body: { runId: params.id, items: [], next: limit === undefined && state === undefined ? null : 'c1' } });
};

// An answer may hold readonly arrays (the domain's), and a 304 has no body.
const counts = { pending: 0, running: 0, done: 1, failed: 0 } as const;
export const cancelled: Answer<R<'cancelRun'>> = { status: 200, body: { id: 'r1', cancelled: { at: '', by: 'a', reason: null }, first: true, counts } };
export const unchanged: Answer<R<'rolloutTraffic'>> = { status: 304, body: null, headers: { etag: '"1.2"' } };

/* eslint-disable @typescript-eslint/no-unsafe-return -- the lines below are meant not to type */
// @ts-expect-error a path parameter the route does not have
export const noSuchParam = (input: Parsed<R<'getRun'>>) => input.params.runId;

// @ts-expect-error a body on a route that takes none
export const noBody = (input: Parsed<R<'getRun'>>): string => input.body.reason;

// @ts-expect-error a status the route does not declare
export const wrongStatus: Handler<R<'getRun'>> = () => Promise.resolve({ status: 201, body: {} });

// @ts-expect-error another route's handler: createRollout's body has a spec, cancelRun's does not
export const wrongRoute: Handler<R<'cancelRun'>> = (input: Parsed<R<'createRollout'>>) => Promise.resolve({ status: 200, body: input.body.spec });

// @ts-expect-error a body of the wrong shape: a run's items page has items and next
export const wrongBody: Handler<R<'runItems'>> = ({ params }) => Promise.resolve({ status: 200, body: { runId: params.id } });

// @ts-expect-error a field of the wrong type: created is true on a 201
export const wrongField: Answer<R<'createRollout'>> = { status: 201, body: { id: 'r1', created: false } };

// @ts-expect-error a field the route does not declare
export const extraField: Answer<R<'createRun'>> = { status: 200, body: { id: 'r1', created: false, items: 1, added: 0, shards: 2 } };

// @ts-expect-error a 304 carries no body
export const bodyOn304: Answer<R<'rolloutAssignment'>> = { status: 304, body: { rolloutId: 'r1' } };

// @ts-expect-error an error body without its error
export const refusalWithoutError: Answer<R<'getRun'>> = { status: 404, body: { issues: [] } };

declare const all: Handlers<SharedRoute>;
// @ts-expect-error a table missing a route (getRun)
export const missing: Handlers<SharedRoute> = { ...all, getRun: undefined };

const { listRuns: _dropped, ...withoutListRuns } = all;
// @ts-expect-error a table without listRuns
export const incomplete: Handlers<SharedRoute> = withoutListRuns;
