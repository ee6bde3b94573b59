/** Bad input a command itself found (a file, a busy port): reported like a flag error, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** An exit code a command chose (not an error): `rollouts status` says how the rollout ended. */
export class ExitCode extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}
