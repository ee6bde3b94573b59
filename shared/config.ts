import type { z } from 'zod';
import { ConfigError } from './errors.js';

/** Parse with zod and turn every issue into one `field: message` line. */
export function parseConfig<S extends z.ZodType>(scope: string, schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ConfigError(scope, issueLines(result.error));
}

/** One `field: message` line per issue, the field as a dotted path (`stageChanges.0.index`). */
export function issueLines(error: z.ZodError): string[] {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
}
