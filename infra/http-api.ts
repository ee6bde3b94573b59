import { RemovalPolicy, Stack, Token, Validations, type CfnElement } from 'aws-cdk-lib';
import { HttpApi, HttpMethod, HttpStage, LogGroupLogDestination, type HttpRoute } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { PolicyStatement, type IGrantable } from 'aws-cdk-lib/aws-iam';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { COMMANDS } from '../shared/rollout/command-names.js';

/** The HTTP API's routes, by the role an IAM policy grants: what the shared API (shared/api/handler.ts) answers. */
export const API_ROUTES = {
  read: [['GET', '/{proxy+}']],
  operate: [
    ['POST', '/rollouts/{id}/{command}'],
    ['POST', '/rollouts/{id}/gates/{gate}/test'],
  ],
  // API Gateway takes the literal segment first: abort is admin's, the other commands operate's.
  admin: [
    ['POST', '/rollouts'],
    ['POST', '/runs'],
    ['POST', '/rollouts/{id}/abort'],
    ['POST', '/runs/{id}/cancel'],
  ],
} as const satisfies Record<string, readonly (readonly ['GET' | 'POST', string])[]>;
export type ApiRole = keyof typeof API_ROUTES;

/**
 * An HTTP API in front of `fn`: IAM authorization on every route, access
 * logs, throttling. The routes are split by what they do, so an IAM policy
 * can grant reading, operating and administering separately (`grantApi`);
 * a path no route names is refused by API Gateway before the function runs.
 * Signals go on the bus, not through the API: `eventSenders`.
 */
export function httpApi(scope: Construct, fn: IFunction, routes: Record<ApiRole, HttpRoute[]>): HttpStage {
  const api = new HttpApi(scope, 'HttpApi', { description: 'Rollout control plane API (SigV4-signed requests only)', createDefaultStage: false });
  const integration = new HttpLambdaIntegration('ApiIntegration', fn);
  const authorizer = new HttpIamAuthorizer();
  for (const [role, declared] of Object.entries(API_ROUTES) as [ApiRole, (typeof API_ROUTES)[ApiRole]][]) {
    for (const [method, path] of declared)
      routes[role].push(...api.addRoutes({ path, methods: [method === 'GET' ? HttpMethod.GET : HttpMethod.POST], integration, authorizer }));
  }
  const logs = new LogGroup(scope, 'ApiAccessLogs', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY });
  return new HttpStage(scope, 'ApiStage', {
    httpApi: api,
    stageName: '$default',
    autoDeploy: true,
    throttle: { rateLimit: 50, burstLimit: 100 },
    accessLogSettings: { destination: new LogGroupLogDestination(logs) },
  });
}

/**
 * Lets `grantee` call what each role named may (execute-api:Invoke). Written
 * path by path rather than per route: a `*` in an execute-api ARN crosses
 * `/`, so a grant of `rollouts/*` would let an operator abort.
 */
export function grantApi(routes: Record<ApiRole, HttpRoute[]>, grantee: IGrantable, roles: readonly ApiRole[]): void {
  const api = routes.read[0]?.httpApi;
  if (!api) throw new Error('grantApi: this stack has no HTTP API');
  const stack = Stack.of(api);
  const arn = (method: string, path: string) => `arn:${stack.partition}:execute-api:${stack.region}:${stack.account}:${api.apiId}/*/${method}${path}`;
  const paths: Record<ApiRole, string[]> = {
    read: [arn('GET', '/*')],
    operate: [...COMMANDS.filter((c) => c !== 'abort').map((c) => arn('POST', `/rollouts/*/${c}`)), arn('POST', '/rollouts/*/gates/*/test')],
    admin: [arn('POST', '/rollouts'), arn('POST', '/runs'), arn('POST', '/rollouts/*/abort'), arn('POST', '/runs/*/cancel')],
  };
  grantee.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ actions: ['execute-api:Invoke'], resources: roles.flatMap((r) => paths[r]) }));
  // The * after the API id is the stage; the others are one path segment each (a rollout or run id): say so to cdk-nag.
  if (Construct.isConstruct(grantee)) {
    const literal = (v: string, token: string) => (Token.isUnresolved(v) ? token : v);
    const nag = (path: string) =>
      `arn:<AWS::Partition>:execute-api:${literal(stack.region, '<AWS::Region>')}:${literal(stack.account, '<AWS::AccountId>')}:<${stack.getLogicalId(api.node.defaultChild as CfnElement)}>/*/${path}`;
    const granted = roles.flatMap((r) => paths[r].map((arn) => arn.split('/*/').slice(1).join('/*/')));
    Validations.of(grantee).acknowledge(
      ...granted.map((path) => ({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::${nag(path)}]`,
        reason: 'The control plane API: any stage, and one rollout or run id per path segment; routes no other role of it grants',
      })),
    );
  }
}
