/**
 * What we keep of an outbound answer (a gate's reading, an actuation's
 * reason) never carries a value we sent with the request (a credential's
 * secret, a header made of one): an allow-listed origin may echo what it got,
 * and not only as it got it. A reply may carry a value raw, JSON-escaped (`\"`,
 * `\\`, `\/`, `\u00e9`), percent-encoded, form-encoded, HTML-escaped or in
 * base64 (at any alignment inside a longer base64 text), and any of these
 * inside another (a JSON string holding JSON, as a proxy's error wraps an
 * upstream's); each form, up to two deep, is cut out.
 */

export const REDACTED = '[redacted]';

/** Values shorter than this are not cut: they would cut ordinary words out of an answer, and a secret is longer. */
export const MIN_REDACTED_LENGTH = 4;

const hex4 = (c: number, upper: boolean) => {
  const h = c.toString(16).padStart(4, '0');
  return `\\u${upper ? h.toUpperCase() : h}`;
};

/** JSON string escaping, as encoders differ: `/` escaped or not, non-ASCII as \uXXXX (either case) or not. */
function jsonEscaped(s: string, o: { slash: boolean; ascii: 'keep' | 'lower' | 'upper' }): string {
  let out = JSON.stringify(s).slice(1, -1);
  if (o.slash) out = out.replaceAll('/', '\\/');
  if (o.ascii !== 'keep') out = out.replace(/[\u0080-\uffff]/g, (ch) => hex4(ch.charCodeAt(0), o.ascii === 'upper'));
  return out;
}

const lowerPercent = (s: string) => s.replace(/%[0-9A-F]{2}/g, (p) => p.toLowerCase());

/** application/x-www-form-urlencoded, as URLSearchParams writes it (space as +, more characters escaped). */
const formEncoded = (s: string) => new URLSearchParams({ v: s }).toString().slice(2);

const htmlEscaped = (s: string) =>
  s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&#39;');

/**
 * The base64 characters `s` always shows as, wherever it sits in a longer
 * base64 text: for each of the 3 alignments, the characters that encode only
 * its own bytes (what a neighbour's byte shares is left out). Standard and
 * URL alphabets, padded or not.
 */
function base64Forms(s: string): string[] {
  const bytes = Buffer.from(s, 'utf8');
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
    const whole = padded.toString('base64');
    // A leading group holding a neighbour's byte, and a trailing group that may hold one, depend on those neighbours.
    const start = offset === 0 ? 0 : 4;
    const fullGroups = Math.floor(padded.length / 3);
    const end = padded.length % 3 === 0 ? whole.length : fullGroups * 4;
    const middle = whole.slice(start, end);
    if (offset === 0) out.push(whole, whole.replace(/=+$/, ''));
    // Short runs would match ordinary base64 by chance; a secret is longer.
    if (middle.length >= 8) out.push(middle);
  }
  return [...out, ...out.map((b) => b.replaceAll('+', '-').replaceAll('/', '_'))];
}

const TRANSFORMS: readonly ((s: string) => string[])[] = [
  (s) => [
    jsonEscaped(s, { slash: false, ascii: 'keep' }),
    jsonEscaped(s, { slash: true, ascii: 'keep' }),
    jsonEscaped(s, { slash: false, ascii: 'lower' }),
    jsonEscaped(s, { slash: false, ascii: 'upper' }),
    jsonEscaped(s, { slash: true, ascii: 'lower' }),
    jsonEscaped(s, { slash: true, ascii: 'upper' }),
  ],
  (s) => {
    const uri = encodeURIComponent(s);
    const form = formEncoded(s);
    return [uri, lowerPercent(uri), form, lowerPercent(form), encodeURI(s)];
  },
  (s) => [htmlEscaped(s)],
  base64Forms,
];

/** JSON strings nest deeper than other encodings (an error quoting an answer that quotes a request): this many more levels. */
const MORE_JSON_LEVELS = 3;

/** Every form `value` may take in an answer, itself first: each transform, each of those again, and any of these inside JSON strings nested up to three deep. */
export function sentForms(value: string): string[] {
  const once = new Set([value]);
  for (const t of TRANSFORMS) for (const f of t(value)) once.add(f);
  const twice = new Set(once);
  for (const f of once) if (f !== value) for (const t of TRANSFORMS) for (const g of t(f)) twice.add(g);
  const out = new Set(twice);
  for (const f of twice) {
    let nested = f;
    for (let i = 0; i < MORE_JSON_LEVELS; i++) out.add((nested = jsonEscaped(nested, { slash: false, ascii: 'keep' })));
  }
  return [...out];
}

/** `text` with every form of every value in `sent` cut out, longest first (a form that holds another goes whole). */
export function redactSent(text: string, sent: readonly string[]): string {
  const forms = new Set<string>();
  for (const s of sent) if (s.length >= MIN_REDACTED_LENGTH) for (const f of sentForms(s)) if (f.length >= MIN_REDACTED_LENGTH) forms.add(f);
  let out = text;
  for (const f of [...forms].sort((a, b) => b.length - a.length)) if (out.includes(f)) out = out.split(f).join(REDACTED);
  return out;
}
