import { DEFAULT_RETENTION } from '../shared/retention.js';
import { Tracer } from '@aws-lambda-powertools/tracer';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { hostname } from 'node:os';
import type pg from 'pg';
import { z } from 'zod';
import { EventBridgeBus } from '../shared/adapters/eventbridge/bus.js';
import type { BusEvent, EventBus } from '../shared/events/bus.js';
import { parseConfig } from '../shared/config.js';
import type { Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import { errorMessage, type Logger } from '../shared/log.js';
import { BATCH_TICK_SECONDS } from '../shared/topology.js';
import { openControlPlane, type ControlPlane } from '../shared/compose/control-plane.js';
import { OutboundPolicy } from '../shared/outbound/policy.js';
import { parseTargets } from '../shared/actuation/targets.js';
import { OperatorSecrets } from '../shared/outbound/secrets.js';
import { defaultGateProviders } from '../shared/compose/gates.js';
import type { GateProviders } from '../shared/rollout/gate-reader.js';
import { namespaceIssue } from '../shared/rollout/spec.js';
import { own } from '../shared/own.js';
import { iamConnection, secretConnection } from './db-auth.js';

export { iamConnection, secretConnection } from './db-auth.js';

/** A variable holding JSON (`{}` when unset), checked by `parse`: "not JSON", or what `parse` says is wrong. */
function jsonEnv<T>(parse: (v: unknown) => T) {
  return z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined || text.trim() === '') return parse({});
      try {
        return parse(JSON.parse(text));
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: err instanceof SyntaxError ? 'not JSON' : errorMessage(err) });
        return z.NEVER;
      }
    });
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

/**
 * What a Lambda handler needs, built once per sandbox from the environment.
 * In AWS a node is one deployed stack: every invocation of this stack's
 * functions shares ROLLOUT_NODE_ID as its lease holder, and takes one
 * campaign step per invocation (no loop survives a frozen sandbox).
 */
const envSchema = z
  .object({
    ROLLOUT_STORE: z.enum(['dynamodb', 'postgres']).default('dynamodb'),
    ROLLOUT_TABLE: z.string().min(1).optional(),
    DATABASE_URL: z.string().min(1).optional(),
    /** Aurora, the migrator only: the cluster's generated secret (host, port, dbname, username, password); read at cold start. */
    ROLLOUT_DB_SECRET_ARN: z.string().min(1).optional(),
    /** Aurora: the function's own database role, logged in with IAM tokens (db-auth.ts), at this endpoint. */
    ROLLOUT_DB_USER: z.string().min(1).optional(),
    ROLLOUT_DB_HOST: z.string().min(1).optional(),
    ROLLOUT_DB_PORT: z.coerce.number().int().min(1).max(65_535).default(5432),
    ROLLOUT_DB_NAME: z.string().min(1).default('postgres'),
    ROLLOUT_NODE_ID: z
      .string()
      .min(1)
      .default(`${process.env.AWS_LAMBDA_FUNCTION_NAME ?? hostname()}`),
    ROLLOUT_EVENT_BUS: z.string().min(1).default('default'),
    ROLLOUT_LEASE_TTL_MS: z.coerce.number().int().positive().default(30_000),
    ROLLOUT_LEASE_RENEW_MS: z.coerce.number().int().positive().default(10_000),
    ROLLOUT_LEASE_RETRY_MS: z.coerce.number().int().positive().default(5_000),
    ROLLOUT_TICK_INTERVAL_MS: z.coerce
      .number()
      .int()
      .positive()
      .default(BATCH_TICK_SECONDS * 1000),
    /** How long a sandbox serves a rollout read for assignment answers again (ms): a fleet's questions cost one read per window. */
    ROLLOUT_ASSIGNMENT_READ_MS: z.coerce.number().int().min(0).max(5_000).default(250),
    /** What a spec may make the stack request (the stack's `outbound` prop, as JSON): nothing when unset. */
    ROLLOUT_OUTBOUND: jsonEnv((v) => v),
    /** The targets a spec may move (the stack's `targets` prop, as JSON): none when unset. */
    ROLLOUT_TARGETS: jsonEnv(parseTargets),
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
    /** How long what ended is kept, in days (the stack's `retention` prop): README, "What is kept". */
    ROLLOUT_RETAIN_ROLLOUTS_DAYS: z.coerce.number().positive().max(36_500).default(DEFAULT_RETENTION.rolloutDays),
    ROLLOUT_RETAIN_RUNS_DAYS: z.coerce.number().positive().max(36_500).default(DEFAULT_RETENTION.runDays),
  })
  .superRefine((e, ctx) => {
    if (!(e.ROLLOUT_LEASE_TTL_MS > e.ROLLOUT_LEASE_RENEW_MS && e.ROLLOUT_LEASE_RENEW_MS > 1.2 * e.ROLLOUT_LEASE_RETRY_MS)) {
      ctx.addIssue({
        code: 'custom',
        path: ['ROLLOUT_LEASE_RETRY_MS'],
        message: `needs TTL (${e.ROLLOUT_LEASE_TTL_MS}) > renew (${e.ROLLOUT_LEASE_RENEW_MS}) > 1.2 × retry (${e.ROLLOUT_LEASE_RETRY_MS})`,
      });
    }
  });
