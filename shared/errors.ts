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
