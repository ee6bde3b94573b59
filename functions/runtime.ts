import { Tracer } from '@aws-lambda-powertools/tracer';
import type { Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { EventBridgeBus } from '../shared/adapters/eventbridge/bus.js';
import { openControlPlane, type ControlPlane } from '../shared/compose/control-plane.js';
import { defaultGateProviders } from '../shared/compose/gates.js';
import type { BusEvent, EventBus } from '../shared/events/bus.js';
import type { Logger } from '../shared/log.js';
import { OutboundPolicy } from '../shared/outbound/policy.js';
import { OperatorSecrets } from '../shared/outbound/secrets.js';
import { parseLambdaEnv, type LambdaEnv } from '../shared/runtimes/lambda-env.js';
import { databaseConnection } from './db-auth.js';
import { namespaceLimited } from './gate-namespaces.js';

export { iamConnection, secretConnection } from './db-auth.js';

/**
 * What a Lambda handler needs, built once per sandbox from the environment
 * (shared/runtimes/lambda-env.ts): this stack's control plane, with the
 * environment it was opened from. In AWS a node is one deployed stack: every
 * invocation of this stack's functions shares ROLLOUT_NODE_ID as its lease
 * holder, and takes one campaign step per invocation (no loop survives a
 * frozen sandbox).
 */
export interface Runtime extends ControlPlane {
  readonly env: LambdaEnv;
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
  const env = parseLambdaEnv(source);
  const outbound = new OutboundPolicy(env.ROLLOUT_OUTBOUND);
  const operatorSecrets = new OperatorSecrets({ secretsManager: secretString });
  const plane = await openControlPlane({
    store:
      env.ROLLOUT_STORE === 'dynamodb'
        ? { kind: 'dynamodb', table: env.ROLLOUT_TABLE!, client: traced(new DynamoDBClient({})), retainRunDays: env.ROLLOUT_RETAIN_RUNS_DAYS }
        : {
            kind: 'postgres',
            connection: { ...(await databaseConnection(env, () => traced(new SecretsManagerClient({})))), max: 2 },
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
