import type { z } from 'zod';
import { ConfigError } from './errors.js';

/** Parse with zod and turn every issue into one `field: message` line. */
export function parseConfig<S extends z.ZodType>(scope: string, schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ConfigError(
    scope,
    result.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`),
  );
}
