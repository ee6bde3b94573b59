import { describe, expect, it } from 'vitest';
import { parseTargets, targetOutboundIssues } from '../../shared/actuation/targets.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';

describe('operator targets', () => {
  it('a webhook target: an http(s) url, an optional credential name, a timeout defaulting to 10 s; unknown fields refused naming them', () => {
    expect(parseTargets({ flags: { type: 'webhook', url: 'https://flags.internal/split' } })).toEqual({
      flags: { type: 'webhook', url: 'https://flags.internal/split', timeoutSeconds: 10 },
    });
    expect(() => parseTargets({ flags: { type: 'webhook', url: 'ftp://flags.internal/split' } })).toThrow(/flags\.url: must be an http\(s\) URL/);
    expect(() => parseTargets({ flags: { type: 'webhook', url: 'https://flags.internal/split', command: 'rm -rf /' } })).toThrow(/flags: .*command/);
    expect(() => parseTargets({ flags: { type: 'webhook', url: 'https://flags.internal/split', timeoutSeconds: 600 } })).toThrow(/flags\.timeoutSeconds/);
  });

  it('a webhook target the outbound policy would refuse is a configuration error naming the target and why', () => {
    const targets = parseTargets({
      flags: { type: 'webhook', url: 'https://flags.internal/split', credential: 'flag-key' },
      web: { type: 'lambdaAlias', functionName: 'web', alias: 'live' },
    });
    expect(targetOutboundIssues(targets, OutboundPolicy.none())).toEqual([
      expect.stringMatching(/^flags\.url: https:\/\/flags\.internal is not an allowed origin/) as unknown,
    ]);
    const elsewhere = new OutboundPolicy({
      origins: ['https://flags.internal', 'https://other.internal'],
      credentials: { 'flag-key': { type: 'hmac', origin: 'https://other.internal', keyId: 'k', secret: { env: 'S' } } },
    });
    expect(targetOutboundIssues(targets, elsewhere)).toEqual([
      expect.stringMatching(/^flags\.credential: credential "flag-key" is bound to https:\/\/other\.internal/) as unknown,
    ]);
    const allowed = new OutboundPolicy({
      origins: ['https://flags.internal'],
      credentials: { 'flag-key': { type: 'hmac', origin: 'https://flags.internal', keyId: 'k', secret: { env: 'S' } } },
    });
    expect(targetOutboundIssues(targets, allowed)).toEqual([]);
  });
});
