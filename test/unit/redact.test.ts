/**
 * A value we sent is cut from what we keep of an answer in every form the
 * answer could carry it in (shared/outbound/redact.ts).
 */
import { describe, expect, it } from 'vitest';
import { redactSent, REDACTED } from '../../shared/outbound/redact.js';

const SECRET = 'p"a\\s/s wörd€😀-0123456789';
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

describe('redactSent', () => {
  it.each([
    ['raw', SECRET],
    ['JSON-escaped', JSON.stringify(SECRET)],
    [
      'JSON-escaped with \\/ and \\u (PHP)',
      JSON.stringify(SECRET)
        .replaceAll('/', '\\/')
        .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    ],
    [
      'JSON with upper-case \\u',
      JSON.stringify(SECRET).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`),
    ],
    ['JSON in JSON in JSON', JSON.stringify(JSON.stringify(JSON.stringify(SECRET)))],
    ['percent-encoded', encodeURIComponent(SECRET)],
    ['percent-encoded, lower-case hex', encodeURIComponent(SECRET).toLowerCase()],
    ['form-encoded', new URLSearchParams({ t: SECRET }).toString()],
    ['percent-encoded inside JSON', JSON.stringify({ url: `https://x/?t=${encodeURIComponent(SECRET)}` })],
    ['HTML-escaped', SECRET.replaceAll('&', '&amp;').replaceAll('"', '&quot;')],
    ['base64', b64(SECRET)],
    ['base64url', Buffer.from(SECRET).toString('base64url')],
    ['base64 inside a longer text, offset 1', b64(`x${SECRET}yz`)],
    ['base64 inside a longer text, offset 2', b64(`xy${SECRET}z`)],
    ['base64 inside a longer text, offset 3', b64(`xyz${SECRET}`)],
  ])('cuts the secret %s', (_name, echoed) => {
    const answer = `before ${echoed} after`;
    const kept = redactSent(answer, [SECRET]);
    expect(kept).toContain(REDACTED);
    expect(kept).not.toContain('0123456789');
    expect(kept.startsWith('before ') && kept.endsWith(' after')).toBe(true);
    // What is left of the echo is its wrapping (a JSON key, a neighbour's base64 group), never most of it.
    const residue = kept.slice('before '.length, -' after'.length).replaceAll(REDACTED, '');
    expect(residue.length).toBeLessThan(echoed.length / 2);
  });

  it('leaves an answer with no secret in it as it was, and cuts no value shorter than 4 characters', () => {
    expect(redactSent('{"status":"error","error":"abc"}', [SECRET, 'abc'])).toBe('{"status":"error","error":"abc"}');
  });

  it('cuts a longer form whole before a shorter one inside it', () => {
    expect(redactSent(`t=${encodeURIComponent(SECRET)}`, [SECRET])).toBe(`t=${REDACTED}`);
    expect(redactSent(JSON.stringify({ e: SECRET }), [SECRET])).toBe(`{"e":"${REDACTED}"}`);
  });
});