export type RuntimeEnv = z.output<typeof envSchema>;

/** This stack's control plane, with the environment it was opened from. */
export interface Runtime extends ControlPlane {
  readonly env: RuntimeEnv;
}

/** Renewals of promotion_leader that failed while leading, from now on: call the result at the end of an invocation. */
export function renewalFailuresSince(rt: Runtime): () => number {
  const before = rt.elector.renewalCounts().renewFailures;
  return () => rt.elector.renewalCounts().renewFailures - before;
}

/** Rollout events (`ai.rollout.*`) this sandbox published, by type: what rollout_events_total counts. Process-wide, like conflictStats. */
const published = new Map<string, number>();

/** The bus, counting the rollout events it published (at least once: a republished outbox event counts again, as on a node). */
class CountedBus implements EventBus {
  constructor(private readonly inner: EventBus) {}

  async publish(events: readonly BusEvent[]): Promise<void> {
    await this.inner.publish(events);
    for (const e of events) if (e.detailType.startsWith('ai.rollout.')) published.set(e.detailType, (published.get(e.detailType) ?? 0) + 1);
  }
}

/** Rollout events published from now on, by type: call the result at the end of an invocation. */
export function eventsPublishedSince(): () => Map<string, number> {
  const before = new Map(published);
  return () => new Map([...published].flatMap(([type, n]) => (n > (before.get(type) ?? 0) ? [[type, n - (before.get(type) ?? 0)] as const] : [])));
}

