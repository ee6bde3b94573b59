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
