/**
 * Opaque paging cursors: what a store hands out as `next` (JSON, base64url),
 * and takes back, checked, as `cursor`.
 */

/** A cursor this store did not hand out (or a cut one). */
export class BadCursorError extends Error {
  override readonly name = 'BadCursorError';
  constructor() {
    super('cursor: not one this API handed out (pass the previous page\'s next as it was)');
  }
}

/** A cursor as the API hands it out: JSON, base64url. */
export function encodeCursor(v: unknown): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

export function decodeCursor<T>(cursor: string, check: (v: unknown) => v is T): T {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new BadCursorError();
  }
  if (!check(v)) throw new BadCursorError();
  return v;
}
