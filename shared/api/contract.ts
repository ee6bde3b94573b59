/**
 * The HTTP API, defined once: every route with what it takes and what it
 * answers (routes/, by resource), as typed values (route.ts). The Lambda
 * behind API Gateway (functions/api.ts) and a node (runtimes/node/node-api.ts)
 * serve these routes and no others, matched and parsed by one router
 * (router.ts); the OpenAPI 3.1 document (`GET /openapi.json`, `npm run
 * openapi`) is generated from the same schemas (openapi.ts).
 */
export { ID_MESSAGE, ID_RULE } from '../ids.js';
export { API_VERSION, ROUTES, SHARED_ROUTES, type NodeRoute, type Route, type RouteId, type SharedRoute } from './routes/index.js';
export { commandBody, errorBody, HttpError, type Answer, type ApiResponse, type Handlers, type Parsed, type ResponseDef, type RouteDef } from './route.js';
export { commandRouteId, createRolloutBody, MAX_ASSIGNMENT_ENTITIES, RETRY_ABORTED_SCOPE, rolloutBody, type CommandRouteId } from './routes/rollouts.js';
export { createRunBody, createRunFields, MAX_ITEMS_PAGE, MAX_RUN_ITEMS, runRequestJsonSchema } from './routes/runs.js';
export { parseTarget, routerOf, TargetError, type Match } from './router.js';
export { openApiDocument } from './openapi.js';
