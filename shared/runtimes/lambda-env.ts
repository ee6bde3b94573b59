import { hostname } from 'node:os';
import { z } from 'zod';
import { parseConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import { own } from '../own.js';
import { retentionSchema } from '../retention.js';
import { BATCH_TICK_SECONDS } from '../topology.js';
import { DEFAULT_LEASE, leaseCadenceHolds, runtimeSettings } from './settings.js';

/**
 * A Lambda function's environment, as the stack sets it (infra/control-plane.ts, infra/aurora.ts). What a node takes too
 * (retention, outbound requests, targets, the assignment read window) is checked by the one definition both
 * read (settings.ts); the rest is the function's: where its store is, how it logs in to Aurora, its lease holder, bus and
 * cadence. A bad value is refused with its variable named: `invalid environment config: ROLLOUT_X: what is wrong`.
 */

/** A variable holding a number, checked by `schema` (its default when unset): Number() of the text, as z.coerce does. */
function numberVar<S extends z.ZodType>(schema: S) {
  return z.preprocess((text) => (text === undefined ? undefined : Number(text)), schema);
}

/** A variable holding JSON, checked by `schema`; unset or blank reads as `{}`. */
function jsonVar<S extends z.ZodType>(schema: S) {
  return z
    .string()
    .optional()
    .transform((text, ctx): unknown => {
      if (text === undefined || text.trim() === '') return {};
      try {
        return JSON.parse(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

export const lambdaEnvSchema = z
  .object({
    ROLLOUT_STORE: z.enum(['dynamodb', 'postgres']).default('dynamodb'),
    ROLLOUT_TABLE: z.string().min(1).optional(),
    DATABASE_URL: z.string().min(1).optional(),
    /** Aurora, the migrator only: the cluster's generated secret (host, port, dbname, username, password); read at cold start. */
    ROLLOUT_DB_SECRET_ARN: z.string().min(1).optional(),
    /** Aurora: the function's own database role, logged in with IAM tokens (functions/db-auth.ts), at this endpoint. */
    ROLLOUT_DB_USER: z.string().min(1).optional(),
    ROLLOUT_DB_HOST: z.string().min(1).optional(),
    ROLLOUT_DB_PORT: numberVar(z.number().int().min(1).max(65_535).default(5432)),
    ROLLOUT_DB_NAME: z.string().min(1).default('postgres'),
    /** The lease holder: in AWS a node is one deployed stack, and every invocation of its functions holds as it. */
    ROLLOUT_NODE_ID: z
      .string()
      .min(1)
      .default(`${process.env.AWS_LAMBDA_FUNCTION_NAME ?? hostname()}`),
    ROLLOUT_EVENT_BUS: z.string().min(1).default('default'),
    ROLLOUT_LEASE_TTL_MS: numberVar(z.number().int().positive().default(DEFAULT_LEASE.ttlMs)),
    ROLLOUT_LEASE_RENEW_MS: numberVar(z.number().int().positive().default(DEFAULT_LEASE.renewIntervalMs)),
    ROLLOUT_LEASE_RETRY_MS: numberVar(z.number().int().positive().default(DEFAULT_LEASE.retryIntervalMs)),
    ROLLOUT_TICK_INTERVAL_MS: numberVar(
      z
        .number()
        .int()
        .positive()
        .default(BATCH_TICK_SECONDS * 1000),
    ),
    ROLLOUT_ASSIGNMENT_READ_MS: numberVar(runtimeSettings.assignmentReadMs),
    /** The stack's `outbound` prop, as JSON: nothing when unset. */
    ROLLOUT_OUTBOUND: jsonVar(runtimeSettings.outbound),
    /** The stack's `targets` prop, as JSON: none when unset. */
    ROLLOUT_TARGETS: jsonVar(runtimeSettings.targets),
    /**
     * The CloudWatch namespaces cloudwatchMetric gates may read (the stack's `gateNamespaces`, as a JSON array; the stack
     * always sets it, `[]` by default). Unset: no limit (a process outside the stack, whose own identity bounds it).
     */
    ROLLOUT_GATE_NAMESPACES: z
      .string()
      .optional()
      .transform((text, ctx) => {
        if (text === undefined) return null;
        try {
          return z.array(z.string().min(1).max(255)).parse(JSON.parse(text));
        } catch {
          ctx.addIssue({ code: 'custom', message: 'a JSON array of CloudWatch namespaces' });
          return z.NEVER;
        }
      }),
    /** The stack's `retention` prop, in days. */
    ROLLOUT_RETAIN_ROLLOUTS_DAYS: numberVar(retentionSchema.shape.rolloutDays),
    ROLLOUT_RETAIN_RUNS_DAYS: numberVar(retentionSchema.shape.runDays),
  })
  .superRefine((e, ctx) => {
    if (!leaseCadenceHolds({ ttl: e.ROLLOUT_LEASE_TTL_MS, renew: e.ROLLOUT_LEASE_RENEW_MS, retry: e.ROLLOUT_LEASE_RETRY_MS })) {
      ctx.addIssue({
        code: 'custom',
        path: ['ROLLOUT_LEASE_RETRY_MS'],
        message: `needs TTL (${e.ROLLOUT_LEASE_TTL_MS}) > renew (${e.ROLLOUT_LEASE_RENEW_MS}) > 1.2 × retry (${e.ROLLOUT_LEASE_RETRY_MS})`,
      });
    }
  });

export type LambdaEnv = z.output<typeof lambdaEnvSchema>;

/** What the store the environment names lacks to be opened (the first thing), or null. */
function storeIssue(env: LambdaEnv): string | null {
  if (env.ROLLOUT_STORE === 'dynamodb' && !env.ROLLOUT_TABLE) return 'ROLLOUT_TABLE: required when ROLLOUT_STORE=dynamodb';
  if (env.ROLLOUT_STORE === 'postgres' && !env.DATABASE_URL && !env.ROLLOUT_DB_SECRET_ARN && !env.ROLLOUT_DB_USER)
    return 'DATABASE_URL or ROLLOUT_DB_SECRET_ARN, or ROLLOUT_DB_USER with ROLLOUT_DB_HOST: one is required when ROLLOUT_STORE=postgres';
  if (env.ROLLOUT_DB_USER && !env.ROLLOUT_DB_HOST) return 'ROLLOUT_DB_HOST: required with ROLLOUT_DB_USER (the endpoint the IAM token is signed for)';
  return null;
}

/** The environment of a function, checked: a ConfigError naming the bad variable and what is wrong otherwise. */
export function parseLambdaEnv(source: NodeJS.ProcessEnv): LambdaEnv {
  const env = parseConfig('environment', lambdaEnvSchema, source);
  const issue = storeIssue(env);
  if (issue) throw new ConfigError('environment', [issue]);
  return env;
}

/** A variable holding JSON, checked by `schema`; undefined when unset. Errors name the variable: "not JSON", or each issue. */
export function jsonVariable<S extends z.ZodType>(env: NodeJS.ProcessEnv, name: string, schema: S): z.output<S> | undefined {
  const text = own(env, name);
  if (text === undefined || text.trim() === '') return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`invalid environment config: ${name}: not JSON`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success)
    throw new Error(`invalid environment config: ${name}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'value'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
