/** Bad input a command itself found (a file, a busy port): reported like a flag error, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
