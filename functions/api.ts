import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { ApiDeps } from '../shared/api/handler.js';
import { routerOf, SHARED_ROUTES, TargetError, type Match } from '../shared/api/contract.js';
import type { Scope } from '../shared/auth/scopes.js';
import { errorMessage } from '../shared/log.js';
import { sqsWorkQueueFrom } from './work-queue.js';
import { eventsPublishedSince, invocationScoped, runtimeFrom, type Runtime } from './runtime.js';
import { CatalogueMetrics, countEvents } from './metrics.js';
import { activityFlagsFrom, type ActivityFlags } from './activity.js';

/**
 * The HTTP API (API Gateway HTTP API, payload 2.0, IAM authorization): an
 * adapter from the request to shared/api. The caller's IAM principal is the
 * actor recorded on every change. Unexpected failures answer 500 with a
 * request id to find the log line, never the internals.
 *
 * API Gateway's IAM authorization admits a request by its method and path
 * (ControlPlane.grantApi: read, operate and admin grant their routes' paths
 * only). So what the caller is known to hold is the scope of the route it
 * reached, no more: an admin's retry and an operator's arrive alike, and a
 * retry of an aborted rollout (admin's, on a node) is refused here (403).
 * The path is matched once, here, in its one spelling (contract.ts): any
 * other spelling is a 400 naming what is wrong.
 *
 * On Aurora any write may start work (a rollout, a run, a resume): the
 * activity flags are raised before the request is handled (activity.ts), so
 * the scheduled probes look at the database. A flag that cannot be raised
 * answers 500 and writes nothing.
 */
const utf8 = new TextDecoder('utf-8', { fatal: true });
/** The routes the deployed API serves (not a node's own). */
const served = routerOf(SHARED_ROUTES);

export function apiLambdaHandler(
  runtime: () => Promise<Runtime>,
  overrides: Partial<Pick<ApiDeps, 'workQueue'>> & { readonly activity?: ActivityFlags | null } = {},
  logger = lambdaLogger('api'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'api' }),
  catalogue = new CatalogueMetrics(),
) {
  // Built over the runtime it was given: a runtime opened per invocation (Aurora) gets its own.
  let built: { readonly rt: Runtime; readonly api: ReturnType<Runtime['api']> } | undefined;
  const handle = async () => {
    const rt = await runtime();
    if (built?.rt !== rt) {
      const api = rt.api({
        workQueue: overrides.workQueue ?? (() => sqsWorkQueueFrom(process.env, 'to create runs')),
      });
      built = { rt, api };
    }
    return built.api;
  };

  return async (event: APIGatewayProxyEventV2WithIAMAuthorizer): Promise<APIGatewayProxyStructuredResultV2> => {
    const method = event.requestContext.http.method;
    const path = event.rawPath;
    // Commands (pause, resume, abort…) publish rollout events: counted as on a node.
    const events = eventsPublishedSince();
    try {
      let body: string | null;
      try {
        body = event.body === undefined ? null : event.isBase64Encoded ? utf8.decode(Buffer.from(event.body, 'base64')) : event.body;
      } catch {
        return { statusCode: 400, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'request body is not valid UTF-8' }) };
      }
      let route: Match;
      try {
        route = served(method, path);
      } catch (err) {
        if (!(err instanceof TargetError)) throw err;
        metrics.addMetric('Responses4xx', MetricUnit.Count, 1);
        return { statusCode: 400, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: err.message }) };
      }
      const actor = event.requestContext.authorizer?.iam?.userArn ?? 'unknown';
      if (method !== 'GET' && method !== 'HEAD') await overrides.activity?.raise(['promotion', 'runs']);
      const scopes: ReadonlySet<Scope> = new Set(route.route?.scope ? [route.route.scope] : []);
      const res = await (
        await handle()
      )({ method, path, body, actor, route, scopes, query: new URLSearchParams(event.rawQueryString ?? ''), headers: event.headers ?? {} });
      metrics.addMetric(res.status >= 500 ? 'Responses5xx' : res.status >= 400 ? 'Responses4xx' : 'Responses2xx', MetricUnit.Count, 1);
      if (res.status >= 400) logger.warn('request refused', { method, path, status: res.status, actor, body: res.body });
      // Who changed what, with the caller's IAM ARN, for every write that went through.
      else if (method !== 'GET' && method !== 'HEAD')
        logger.info('write', { method, path, status: res.status, actor, requestId: event.requestContext.requestId });
      if (res.status === 304) return { statusCode: 304, headers: { ...res.headers }, body: '' };
      return { statusCode: res.status, headers: { 'content-type': 'application/json', ...res.headers }, body: JSON.stringify(res.body) };
    } catch (err) {
      metrics.addMetric('Responses5xx', MetricUnit.Count, 1);
      logger.error('request failed', { method, path, requestId: event.requestContext.requestId, error: errorMessage(err) });
      return {
        statusCode: 500,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ error: 'internal error', requestId: event.requestContext.requestId }),
      };
    } finally {
      countEvents(catalogue, events());
      catalogue.flush();
      metrics.publishStoredMetrics();
    }
  };
}

const scoped = invocationScoped(() => runtimeFrom(process.env));
export const handler = scoped.around(apiLambdaHandler(scoped.runtime, { activity: activityFlagsFrom(process.env) }));