export async function runtimeFrom(source: NodeJS.ProcessEnv, overrides: { bus?: EventBus; logger?: Logger } = {}): Promise<Runtime> {
  const env = parseConfig('environment', envSchema, source);
  if (env.ROLLOUT_STORE === 'dynamodb' && !env.ROLLOUT_TABLE)
    throw new Error('invalid environment config: ROLLOUT_TABLE: required when ROLLOUT_STORE=dynamodb');
  if (env.ROLLOUT_STORE === 'postgres' && !env.DATABASE_URL && !env.ROLLOUT_DB_SECRET_ARN && !env.ROLLOUT_DB_USER)
    throw new Error(
      'invalid environment config: DATABASE_URL or ROLLOUT_DB_SECRET_ARN, or ROLLOUT_DB_USER with ROLLOUT_DB_HOST: one is required when ROLLOUT_STORE=postgres',
    );
  if (env.ROLLOUT_DB_USER && !env.ROLLOUT_DB_HOST)
    throw new Error('invalid environment config: ROLLOUT_DB_HOST: required with ROLLOUT_DB_USER (the endpoint the IAM token is signed for)');
  const outbound = new OutboundPolicy(env.ROLLOUT_OUTBOUND as ConstructorParameters<typeof OutboundPolicy>[0]);
  const operatorSecrets = new OperatorSecrets({ secretsManager: secretString });
  const plane = await openControlPlane({
    store:
      env.ROLLOUT_STORE === 'dynamodb'
        ? { kind: 'dynamodb', table: env.ROLLOUT_TABLE!, client: traced(new DynamoDBClient({})), retainRunDays: env.ROLLOUT_RETAIN_RUNS_DAYS }
        : {
            kind: 'postgres',
            connection: { ...(await connectionOf(env)), max: 2 },
          },
    holderId: env.ROLLOUT_NODE_ID,
    timings: { ttlMs: env.ROLLOUT_LEASE_TTL_MS, renewIntervalMs: env.ROLLOUT_LEASE_RENEW_MS, retryIntervalMs: env.ROLLOUT_LEASE_RETRY_MS },
    // One campaign step per leadership check: no loop survives a frozen sandbox.
    election: { kind: 'lease', loop: false },
    outbound,
    targets: env.ROLLOUT_TARGETS,
    assignmentReadMs: env.ROLLOUT_ASSIGNMENT_READ_MS,
    secrets: operatorSecrets,
    gateNamespaces: env.ROLLOUT_GATE_NAMESPACES,
    ...(env.ROLLOUT_GATE_NAMESPACES
      ? { gateProviders: namespaceLimited(defaultGateProviders({ outbound, secrets: operatorSecrets }), env.ROLLOUT_GATE_NAMESPACES) }
      : {}),
    bus: new CountedBus(overrides.bus ?? new EventBridgeBus(env.ROLLOUT_EVENT_BUS, traced(new EventBridgeClient({})))),
    ...(overrides.logger ? { logger: overrides.logger } : {}),
  });
  return Object.assign(plane, { env });
}

/**
 * The CloudWatch metric reader held to the operator's namespaces: IAM
 * cannot hold GetMetricData to a namespace, so a gate naming another one is
 * answered with an error reading and never sent.
 */
export function namespaceLimited(providers: GateProviders, allowed: readonly string[]): GateProviders {
  const inner = providers.cloudwatchMetric;
  if (!inner) return providers;
  return {
    ...providers,
    cloudwatchMetric: {
      async read(gates, o) {
        const issues = gates.map((g) => namespaceIssue(g, allowed));
        const kept = gates.flatMap((g, i) => (issues[i] ? [] : [{ g, context: o.contexts[i]! }]));
        const read = kept.length
          ? await inner.read(
              kept.map((k) => k.g),
              { ...o, contexts: kept.map((k) => k.context) },
            )
          : [];
        let next = 0;
        return issues.map((issue) => (issue ? { kind: 'error' as const, message: `cloudwatchMetric gate refused: ${issue}`, answer: '' } : read[next++]!));
      },
    },
  };
}

/**
 * Where a function's pool connects: DATABASE_URL (a local server), else its
 * own role with IAM tokens (every function on Aurora), else the master
 * secret (the migrator).
 */
function connectionOf(env: RuntimeEnv): Promise<pg.PoolConfig> | pg.PoolConfig {
  if (env.DATABASE_URL) return { connectionString: env.DATABASE_URL };
  if (env.ROLLOUT_DB_USER) return iamLogin(env);
  return cachedSecretConnection(env.ROLLOUT_DB_SECRET_ARN!);
}

/** One login per role for the sandbox's life, so a runtime opened per invocation reuses its token. */
const iamLogins = new Map<string, pg.PoolConfig>();

function iamLogin(env: RuntimeEnv): pg.PoolConfig {
  const login = { host: env.ROLLOUT_DB_HOST!, port: env.ROLLOUT_DB_PORT, database: env.ROLLOUT_DB_NAME, user: env.ROLLOUT_DB_USER! };
  const key = JSON.stringify(login);
  let config = iamLogins.get(key);
  if (!config) {
    config = iamConnection(login);
    iamLogins.set(key, config);
  }
  return config;
}

