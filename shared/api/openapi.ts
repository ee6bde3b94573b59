import { z } from 'zod';
import { ID_RULE } from '../ids.js';
import { errorBody, type RouteDef } from './route.js';
import { API_VERSION, ROUTES } from './routes/index.js';

/**
 * The OpenAPI 3.1 document (`GET /openapi.json`, `npm run openapi`),
 * generated from the routes' schemas by zod's JSON Schema emitter (draft
 * 2020-12, OpenAPI 3.1's dialect).
 */

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  // Named schemas (meta id) become components: the caller gathers them.
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

/** The OpenAPI 3.1 document of the API as a node serves it (routes only a node serves say so). */
export function openApiDocument(): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const gather = (schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> => {
    const s = JSON.parse(JSON.stringify(schemaOf(schema, io)).replaceAll('"#/$defs/', '"#/components/schemas/')) as Record<string, unknown>;
    const defs = s.$defs as Record<string, unknown> | undefined;
    if (defs) {
      for (const [name, def] of Object.entries(defs)) components[name] = def;
      delete s.$defs;
    }
    return s;
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of ROUTES as readonly RouteDef[]) {
    const parameters: unknown[] = Object.entries(r.params ?? {}).map(([name, description]) => ({
      name,
      in: 'path',
      required: true,
      description,
      schema: { type: 'string', pattern: ID_RULE.source },
    }));
    for (const [name, field] of Object.entries(r.query?.shape ?? {})) {
      const schema = gather(field as z.ZodType, 'input');
      const many = JSON.stringify(schema).includes('"type":"array"');
      parameters.push({
        name,
        in: 'query',
        required: !(field as z.ZodType).safeParse(undefined).success,
        ...(schema.description ? { description: schema.description } : {}),
        schema,
        ...(many ? { style: 'form', explode: true } : {}),
      });
    }
    const responses: Record<string, unknown> = {};
    for (const [status, res] of Object.entries(r.responses)) {
      const content = res.content
        ? { [res.content.type ?? 'application/json']: res.content.schema ? { schema: gather(res.content.schema, 'output') } : {} }
        : undefined;
      responses[status] = {
        description: res.description,
        ...(res.headers
          ? { headers: Object.fromEntries(Object.entries(res.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }])) }
          : {}),
        ...(content ? { content } : {}),
      };
    }
    responses.default = {
      description: 'refused: by the node in front (401 no credential, 403 scope, 421 host, 429 rate, 413 body) or otherwise',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
    (paths[r.path] ??= {})[r.method.toLowerCase()] = {
      operationId: r.id,
      summary: r.summary,
      tags: [r.tag],
      ...(r.nodeOnly ? { 'x-node-only': true } : {}),
      'x-scope': r.scope,
      ...(r.scopeWhen ? { 'x-scope-when': r.scopeWhen } : {}),
      security: r.scope ? [{ bearer: [r.scope] }, { sigv4: [] }] : [],
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: !r.optionalBody, content: { 'application/json': { schema: gather(r.body, 'input') } } } } : {}),
      responses,
    };
  }
  components.Error ??= gather(errorBody, 'output');
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Rollout control plane',
      version: API_VERSION,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      description:
        'Progressive rollouts and work runs, fenced by leases. A node (`rollout serve`) serves every route; the deployed API (API Gateway, SigV4) serves those not marked x-node-only.',
    },
    tags: [
      { name: 'cluster', description: 'who leads, health' },
      { name: 'rollouts', description: 'progressive rollouts: create, command, read, assign' },
      { name: 'runs', description: 'work runs: submit, read back, cancel' },
      { name: 'work', description: "a remote worker's protocol (a node only): claim, change, read and register, for a worker without a store of its own" },
      { name: 'node', description: 'served by a node only' },
    ],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: "a node with --tokens-file or --oidc: a token carrying the route's scope" },
        sigv4: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'the deployed API: AWS SigV4 (IAM authorization; grantRead/Operate/Admin)' },
      },
    },
  };
}
