import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../shared/errors.js';
import { forbiddenAddress, OutboundPolicy, originOf } from '../../shared/outbound/policy.js';
import { parseRolloutSpec, outboundIssues } from '../../shared/rollout/spec.js';

const policy = new OutboundPolicy({
  origins: ['https://prom.example.com', 'HTTP://10.0.0.5:9090', 'http://127.0.0.1:9090', 'https://aps-workspaces.eu-west-1.amazonaws.com'],
  credentials: {
    'prom-prod': { type: 'basic', origin: 'https://prom.example.com:443', username: 'reader', password: { env: 'PROM_PASSWORD' } },
    amp: { type: 'sigv4', origin: 'https://aps-workspaces.eu-west-1.amazonaws.com', region: 'eu-west-1' },
  },
});

describe('the outbound policy', () => {
  it('compares origins as scheme, host and port, the default port dropped', () => {
    expect(originOf('HTTPS://Prom.Example.com:443/api/v1/query')).toBe('https://prom.example.com');
    expect(policy.allowedOrigins).toContain('http://10.0.0.5:9090');
    expect(policy.refuseUrl('https://prom.example.com/api/v1/query', 'address')).toBeNull();
    expect(policy.refuseUrl('https://prom.example.com:8443/api', 'address')).toMatch(/^address: https:\/\/prom\.example\.com:8443 is not an allowed origin/);
    expect(policy.refuseUrl('http://prom.example.com/api', 'address')).toMatch(/is not an allowed origin/);
    expect(policy.refuseUrl('https://user:pw@prom.example.com/', 'address')).toMatch(/credentials in the URL are not sent/);
  });

  it('sends a credential only to the origin it is bound to', () => {
    expect(policy.refuseCredential('prom-prod', 'https://prom.example.com/api/v1/query', 'credential')).toBeNull();
    expect(policy.refuseCredential('prom-prod', 'http://10.0.0.5:9090/api/v1/query', 'credential')).toBe(
      'credential: credential "prom-prod" is bound to https://prom.example.com, not http://10.0.0.5:9090',
    );
    expect(policy.refuseCredential('nope', 'https://prom.example.com/', 'credential')).toMatch(/no credential named "nope"/);
    // Names that are properties of every object are not credentials.
    expect(policy.refuseCredential('constructor', 'https://prom.example.com/', 'credential')).toMatch(/no credential named/);
  });

  it('refuses a configuration that would send a credential to an origin it does not allow, or sign for anything but Amazon Managed Prometheus', () => {
    expect(() => new OutboundPolicy({ origins: [], credentials: { x: { type: 'bearer', origin: 'https://a.example', token: { env: 'T' } } } })).toThrow(
      ConfigError,
    );
    expect(
      () => new OutboundPolicy({ origins: ['https://a.example'], credentials: { x: { type: 'bearer', origin: 'https://a.example', token: { env: 'T' } } } }),
    ).not.toThrow();
    expect(
      () =>
        new OutboundPolicy({
          origins: ['https://sts.amazonaws.com'],
          credentials: { x: { type: 'sigv4', origin: 'https://sts.amazonaws.com', region: 'us-east-1' } },
        }),
    ).toThrow(/SigV4 signs only for Amazon Managed Service for Prometheus/);
    expect(
      () =>
        new OutboundPolicy({
          origins: ['https://aps-workspaces.us-east-1.amazonaws.com'],
          credentials: { x: { type: 'sigv4', origin: 'https://aps-workspaces.us-east-1.amazonaws.com', region: 'eu-west-1' } },
        }),
    ).toThrow(/must be the origin's region, us-east-1/);
    expect(() => new OutboundPolicy({ origins: ['https://a.example/path'] })).toThrow(/an origin/);
    expect(() => new OutboundPolicy({ origins: ['file:///etc/passwd'] })).toThrow(/an origin/);
  });

  it('never lets a name reach loopback, link-local or the metadata service; an origin naming the address does', () => {
    for (const a of [
      '127.0.0.1',
      '127.1.2.3',
      '169.254.169.254',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
    ]) {
      expect(forbiddenAddress(a), a).not.toBeNull();
    }
    for (const a of ['10.0.0.5', '192.168.1.1', '8.8.8.8', '2001:db8::1']) expect(forbiddenAddress(a), a).toBeNull();
    expect(policy.refuseAddress(new URL('https://prom.example.com/'), '127.0.0.1')).toMatch(/prom\.example\.com resolved to 127\.0\.0\.1, a loopback address/);
    expect(policy.refuseAddress(new URL('https://prom.example.com/'), '169.254.169.254')).toMatch(/instance metadata/);
    expect(policy.refuseAddress(new URL('http://127.0.0.1:9090/'), '127.0.0.1')).toBeNull();
    expect(policy.refuseAddress(new URL('https://prom.example.com/'), '10.1.2.3')).toBeNull();
  });
});

describe('a spec against the policy', () => {
  const spec = (gate: Record<string, unknown>) =>
    parseRolloutSpec({
      target: { service: 's', version: 'v2' },
      stages: [
        {
          name: 'all',
          percent: 100,
          bakeSeconds: 0,
          gates: { providers: [{ type: 'prometheus', name: 'g', query: 'up', comparison: '>', threshold: 0, ...gate }] },
        },
      ],
    });

  it('names each address outside the list and each credential unknown or bound elsewhere', () => {
    expect(outboundIssues(spec({ address: 'https://prom.example.com', credential: 'prom-prod' }), policy)).toEqual([]);
    expect(outboundIssues(spec({ address: 'http://attacker.example:9090' }), policy)).toEqual([
      expect.stringMatching(/^stages\.0\.gates\.providers\.0\.address: http:\/\/attacker\.example:9090 is not an allowed origin/),
    ]);
    expect(outboundIssues(spec({ address: 'http://10.0.0.5:9090', credential: 'prom-prod' }), policy)).toEqual([
      expect.stringMatching(/^stages\.0\.gates\.providers\.0\.credential: credential "prom-prod" is bound to https:\/\/prom\.example\.com/),
    ]);
    expect(outboundIssues(spec({ address: 'http://10.0.0.5:9090', credential: 'missing' }), policy)).toEqual([
      expect.stringMatching(/no credential named "missing"/),
    ]);
  });

  it('refuses a spec that names an environment variable, saying what to do instead', () => {
    expect(() => spec({ address: 'https://prom.example.com', auth: { type: 'basic', username: 'x', passwordEnv: 'DATABASE_URL' } })).toThrow(
      /auth: a spec no longer names secrets or environment variables: name a credential/,
    );
  });
});
