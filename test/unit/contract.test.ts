import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ID_RULE, openApiDocument, routerOf, ROUTES, TargetError } from '../../shared/api/contract.js';
import { API_ROUTES } from '../../infra/control-plane.js';
import { checkAnswers } from '../harness/contract-check.js';

/**
 * The API's one definition (shared/api/contract.ts) and the OpenAPI document
 * generated from it: every route is in it, the copy in the repository is the
 * one the code generates, the deployed API's routes grant what the
 * definition's scopes say, and the check the suites' answers go through can
 * fail.
 */
const doc = openApiDocument();
const paths = doc.paths as Record<
  string,
  Record<string, { operationId: string; 'x-scope': string | null; 'x-scope-when'?: Record<string, string>; 'x-node-only'?: boolean }>
>;

describe('the API definition', () => {
  it('puts every route in the document, once, with its scope', () => {
    const ids = ROUTES.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const r of ROUTES) {
      const op = paths[r.path]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.path}`).toBeDefined();
      expect(op!.operationId).toBe(r.id);
      expect(op!['x-scope']).toBe(r.scope);
      expect(op!['x-scope-when']).toEqual(r.scopeWhen);
      expect(Boolean(op!['x-node-only'])).toBe(Boolean(r.nodeOnly));
    }
    const operations = Object.values(paths).reduce((n, m) => n + Object.keys(m).length, 0);
    expect(operations).toBe(ROUTES.length);
  });

  it('says retrying an aborted rollout needs admin', () => {
    expect(paths['/rollouts/{id}/retry']!.post!['x-scope']).toBe('operate');
    expect(paths['/rollouts/{id}/retry']!.post!['x-scope-when']).toEqual({ admin: expect.stringMatching(/aborted/) as unknown });
  });

  it('routes each path in its one spelling to its definition, HEAD included; another spelling is refused', () => {
    const route = routerOf(ROUTES);
    for (const r of ROUTES) {
      const path = r.path.replace('{id}', 'x-1').replace(/\{\w+\}/g, 'y-2');
      expect(route(r.method, path).route?.id, path).toBe(r.id);
      if (path !== '/') expect(() => route(r.method, `${path}/`), `${path}/`).toThrow(TargetError);
      expect(() => route(r.method, `/${path}`), `/${path}`).toThrow(TargetError);
      if (path.includes('x-1'))
        expect(route(r.method, path.replace('x-1', 'x%2D1')), 'an escaped id').toMatchObject({ route: { id: r.id }, params: { id: 'x-1' } });
    }
    expect(() => route('GET', '/rollouts/%2e%2E/history')).toThrow(/dot segment/);
    expect(route('GET', '/Rollouts')).toEqual({ route: null, allowed: [] });
    expect(route('HEAD', '/cluster/health').route?.id).toBe('clusterHealth');
    expect(route('DELETE', '/rollouts')).toEqual({ route: null, allowed: ['GET', 'POST'] });
    expect(route('GET', '/nowhere')).toEqual({ route: null, allowed: [] });
  });

  it('matches a path asked again as it did the first time, by method; a refused spelling stays refused', () => {
    const route = routerOf(ROUTES);
    const asked = [
      ['GET', '/rollouts'],
      ['POST', '/rollouts'],
      ['HEAD', '/rollouts'],
      ['DELETE', '/rollouts'],
      ['GET', '/rollouts/a/assignment'],
      ['GET', '/rollouts/b/assignment'],
      ['POST', '/rollouts/a/pause'],
      ['POST', '/rollouts/a/frobnicate'],
      ['GET', `/rollouts/${'x'.repeat(300)}`],
    ] as const;
    const first = asked.map(([m, p]) => route(m, p));
    // The same answers in the other order, then once more: none is another request's.
    const again = [...asked]
      .reverse()
      .map(([m, p]) => route(m, p))
      .reverse();
    expect(again).toEqual(first);
    expect(asked.map(([m, p]) => route(m, p))).toEqual(first);
    expect(first.map((m) => m.route?.id ?? null)).toEqual([
      'listRollouts',
      'createRollout',
      'listRollouts',
      null,
      'rolloutAssignment',
      'rolloutAssignment',
      'rolloutPause',
      null,
      'getRollout',
    ]);
    expect(first[5]).toMatchObject({ params: { id: 'b' } });
    // A match handed out is never changed by whoever holds it.
    expect(() => ((first[4] as { params: Record<string, string> }).params.id = 'b')).toThrow(TypeError);
    expect(route('GET', '/rollouts/a/assignment')).toMatchObject({ params: { id: 'a' } });
    for (let i = 0; i < 3; i++) expect(() => route('GET', '/rollouts//assignment')).toThrow(TargetError);
  });

  it('holds ids to what a path reaches: not . or .., in a body or the document', () => {
    for (const id of ['.', '..']) expect(ID_RULE.test(id), id).toBe(false);
    for (const id of ['...', '.a', 'a.', 'ro:1', 'x_y-z']) expect(ID_RULE.test(id), id).toBe(true);
    const pattern = new RegExp((paths['/rollouts/{id}']!.get as unknown as { parameters: { schema: { pattern: string } }[] }).parameters[0]!.schema.pattern);
    expect(['.', '..', 'ok'].map((id) => pattern.test(id))).toEqual([false, false, true]);
  });

  it('is written to openapi.json as generated (npm run openapi)', () => {
    const committed = JSON.parse(readFileSync(join(import.meta.dirname, '../../openapi.json'), 'utf8')) as unknown;
    expect(committed, 'openapi.json is out of date: run npm run openapi').toEqual(doc);
  });

  it("grants through API Gateway what each route's scope says", () => {
    const byRole = Object.fromEntries(Object.entries(API_ROUTES).map(([role, routes]) => [role, routes.map(([m, p]) => `${m} ${p}`)]));
    for (const r of ROUTES.filter((x) => !x.nodeOnly)) {
      if (r.method === 'GET') expect(byRole.read, r.id).toContain('GET /{proxy+}');
      else if (r.scope === 'admin') expect(byRole.admin, r.id).toContain(`POST ${r.path}`);
      else if (r.path.startsWith('/rollouts/{id}/gates/')) expect(byRole.operate, r.id).toContain(`POST ${r.path}`);
      else expect(byRole.operate, r.id).toContain('POST /rollouts/{id}/{command}');
    }
  });

  it('refuses answers the document does not describe', () => {
    const ok = { route: 'rolloutHistory', status: 200, contentType: 'application/json', body: { rolloutId: 'r', history: [] } };
    expect(checkAnswers(doc, [ok]).failures).toEqual([]);
    const { failures } = checkAnswers(doc, [
      { ...ok, body: { rolloutId: 'r' } },
      { ...ok, status: 201 },
      { ...ok, route: 'nothing' },
      { ...ok, route: 'rolloutTraffic', status: 304, contentType: null, body: null },
      { ...ok, status: 404, body: { message: 'no error field' } },
      { ...ok, route: 'metrics', contentType: 'application/json' },
    ]);
    expect(failures).toEqual([
      expect.stringMatching(/^rolloutHistory 200: .*must have required property 'history'/),
      'rolloutHistory 201: a status the document does not declare for it',
      'nothing: answered, but the document has no such operation',
      expect.stringMatching(/^rolloutHistory 404: .*must have required property 'error'/),
      'metrics 200: answered application/json; the document declares text/plain',
    ]);
  });
});
