import { describe, expect, it } from 'vitest';
import { RequestRefused, requestTarget } from '../../shared/runtimes/node/http.js';

describe('a request target in its one spelling is read as sent; its query as WHATWG URL parsing reads it', () => {
  const targets = [
    '/',
    '/rollouts/ro-1/assignment?entity=user-1',
    '/rollouts/ro_1/assignment?entity=a+b&entity=%C3%A9',
    '/runs?limit=5&cursor=',
    '/rollouts/a%2Fb/assignment',
    '/rollouts/ro%3A1',
    '/x?',
    '/x?=&&=',
    '/rollouts/...',
  ];
  it.each(targets)('%s', (raw) => {
    const url = new URL(raw, 'http://local');
    const got = requestTarget(raw);
    expect([got.pathname, [...got.searchParams]]).toEqual([url.pathname, [...url.searchParams]]);
  });
});

describe('any other spelling is a 400 naming what is wrong, never normalised', () => {
  const refused: [string, RegExp][] = [
    ['//', /empty segment/],
    ['//double', /empty segment/],
    ['/rollouts/', /empty segment/],
    ['/rollouts//x', /empty segment/],
    ['/rollouts/../runs', /dot segment/],
    ['/rollouts/./x', /dot segment/],
    ['/rollouts/%2e%2E', /dot segment/],
    ['/rollouts/.%2e/x', /dot segment/],
    ['/rollouts/%2E', /dot segment/],
    ['/rollouts/é/traffic', /character "é"/],
    ['/a b?c d', /character " "/],
    ['/rollouts\\x', /character "\\\\"/],
    ['/x%zz', /malformed percent-escape/],
    ['/x%4', /malformed percent-escape/],
    ['/x?y=1#frag', /fragment/],
    ['/x#frag?y=1', /fragment/],
    ['*', /not a path/],
    ['http://evil.example/rollouts', /not a path/],
    ['', /not a path/],
  ];
  it.each(refused)('%s', (raw, why) => {
    let thrown: unknown;
    try {
      requestTarget(raw);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(RequestRefused);
    expect((thrown as RequestRefused).status).toBe(400);
    expect((thrown as RequestRefused).message).toMatch(why);
  });
});