/**
 * One connection config per secret for the sandbox's life: a runtime opened
 * for each invocation (`invocationScoped`) does not read the secret each
 * time; the password inside still follows rotation (`secretConnection`).
 */
const secretConfigs = new Map<string, Promise<pg.PoolConfig>>();

function cachedSecretConnection(secretArn: string): Promise<pg.PoolConfig> {
  let config = secretConfigs.get(secretArn);
  if (!config) {
    config = secretConnection(secretArn, traced(new SecretsManagerClient({})));
    secretConfigs.set(secretArn, config);
    // A failed read is not kept: the next invocation asks again.
    config.catch(() => secretConfigs.delete(secretArn));
  }
  return config;
}

let secrets: SecretsManagerClient | undefined;

/** A Secrets Manager secret's string, for the credentials the operator bound to outbound origins. */
async function secretString(secretId: string): Promise<string> {
  secrets ??= traced(new SecretsManagerClient({}));
  const { SecretString } = await secrets.send(new GetSecretValueCommand({ SecretId: secretId }));
  if (SecretString === undefined) throw new Error(`secret ${secretId} has no string value`);
  return SecretString;
}

/**
 * Powertools Tracer, configured by the environment (POWERTOOLS_SERVICE_NAME,
 * POWERTOOLS_TRACE_ENABLED, POWERTOOLS_TRACER_CAPTURE_RESPONSE…): every AWS
 * client a handler uses is captured as an X-Ray subsegment of the function's
 * trace. Outside Lambda the tracer is off and clients are returned as they are.
 */
export const tracer = new Tracer();

export function traced<T>(client: T): T {
  return tracer.isTracingEnabled() ? tracer.captureAWSv3Client(client) : client;
}

/** One runtime per sandbox, created on first use. */
export function lazy<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => {
    value ??= make().catch((err: unknown) => {
      value = undefined; // a failed start (store unreachable) is retried on the next invocation
      throw err;
    });
    return value;
  };
}

/**
 * The runtime of a deployed function. On DynamoDB it is opened once and kept
 * for the sandbox's life. On PostgreSQL it is opened by the first use in an
 * invocation and closed, its pool ended, when the invocation ends
 * (`around`): a frozen sandbox holding a connection would keep an Aurora
 * cluster from pausing for as long as the sandbox lives. The price is a new
 * connection (and the schema check) per invocation that uses the store.
 */
export function invocationScoped(make: () => Promise<Runtime>): {
  runtime: () => Promise<Runtime>;
  around<E, C, R>(handler: (event: E, context: C) => Promise<R>): (event: E, context: C) => Promise<R>;
} {
  let current: Promise<Runtime> | undefined;
  const runtime = () => {
    current ??= make().catch((err: unknown) => {
      current = undefined; // a failed start (store unreachable) is retried on the next use
      throw err;
    });
    return current;
  };
  const release = async () => {
    const held = current;
    if (!held) return;
    let rt: Runtime;
    try {
      rt = await held;
    } catch {
      return;
    }
    if (rt.env.ROLLOUT_STORE !== 'postgres') return;
    if (current === held) current = undefined;
    // A pool that fails to end has lost its connections already.
    await rt.close().catch(() => undefined);
  };
  return {
    runtime,
    around: (handler) => async (event, context) => {
      try {
        return await handler(event, context);
      } finally {
        await release();
      }
    },
  };
}

/** Powertools' Logger as the core's logging port. */
export function loggerPort(logger: PowertoolsLogger): Logger {
  return {
    debug: (m, e) => logger.debug(m, e ?? {}),
    info: (m, e) => logger.info(m, e ?? {}),
    warn: (m, e) => logger.warn(m, e ?? {}),
    error: (m, e) => logger.error(m, e ?? {}),
  };
}
