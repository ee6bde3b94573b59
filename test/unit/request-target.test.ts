import { describe, expect, it } from 'vitest';
import { requestTarget } from '../../shared/runtimes/node/http.js';

describe('a request target is read as WHATWG URL parsing reads it', () => {
  const targets = [
    '/', '/rollouts/ro-1/assignment?entity=user-1', '/rollouts/ro_1/assignment?entity=a+b&entity=%C3%A9', '/runs?limit=5&cursor=',
    '/rollouts/../runs', '/rollouts/./x', '/rollouts/a%2Fb/assignment', '/rollouts/é/traffic', '/a b?c d', '/x?y=1#frag', '/x#frag?y=1', '//double', '/x?', '/x?=&&=',
  ];
  it.each(targets)('%s', (raw) => {
    const url = new URL(raw, 'http://local');
    const got = requestTarget(raw);
    expect([got.pathname, [...got.searchParams]]).toEqual([url.pathname, [...url.searchParams]]);
  });
});
