/** Invalid configuration, refused at construction. The message names the field. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly scope: string,
    readonly issues: readonly string[],
  ) {
    super(`invalid ${scope} config: ${issues.join('; ')}`);
  }
}

/**
 * The store refused a write for contention, without judging it: nothing was
 * written and the same request may simply be sent again (an API answers 503
 * with Retry-After).
 */
export class StoreContendedError extends Error {
  override readonly name: string = 'StoreContendedError';
}

/**
 * An error whose message is our own words, safe to put in an answer to
 * anyone. Any other error's text (a driver's, a store's) goes to the log,
 * never to a response body.
 */
export class PublicError extends Error {
  override readonly name: string = 'PublicError';
}

/** The message of `err` if it may be answered with, else `fallback`. */
export function publicMessage(err: unknown, fallback: string): string {
  return err instanceof PublicError ? err.message : fallback;
}
