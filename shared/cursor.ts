/**
 * Opaque paging cursors: what a store hands out as `next` (JSON, base64url),
 * and takes back as `cursor`, parsed by a schema before any store sees it
 * (DESIGN.md "Trust boundaries"): a cursor is request input like a body, so
 * its integers are safe integers in range, its strings follow a body's rules
 * (no NUL, Unicode only) and are bounded, and its objects hold only the
 * fields the store wrote. Anything else is a BadCursorError (400), never a
 * store error (which reads as "store unreachable").
 */
import { z } from 'zod';

/** Longest `cursor` accepted, in characters: every cursor handed out is far shorter (a DynamoDB key is at most 3 KB). */
export const MAX_CURSOR_LENGTH = 4_096;
/** Latest instant a cursor may carry, ms since the epoch: the last a JavaScript Date holds (PostgreSQL's timestamps reach further). */
export const MAX_CURSOR_TIME = 8.64e15;

/** A cursor this store did not hand out (or a cut one); `why` names the part that is wrong, never echoing it. */
export class BadCursorError extends Error {
  override readonly name = 'BadCursorError';
  constructor(why?: string) {
    super(`cursor: not one this API handed out${why ? ` (${why})` : ''}; pass the previous page's next as it was`);
  }
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A string in a cursor: 1 to `maxBytes` UTF-8 bytes, with a request body's rules (shared/api/json.ts): no NUL (PostgreSQL text refuses it), no lone surrogate. */
export function cursorText(maxBytes: number) {
  return z
    .string()
    .min(1, 'empty')
    .refine((s) => !s.includes('\u0000'), 'contains a NUL character')
    .refine((s) => !LONE_SURROGATE.test(s), 'contains a lone UTF-16 surrogate (not Unicode text)')
    .refine((s) => Buffer.byteLength(s, 'utf8') <= maxBytes, `longer than ${maxBytes} bytes`);
}

/** A whole number in a cursor, from `min` to `max` (safe integers only: 1.5, 1e300 and 2^53 are refused). */
export function cursorInt(min: number, max: number) {
  return z.int().min(min).max(max);
}

/** An instant in a cursor (ms since the epoch), as a store's `createdAt`. */
export const cursorTime = () => cursorInt(0, MAX_CURSOR_TIME);

/** An object in a cursor: exactly the fields the store wrote, no others. */
export const cursorObject = z.strictObject;

/** A cursor as the API hands it out: JSON, base64url. */
export function encodeCursor(v: unknown): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

/** What is wrong with a cursor's JSON, by path, in words that never echo it. */
function issueText(issue: z.core.$ZodIssue): string {
  const at = issue.path.length ? `${issue.path.join('.')}: ` : '';
  return `${at}${issue.code === 'unrecognized_keys' ? 'a field no cursor has' : issue.message}`;
}

/** `cursor` decoded and checked by `schema`; BadCursorError naming what is wrong otherwise. */
export function decodeCursor<S extends z.ZodType>(cursor: string, schema: S): z.output<S> {
  if (cursor.length > MAX_CURSOR_LENGTH) throw new BadCursorError(`longer than ${MAX_CURSOR_LENGTH} characters`);
  // Buffer's base64url decoding skips what is not base64url: a cursor holds nothing else.
  if (!BASE64URL.test(cursor)) throw new BadCursorError('not base64url');
  let v: unknown;
  try {
    v = JSON.parse(strictUtf8.decode(Buffer.from(cursor, 'base64url')));
  } catch {
    throw new BadCursorError('not base64url of UTF-8 JSON');
  }
  const parsed = schema.safeParse(v);
  if (!parsed.success) throw new BadCursorError(issueText(parsed.error.issues[0]!));
  return parsed.data;
}
